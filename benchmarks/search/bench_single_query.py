"""Few queries at a time over 1M codes: search of 1, 4 and 16 queries (and 1,000, for the batch
lead) against faiss on the same threads, top-10, interleaved rounds, best of ``--repeat``, each
search 0.2 s after the one before (see SETTLE).

The codes are 200,000 real-like vectors encoded once and tiled to ``--docs`` rows (the scans do
not care that rows repeat). References:

* ``pq:48``: faiss ``IndexPQ`` holding the same centroids and the same codes;
* ``rq:48``: faiss ``IndexPQ`` of 48 bytes as well (the same table scan over 48 one-byte
  codes; faiss's residual index scores by decoding, a different kind of scan);
* ``rabitq:1`` and ``rabitq:4``: faiss ``IndexRaBitQ`` with as many bits, its own codes of the same
  tiled vectors;
* ``sq:2``: faiss ``IndexScalarQuantizer`` with 4 bits (faiss has no 2-bit scalar code; 192 B
  against our 96 B), its own codes.

    python benchmarks/search/bench_single_query.py [--docs 1000000] [--repeat 5] [--json
    benchmarks/results/single-query.json]
    python benchmarks/search/bench_single_query.py --table benchmarks/results/single-query.json [--readme
    benchmarks/search/README.md]

``--table`` prints (or writes between ``<!-- single-query-table -->`` and its end marker) the table
of a run's JSON: per code and number of queries, our queries/s and the ratio to faiss's.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import faiss
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: _util and the other groups' modules
from codes.bench_codes_speed import correlated  # noqa: E402
from _util import show_table  # noqa: E402

from embcompress import from_spec  # noqa: E402
from embcompress.core._parallel import num_threads  # noqa: E402
from embcompress.search import Index  # noqa: E402


#: seconds between timed searches: faiss's OpenMP workers spin-wait after a call (its default
#: policy), on the cores the next search (ours or its own) needs; a search of one query over 1M
#: codes takes a few milliseconds, so whichever ran second in a round paid for the other's spin
SETTLE = 0.2


def faiss_reference(spec: str, ours, X: np.ndarray, docs: np.ndarray, tile: int, n: int, d: int):
    ip = faiss.METRIC_INNER_PRODUCT
    if spec == "pq:48":
        index = faiss.IndexPQ(d, 48, 8, ip)
        faiss.copy_array_to_vector(ours.centroids_.ravel(), index.pq.centroids)
        index.is_trained = True
        index.add_sa_codes(np.ascontiguousarray(docs))
        return index, "IndexPQ, same codes"
    if spec == "rq:48":
        index = faiss.IndexPQ(d, 48, 8, ip)
        index.train(X[:20_000])
        index.add_sa_codes(np.ascontiguousarray(np.tile(index.sa_encode(X), (tile, 1))[:n]))
        return index, "IndexPQ 48 B, its codes"
    if spec.startswith("rabitq"):
        bits = int(spec.split(":")[1])
        index = faiss.IndexRaBitQ(d, ip, bits)
        index.train(X[:20_000])
        index.add_sa_codes(np.ascontiguousarray(np.tile(index.sa_encode(X), (tile, 1))[:n]))
        return index, f"IndexRaBitQ {bits} bit(s), its codes"
    index = faiss.IndexScalarQuantizer(d, faiss.ScalarQuantizer.QT_4bit, ip)
    index.train(X[:20_000])
    index.add_sa_codes(np.ascontiguousarray(np.tile(index.sa_encode(X), (tile, 1))[:n]))
    return index, "IndexScalarQuantizer 4 bits, its codes"


START, END = "<!-- single-query-table -->", "<!-- /single-query-table -->"
COUNTS = (1, 4, 16, 1000)


def table(run: dict) -> str:
    """Per code: our queries/s at each number of queries, with the ratio to faiss's in the same run."""
    head = ["code", "bytes", "faiss reference", *(f"{n:,} {'query' if n == 1 else 'queries'}" for n in COUNTS)]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    by = {}
    for r in run["rows"]:
        by.setdefault((r["code"], r["bytes"], r["reference"]), {})[r["queries"]] = r
    for (code, nbytes, ref), cells in by.items():
        out.append(
            f"| `{code}` | {nbytes} | {ref} | "
            + " | ".join(
                "-" if n not in cells else f"{cells[n]['ours_qps']:,.0f} q/s (**{cells[n]['ratio']:.2f}x**)"
                for n in COUNTS
            )
            + " |"
        )
    out += [
        "",
        f"Ours over faiss's queries per second, in the same process; {run['docs']:,} codes ({run['vectors']:,} vectors "
        f"tiled) x {run['dim']} dims, top 10, {run['threads']} threads, interleaved rounds, best of {run['repeat']} "
        f"(1,000 queries: of 2); {run['machine']}, {run['date']}.",
    ]
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--codes", default="pq:48,rq:48,rabitq:1,sq:2,rabitq:4")
    ap.add_argument("--json", default=None, help="write the figures here")
    ap.add_argument("--table", default=None, help="a run's JSON: print its table (or write it into --readme)")
    ap.add_argument("--readme", default=None)
    args = ap.parse_args()
    if args.table:
        return show_table(table(json.loads(Path(args.table).read_text())), args.readme, START, END)
    rng = np.random.default_rng(0)
    d, n = 384, args.docs
    threads = num_threads()
    faiss.omp_set_num_threads(threads)
    X = correlated(200_000, d, rng)
    Q = correlated(1000, d, rng)
    tile = -(-n // len(X))
    print(
        f"{n:,} codes (200,000 vectors tiled) x {d} dims, top-10, {threads} threads, "
        f"{time.strftime('%Y-%m-%d %H:%M')}; interleaved rounds, best of {args.repeat} (1,000 queries: of 2)"
    )
    print(
        f"  {'code':9s} {'bytes':>5s} {'queries':>7s} {'ours q/s':>10s} {'faiss q/s':>10s} {'ours/faiss':>10s}   "
        "reference"
    )
    run = {
        "docs": n,
        "vectors": len(X),
        "dim": d,
        "threads": threads,
        "repeat": args.repeat,
        "machine": f"{os.cpu_count()} cores",
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "rows": [],
    }
    for spec in args.codes.split(","):
        ours = from_spec(spec).fit(X[:20_000])  # a speed benchmark: the fit's size does not matter
        docs = np.tile(ours.transform(X), (tile, 1))[:n]
        idx = Index(docs, compressor=ours)
        ref, label = faiss_reference(spec, ours, X, docs, tile, n, d)
        idx.search(Q[:2], 10)  # first use: the scorer and the thread pool are made once
        ref.search(Q[:2], 10)
        for nq in (1, 4, 16, 1000):
            q = Q[:nq]
            t_o = t_f = float("inf")
            for _ in range(2 if nq == 1000 else args.repeat):
                time.sleep(SETTLE)
                t = time.perf_counter()
                idx.search(q, 10)
                t_o = min(t_o, time.perf_counter() - t)
                time.sleep(SETTLE)
                t = time.perf_counter()
                ref.search(q, 10)
                t_f = min(t_f, time.perf_counter() - t)
            print(
                f"  {spec:9s} {docs.shape[1]:5d} {nq:7d} {nq / t_o:10,.1f} {nq / t_f:10,.1f} {t_f / t_o:9.2f}x   "
                f"{label}",
                flush=True,
            )
            run["rows"].append(
                {
                    "code": spec,
                    "bytes": int(docs.shape[1]),
                    "queries": nq,
                    "ours_qps": nq / t_o,
                    "faiss_qps": nq / t_f,
                    "ratio": t_f / t_o,
                    "reference": label,
                }
            )
            if args.json:  # after every figure, so a stopped run keeps what it measured
                Path(args.json).write_text(json.dumps(run, indent=1))


if __name__ == "__main__":
    main()
