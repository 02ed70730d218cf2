"""One GeoPres training step (positional loss, forward and backward) as the library computes it
(``geopres.positional_loss``: in place, the backward written out) against autograd through the
plain formulas (``mean_offdiagonal_sq`` of two ``distance_matrix``), on the same batch and
weights, interleaved, best of ``--repeat``; and the two gradients' largest relative difference.

    python benchmarks/codes/bench_geopres_step.py [--batches 1024,2048,4096] [--threads 1,2] [--repeat 3]
"""

from __future__ import annotations

import argparse
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batches", default="1024,2048,4096")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--dims", default="384,192", help="input width, output width")
    ap.add_argument("--steps", type=int, default=5, help="steps per timing")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    import torch

    from embcompress.compressors.geopres import _distances_, distance_matrix, mean_offdiagonal_sq, positional_loss

    n, k = (int(x) for x in args.dims.split(","))
    print(
        f"GeoPres step, {n} -> {k} dimensions, {args.steps} steps per timing, best of {args.repeat}, "
        f"{time.strftime('%Y-%m-%d %H:%M')}"
    )
    print(
        f"  {'batch':>6s} {'threads':>7s} {'autograd s':>10s} {'library s':>9s} {'speed-up':>8s} "
        f"{'max rel. grad diff':>18s}"
    )
    for m in [int(b) for b in args.batches.split(",")]:
        g = torch.Generator().manual_seed(0)
        Y = torch.nn.functional.normalize(torch.randn(m, n, generator=g), dim=1)
        W0 = torch.randn(k, n, generator=g) / n**0.5

        def plain(W):
            with torch.no_grad():
                target = distance_matrix(torch, Y)
            return mean_offdiagonal_sq(torch, target, distance_matrix(torch, Y @ W.T))

        def library(W):
            with torch.no_grad():
                target = _distances_(torch, Y)
            return positional_loss(torch, target, Y @ W.T)

        grads = {}
        for name, f in (("plain", plain), ("library", library)):
            W = W0.clone().requires_grad_(True)
            f(W).backward()
            grads[name] = W.grad
        diff = float(((grads["plain"] - grads["library"]).abs().max() / grads["plain"].abs().max()))
        for threads in [int(t) for t in args.threads.split(",")]:
            before = torch.get_num_threads()
            torch.set_num_threads(threads)
            best = {"plain": float("inf"), "library": float("inf")}
            try:
                for _ in range(args.repeat):
                    for name, f in (("plain", plain), ("library", library)):
                        W = W0.clone().requires_grad_(True)
                        t = time.perf_counter()
                        for _ in range(args.steps):
                            W.grad = None
                            f(W).backward()
                        best[name] = min(best[name], (time.perf_counter() - t) / args.steps)
            finally:
                torch.set_num_threads(before)
            print(
                f"  {m:6d} {threads:7d} {best['plain']:10.4f} {best['library']:9.4f} "
                f"{best['plain'] / best['library']:7.2f}x {diff:18.2e}",
                flush=True,
            )


if __name__ == "__main__":
    main()
