"""PCA fitted in one streaming pass by accumulating the covariance matrix."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core.base import Compressor
from ..core.specs import OutputSpec, Traits, float_spec
from ..core.checks import check_dim, check_matrix_fits
from ..core.capabilities import Affine, BlockStats
from ..core.errors import InputError
from ..core.registry import register

#: rows per matrix product while accumulating; bounds the float32 partial sums' length
_CHUNK = 16384


@register
class PCA(BlockStats, Affine, Compressor):
    """Project centered vectors on the top principal components.

    Give ``dim`` (number of components) or ``variance`` (keep the fewest components whose
    explained variance reaches this fraction, e.g. 0.95). The covariance is accumulated over
    batches in float64 around a shift (the first batch's mean, which keeps the sums well
    conditioned), so the fit reads the data once and needs O(d^2) memory whatever the row count; a
    cluster accumulates each row group the same way around its own mean and merges them.
    ``eigenvalues_`` keeps the whole spectrum, which the analysis tools use for the intrinsic
    dimensionality.
    """

    name = "pca"
    _positional = "dim"
    _state_arrays = ("components_", "mean_", "eigenvalues_")
    _state_scalars = ("n_samples_seen_",)

    @property
    def traits(self) -> Traits:
        return super().traits.with_fit(min_rows=2)

    def __init__(self, dim: int | None = None, variance: float | None = None):
        self.dim = dim
        self.variance = variance

    @classmethod
    def positional(cls, value: Any) -> dict[str, Any]:
        if isinstance(value, float) and 0 < value < 1:
            return {"variance": value}
        return {"dim": value}

    def _validate_params(self, n_features: int) -> None:
        if (self.dim is None) == (self.variance is None):
            raise InputError("pca needs exactly one of dim (a number of components) or variance (a fraction in (0, 1])")
        check_matrix_fits(n_features, n_features, "pca's fit (a covariance matrix)")
        if self.dim is not None:
            check_dim("dim", self.dim, n_features)
        elif not (isinstance(self.variance, (int, float)) and 0 < float(self.variance) <= 1):
            raise InputError(f"variance must be a fraction in (0, 1], got {self.variance!r}")

    def _from_covariance(self, cov: np.ndarray, mean: np.ndarray, n: int) -> None:
        n_features = len(cov)
        eigvals, eigvecs = np.linalg.eigh(cov)  # ascending
        eigvals = np.clip(eigvals[::-1], 0.0, None)
        eigvecs = eigvecs[:, ::-1]
        # deterministic sign: largest-magnitude loading of each component is positive
        signs = np.sign(eigvecs[np.abs(eigvecs).argmax(axis=0), np.arange(n_features)])
        eigvecs *= np.where(signs == 0, 1, signs)
        k = self.dim if self.dim is not None else max(1, components_for_variance(eigvals, float(self.variance)))
        self.components_ = np.ascontiguousarray(eigvecs[:, :k].T, dtype=np.float32)  # (k, d)
        self.mean_ = mean.astype(np.float32)
        self.eigenvalues_ = eigvals
        self.n_samples_seen_ = int(n)

    # ---- statistics combined from blocks (a cluster's row groups) --------------------------------
    def _fit(self, batches, n_features: int) -> None:
        """The statistics of every batch accumulated around one shift, the first batch's mean: the same sums as
        :meth:`_block_stats` of all the rows at once would make (a cluster's blocks, each around its own mean,
        are merged by :meth:`_merge_stats` instead)."""
        shift, sums = None, None
        for batch in batches():
            if shift is None:
                shift = batch.mean(axis=0, dtype=np.float64).astype(np.float32)
            sums = _scatter_sums(batch, shift, sums)
        self._fit_stats(_centred(sums, shift), n_features)

    def _block_stats(self, X: np.ndarray) -> dict[str, np.ndarray]:
        """Count, mean and centred scatter of a block, accumulated around its own mean (:func:`_scatter_sums`)."""
        shift = X.mean(axis=0, dtype=np.float64).astype(np.float32)
        return _centred(_scatter_sums(X, shift, None), shift)

    @staticmethod
    def _merge_stats(a: dict, b: dict) -> dict:
        """Chan et al.'s pairwise update of count, mean and centred scatter: exact in any order."""
        na, nb = int(a["n"][0]), int(b["n"][0])
        n = na + nb
        delta = b["mean"] - a["mean"]
        return {
            "n": np.array([n], np.int64),
            "mean": a["mean"] + delta * (nb / n),
            "m2": a["m2"] + b["m2"] + np.outer(delta, delta) * (na * nb / n),
        }

    def _fit_stats(self, stats: dict, n_features: int) -> None:
        n = int(stats["n"][0])
        self._from_covariance(stats["m2"] / (n - 1), stats["mean"], n)

    @property
    def explained_variance_ratio_(self) -> np.ndarray:
        total = self.eigenvalues_.sum()
        return self.eigenvalues_ / total if total > 0 else np.zeros_like(self.eigenvalues_)

    def _transform(self, X: np.ndarray) -> np.ndarray:
        return (X - self.mean_) @ self.components_.T

    def _inverse(self, Z: np.ndarray) -> np.ndarray:
        return Z @ self.components_ + self.mean_

    def linear_part(self, X: np.ndarray) -> np.ndarray:
        return X @ self.components_.T

    def _state_shapes(self):
        d = self.n_features_in_
        return {"components_": (self.dim, d), "mean_": (d,), "eigenvalues_": (d,)}

    def _output_spec(self) -> OutputSpec:
        return float_spec(len(self.components_))


def components_for_variance(eigenvalues: np.ndarray, fraction: float) -> int:
    """Fewest leading components whose share of the total variance reaches ``fraction``; 0 when
    the data do not vary at all (total variance 0: no component explains anything)."""
    total = float(np.sum(eigenvalues))
    if total <= 0:
        return 0
    cumulative = np.cumsum(eigenvalues) / total
    return int(min(np.searchsorted(cumulative, fraction - 1e-12) + 1, len(eigenvalues)))


def _scatter_sums(X: np.ndarray, shift: np.ndarray, sums: tuple | None) -> tuple[int, np.ndarray, np.ndarray]:
    """``(n, total, scatter)`` of the rows ``X`` minus ``shift`` added to ``sums`` (None: zeros): float64 sums
    of float32 products over :data:`_CHUNK` rows at a time."""
    n, total, scatter = sums or (0, np.zeros(X.shape[1], np.float64), np.zeros((X.shape[1],) * 2, np.float64))
    for start in range(0, len(X), _CHUNK):
        block = X[start : start + _CHUNK] - shift  # (b, d) float32
        total += block.sum(axis=0, dtype=np.float64)
        scatter += block.T @ block  # (d, d), float32 product, float64 sum
    return n + len(X), total, scatter


def _centred(sums: tuple[int, np.ndarray, np.ndarray], shift: np.ndarray) -> dict[str, np.ndarray]:
    """The block statistics (count, mean, centred scatter) of sums around ``shift``."""
    n, total, scatter = sums
    moved = total / n
    return {
        "n": np.array([n], np.int64),
        "mean": shift.astype(np.float64) + moved,
        "m2": scatter - n * np.outer(moved, moved),
    }
