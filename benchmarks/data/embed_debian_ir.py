"""Embed the Debian package-description retrieval set (../shared/data/debian-ir, BEIR layout) with
the packaged all-MiniLM-L6-v2 (or ``--model DIR``, any local sentence-transformers model) and cache corpus and query
embeddings as parquet vector dumps.
Slow on a CPU (about 30 documents/s on 2 cores); run once, later benchmarks read the cache.

    python benchmarks/data/embed_debian_ir.py [--data ../shared/data/debian-ir] [--out bench-data/debian-ir]
    python benchmarks/data/embed_debian_ir.py --model bench-data/models/mpnet-static-256 --out
    bench-data/debian-ir/mpnet-static
"""

from __future__ import annotations

import sys

import argparse
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: _util and the other groups' modules
from _util import DEBIAN, load_bench_model

from embcompress.io.datasets import load_beir
from embcompress.embedding.embed import DEFAULT_MODEL, encode, write_embeddings


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=str(DEBIAN))
    ap.add_argument("--out", default="bench-data/debian-ir")
    ap.add_argument("--limit", type=int, default=None, help="first N documents and their queries only")
    ap.add_argument(
        "--model", default=None, help="a local sentence-transformers directory (default: the packaged MiniLM)"
    )
    ap.add_argument("--backend", default="torch", help="torch, onnx or onnx-int8 (as embed --backend)")
    ap.add_argument("--max-seq-length", type=int, default=256, help="tokens per text (MiniLM's own setting: 256)")
    args = ap.parse_args()
    data = load_beir(args.data)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    model = load_bench_model(args.model, args.max_seq_length, args.backend)  # long descriptions are cut there
    doc_ids = list(data.corpus)[: args.limit]
    for name, ids, texts in (
        (
            "queries",
            [q for q in data.queries if args.limit is None or any(d in set(doc_ids) for d in data.qrels.get(q, {}))],
            data.queries,
        ),
        ("corpus", doc_ids, data.corpus),
    ):
        path = out / f"{name}.parquet"
        if path.exists():
            print(f"{path} exists, skipped")
            continue
        t0 = time.perf_counter()
        done = [0]

        def progress(n: int) -> None:
            done[0] += n
            if done[0] % 2048 < n:
                print(f"  {name}: {done[0]}/{len(ids)} ({done[0] / (time.perf_counter() - t0):.0f}/s)", flush=True)

        X = encode(model, [texts[i] for i in ids], batch_size=64, progress=progress)
        write_embeddings(path, ids, X, model_name=args.model or DEFAULT_MODEL, normalized=True)
        dt = time.perf_counter() - t0
        print(f"{name}: {len(ids)} texts in {dt:.0f} s ({len(ids) / dt:.0f}/s) -> {path}", flush=True)


if __name__ == "__main__":
    main()
