"""Fit speed of the learned and streaming reductions on this machine's CPU: GeoPres on
N x 384 -> 96 for several N (how it scales with rows), against the streaming PCA fit on the same
data in the same process.

    python benchmarks/codes/bench_fit.py [--rows 25000,50000,100000] [--dim 384] [--to 96]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from embcompress import PCA, GeoPres
from embcompress.analysis import preservation


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", default="25000,50000,100000")
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--to", type=int, default=96)
    args = ap.parse_args()
    sizes = [int(x) for x in args.rows.split(",")]
    rng = np.random.default_rng(0)
    n_max = max(sizes)
    # embedding-like data: a decaying spectrum on the unit sphere
    X = rng.standard_normal((n_max, args.dim), dtype=np.float32) * np.geomspace(1, 0.02, args.dim, dtype=np.float32)
    X = X @ np.linalg.qr(rng.standard_normal((args.dim, args.dim)))[0].astype(np.float32)
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    print(
        f"GeoPres {args.dim} -> {args.to} (positional loss, CPU defaults: batch 2048, 10 epochs, min 300 steps, early "
        "stopping)"
    )
    print(
        f"{'rows':>8s} {'GeoPres s':>10s} {'steps':>6s} {'s/step':>7s} {'PCA s':>7s} {'ratio':>7s} "
        f"{'proxy GeoPres':>14s} {'proxy PCA':>10s}"
    )
    for n in sizes:
        t0 = time.perf_counter()
        g = GeoPres(dim=args.to).fit(X[:n])
        tg = time.perf_counter() - t0
        t0 = time.perf_counter()
        p = PCA(dim=args.to).fit_batches(lambda n=n: (X[s : min(s + 16384, n)] for s in range(0, n, 16384)))
        tp = time.perf_counter() - t0
        steps = g.history_[-1]["step"]
        sample = X[:2000]
        print(
            f"{n:8d} {tg:10.1f} {steps:6d} {tg / steps:7.3f} {tp:7.2f} {tg / tp:6.0f}x "
            f"{preservation(sample, g.transform(sample)).spearman:14.3f} "
            f"{preservation(sample, p.transform(sample)).spearman:10.3f}"
        )


if __name__ == "__main__":
    main()
