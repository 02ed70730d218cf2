"""Retrieval quality and speed of each compression on real data: the packaged all-MiniLM-L6-v2 on
the Debian package-description set (33,253 queries and documents, BEIR layout, in
../shared/data/debian-ir). Run benchmarks/data/embed_debian_ir.py first (embeddings are cached).

    python benchmarks/choosing/bench_debian_ir.py [--emb bench-data/debian-ir] [--data ../shared/data/debian-ir]
"""

from __future__ import annotations

import sys

import argparse
import json
from pathlib import Path

import numpy as np

from embcompress.io.datasets import read_qrels
from embcompress.evaluation.evaluate import evaluate
from embcompress.io import read_all
from embcompress.search import NpyStore

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: _util and the other groups' modules
from _util import DEBIAN  # noqa: E402  (the benchmarks' folder is on the path when they run)

CONFIGS = [
    "float",
    "binary",
    "binary@asym",
    "binary@floatx1",
    "binary@floatx4",
    "binary@floatx10",
    "int8",
    "int8@floatx10",
    "truncate:192",
    "truncate:192:renormalize=true",
]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--emb", default="bench-data/debian-ir")
    ap.add_argument("--data", default=str(DEBIAN))
    ap.add_argument("--json", default=None, help="also write the rows to this JSON file")
    args = ap.parse_args()
    emb = Path(args.emb)
    D, dids = read_all(emb / "corpus.parquet")
    Q, qids = read_all(emb / "queries.parquet")
    qrels = read_qrels(Path(args.data) / "qrels.tsv.gz")
    npy = emb / "corpus.npy"
    if not npy.exists():
        np.save(npy, D)
    res = evaluate(D, Q, doc_ids=dids, query_ids=qids, qrels=qrels, configs=CONFIGS, k=10, originals=NpyStore(npy))
    s = res["summary"]
    print(
        f"Debian IR: {s['documents']:,} documents, {s['queries']:,} queries ({s['evaluated_queries']:,} judged), "
        f"all-MiniLM-L6-v2 ({s['dim']} dims); float rerank reads originals from a memory-mapped .npy"
    )
    print(
        f"{'configuration':32s} {'bytes':>6s} {'nDCG@10':>8s} {'R@10':>7s} {'MRR@10':>7s} {'retention':>9s} "
        f"{'search s':>9s} {'q/s':>8s}"
    )
    for r in res["rows"]:
        print(
            f"{r['config']:32s} {r['bytes_per_vector']:6d} {r['ndcg@10']:8.4f} {r['recall@10']:7.4f} "
            f"{r['mrr@10']:7.4f} {100 * r['retention']:8.1f}% {r['search_seconds']:9.2f} {r['queries_per_second']:8.0f}"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
