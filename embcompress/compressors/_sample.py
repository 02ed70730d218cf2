"""Bounded-memory samples of a stream of batches, for compressors that learn from a sample
(learned maps, ITQ, scalar and product quantizers, RaBitQ), and the block statistics of a fit that
needs only the mean."""

from __future__ import annotations

from typing import Callable


import numpy as np

from ..core.specs import Traits
from ..core.capabilities import BlockStats
from ..core.errors import InputError


def reservoir(batches: Callable, max_rows: int, rng: np.random.Generator) -> np.ndarray:
    """All rows if there are at most ``max_rows``, else a uniform random sample of ``max_rows``
    rows (reservoir sampling, one pass, memory bounded by the sample)."""
    sample: np.ndarray | None = None
    seen = 0
    for b in batches():
        if sample is None:
            sample = np.empty((max_rows, b.shape[1]), dtype=np.float32)
        n = len(b)
        fill = min(n, max(0, max_rows - seen))
        sample[seen : seen + fill] = b[:fill]
        if fill < n:  # replace with probability max_rows / (position + 1)
            pos = np.arange(seen + fill, seen + n)
            slots = rng.integers(0, pos + 1)
            keep = slots < max_rows
            for row, slot in zip(np.flatnonzero(keep) + fill, slots[keep]):
                sample[slot] = b[row]
        seen += n
    return sample[: min(seen, max_rows)]


def stream_mean(batches: Callable) -> np.ndarray:
    """The per-dimension mean of every row of ``batches()`` (one pass, summed in float64), float32."""
    total, n = None, 0
    for b in batches():
        part = b.sum(axis=0, dtype=np.float64)
        total = part if total is None else total + part
        n += len(b)
    return (total / n).astype(np.float32)


class MeanStats(BlockStats):
    """Block statistics (:class:`~embcompress.core.capabilities.BlockStats`) of a fit that needs only the
    per-dimension mean: sums and the count, merged by adding."""

    @property
    def traits(self) -> Traits:  # sums and a count: cheap enough for every batch
        return super().traits.with_fit(stats_per_batch=True)

    def _block_stats(self, X: np.ndarray) -> dict[str, np.ndarray]:
        return {"total": X.sum(axis=0, dtype=np.float64), "n": np.array([len(X)], np.int64)}

    @staticmethod
    def _merge_stats(a: dict, b: dict) -> dict:
        return {"total": a["total"] + b["total"], "n": a["n"] + b["n"]}

    @staticmethod
    def _stats_mean(stats: dict) -> np.ndarray:
        return (stats["total"] / int(stats["n"][0])).astype(np.float32)


class OptionalCentering(MeanStats):
    """A map that subtracts the per-dimension mean only with ``center=True``: it learns from the
    data (and combines per-block sums) only then, and ``mean_`` is the fitted mean or zeros."""

    center: bool

    @property
    def traits(self) -> Traits:  # the mean, from per-block sums, only when centring
        return super().traits.with_fit(learns=bool(self.center), block_stats=bool(self.center))

    def _check_center(self) -> None:
        if not isinstance(self.center, bool):
            raise InputError(f"center must be true or false, got {self.center!r}")

    def _centre_from(self, stats: dict | None, n_features: int) -> np.ndarray:
        """The mean to subtract: from the block statistics, or zeros without centering (then there are none)."""
        if not self.center:
            return np.zeros(n_features, dtype=np.float32)
        return self._stats_mean(stats)
