"""Approximate search on 1M binary codes: `search --index hnsw` (faiss IndexBinaryHNSW) and a
usearch b1 index, against the exact Hamming scan, in one process.

Prints, for N codes of B bits (sign bits of clustered synthetic embeddings: structure like real
ones, so that recall means something) and Q queries: build time, queries/s, recall@10 against the
exact scan's top 10 (ties counted as hits: a document whose Hamming distance equals the exact
10th-best is as good), and the speed-up over the exact scan.

    python benchmarks/bench_ann.py [--n 1000000] [--dim 384] [--queries 1000] [--ef 64,128,256]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from embcompress import Binary
from embcompress.search import Index
from embcompress.search import ann
from embcompress.search.exact import hamming_distances


def clustered(n: int, d: int, rng: np.random.Generator, centers: np.ndarray) -> np.ndarray:
    out = np.empty((n, d), dtype=np.float32)
    for s in range(0, n, 100_000):
        m = min(100_000, n - s)
        out[s : s + m] = centers[rng.integers(0, len(centers), m)] + 0.7 * rng.standard_normal((m, d), dtype=np.float32)
    return out


def recall_with_ties(found: np.ndarray, exact_dist: np.ndarray, codes: np.ndarray, qcodes: np.ndarray) -> float:
    """Share of found rows whose distance is at most the exact 10th-best distance."""
    hits = 0
    for q in range(len(found)):
        d = hamming_distances(qcodes[q : q + 1], codes[found[q]])[0]
        hits += int((d <= exact_dist[q, -1]).sum())
    return hits / found.size


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--ef", default="64,128,256")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    centers = rng.standard_normal((2000, args.dim), dtype=np.float32)
    X = clustered(args.n, args.dim, rng, centers)
    Q = clustered(args.queries, args.dim, rng, centers)
    comp = Binary(decoder="sign").fit(X[:1000])
    codes = comp.transform(X)
    del X
    qcodes = comp.transform(Q)
    print(f"{args.n:,} codes of {args.dim} bits ({codes.nbytes / 1e6:.0f} MB), {args.queries:,} queries, k=10")

    exact = Index(codes, compressor=comp)
    t = time.perf_counter()
    ex = exact.search(Q, 10)
    t_exact = time.perf_counter() - t
    exact_dist = (args.dim - ex.scores).astype(np.int64)
    print(f"{'exact Hamming scan (embcompress)':<40} build      -   {args.queries / t_exact:9,.0f} q/s   recall 1.000")

    t = time.perf_counter()
    graph = ann.faiss_index(exact, "hnsw")
    t_build = time.perf_counter() - t
    hnsw = Index(codes, compressor=comp, structure="hnsw")
    hnsw._graph = graph  # built above, timed apart
    for ef in [int(e) for e in args.ef.split(",")]:
        hnsw.ef_search = ef
        t = time.perf_counter()
        res = hnsw.search(Q, 10)
        secs = time.perf_counter() - t
        r = recall_with_ties(res.rows, exact_dist, codes, qcodes)
        print(f"{'faiss IndexBinaryHNSW (M=32), ef=' + str(ef):<40} build {t_build:5.0f} s {args.queries / secs:9,.0f} q/s   "
              f"recall {r:.3f}   {t_exact / secs:5.1f}x the exact scan")

    try:
        from usearch.index import Index as UIndex
    except ImportError:
        print("usearch not installed: pip install 'embcompress[export]'")
        return
    t = time.perf_counter()
    u = UIndex(ndim=codes.shape[1] * 8, metric="hamming", dtype="b1")
    u.add(np.arange(len(codes), dtype=np.uint64), codes)
    t_ubuild = time.perf_counter() - t
    t = time.perf_counter()
    m = u.search(qcodes, 10)
    secs = time.perf_counter() - t
    r = recall_with_ties(np.asarray(m.keys, dtype=np.int64), exact_dist, codes, qcodes)
    print(f"{'usearch b1 hamming (defaults)':<40} build {t_ubuild:5.0f} s {args.queries / secs:9,.0f} q/s   "
          f"recall {r:.3f}   {t_exact / secs:5.1f}x the exact scan")


if __name__ == "__main__":
    main()
