"""A seeded random orthogonal rotation: spreads the variance evenly over the dimensions before
a 1-bit code, so each bit carries about the same information."""

from __future__ import annotations

import numpy as np

from ..base import Compressor, OutputSpec, float_spec, make_rng
from ..capabilities import Affine
from ..registry import register
from ._sample import OptionalCentering


def random_orthogonal(d: int, rng: np.random.Generator) -> np.ndarray:
    """A (d, d) orthogonal matrix drawn uniformly (Haar): QR of a Gaussian matrix with the signs
    of R's diagonal folded into Q."""
    q, r = np.linalg.qr(rng.standard_normal((d, d)))
    return (q * np.sign(np.diag(r))).astype(np.float32)


class OrthogonalMap(Affine, Compressor):
    """``x -> (x - mean_) @ rotation_`` with an orthogonal ``rotation_``: the width is unchanged,
    the inverse is the transpose. Subclasses choose the rotation (and whether to centre)."""

    _state_arrays = ("rotation_", "mean_")

    def _transform(self, X: np.ndarray) -> np.ndarray:
        return (X - self.mean_) @ self.rotation_

    def _inverse(self, Z: np.ndarray) -> np.ndarray:
        return Z @ self.rotation_.T + self.mean_

    def linear_part(self, X: np.ndarray) -> np.ndarray:
        return X @ self.rotation_

    def _state_shapes(self):
        d = self.n_features_in_
        return {"rotation_": (d, d), "mean_": (d,)}

    def _output_spec(self) -> OutputSpec:
        return float_spec(self.n_features_in_)


@register
class Rotate(OptionalCentering, OrthogonalMap):
    """``x -> (x - mean) @ R`` with ``R`` a seeded random orthogonal matrix (the mean is
    subtracted only with ``center=True``). Lengths and angles are kept (without centering),
    the width is unchanged; chain it before ``binary``: ``rotate+binary``."""

    name = "rotate"
    examples = ("rotate:seed=3", "rotate:center=true")  # the contract suite's cases
    sklearn_example = "rotate:center=true"  # scikit-learn's estimator checks (they fit on a few rows of 1-5 columns)
    _positional = "seed"

    def __init__(self, seed: int = 0, center: bool = False):
        self.seed = seed
        self.center = center

    def _fit_stats(self, stats: dict, n_features: int) -> None:
        self.rotation_ = random_orthogonal(n_features, make_rng(self.seed))
        self.mean_ = self._centre_from(stats, None, n_features)

    def _validate_params(self, n_features: int) -> None:
        make_rng(self.seed)
        self._check_center()

    def _fit(self, batches, n_features: int) -> None:
        self.rotation_ = random_orthogonal(n_features, make_rng(self.seed))
        self.mean_ = self._centre_from(None, batches, n_features)
