"""The structured rotation (``rotate:kind=hadamard``) against the dense Haar-random one
(``kind=haar``, a d x d matrix product per vector on BLAS), in the same process, interleaved,
best of ``--repeat``: the rotation alone and the 48 B code that leads the budget table at 384 dims
(``rotate:center=true+sq:1``), each through ``transform`` on every core, at several widths.
Both are fitted on the same rows; the encoded rows are the same synthetic correlated vectors.

    python benchmarks/codes/bench_rotation.py [--rows 200000] [--dims 384,768,1024] [--repeat 3]

What each keeps on real data is measured by ``bench_codes_debian.py`` (see benchmarks/README.md,
"A structured rotation")."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: _util and the other groups' modules
from _util import best_of  # noqa: E402

from embcompress import from_spec  # noqa: E402
from embcompress.core._parallel import num_threads  # noqa: E402


def correlated(n: int, d: int, rng) -> np.ndarray:
    """Rows with a decaying spectrum and a shared offset, unit length, like sentence embeddings."""
    basis = np.linalg.qr(rng.standard_normal((d, d)))[0].astype(np.float32)
    X = (
        rng.standard_normal((n, d)).astype(np.float32) * np.linspace(1.0, 0.05, d, dtype=np.float32)
    ) @ basis + 0.3 / np.sqrt(d)
    return X / np.linalg.norm(X, axis=1, keepdims=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--dims", default="384,768,1024")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    print(f"rotations, {args.rows:,} rows, {num_threads()} threads, interleaved, best of {args.repeat}")
    print(f"  {'dims':>5s} {'what':32s} {'haar rows/s':>12s} {'hadamard rows/s':>16s} {'hadamard/haar':>14s}")
    for d in map(int, args.dims.split(",")):
        X = correlated(args.rows, d, rng)
        for what in ("rotate:center=true", "rotate:center=true+sq:1"):
            head, _, tail = what.partition("+")
            haar = from_spec(what).fit(X[:50_000])
            fast = from_spec(f"{head},kind=hadamard" + (f"+{tail}" if tail else "")).fit(X[:50_000])
            t_a = t_b = float("inf")
            for _ in range(args.repeat):
                t_a = min(t_a, best_of(lambda: haar.transform(X), 1))
                t_b = min(t_b, best_of(lambda: fast.transform(X), 1))
            print(f"  {d:5d} {what:32s} {len(X) / t_a:12,.0f} {len(X) / t_b:16,.0f} {t_a / t_b:13.2f}x", flush=True)


if __name__ == "__main__":
    main()
