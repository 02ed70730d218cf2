"""The suite's big judged corpus: docstrings of a pinned set of Python packages, embedded.

Each function or class docstring with a summary line and a body of at least 80 characters gives a
document (the body) and a natural query shorter than it (the summary line); the query's one
relevant document is its own body. Repeated queries and documents are dropped across the whole
set (the first kept, in the order of corpus_packages.txt; at most 4,000 from one package). The packages are fetched as
wheels by ``pip
download`` (a package registry, the only network this needs) and read as zip archives: nothing is
installed, imported or executed. torch is read from the installed copy pinned by constraints.txt.

    python benchmarks/data/build_corpus.py [--out bench-data/big] [--queries 20000] [--model PATH]

Writes, under OUT:
  pairs.jsonl.gz                                 every pair parsed (kept: parsing is the slow part)
  corpus.jsonl.gz, queries.jsonl.gz, qrels.tsv   the judged set in BEIR's layout (texts): 250,000
                                                 documents by default (--max-docs), every judged one
                                                 among them, and 20,000 judged queries
  MODEL/corpus.parquet, MODEL/queries.parquet    the embeddings (MODEL: minilm by default)
  MODEL/parts/                                   finished slices; a stopped run resumes from them
Documents are embedded in order of length (little padding), in slices of 4,096, each saved as it
is done; corpus.parquet is written in the corpus's own order at the end. Prints its time.
"""

from __future__ import annotations

import argparse
import gzip
import json
import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

PACKAGES = Path(__file__).with_name("corpus_packages.txt")  # pinned: the same list gives the same corpus
PER_PACKAGE = 4000  # at most this many pairs from one package (a seeded sample), so no library dominates

SLICE = 4096

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: _util and the other groups' modules


def pinned() -> list[str]:
    return [line.strip() for line in PACKAGES.read_text().splitlines() if line.strip() and not line.startswith("#")]


def _wheel_of(cache: Path, pin: str) -> Path | None:
    name, version = pin.split("==")
    stem = f"{name.lower().replace('-', '_').replace('.', '_')}-{version}-"
    return next((w for w in sorted(cache.glob("*.whl")) if w.name.lower().startswith(stem)), None)


def fetch_wheels(cache: Path) -> list[Path]:
    """The pinned wheels in the list's order, downloaded into ``cache`` unless already there, 40
    to a pip call (one at a time where a call fails). A package with no wheel for this Python is
    left out and named; which ones is fixed by the list and the registry."""
    cache.mkdir(parents=True, exist_ok=True)
    pins = pinned()
    missing = [p for p in pins if _wheel_of(cache, p) is None and not (cache / f"{p}.none").exists()]
    pip = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "-d", str(cache)]
    for start in range(0, len(missing), 40):
        batch = missing[start : start + 40]
        if subprocess.run(pip + batch, capture_output=True).returncode != 0:
            for pin in batch:
                if _wheel_of(cache, pin) is None and subprocess.run(pip + [pin], capture_output=True).returncode != 0:
                    (cache / f"{pin}.none").touch()  # no wheel to be had: not asked again
        print(f"  wheels: {min(start + 40, len(missing))}/{len(missing)} fetched", flush=True)
    wheels = [w for w in (_wheel_of(cache, p) for p in pins) if w is not None]
    print(f"{len(wheels)} of {len(pins)} pinned packages have a wheel here", flush=True)
    return wheels


def installed_torch() -> Path | None:
    """The installed torch's package folder (torch is pinned by constraints.txt), or None."""
    try:
        import importlib.util

        spec = importlib.util.find_spec("torch")
    except ImportError:
        return None
    return Path(spec.origin).parent if spec and spec.origin else None


def _wheel_pairs(wheel: Path) -> list:
    from embcompress.embedding.corpus import _pairs_from_source, _sources_in_wheel

    return [p for module, source in _sources_in_wheel(wheel) for p in _pairs_from_source(source, module, 80)]


def build_pairs(cache: Path, min_docs: int):
    from embcompress.embedding.corpus import _pairs_from_source, _sources_under, unique_pairs

    def per_package():
        with multiprocessing.Pool(os.cpu_count()) as pool:  # parsing is CPU-bound; order is kept
            yield from pool.imap(_wheel_pairs, fetch_wheels(cache), chunksize=4)
        torch_dir = installed_torch()
        if torch_dir is not None:
            yield [
                p
                for module, source in _sources_under(torch_dir)
                for p in _pairs_from_source(source, f"torch.{module}", 80)
            ]

    pairs = unique_pairs(
        p for group in per_package() for p in unique_pairs(group, PER_PACKAGE) if len(p.query) < len(p.document)
    )
    if len(pairs) < min_docs:
        raise SystemExit(f"only {len(pairs)} documents from the pinned packages; at least {min_docs} were asked for")
    return pairs


def cached_pairs(out: Path, cache: Path, min_docs: int):
    """Every pair, parsed once and kept in ``OUT/pairs.jsonl.gz`` (parsing 3,900 wheels takes
    10-40 minutes on 2 cores)."""
    from _util import kept_pairs

    return kept_pairs(out / "pairs.jsonl.gz", lambda: build_pairs(cache, min_docs))


