"""Encoding speed of ``rq`` (what ``apply`` spends per row), against faiss's plain
``ResidualQuantizer.compute_codes`` on the same codebooks and rows in the same process. With a
beam, ``rq`` encodes through faiss's table-based beam search (precomputed codeword inner
products); the script prints both speeds, their ratio and how many rows get the same codes.

    python benchmarks/codes/bench_rq_encode.py [--emb corpus.parquet] [--rows 20000] [--fit-rows 15000] [--specs
    rq:24,rq:24:beam=4]

Without ``--emb`` the vectors are synthetic (a decaying spectrum, unit norm, 384 dims).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import faiss
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: _util and the other groups' modules
from codes.bench_codes_speed import correlated  # noqa: E402

from embcompress import from_spec  # noqa: E402
from embcompress.core._parallel import num_threads  # noqa: E402
from embcompress.io import read_all  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--emb", help="a parquet file of vectors (default: synthetic)")
    ap.add_argument("--rows", type=int, default=20_000, help="rows encoded and timed")
    ap.add_argument("--fit-rows", type=int, default=15_000)
    ap.add_argument("--specs", default="rq:24,rq:24:beam=4")
    args = ap.parse_args()
    threads = num_threads()
    faiss.omp_set_num_threads(threads)
    if args.emb:
        X = read_all(args.emb)[0].astype(np.float32)[: args.fit_rows + args.rows]
    else:
        X = correlated(args.fit_rows + args.rows, 384, np.random.default_rng(0))
    fit, enc = X[: args.fit_rows], np.ascontiguousarray(X[args.fit_rows :])
    print(
        f"rq encoding: {len(enc):,} rows x {X.shape[1]} dims ({args.emb or 'synthetic'}), codebooks fitted on "
        f"{len(fit):,} other rows, {threads} threads"
    )
    print(
        f"  {'spec':18s} {'faiss plain rows/s':>19s} {'ours rows/s':>12s} {'ratio':>7s}   same codes   error ours / "
        "plain"
    )
    for spec in args.specs.split(","):
        c = from_spec(spec).fit(fit)
        m, k, d = c.codebooks_.shape
        ref = faiss.ResidualQuantizer(d, m, int(c.nbits))
        ref.max_beam_size = int(c.beam)
        faiss.copy_array_to_vector(c.codebooks_.ravel(), ref.codebooks)
        ref.is_trained = True
        t0 = time.perf_counter()
        theirs = ref.compute_codes(np.ascontiguousarray(enc - c.mean_))
        t_ref = time.perf_counter() - t0
        t0 = time.perf_counter()
        ours = c.transform(enc)
        t_ours = time.perf_counter() - t0
        same = float((ours == theirs).all(axis=1).mean())
        err = [float(((c.decode(x) - enc) ** 2).sum(axis=1).mean()) for x in (ours, theirs)]
        print(
            f"  {spec:18s} {len(enc) / t_ref:19,.0f} {len(enc) / t_ours:12,.0f} {t_ref / t_ours:6.2f}x   {same:10.4f}"
            f"   {err[0]:.5f} / {err[1]:.5f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
