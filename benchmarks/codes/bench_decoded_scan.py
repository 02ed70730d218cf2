"""Table codes as a matrix product: the exact first stage of byte codes (PQ, OPQ, RQ, few-bit
SQ) scored by lookup tables (or, for SQ with 2 bits or more, the dense scan) against the same
codes decoded a block of documents at a time and multiplied with the queries by BLAS
(``search.adc.scan_decoded``), top-10, through ``Index.search`` as users call it, the path forced
through the scorer's ``decoded_from``; "default" is the path the library takes for that batch
(``scorers.DECODED_MIN_QUERIES`` and the rules beside it). Interleaved rounds, best of ``--repeat``.

``--float``: exact float search (cosine) as ``Index.search`` runs it, whose top-k of each score
block now takes one C pass (``_adc.rows_topk``), against the numpy partition it replaced (the
kernel hidden in the same run) and faiss ``IndexFlatIP`` on the same unit vectors and threads.

The vectors are real when ``--emb`` names a Parquet file of embeddings (its first ``--fit``
rows fit the codes, the next ones are the documents, tiled to ``--docs`` rows, the queries are
``--queries-file``'s), else the correlated stand-ins of bench_codes_speed.

    python benchmarks/codes/bench_decoded_scan.py [--emb corpus.parquet --queries-file queries.parquet]
        [--docs 200000] [--batches 16,64,256,1024] [--codes pq:48,pq:96,opq:96,rq:48,sq:1,sq:2] [--float]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: _util and the other groups' modules
from codes.bench_codes_speed import correlated  # noqa: E402

from embcompress import from_spec  # noqa: E402
from embcompress.search import Index  # noqa: E402


def vectors(path: str) -> np.ndarray:
    from embcompress.io.whole import read_all

    return np.asarray(read_all(path)[0], dtype=np.float32)


#: seconds between timed float searches: faiss's OpenMP workers spin after a call on the cores
#: the next search needs (as in bench_single_query)
SETTLE = 0.2


def timed(index: Index, Q: np.ndarray, decoded: bool):
    index.scorer.decoded_from = 1 if decoded else 10**12
    t = time.perf_counter()
    res = index.search(Q, 10)
    return time.perf_counter() - t, res.rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--emb", default=None)
    ap.add_argument("--queries-file", default=None)
    ap.add_argument("--fit", type=int, default=20_000)
    ap.add_argument("--docs", type=int, default=200_000)
    ap.add_argument("--batches", default="16,64,256,1024")
    ap.add_argument("--codes", default="pq:48,pq:96,opq:96,rq:48,sq:1,sq:2")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", default=None)
    ap.add_argument("--float", action="store_true", help="time exact float search instead of the codes")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    if args.emb:
        X = vectors(args.emb)
        Qall = vectors(args.queries_file)
        fitX, base = X[: args.fit], X[args.fit :]
    else:
        fitX, base, Qall = correlated(args.fit, 384, rng), correlated(200_000, 384, rng), correlated(4096, 384, rng)
    docs = np.tile(base, (-(-args.docs // len(base)), 1))[: args.docs]
    batches = [int(b) for b in args.batches.split(",")]
    if args.float:
        return float_section(docs, Qall, batches, args.repeat, rng)
    print(
        f"{len(docs):,} documents x {docs.shape[1]}, {'real' if args.emb else 'correlated'} vectors; "
        f"top-10, best of {args.repeat}; {time.strftime('%Y-%m-%d %H:%M')}"
    )
    print(f"{'code':8s} {'queries':>7s} {'tables s':>9s} {'decoded s':>9s} {'ratio':>6s}  same rows  default")
    out = []
    for spec in args.codes.split(","):
        c = from_spec(spec).fit(fitX)
        index = Index(c.transform(docs), compressor=c)
        default_from = index.scorer.decoded_from
        for nq in batches:
            Q = Qall[rng.choice(len(Qall), nq, replace=nq > len(Qall))]
            best = {False: np.inf, True: np.inf}
            rows = {}
            for _ in range(args.repeat):
                for decoded in (False, True):
                    t, rows[decoded] = timed(index, Q, decoded)
                    best[decoded] = min(best[decoded], t)
            same = float(np.mean(rows[False] == rows[True]))
            default = "decoded" if default_from is not None and nq >= default_from else "tables"
            print(
                f"{spec:8s} {nq:7d} {best[False]:9.3f} {best[True]:9.3f} {best[False] / best[True]:5.2f}x  {same:9.4f} "
                f" {default}",
                flush=True,
            )
            out.append(
                {
                    "code": spec,
                    "queries": nq,
                    "tables_s": best[False],
                    "decoded_s": best[True],
                    "same_rows": same,
                    "default": default,
                }
            )
    if args.json:
        Path(args.json).write_text(json.dumps({"docs": len(docs), "rows": out}, indent=1))


def float_section(docs: np.ndarray, Qall: np.ndarray, batches: list[int], repeat: int, rng) -> None:
    import faiss

    from embcompress.core._parallel import num_threads
    from embcompress.search import exact

    faiss.omp_set_num_threads(num_threads())
    unit = docs / np.linalg.norm(docs, axis=1, keepdims=True)
    flat = faiss.IndexFlatIP(docs.shape[1])
    flat.add(unit)
    index = Index(docs)
    kernel = exact._adc
    print(
        f"exact float search over {len(docs):,} x {docs.shape[1]}, top-10, best of {repeat}; "
        f"{time.strftime('%Y-%m-%d %H:%M')}"
    )
    print(
        f"{'queries':>7s} {'ours s':>8s} {'numpy top-k s':>13s} {'faiss s':>8s}  ours vs numpy  ours vs faiss  same "
        "rows as numpy"
    )
    for nq in batches:
        Q = Qall[rng.choice(len(Qall), nq, replace=nq > len(Qall))]
        Qu = Q / np.linalg.norm(Q, axis=1, keepdims=True)
        best, rows = [np.inf, np.inf, np.inf], [None, None]
        for _ in range(repeat):
            for j in range(3):
                exact._adc = None if j == 1 else kernel
                time.sleep(SETTLE)
                t = time.perf_counter()
                res = flat.search(Qu, 10) if j == 2 else index.search(Q, 10)
                best[j] = min(best[j], time.perf_counter() - t)
                if j < 2:
                    rows[j] = res.rows
        exact._adc = kernel
        same = float(np.mean(rows[0] == rows[1]))
        print(
            f"{nq:7d} {best[0]:8.3f} {best[1]:13.3f} {best[2]:8.3f}  {best[1] / best[0]:12.2f}x  "
            f"{best[2] / best[0]:12.2f}x  {same:9.4f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
