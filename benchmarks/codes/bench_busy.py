"""Fits on a busy machine: ``opq:48`` and ``rq:24`` fitted alone and with one core kept busy by
another process (a Python loop), by embcompress (faiss loaded through it: OpenMP threads wait
asleep, not spinning, unless the user set OMP_WAIT_POLICY) and by faiss imported directly, with
its defaults, on the same settings (the same k-means seed, beam 1 for RQ). Each fit runs in a fresh
process so that no OpenMP state carries over; the time is the fit alone. (A team sized to the idle
cores was measured with it on 2026-11-26 and withdrawn: faiss's training is not the same on
another number of threads, so fits then depended on the machine's load; benchmarks/README.md.)

``geopres:DIM`` (torch's training) is measured the same way; its reference, printed in the faiss
columns, is embcompress's fit with torch's own team (the idle-core limit switched off), the
behaviour before that limit.

    python benchmarks/codes/bench_busy.py [--emb bench-data/debian-ir] [--rows 16000] [--codes opq:48,rq:24,geopres:192]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np


def fit_once(who: str, spec: str, emb: str, rows: int) -> float:
    """Fit ``spec`` on a seeded sample of ``rows`` documents; the seconds of the fit."""
    from embcompress.io import read_all

    X, _ = read_all(os.path.join(emb, "corpus.parquet"))
    X = np.ascontiguousarray(X[np.sort(np.random.default_rng(0).choice(len(X), min(rows, len(X)), replace=False))])
    name, m = spec.split(":")[0], int(spec.split(":")[1])
    if name == "geopres" and who == "faiss":  # the reference: torch's own team, as before the limit
        from embcompress.compressors import _learned

        _learned.idle_cores = lambda: None
        who = "ours"
    if who == "ours":
        from embcompress import from_spec

        t = time.perf_counter()
        from_spec(spec).fit(X)
        return time.perf_counter() - t
    import faiss

    d = X.shape[1]
    t = time.perf_counter()
    if name == "opq":
        opq = faiss.OPQMatrix(d, m)
        opq.pq = faiss.ProductQuantizer(d, m, 8)
        opq.pq.cp.min_points_per_centroid, opq.pq.cp.seed = 1, 0
        opq.train(X)
        pq = faiss.ProductQuantizer(d, m, 8)
        pq.cp.min_points_per_centroid, pq.cp.seed = 1, 0
        pq.train(np.ascontiguousarray(opq.apply(X)))
    elif name == "rq":
        rq = faiss.ResidualQuantizer(d, m, 8)
        rq.max_beam_size = 1
        rq.cp.min_points_per_centroid, rq.cp.seed = 1, 0
        rq.train(np.ascontiguousarray(X - X.mean(axis=0)))
    else:
        raise SystemExit(f"no faiss reference for {spec}")
    return time.perf_counter() - t


def measure(who: str, spec: str, args) -> float:
    out = subprocess.run(
        [sys.executable, __file__, "--one", who, spec, "--emb", args.emb, "--rows", str(args.rows)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])["seconds"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--emb", default="bench-data/debian-ir")
    ap.add_argument("--rows", type=int, default=16_000)
    ap.add_argument("--codes", default="opq:48,rq:24")
    ap.add_argument("--one", nargs=2, metavar=("WHO", "SPEC"), default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps({"seconds": fit_once(*args.one, args.emb, args.rows)}))
        return
    codes = args.codes.split(",")
    print(
        f"fits on {args.rows:,} rows of {args.emb}, {os.cpu_count()} cores, {time.strftime('%Y-%m-%d %H:%M')}; "
        "each in a fresh process; shared = one core kept busy by another process",
        flush=True,
    )
    res: dict = {}
    for cond in ("alone", "shared"):
        busy = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if cond == "shared" else None
        try:
            if busy:
                time.sleep(1.0)
            for spec in codes:
                for who in ("ours", "faiss"):
                    res[cond, spec, who] = measure(who, spec, args)
                    print(f"  {cond:6s} {spec:7s} {who:5s} {res[cond, spec, who]:7.1f} s", flush=True)
        finally:
            if busy:
                busy.kill()
                busy.wait()
    print(
        f"{'code':8s} {'ours alone':>10s} {'faiss alone':>11s} {'ours shared':>11s} {'faiss shared':>12s} "
        f"{'ours shared/alone':>17s} {'faiss shared/alone':>18s} {'faiss/ours shared':>17s}"
    )
    for spec in codes:
        oa, fa, os_, fs = (
            res[c, spec, w] for c, w in (("alone", "ours"), ("alone", "faiss"), ("shared", "ours"), ("shared", "faiss"))
        )
        print(
            f"{spec:8s} {oa:9.1f}s {fa:10.1f}s {os_:10.1f}s {fs:11.1f}s {os_ / oa:16.2f}x {fs / fa:17.2f}x "
            f"{fs / os_:16.2f}x"
        )


if __name__ == "__main__":
    main()
