"""Approximate search on 1M binary codes: `search --index hnsw` (faiss IndexBinaryHNSW) and a
usearch b1 index, against the exact Hamming scan, in one process, for one or more graph settings.

Prints, for N codes of B bits (sign bits of clustered synthetic embeddings: structure like real
ones, so that recall means something; or the first N rows of a bits file that ``binarize`` wrote,
with real queries) and Q queries: build time, queries/s, recall@10 against the exact scan's top 10
(ties counted as hits: a document whose Hamming distance equals the exact 10th-best is as good),
and the speed-up over the exact scan.

    python benchmarks/search/bench_ann.py [--n 1000000] [--dim 384] [--queries 1000] [--ef 64,128,256]
        [--graphs 32:80,16:40] [--bits BITS.parquet --query-file QUERIES.parquet] [--no-usearch]

``--graphs``: links per node and ef_construction of each graph (``search --hnsw-m``,
``--ef-construction``); usearch is built with the same settings. ``--add-rows``: documents per
call of faiss's add (the library's ``ann.GRAPH_ADD_ROWS`` by default; ``all``: one call, as before
graph builds reported progress), several to compare the graphs they build.
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import numpy as np

from embcompress import Binary
from embcompress.search import Index
from embcompress.search import ann
from embcompress.search.exact import hamming_distances

GRAPH_ADD_ROWS = ann.GRAPH_ADD_ROWS  # the library's


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


def data(args):
    """(the exact Index over the codes, float queries, the queries' codes)."""
    if args.bits:
        from embcompress.io import read_all
        from embcompress.search.files import load_index

        full = load_index(args.bits)
        Q = read_all(args.query_file)[0][: args.queries]
        exact = Index(full.data[: args.n].copy(), compressor=full.compressor)
        del full
        return exact, Q, exact.compressor.transform(Q)
    rng = np.random.default_rng(0)
    centers = rng.standard_normal((2000, args.dim), dtype=np.float32)
    X = clustered(args.n, args.dim, rng, centers)
    Q = clustered(args.queries, args.dim, rng, centers)
    comp = Binary(decoder="sign").fit(X[:1000])
    return Index(comp.transform(X), compressor=comp), Q, comp.transform(Q)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--ef", default="64,128,256")
    ap.add_argument("--graphs", default="32:80", help="M:ef_construction of each graph, comma-separated")
    ap.add_argument("--bits", default=None, help="a bits file written by binarize (its first --n rows)")
    ap.add_argument("--query-file", default=None, help="float queries for --bits")
    ap.add_argument("--no-usearch", action="store_true")
    ap.add_argument(
        "--add-rows",
        default=str(ann.GRAPH_ADD_ROWS),
        help="documents per faiss add call, comma-separated; all: one call",
    )
    args = ap.parse_args()
    exact, Q, qcodes = data(args)
    codes, width = exact.data, exact.width
    print(
        f"{len(codes):,} codes of {width} bits ({codes.nbytes / 1e6:.0f} "
        f"MB{', ' + args.bits if args.bits else ', synthetic'}), "
        f"{len(Q):,} queries, k=10; {time.strftime('%Y-%m-%d %H:%M')}"
    )
    t = time.perf_counter()
    ex = exact.search(Q, 10)
    t_exact = time.perf_counter() - t
    exact_dist = (width - ex.scores).astype(np.int64)
    print(f"{'exact Hamming scan (embcompress)':<44} build      -   {len(Q) / t_exact:9,.0f} q/s   recall 1.000")
    for g in args.graphs.split(","):
        m, efc = (int(v) for v in g.split(":"))
        for add_rows in args.add_rows.split(","):
            ann.GRAPH_ADD_ROWS = len(codes) if add_rows == "all" else int(add_rows)
            step = "" if add_rows == str(GRAPH_ADD_ROWS) else f", add {add_rows}"
            hnsw = Index(codes, compressor=exact.compressor, structure="hnsw", hnsw=ann.Hnsw(m=m, ef_construction=efc))
            c0 = time.process_time()
            t_build = hnsw.build_graph()
            cpu = time.process_time() - c0
            for ef in [int(e) for e in args.ef.split(",")]:
                hnsw.hnsw = dataclasses.replace(hnsw.hnsw, ef_search=ef)
                t = time.perf_counter()
                res = hnsw.search(Q, 10)
                secs = time.perf_counter() - t
                r = recall_with_ties(res.rows, exact_dist, codes, qcodes)
                print(
                    f"{f'faiss IndexBinaryHNSW M={m} efC={efc}{step}, ef={ef}':<44} build {t_build:5.0f} s ({cpu:5.0f} "
                    f"cpu-s) {len(Q) / secs:9,.0f} q/s   recall {r:.3f}   {t_exact / secs:5.1f}x the exact scan",
                    flush=True,
                )
            del hnsw
        ann.GRAPH_ADD_ROWS = GRAPH_ADD_ROWS
        if args.no_usearch:
            continue
        try:
            ann.require("usearch.index", "export", "usearch indexes")
        except Exception:
            print("usearch not installed: pip install 'embcompress[export]'")
            continue
        t = time.perf_counter()
        u = ann.usearch_index(exact, ann.Hnsw(m=m, ef_construction=efc))
        t_ubuild = time.perf_counter() - t
        for ef in [int(e) for e in args.ef.split(",")]:
            u.expansion_search = ef
            t = time.perf_counter()
            found = u.search(qcodes, 10)
            secs = time.perf_counter() - t
            r = recall_with_ties(np.asarray(found.keys, dtype=np.int64), exact_dist, codes, qcodes)
            print(
                f"{f'usearch b1 hamming M={m} efC={efc}, ef={ef}':<44} build {t_ubuild:5.0f} s {'':14} "
                f"{len(Q) / secs:9,.0f} q/s   recall {r:.3f}   {t_exact / secs:5.1f}x the exact scan",
                flush=True,
            )


if __name__ == "__main__":
    main()
