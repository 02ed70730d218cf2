"""A seeded random subset of ``dim`` input dimensions (Dinu et al., 2025, section 4)."""

from __future__ import annotations


import numpy as np

from ..core.specs import Traits
from ..core.base import Compressor
from ..core.specs import OutputSpec, float_spec
from ..core.checks import check_dim, make_rng
from ..core.registry import register


@register
class RandomSelect(Compressor):
    """Keep ``dim`` input dimensions drawn without replacement; kept in increasing order."""

    name = "random_select"
    _positional = "dim"
    _state_arrays = ("indices_",)

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
        self.indices_ = np.sort(rng.choice(n_features, size=self.dim, replace=False)).astype(np.int64)

    def _transform(self, X: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(X[:, self.indices_])

    def _inverse(self, Z: np.ndarray) -> np.ndarray:
        out = np.zeros((len(Z), self.n_features_in_), dtype=np.float32)
        out[:, self.indices_] = Z
        return out

    def _state_shapes(self):
        return {"indices_": (self.dim,)}

    def _output_spec(self) -> OutputSpec:
        return float_spec(self.dim)
