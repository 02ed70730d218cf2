"""In-memory throughput of binary and int8 against sentence-transformers `quantize_embeddings`
on the same array, and PCA fit time against scikit-learn's PCA.

    python benchmarks/codes/bench_quantize.py [--rows 200000] [--dim 1024] [--pca-rows 300000]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: _util and the other groups' modules
from _util import best_of  # noqa: E402

from embcompress import Binary, Int8, PCA  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--dim", type=int, default=1024)
    ap.add_argument("--pca-rows", type=int, default=300_000)
    ap.add_argument("--pca-dim", type=int, default=256)
    ap.add_argument("--skip-full-pca", action="store_true", help="skip sklearn's PCA() with all components (slow)")
    args = ap.parse_args()
    from sentence_transformers.util.quantization import quantize_embeddings
    from sklearn.decomposition import PCA as SkPCA

    rng = np.random.default_rng(0)
    X = rng.standard_normal((args.rows, args.dim), dtype=np.float32)
    gb = X.nbytes / 1e9
    print(f"array: {args.rows:,} x {args.dim} float32 ({gb:.2f} GB)")

    b = Binary().fit(X)
    assert np.array_equal(b.transform(X), quantize_embeddings(X, precision="ubinary"))
    t_st = best_of(lambda: quantize_embeddings(X, precision="ubinary"))
    t_ours = best_of(lambda: b.transform(X))
    print(
        f"binary  sentence-transformers {t_st:6.3f} s ({gb / t_st:5.2f} GB/s) | embcompress {t_ours:6.3f} s "
        f"({gb / t_ours:5.2f} GB/s) | speed-up {t_st / t_ours:.2f}x (aim >= 1x)"
    )

    q = Int8().fit(X)
    assert np.array_equal(q.transform(X), quantize_embeddings(X, precision="int8", ranges=q.ranges_))
    t_st = best_of(lambda: quantize_embeddings(X, precision="int8", ranges=q.ranges_))
    t_ours = best_of(lambda: q.transform(X))
    print(
        f"int8    sentence-transformers {t_st:6.3f} s ({gb / t_st:5.2f} GB/s) | embcompress {t_ours:6.3f} s "
        f"({gb / t_ours:5.2f} GB/s) | speed-up {t_st / t_ours:.2f}x (aim >= 2x); codes identical"
    )
    t_st_cal = best_of(lambda: quantize_embeddings(X, precision="int8"), 1)
    t_ours_cal = best_of(lambda: Int8().fit(X).transform(X), 1)
    print(
        f"int8 incl. calibration on X     {t_st_cal:6.3f} s                 | embcompress {t_ours_cal:6.3f} s"
        f"                 | speed-up {t_st_cal / t_ours_cal:.2f}x"
    )
    X = None  # frees the array (the timed closures above are not called again)

    P = rng.standard_normal((args.pca_rows, args.dim), dtype=np.float32)
    P *= np.linspace(3, 0.05, args.dim, dtype=np.float32)  # a decaying spectrum, like real embeddings
    t0 = time.perf_counter()
    ours = PCA(dim=args.pca_dim).fit(P)
    t_ours = time.perf_counter() - t0
    t0 = time.perf_counter()
    ref = SkPCA(n_components=args.pca_dim).fit(P)
    t_sk = time.perf_counter() - t0
    # variance captured by each 256-d subspace (ours is the exact top-k; randomized is approximate)
    cap_ours = float(ours.explained_variance_ratio_[: args.pca_dim].sum())
    cap_sk = float(ref.explained_variance_ratio_.sum())
    print(
        f"PCA fit {args.pca_rows:,} x {args.dim} -> {args.pca_dim}: embcompress {t_ours:6.2f} s | "
        f"sklearn PCA(n_components={args.pca_dim}) [solver {ref._fit_svd_solver}] {t_sk:6.2f} s | "
        f"speed-up {t_sk / t_ours:.1f}x (aim >= 5x); variance captured {cap_ours:.4f} vs {cap_sk:.4f}"
    )
    if not args.skip_full_pca:
        t0 = time.perf_counter()
        full = SkPCA().fit(P)
        t_full = time.perf_counter() - t0
        print(
            f"PCA fit, sklearn default PCA() (all components) [solver {full._fit_svd_solver}] {t_full:6.2f} s | "
            f"speed-up {t_full / t_ours:.1f}x"
        )


if __name__ == "__main__":
    main()
