"""RaBitQ (Gao & Long, 2024) and its extension to several bits per dimension (Gao et al., 2024):
centroid-relative unit vectors, a random rotation, a code on a scaled grid, and one correction
factor per vector that makes the inner-product estimate unbiased."""

from __future__ import annotations

import numpy as np

from ..base import Compressor, OutputSpec, make_rng
from ..errors import InputError
from ..registry import register
from ._codes import byte_tables
from ._sample import MeanStats, stream_mean
from .rotate import random_orthogonal

BITS = (1, 2, 3, 4)
#: grid scales tried per vector when bits > 1 (the code that best keeps the direction is kept)
N_SCALES = 40
FACTOR_BYTES = 4  # one float32 per vector


def grid_code(o: np.ndarray, bits: int) -> np.ndarray:
    """(n, d) int: for unit rows ``o``, the vectors ``g`` of odd integers in [-(2^B - 1), 2^B - 1]
    whose direction is closest to ``o`` (largest <g, o> / ||g||) among nearest-odd roundings of
    ``t * o`` over a range of scales ``t``. With one bit this is sign(o)."""
    top = 2 ** bits - 1
    if bits == 1:
        return np.where(o > 0, 1, -1).astype(np.int16)
    peak = np.maximum(np.abs(o).max(axis=1, keepdims=True), 1e-12)
    best = np.zeros(o.shape, dtype=np.int16)
    best_cos = np.full(len(o), -np.inf)
    for f in np.geomspace(0.35, 3.0, N_SCALES):
        t = f * (top + 1) / 2 / peak  # f = 1: the largest coordinate lands at the top of the grid
        g = np.clip(2 * np.floor(t * o / 2) + 1, -top, top)  # nearest odd integer, clipped
        cos = (g * o).sum(axis=1) / np.linalg.norm(g, axis=1)
        better = cos > best_cos
        best[better] = g[better]
        best_cos[better] = cos[better]
    return best


def rowwise_matmul(X: np.ndarray, W: np.ndarray, block: int = 256) -> np.ndarray:
    """``X @ W`` computed in row blocks of one fixed size (the last one zero-padded), so every
    row goes through the same BLAS kernel and its result does not depend on which other rows
    were in the batch: the codes and factors of a vector are the same whatever batch it came in."""
    n = len(X)
    out = np.empty((n, W.shape[1]), dtype=np.float32)
    buf = np.zeros((block, X.shape[1]), dtype=np.float32)
    for s in range(0, n, block):
        part = X[s:s + block]
        buf[: len(part)] = part
        buf[len(part):] = 0
        out[s:s + len(part)] = (buf @ W)[: len(part)]
    return out


