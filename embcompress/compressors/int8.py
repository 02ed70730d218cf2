"""Int8 scalar quantization with per-dimension calibrated ranges."""

from __future__ import annotations

import numpy as np

from ..core._parallel import map_rows
from ..core.capabilities import BlockStats
from ..core.base import Compressor
from ..core.checks import NonFiniteChunk, values_ok
from ..core.specs import OutputSpec, Traits
from ..core.registry import register

_CHUNK = 512


@register
class Int8(BlockStats, Compressor):
    """Each dimension's calibrated range [min, max] is cut into 256 equal steps; values outside the
    range are clipped to its ends. The ranges are learned in ``fit`` (streamed min/max) and saved
    with the model, so documents indexed tomorrow use the same steps as today's. Codes equal
    sentence-transformers ``quantize_embeddings(X, "int8", ranges=ranges_)`` exactly.
    Compare codes after :meth:`decode` (dequantized float vectors) by cosine."""

    name = "int8"
    _state_arrays = ("ranges_",)

    def __init__(self):
        pass

    @property
    def traits(self) -> Traits:
        """Its ranges are per dimension (code files carry them), min/max are cheap for every batch, and
        its transform tests each chunk for NaN/inf itself."""
        return (
            super()
            .traits.with_fit(stats_per_batch=True)
            .but(output="int8", state_in_file=True, fused_finite_check=True)
        )

    # ---- statistics combined from blocks (a cluster's row groups, or the reader's batches) -------
    def _block_stats(self, X: np.ndarray) -> dict[str, np.ndarray]:
        return {"lo": X.min(axis=0), "hi": X.max(axis=0)}

    @staticmethod
    def _merge_stats(a: dict, b: dict) -> dict:
        return {"lo": np.minimum(a["lo"], b["lo"]), "hi": np.maximum(a["hi"], b["hi"])}

    def _fit_stats(self, stats: dict, n_features: int) -> None:
        self.ranges_ = np.vstack([stats["lo"], stats["hi"]]).astype(np.float32)  # (2, d): row 0 min, row 1 max

    def _steps(self) -> tuple[np.ndarray, np.ndarray]:
        starts = self.ranges_[0].astype(np.float32)
        steps = (self.ranges_[1].astype(np.float32) - starts) / np.float32(255)
        return starts, np.where(steps == 0, np.float32(1), steps).astype(np.float32)

    def _transform(self, X: np.ndarray) -> np.ndarray:
        starts, steps = self._steps()
        return map_rows(lambda part: self._quantize(part, starts, steps), X, np.empty(X.shape, dtype=np.int8))

    @staticmethod
    def _quantize(X: np.ndarray, starts: np.ndarray, steps: np.ndarray) -> np.ndarray:
        n, d = X.shape
        out = np.empty((n, d), dtype=np.int8)
        buf = np.empty((min(n, _CHUNK), d), dtype=np.float32)
        for start in range(0, n, _CHUNK):
            block = X[start : start + _CHUNK]
            if not values_ok(block):
                raise NonFiniteChunk
            t = buf[: len(block)]
            np.subtract(block, starts, out=t)
            np.divide(t, steps, out=t)
            np.floor(t, out=t)
            np.clip(t, 0, 255, out=t)
            t -= 128
            np.copyto(out[start : start + len(block)], t, casting="unsafe")
        return out

    def decode(self, codes: np.ndarray) -> np.ndarray:
        """Codes -> float32 values at the lower edge of each code's step."""
        self._check_fitted()
        starts, steps = self._steps()
        return (np.asarray(codes, dtype=np.float32) + 128) * steps + starts

    def affine(self) -> tuple[np.ndarray, np.ndarray]:
        """(a, b), float32 per dimension, with which :meth:`decode` is ``a * code + b`` (to rounding): for
        kernels that score codes without decoding them first."""
        self._check_fitted()
        starts, steps = self._steps()
        return steps, (np.float32(128) * steps + starts).astype(np.float32)

    def _state_shapes(self):
        return {"ranges_": (2, self.n_features_in_)}

    def _output_spec(self) -> OutputSpec:
        d = self.n_features_in_
        return OutputSpec(kind="int8", dtype="int8", width=d, nbytes=d, metric="cosine")
