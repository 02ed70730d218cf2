"""Iterative quantization (Gong & Lazebnik, 2011): an orthogonal rotation of the centred data
learned so that the sign code loses as little as possible."""

from __future__ import annotations


import numpy as np

from ..core._util import check_positive_int
from ..core.checks import check_matrix_fits, make_rng
from ..core.specs import Traits
from ..core.registry import register
from ._sample import reservoir, stream_mean
from .rotate import OrthogonalMap, random_orthogonal

MIN_ROWS = 2


@register
class ITQ(OrthogonalMap):
    """``x -> (x - mean) @ R``: ``R`` minimizes the quantization loss ``||sign(V R) - V R||^2``
    over the centred sample ``V`` (up to ``max_rows`` rows, drawn uniformly from the stream).
    Starting from a seeded random rotation, each of ``iters`` iterations fixes the codes
    ``B = sign(V R)`` and solves the orthogonal Procrustes problem ``min ||B - V R||`` for ``R``
    by an SVD of ``V^T B`` (Gong & Lazebnik, 2011, section 2.3). The width is unchanged; chain
    it before ``binary``: ``itq+binary`` or ``pca:192+itq+binary``. ``loss_`` keeps the loss per
    iteration (mean squared distance of the rotated rows to their signs, per dimension)."""

    name = "itq"
    _positional = "iters"
    _state_arrays = ("rotation_", "mean_", "loss_")  # the loss per iteration is kept with the model

    @property
    def traits(self) -> Traits:  # a uniform sample of max_rows rows
        return super().traits.with_fit(min_rows=MIN_ROWS, sample=self.max_rows)

    def __init__(self, iters: int = 50, max_rows: int = 25_000, seed: int = 0):
        self.iters = iters
        self.max_rows = max_rows
        self.seed = seed

    def _state_shapes(self):
        return {**super()._state_shapes(), "loss_": (None,)}

    def _validate_params(self, n_features: int) -> None:
        check_positive_int("iters", self.iters, minimum=0)
        check_positive_int("max_rows", self.max_rows, minimum=MIN_ROWS)
        make_rng(self.seed)
        check_matrix_fits(n_features, n_features, "itq's rotation")  # before the sample's buffer is allocated

    def _fit(self, batches, n_features: int) -> None:
        rng = make_rng(self.seed)
        self.mean_ = stream_mean(batches)  # the mean over all rows; the rotation is learned on a sample
        V = reservoir(batches, self.max_rows, rng)
        V -= self.mean_
        R = random_orthogonal(n_features, rng)
        losses = []
        for _ in range(int(self.iters)):
            Z = V @ R  # (n, d) rotated sample
            B = np.where(Z >= 0, np.float32(1), np.float32(-1))
            losses.append(float(((B - Z) ** 2).mean()))
            u, _, vt = np.linalg.svd(V.T @ B)  # V^T B = U S W^T  ->  R = U W^T maximizes tr(B^T V R)
            R = (u @ vt).astype(np.float32)
        Z = V @ R
        losses.append(float(((np.where(Z >= 0, 1.0, -1.0) - Z) ** 2).mean()))
        self.rotation_ = R
        self.loss_ = np.asarray(losses, dtype=np.float64)
