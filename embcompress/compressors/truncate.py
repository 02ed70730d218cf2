"""Keep the first ``dim`` dimensions (Matryoshka-style truncation)."""

from __future__ import annotations


import numpy as np

from ..core.specs import Traits
from ..core._util import normalize_rows
from ..core.base import Compressor
from ..core.specs import OutputSpec, float_spec
from ..core.checks import check_dim
from ..core.registry import register


@register
class Truncate(Compressor):
    """``x -> x[:dim]``, optionally re-normalized to unit length.

    Re-normalizing does not change cosine rankings but makes inner product equal cosine again.
    """

    name = "truncate"
    _positional = "dim"

    def __init__(self, dim: int = 256, renormalize: bool = False):
        self.dim = dim
        self.renormalize = renormalize

    @property
    def traits(self) -> Traits:
        return super().traits.with_fit(learns=False).but(state_in_file=True)

    def _validate_params(self, n_features: int) -> None:
        check_dim("dim", self.dim, n_features)

    def _fit(self, batches, n_features: int) -> None:
        pass  # only the input width is learned

    def _transform(self, X: np.ndarray) -> np.ndarray:
        out = np.array(X[:, : self.dim], dtype=np.float32, order="C")
        return normalize_rows(out, copy=False) if self.renormalize else out

    def _inverse(self, Z: np.ndarray) -> np.ndarray:
        out = np.zeros((len(Z), self.n_features_in_), dtype=np.float32)
        out[:, : self.dim] = Z  # the dropped dimensions come back as 0 (a renormalized row keeps its direction)
        return out

    def _output_spec(self) -> OutputSpec:
        return float_spec(self.dim)