def select(n: int, queries: int, max_docs: int | None, seed: int) -> tuple[list[int], list[int]]:
    """(the pairs whose queries are judged: a seeded sample of ``queries``; the documents kept: every
    judged one and a seeded sample of the others, ``max_docs`` in all), both in pair order."""
    from embcompress.core._util import sample_rows

    picked = [int(i) for i in sample_rows(n, queries, seed)]
    if max_docs is None or max_docs >= n:
        return picked, list(range(n))
    others = np.setdiff1d(np.arange(n), picked)
    extra = others[sample_rows(len(others), max(max_docs - len(picked), 0), seed + 1)]
    return picked, sorted(picked + [int(i) for i in extra])


def write_beir(out: Path, pairs, picked: list[int], kept: list[int]) -> None:
    """corpus.jsonl.gz (the kept documents), queries.jsonl.gz and qrels.tsv (the judged queries)."""
    for name, rows, field in (("corpus", kept, "document"), ("queries", picked, "query")):
        tmp = out / f".{name}.jsonl.gz.tmp"
        with gzip.open(tmp, "wt", encoding="utf-8") as f:
            for i in rows:
                f.write(json.dumps({"_id": pairs[i].id, "text": getattr(pairs[i], field)}, ensure_ascii=False) + "\n")
        os.replace(tmp, out / f"{name}.jsonl.gz")
    (out / "qrels.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{pairs[i].id}\t{pairs[i].id}\t1\n" for i in picked)
    )


def embed_resumable(model, texts: list[str], parts: Path, label: str) -> np.ndarray:
    """Embeddings of ``texts`` in their own order, computed longest-first in slices saved under
    ``parts`` (a slice already there is read back, not recomputed)."""
    from embcompress.embedding.embed import encode

    parts.mkdir(parents=True, exist_ok=True)
    order = np.argsort([-len(t) for t in texts], kind="stable")
    out = None
    t0 = time.perf_counter()
    done = 0
    for k, start in enumerate(range(0, len(texts), SLICE)):
        rows = order[start : start + SLICE]
        path = parts / f"{label}-{k:05d}-{len(rows)}.npy"
        if path.exists():
            X = np.load(path)
        else:
            X = encode(model, [texts[i] for i in rows], batch_size=64)
            np.save(parts / f".{path.name}", X)
            os.replace(parts / f".{path.name}", path)
            done += len(rows)
            rate = done / (time.perf_counter() - t0)
            left = (len(texts) - start - len(rows)) / rate
            print(
                f"  {label}: {start + len(rows):,}/{len(texts):,}  {rate:.0f}/s  ~{left / 60:.0f} min left", flush=True
            )
        if out is None:
            out = np.empty((len(texts), X.shape[1]), np.float32)
        out[rows] = X
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="bench-data/big")
    ap.add_argument("--wheels", default="bench-data/wheels", help="where the pinned wheels are kept")
    ap.add_argument("--queries", type=int, default=20000, help="a seeded sample of this many queries is judged")
    ap.add_argument("--min-docs", type=int, default=200000)
    ap.add_argument(
        "--max-docs",
        type=int,
        default=250000,
        help="documents kept: every judged one and a seeded sample of the others (0: all of them)",
    )
    ap.add_argument(
        "--model", default=None, help="a local sentence-transformers directory (default: the packaged MiniLM)"
    )
    ap.add_argument("--model-label", default="minilm", help="the folder under OUT for this model's embeddings")
    ap.add_argument("--max-seq-length", type=int, default=256, help="tokens per text (MiniLM's own setting: 256)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    args.max_docs = args.max_docs or None
    from _util import load_bench_model

    from embcompress.embedding.embed import DEFAULT_MODEL, write_embeddings

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    pairs = cached_pairs(out, Path(args.wheels), args.min_docs)
    picked, kept = select(len(pairs), args.queries, args.max_docs, args.seed)
    write_beir(out, pairs, picked, kept)
    lengths = np.array([len(pairs[i].document) for i in kept])
    qlen = np.array([len(pairs[i].query) for i in picked])
    print(
        f"{len(kept):,} documents of {len(pairs):,} pairs (median {np.median(lengths):.0f} chars), {len(picked):,} "
        f"judged queries (median {np.median(qlen):.0f} chars) from {len(pinned())} pinned packages and torch in "
        f"{time.perf_counter() - t0:.0f} s",
        flush=True,
    )

    emb = out / args.model_label
    model = load_bench_model(args.model, args.max_seq_length)
    name = args.model or DEFAULT_MODEL
    for label, ids, texts in (
        ("queries", [pairs[i].id for i in picked], [pairs[i].query for i in picked]),
        ("corpus", [pairs[i].id for i in kept], [pairs[i].document for i in kept]),
    ):
        path = emb / f"{label}.parquet"
        if path.exists():
            print(f"{path} exists, kept")
            continue
        t1 = time.perf_counter()
        X = embed_resumable(model, texts, emb / "parts", label)
        write_embeddings(path, ids, X, model_name=name, normalized=True)
        dt = time.perf_counter() - t1
        print(f"{label}: {len(ids):,} texts embedded in {dt / 60:.1f} min -> {path}", flush=True)
    print(f"done in {(time.perf_counter() - t0) / 60:.1f} min", flush=True)


if __name__ == "__main__":
    main()
