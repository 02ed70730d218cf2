"""Rows scaled to unit length, optionally after subtracting the corpus mean."""

from __future__ import annotations

import numpy as np

from ..core._util import normalize_rows
from ..core.base import Compressor
from ..core.specs import OutputSpec, Traits, float_spec
from ..core.registry import register
from ._sample import OptionalCentering


@register
class Normalize(OptionalCentering, Compressor):
    """``x -> (x - mean) / |x - mean|`` (the mean subtracted only with ``center=True``): the width is
    unchanged and inner product becomes cosine. For embeddings that are not unit-length (many
    models' raw outputs), and, centred, for anisotropic ones whose vectors share a common
    direction; chain it first: ``normalize:center=true+binary``. All-zero rows stay zero."""

    name = "normalize"
    _state_arrays = ("mean_",)

    def __init__(self, center: bool = False):
        self.center = center

    @property
    def traits(self) -> Traits:  # the mean is per dimension: code files carry it
        return super().traits.but(state_in_file=True)

    def _validate_params(self, n_features: int) -> None:
        self._check_center()

    def _fit_stats(self, stats: dict, n_features: int) -> None:
        self.mean_ = self._centre_from(stats, n_features)

    def _transform(self, X: np.ndarray) -> np.ndarray:
        return normalize_rows(np.subtract(X, self.mean_, dtype=np.float32), copy=False)

    def _inverse(self, Z: np.ndarray) -> np.ndarray:
        return np.asarray(Z, dtype=np.float32)  # the length and the mean are gone: the direction is what comes back

    def _output_spec(self) -> OutputSpec:
        return float_spec(self.n_features_in_)
