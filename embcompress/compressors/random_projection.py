"""Seeded Gaussian random projection (Johnson-Lindenstrauss)."""

from __future__ import annotations


import numpy as np

from ..core.specs import Traits
from ..core.base import Compressor
from ..core.specs import OutputSpec, float_spec
from ..core.checks import check_dim, make_rng
from ..core.registry import register


@register
class RandomProjection(Compressor):
    """``x -> x @ R`` with ``R[i, j] ~ N(0, 1 / dim)``.

    With this scaling squared Euclidean distances are preserved in expectation, and for ``n``
    points they stay within ``1 +- eps`` with high probability once ``dim >= 4 ln(n) / (eps^2/2 -
    eps^3/3)`` (Johnson-Lindenstrauss; Dasgupta and Gupta 2003).
    """

    name = "random_projection"
    _positional = "dim"
    _state_arrays = ("components_",)

    def __init__(self, dim: int = 256, seed: int = 0):
        self.dim = dim
        self.seed = seed

    @property
    def traits(self) -> Traits:
        return super().traits.with_fit(learns=False)

    def _validate_params(self, n_features: int) -> None:
        check_dim("dim", self.dim, n_features)
        make_rng(self.seed)

    def _fit(self, batches, n_features: int) -> None:
        rng = make_rng(self.seed)
        R = rng.standard_normal((n_features, self.dim)) / np.sqrt(self.dim)
        self.components_ = R.astype(np.float32)  # (n_features, dim)

    def _transform(self, X: np.ndarray) -> np.ndarray:
        return X @ self.components_

    def _inverse(self, Z: np.ndarray) -> np.ndarray:
        return (Z @ np.linalg.pinv(self.components_)).astype(np.float32)  # least-squares preimage

    def _state_shapes(self):
        return {"components_": (self.n_features_in_, self.dim)}

    def _output_spec(self) -> OutputSpec:
        return float_spec(self.dim)