@register
class RaBitQ(MeanStats, Compressor):
    """``bits`` (1 to 4) per dimension plus one float32 per vector.

    Fitting takes the centroid ``c`` (the mean) and a seeded random rotation ``P``. A vector
    ``o`` is coded from ``u = P^T (o - c) / ||o - c||``: the grid vector ``g`` of odd integers
    closest in direction to ``u`` (sign(u) with one bit), stored as ``bits`` bit-planes, and the
    factor ``s = ||o - c|| / <g, u>``. The inner product of a query ``q`` with ``o`` is estimated
    as ``<q, c> + s <P^T q, g>`` -- the unbiased estimator of RaBitQ, with ``<g, u>``
    correcting for the angle between ``u`` and its code. The estimate is what :meth:`decode`
    gives for ``o`` (``c + s P g``) and what the lookup tables compute; the factor counts in
    ``bytes_per_vector`` and is stored at the end of each code row."""

    name = "rabitq"
    _positional = "bits"
    _state_arrays = ("center_", "rotation_")

    def __init__(self, bits: int = 1, seed: int = 0):
        self.bits = bits
        self.seed = seed

    def _validate_params(self, n_features: int) -> None:
        if isinstance(self.bits, bool) or self.bits not in BITS:
            raise InputError(f"rabitq bits must be one of {', '.join(map(str, BITS))} per dimension, got {self.bits!r}")
        make_rng(self.seed)

    def _fit(self, batches, n_features: int) -> None:
        self.center_ = stream_mean(batches)
        self.rotation_ = random_orthogonal(n_features, make_rng(self.seed))

    # ---- statistics combined from blocks (a cluster's row groups) --------------------------------
    def _fit_stats(self, stats: dict, n_features: int) -> None:
        self.center_ = self._stats_mean(stats)
        self.rotation_ = random_orthogonal(n_features, make_rng(self.seed))

    @property
    def _plane_bytes(self) -> int:
        return (self.n_features_in_ + 7) // 8

    def _transform(self, X: np.ndarray) -> np.ndarray:
        R = X - self.center_
        norms = np.linalg.norm(R, axis=1)
        U = rowwise_matmul(R, self.rotation_) / np.where(norms > 0, norms, 1)[:, None]  # rotated unit residuals
        g = grid_code(U, int(self.bits))
        dot = (g * U).sum(axis=1)
        scale = np.divide(norms, dot, out=np.zeros_like(norms), where=dot > 0).astype("<f4")
        u = ((g + (2 ** self.bits - 1)) // 2).astype(np.uint8)  # odd g -> level index 0 .. 2^B - 1
        planes = [np.packbits((u >> p) & 1, axis=1) for p in range(int(self.bits) - 1, -1, -1)]
        return np.concatenate([*planes, scale.view(np.uint8).reshape(len(X), FACTOR_BYTES)], axis=1)

    def adc_codes(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The bit-planes (what the tables index) and the per-vector factor ``s``."""
        rows = np.ascontiguousarray(rows, dtype=np.uint8)
        nb = int(self.bits) * self._plane_bytes
        return rows[:, :nb], np.ascontiguousarray(rows[:, nb:nb + FACTOR_BYTES]).view("<f4").reshape(-1).astype(np.float32)

    def adc_offset(self, Q: np.ndarray) -> np.ndarray:
        return (np.asarray(Q, dtype=np.float32) @ self.center_).astype(np.float32)

    def grid(self, rows: np.ndarray) -> np.ndarray:
        """(n, d) the odd-integer grid vectors ``g`` of stored rows."""
        codes, _ = self.adc_codes(rows)
        d, pb = self.n_features_in_, self._plane_bytes
        u = np.zeros((len(codes), d), dtype=np.int16)
        for i, p in enumerate(range(int(self.bits) - 1, -1, -1)):
            u += np.unpackbits(codes[:, i * pb:(i + 1) * pb], axis=1, count=d).astype(np.int16) << p
        return 2 * u - (2 ** self.bits - 1)

    def decode(self, rows: np.ndarray) -> np.ndarray:
        """``c + s P g`` per row: its inner product with a query is the RaBitQ estimate."""
        self._check_fitted()
        _, scale = self.adc_codes(rows)
        return self.center_ + (scale[:, None] * self.grid(rows)) @ self.rotation_.T

    def dense_codes(self) -> tuple[str, int, np.ndarray]:
        """The bit-planes decode to the odd integers ``g`` of every dimension's grid."""
        self._check_fitted()
        B = int(self.bits)
        grid = (2 * np.arange(2 ** B) - (2 ** B - 1)).astype(np.float32)
        return "planes", B, np.tile(grid, (self.n_features_in_, 1))

    def dense_queries(self, Q: np.ndarray) -> np.ndarray:
        """``P^T q``: the grid vectors live in the rotated space."""
        return (np.asarray(Q, dtype=np.float32) @ self.rotation_).astype(np.float32)

    def lookup_tables(self, Q: np.ndarray) -> np.ndarray:
        """Tables over the bit-planes: a row's table sum is ``<P^T q, g>``, which the per-vector
        factor then scales (``<q, c>`` is the same for every document and left out)."""
        self._check_fitted()
        Qr = self.dense_queries(Q)  # (nq, d): P^T q
        B = int(self.bits)
        tables = []
        for i, p in enumerate(range(B - 1, -1, -1)):
            levels = np.tile(np.array([0.0, 2.0 ** (p + 1)], dtype=np.float32), (Qr.shape[1], 1))
            if i == 0:  # g = sum_p 2^(p+1) bit_p - (2^B - 1): the constant goes in with the first plane
                levels = levels - np.float32(2 ** B - 1)
            tables.append(byte_tables(Qr, levels, 1))
        return np.concatenate(tables, axis=1)

    def _state_shapes(self):
        d = self.n_features_in_
        return {"center_": (d,), "rotation_": (d, d)}

    def _output_spec(self) -> OutputSpec:
        nbytes = int(self.bits) * self._plane_bytes + FACTOR_BYTES
        return OutputSpec(kind="codes", dtype="uint8", width=nbytes, nbytes=nbytes, metric="adc")
