"""Embed the Debian package-description retrieval set (../shared/data/debian-ir, BEIR layout) with
the packaged all-MiniLM-L6-v2 and cache corpus and query embeddings as parquet vector dumps.
Slow on a CPU (about 30 documents/s on 2 cores); run once, later benchmarks read the cache.

    python benchmarks/embed_debian_ir.py [--data ../shared/data/debian-ir] [--out bench-data/debian-ir]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from embcompress.datasets import load_beir
from embcompress.embed import DEFAULT_MODEL, encode, load_model, write_embeddings
from _util import DEBIAN  # noqa: E402  (the benchmarks' folder is on the path when they run)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=str(DEBIAN))
    ap.add_argument("--out", default="bench-data/debian-ir")
    ap.add_argument("--limit", type=int, default=None, help="first N documents and their queries only")
    args = ap.parse_args()
    data = load_beir(args.data)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    model = load_model(None)
    model.max_seq_length = 256  # MiniLM's own setting; long descriptions are cut there
    doc_ids = list(data.corpus)[: args.limit]
    for name, ids, texts in (
        ("queries", [q for q in data.queries if args.limit is None or any(d in set(doc_ids) for d in data.qrels.get(q, {}))], data.queries),
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
        write_embeddings(path, ids, X, model_name=DEFAULT_MODEL, normalized=True)
        dt = time.perf_counter() - t0
        print(f"{name}: {len(ids)} texts in {dt:.0f} s ({len(ids) / dt:.0f}/s) -> {path}", flush=True)


if __name__ == "__main__":
    main()
