"""Sign binarization to packed bits."""

from __future__ import annotations


import numpy as np

from ..core.specs import Traits
from ..core._parallel import map_rows
from ..core.base import Compressor
from ..core.checks import NonFiniteChunk, values_ok
from ..core.specs import OutputSpec
from ..core.capabilities import RerankTables
from ..core.registry import register
from ._sample import MeanStats

try:  # fused C kernel built at install; where no compiler was found the numpy path gives the same bytes
    from . import _pack
except ImportError:  # pragma: no cover - depends on the install
    _pack = None

#: rows handled at once so the chunk and its boolean temporary stay in cache (measured fastest
#: between 256 and 4096 rows for 1024 dims)
_CHUNK = 256
THRESHOLDS = ("zero", "mean")


def pack_bits(X: np.ndarray, thresholds: np.ndarray | float = 0.0, *, check_finite: bool = False) -> np.ndarray:
    """``X > thresholds`` packed row by row, most significant bit first, zero-padded to whole
    bytes. Byte-identical to sentence-transformers ``quantize_embeddings(X, "ubinary")``.
    ``check_finite`` raises NonFiniteChunk on NaN/inf. C-contiguous float32 input goes through the
    C kernel (one pass: compare, pack and finiteness test); anything else through numpy, in
    cache-sized chunks."""
    n, d = X.shape
    out = np.empty((n, (d + 7) // 8), dtype=np.uint8)
    if _pack is not None and d and X.dtype == np.float32 and X.flags.c_contiguous:
        t = np.ascontiguousarray(thresholds, dtype=np.float32).reshape(-1)  # (d,) or (1,)
        if not _pack.pack(X, t, d, out) and check_finite:
            raise NonFiniteChunk
        return out
    mask = np.empty((min(n, _CHUNK), d), dtype=bool)
    for start in range(0, n, _CHUNK):
        block = X[start : start + _CHUNK]
        if check_finite and not values_ok(block):
            raise NonFiniteChunk
        m = mask[: len(block)]
        np.greater(block, thresholds, out=m)
        out[start : start + len(block)] = np.packbits(m, axis=-1)
    return out


def pack_kernel() -> str | None:
    """Which fused packing path this install uses: 'avx2', 'portable', or None (numpy only)."""
    return None if _pack is None else _pack.simd()


def unpack_signs(codes: np.ndarray, width: int) -> np.ndarray:
    """Packed bits -> float32 +-1 vectors of ``width`` dims (the padding bits are dropped)."""
    bits = np.unpackbits(np.asarray(codes, dtype=np.uint8), axis=-1, count=width)
    out = bits.astype(np.float32)
    out *= 2
    out -= 1
    return out


#: rows read to fit the 1-bit decoding levels: the two means per dimension are settled long before
LEVEL_ROWS = 65_536
DECODERS = ("auto", "levels", "sign")
#: ``decoder="auto"`` decodes with the fitted levels when the input is centred, |mean| at most this
#: share of the rows' root-mean-square norm, and with +-1 otherwise. Centred inputs (after PCA or a
#: centred rotation) measure 0.000; raw text embeddings 0.36-0.38 (MiniLM) and 0.81-0.84 (a static
#: model) on the benchmark sets, where sign decoding kept more (docs/decisions/0001)
CENTRED = 0.1


@register
class Binary(MeanStats, RerankTables, Compressor):
    """One bit per dimension: 1 where the value is above the threshold, compared by Hamming
    distance (Dinu et al., 2025, section 4). ``threshold="zero"`` is the plain sign; ``"mean"`` fits a
    per-dimension threshold (the data's mean), which balances bits on uncentered embeddings.

    Decoding (for asymmetric scores: a float query against the bits): ``decoder="levels"`` uses,
    per dimension, the mean of the fitted values on each side of the threshold, i.e. the 1-bit
    Lloyd-Max quantizer of that dimension (fitted on up to ``LEVEL_ROWS`` rows); ``"sign"``
    decodes to +-1; ``"auto"``, the default, takes the levels when the input is centred (its mean
    vector at most :data:`CENTRED` of its rows' RMS norm, as after PCA or a centred rotation) and
    +-1 otherwise, which is what kept more retrieval quality on each kind of input across the
    benchmark sets and models. ``decoder_`` says which one a fit took. The codes themselves do
    not depend on the decoder: with ``threshold="zero"`` they are byte-identical to
    sentence-transformers ``quantize_embeddings(x, "ubinary")``."""

    name = "binary"
    _positional = "threshold"
    _state_arrays = ("thresholds_", "levels_")
    _state_scalars = ("decoder_",)
    _choices = {"threshold": THRESHOLDS, "decoder": DECODERS}

    def __init__(self, threshold: str = "zero", decoder: str = "auto"):
        self.threshold = threshold
        self.decoder = decoder

    @property
    def traits(self) -> Traits:
        """It learns the mean threshold or the decoding levels (those of the first LEVEL_ROWS rows
        with the zero threshold), each from block statistics; its state is per dimension (code files
        carry it) and its packing tests each chunk for NaN/inf itself."""
        return (
            super()
            .traits.with_fit(
                learns=self.threshold != "zero" or self.decoder != "sign",
                first_rows=LEVEL_ROWS if self.threshold == "zero" else None,
                block_stats=self.threshold == "mean" or self.decoder != "sign",
            )
            .but(output="bits", state_in_file=True, fused_finite_check=True)
        )

    def _state_shapes(self):
        d = self.n_features_in_
        return {"thresholds_": (d,), "levels_": (2, d)}

    def _take_levels(self, stats: tuple[np.ndarray, np.ndarray, np.ndarray] | None) -> None:
        """``levels_`` and ``decoder_`` from the levels' statistics (None: sign decoding)."""
        decoder = "sign" if stats is None else self.decoder
        if decoder == "auto":
            sums, counts, squares = stats
            n = max(int(counts[:, 0].sum()), 1)
            centred = np.linalg.norm(sums.sum(axis=0) / n) <= CENTRED * np.sqrt(squares.sum() / n)
            decoder = "levels" if centred else "sign"
        self.decoder_ = decoder
        d = len(self.thresholds_)
        self.levels_ = levels_from(stats[0], stats[1], self.thresholds_) if decoder == "levels" else sign_levels(d)

    # ---- statistics combined from blocks: the mean threshold, then the fitted levels, which need
    # the thresholds first, from the first rows in order; with the zero threshold, the levels'
    # per-side sums and counts themselves ---------------------------------------------------------
    def _block_stats(self, X: np.ndarray) -> dict[str, np.ndarray]:
        if self.threshold == "mean":
            return super()._block_stats(X)
        sums, counts, squares = level_sums(X, np.zeros(X.shape[1], dtype=np.float32))
        return {"sums": sums, "counts": counts, "squares": squares}

    @staticmethod
    def _merge_stats(a: dict, b: dict) -> dict:
        return {k: a[k] + b[k] for k in a}

    @property
    def rows_after_stats(self) -> int | None:
        return LEVEL_ROWS if self.decoder != "sign" and self.threshold == "mean" else None

    def _after_stats(self, batches) -> None:
        self._take_levels(level_stats(batches, self.thresholds_, LEVEL_ROWS))

    def _fit_stats(self, stats: dict, n_features: int) -> None:
        if self.threshold == "zero":  # the levels' sums (of the first LEVEL_ROWS rows), or none with sign decoding
            self.thresholds_ = np.zeros(n_features, dtype=np.float32)
            self._take_levels(None if stats is None else (stats["sums"], stats["counts"], stats["squares"]))
            return
        self.thresholds_ = self._stats_mean(stats)
        self._take_levels(None)  # sign until _after_stats fits the levels, when it runs

    def _transform(self, X: np.ndarray) -> np.ndarray:
        t = 0.0 if self.threshold == "zero" else self.thresholds_
        out = np.empty((len(X), (X.shape[1] + 7) // 8), dtype=np.uint8)
        return map_rows(lambda part: pack_bits(part, t, check_finite=True), X, out)

    def _set_state(self, scalars, arrays) -> None:
        d = int(scalars["n_features_in_"])
        if "thresholds_" not in arrays and self.threshold == "zero":  # nothing was learned
            arrays = {**arrays, "thresholds_": np.zeros(d, dtype=np.float32)}
        if "levels_" not in arrays and self.decoder == "sign":
            arrays = {**arrays, "levels_": sign_levels(d)}
        if "decoder_" not in scalars:  # saved before decoder="auto" existed: levels or sign, as asked
            scalars = {**scalars, "decoder_": self.decoder}
        super()._set_state(scalars, arrays)

    def decode(self, codes: np.ndarray) -> np.ndarray:
        """Bits -> float32 vectors: the fitted level of each bit's side (or +-1 with ``decoder="sign"``).
        A float query's inner product with them is the asymmetric score."""
        self._check_fitted()
        lo, hi = self.levels_
        bits = np.unpackbits(np.asarray(codes, dtype=np.uint8), axis=-1, count=self.n_features_in_)
        out = bits.astype(np.float32)
        out *= hi - lo
        out += lo
        return out

    def rerank_tables(self, Q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(tables, offsets)``: (queries, code bytes, 256) float32 tables and (queries,) offsets
        such that a query's inner product with :meth:`decode` of a code row is its offset plus one
        entry per byte (``<q, lo> + sum_d bit_d (hi_d - lo_d) q_d``, eight bits to an entry): the
        asymmetric rerank scores candidates so without decoding them. ``_codes.byte_tables`` of the
        two levels gives the same sums, but builds them about 30x slower at one bit (5.8 against
        0.19 ms for 32 queries of 384 dimensions), which would cost the rerank more than decoding."""
        self._check_fitted()
        lo, hi = self.levels_
        Q = np.asarray(Q, dtype=np.float32)
        d = self.n_features_in_
        nb = (d + 7) // 8
        w = np.zeros((len(Q), nb * 8), dtype=np.float32)
        w[:, :d] = Q * (hi - lo)
        tables = w.reshape(len(Q) * nb, 8) @ _BYTE_BITS  # (q * nb, 256)
        return tables.reshape(len(Q), nb, 256), (Q @ lo).astype(np.float32)

    def _output_spec(self) -> OutputSpec:
        d = self.n_features_in_
        return OutputSpec(kind="bits", dtype="uint8", width=d, nbytes=(d + 7) // 8, metric="hamming")


#: (8, 256) float32: row i holds bit i of each byte value, most significant first (np.packbits' order)
_BYTE_BITS = ((np.arange(256)[None, :] >> (7 - np.arange(8))[:, None]) & 1).astype(np.float32)


def level_stats(batches, thresholds: np.ndarray, max_rows: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`level_sums` over the first ``max_rows`` rows of ``batches``."""
    d = len(thresholds)
    sums = np.zeros((2, d), dtype=np.float64)
    counts = np.zeros((2, d), dtype=np.int64)
    squares = np.zeros(d, dtype=np.float64)
    seen = 0
    for batch in batches():
        b = batch[: max_rows - seen]
        s, c, q = level_sums(b, thresholds)
        sums += s
        counts += c
        squares += q
        seen += len(b)
        if seen >= max_rows:
            break
    return sums, counts, squares


def level_sums(b: np.ndarray, thresholds: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per dimension, the float64 sums and the counts of the values of ``b`` at or below the
    threshold (row 0) and above it (row 1), and the sums of their squares (for ``decoder="auto"``).
    C-contiguous float32 rows go through the C kernel (one pass where numpy takes six, and
    numpy's sums: one addition after another per dimension, in double; numpy orders only a single
    column's squares otherwise); anything else through numpy."""
    d = b.shape[1]
    if _pack is not None and d and b.dtype == np.float32 and b.flags.c_contiguous:
        t = np.ascontiguousarray(np.broadcast_to(thresholds, (d,)), dtype=np.float32)
        total, hi_sum, squares = np.zeros(d), np.zeros(d), np.zeros(d)
        n_hi = np.zeros(d, dtype=np.int64)
        _pack.level_sums(b, t, d, total, hi_sum, squares, n_hi)
        return np.vstack([total - hi_sum, hi_sum]), np.vstack([len(b) - n_hi, n_hi]), squares
    above = b > thresholds
    hi_sum = np.where(above, b, 0).sum(axis=0, dtype=np.float64)
    n_hi = above.sum(axis=0)
    sums = np.vstack([b.sum(axis=0, dtype=np.float64) - hi_sum, hi_sum])
    squares = np.einsum("ij,ij->j", b, b, dtype=np.float64)
    return sums, np.vstack([len(b) - n_hi, n_hi]).astype(np.int64), squares


def sign_levels(d: int) -> np.ndarray:
    """(2, d) float32 levels -1 and +1: the decoding of ``decoder="sign"``."""
    return np.vstack([np.full(d, -1, np.float32), np.ones(d, np.float32)])


def levels_from(sums: np.ndarray, counts: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """(2, d) float32: per dimension, the mean of the values at or below the threshold (row 0) and
    above it (row 1). A side that no value fell on gets the threshold itself, so it adds nothing
    to a score."""
    t = np.broadcast_to(thresholds.astype(np.float64), sums.shape)
    return np.where(counts > 0, sums / np.maximum(counts, 1), t).astype(np.float32)
