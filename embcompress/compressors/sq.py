"""Few-bit scalar quantization: 1, 2 or 4 bits per dimension with per-dimension levels fitted to
the data, packed codes, and float queries scored against the decoded levels through lookup tables."""

from __future__ import annotations


import numpy as np

from ..core._util import check_positive_int
from ..core.base import Compressor
from ..core.specs import OutputSpec
from ..core.checks import make_rng
from ..core.capabilities import DenseScan
from ..core.errors import InputError
from ..core.specs import Traits
from ..core.registry import register
from ._codes import byte_tables, pack_codes, unpack_codes
from ._sample import reservoir

BITS = (1, 2, 4)


def lloyd_levels(X: np.ndarray, n_levels: int, iters: int) -> np.ndarray:
    """(d, n_levels) float32: per column, the levels of a Lloyd-Max quantizer (1-D k-means),
    started at the quantiles (i + 0.5) / n_levels and refined by ``iters`` Lloyd iterations. A
    level that loses all its values keeps its place."""
    n, d = X.shape
    levels = np.quantile(X, (np.arange(n_levels) + 0.5) / n_levels, axis=0).T.astype(np.float64)  # (d, L)
    cols = np.arange(d)
    for _ in range(iters):
        codes = assign(X, levels)  # (n, d)
        sums = np.zeros((d, n_levels))
        counts = np.zeros((d, n_levels))
        flat = (codes + cols * n_levels).reshape(-1)
        np.add.at(sums.reshape(-1), flat, X.reshape(-1).astype(np.float64))
        counts.reshape(-1)[:] = np.bincount(flat, minlength=d * n_levels)
        new = np.where(counts > 0, sums / np.maximum(counts, 1), levels)
        new.sort(axis=1)
        if np.allclose(new, levels, rtol=0, atol=1e-7):
            levels = new
            break
        levels = new
    return levels.astype(np.float32)


def assign(X: np.ndarray, levels: np.ndarray) -> np.ndarray:
    """(n, d) uint8: per value, the index of the nearest level of its column (levels sorted)."""
    cuts = (levels[:, 1:] + levels[:, :-1]) / 2  # (d, L-1) decision thresholds
    codes = np.zeros(X.shape, dtype=np.uint8)
    for j in range(cuts.shape[1]):
        codes += X > cuts[:, j]
    return codes


@register
class SQ(DenseScan, Compressor):
    """``bits`` (1, 2 or 4) per dimension. Each dimension gets ``2**bits`` levels: Lloyd-Max
    quantizer levels (1-D k-means from the quantiles) fitted on a sample of up to ``max_rows``
    rows; a value is coded by its nearest level. Codes are packed most significant first,
    ``8 / bits`` dimensions per byte. A float query is scored against the decoded levels (inner
    product) with one 256-entry lookup table per code byte."""

    name = "sq"
    _positional = "bits"
    _state_arrays = ("levels_",)

    @property
    def traits(self) -> Traits:  # a uniform sample of max_rows rows
        return super().traits.with_fit(min_rows=2 ** int(self.bits), sample=self.max_rows)

    def __init__(self, bits: int = 4, iters: int = 20, max_rows: int = 100_000, seed: int = 0):
        self.bits = bits
        self.iters = iters
        self.max_rows = max_rows
        self.seed = seed

    def _validate_params(self, n_features: int) -> None:
        if isinstance(self.bits, bool) or self.bits not in BITS:
            raise InputError(f"sq bits must be one of {', '.join(map(str, BITS))} per dimension, got {self.bits!r}")
        check_positive_int("iters", self.iters, minimum=0)
        check_positive_int("max_rows", self.max_rows, minimum=2**self.bits)
        make_rng(self.seed)

    def _fit(self, batches, n_features: int) -> None:
        X = reservoir(batches, self.max_rows, make_rng(self.seed))
        self.levels_ = lloyd_levels(X, 2**self.bits, int(self.iters))

    def _transform(self, X: np.ndarray) -> np.ndarray:
        return pack_codes(assign(X, self.levels_), self.bits)

    def decode(self, codes: np.ndarray) -> np.ndarray:
        self._check_fitted()
        idx = unpack_codes(np.asarray(codes, dtype=np.uint8), self.bits, self.n_features_in_)
        return (
            np.take_along_axis(self.levels_[None, :, :], idx[:, :, None].astype(np.intp), axis=2)[:, :, 0]
            if len(idx)
            else np.zeros((0, self.n_features_in_), np.float32)
        )

    def dense_codes(self) -> tuple[str, int, np.ndarray]:
        self._check_fitted()
        return "packed", int(self.bits), self.levels_.astype(np.float32)

    def lookup_tables(self, Q: np.ndarray) -> np.ndarray:
        """(queries, bytes, 256) float32: entry [q, b, v] is the inner product of query q's
        dimensions stored in byte b with the levels that byte value v decodes to."""
        self._check_fitted()
        return byte_tables(Q, self.levels_, self.bits)

    def _state_shapes(self):
        return {"levels_": (self.n_features_in_, 2 ** int(self.bits))}

    def _output_spec(self) -> OutputSpec:
        nbytes = (self.n_features_in_ * self.bits + 7) // 8
        return OutputSpec(kind="codes", dtype="uint8", width=nbytes, nbytes=nbytes, metric="adc")
