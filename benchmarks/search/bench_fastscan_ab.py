"""Two builds of the fast-scan kernel (``embcompress.search._fastscan``) in one process: this checkout's and
another's (``--against``, a copy of an earlier build's ``_fastscan*.so``), timed in alternation on the same
first stage, one query at a time, one thread, and checked to return the same rows and scores.

A kernel change that is meant to leave results as they are is measured so: the same process, the same
data and queries, each query run by both builds in turn (which goes first alternates), p50 per build.

    cp embcompress/search/_fastscan*.so /tmp/fastscan-before.so      # before the change
    python setup.py build_ext --inplace                              # after it
    python benchmarks/search/bench_fastscan_ab.py --against /tmp/fastscan-before.so [--ks 10,1000,10000]

The first stage is ``pca:240+pq:24:nbits=4`` fitted on 20,000 generated unit vectors of 256 dimensions,
their codes tiled to ``--docs`` rows.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import time

import numpy as np

import embcompress
from embcompress.core._util import normalize_rows
from embcompress.search import Index, fastscan


def load_build(path: str):
    spec = importlib.util.spec_from_file_location("embcompress.search._fastscan", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--against", required=True, help="the other build's _fastscan*.so")
    ap.add_argument("--docs", type=int, default=1_000_000)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--ks", default="10,1000,10000")
    args = ap.parse_args()
    os.environ["EMBCOMPRESS_NUM_THREADS"] = "1"  # one thread, as the serving tables are measured
    builds = {"this": fastscan._fastscan, "against": load_build(args.against)}
    rng = np.random.default_rng(0)
    base = normalize_rows(rng.standard_normal((20_000, 256)).astype(np.float32))
    first = embcompress.from_spec("pca:240+pq:24:nbits=4").fit(base)
    codes = first.transform(base)
    index = Index(np.tile(codes, (-(-args.docs // len(codes)), 1))[: args.docs], compressor=first)
    Q = normalize_rows(rng.standard_normal((args.queries, 256)).astype(np.float32))
    try:
        for k in (int(x) for x in args.ks.split(",")):
            times = {name: [] for name in builds}
            for j, q in enumerate(Q):
                found = {}
                for name in list(builds)[:: 1 if j % 2 else -1]:
                    fastscan._fastscan = builds[name]
                    t0 = time.perf_counter()
                    found[name] = index.first_stage(q[None], k)
                    times[name].append(time.perf_counter() - t0)
                same = all(np.array_equal(a, b) for a, b in zip(found["this"], found["against"]))
                if not same:
                    raise SystemExit(f"k={k}, query {j}: the two builds return different results")
            this, other = (1e3 * np.median(times[n]) for n in ("this", "against"))
            print(
                f"top {k:>6,} of {args.docs:,}: this build p50 {this:6.3f} ms, the other {other:6.3f} ms, "
                f"{other / this:.2f}x (results identical, {len(Q)} queries)"
            )
    finally:
        fastscan._fastscan = builds["this"]


if __name__ == "__main__":
    main()
