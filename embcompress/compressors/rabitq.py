"""RaBitQ (Gao & Long, 2024) and its extension to several bits per dimension (Gao et al., 2024):
centroid-relative unit vectors, a random rotation, a code on a scaled grid, and one correction
factor per vector that makes the inner-product estimate unbiased."""

from __future__ import annotations

import numpy as np

from ..core._parallel import map_rows
from ..core.base import Compressor
from ..core.specs import OutputSpec
from ..core.checks import make_rng
from ..core.capabilities import PlaneScan
from ..core.errors import InputError
from ..core.registry import register
from ._codes import byte_tables, pack_planes, unpack_planes
from ._sample import MeanStats
from .rotate import KINDS, hadamard_rotate, rotation_matrix

BITS = (1, 2, 3, 4)
FACTOR_BYTES = 4  # one float32 per vector
ROTATE_BLOCK = 256  # rows rotated by one BLAS call (a fixed size: codes do not depend on the batch)

try:  # built by setup.py; optional
    from . import _pack
except ImportError:  # pragma: no cover - depends on the build
    _pack = None


def grid_levels(U: np.ndarray, bits: int) -> tuple[np.ndarray, np.ndarray]:
    """For rows ``u`` of ``U``: (n, d) uint8 level indices ``v`` (``g = 2v - (2^B - 1)``) of the
    grid vectors ``g`` of odd integers in [-(2^B - 1), 2^B - 1] whose direction is closest to ``u``
    -- the largest ``<g, u> / ||g||`` over every scale ``t`` of ``g = sign(u) round_to_odd(t |u|)``
    (extended RaBitQ; ``u = 0`` counts as negative; with one bit, sign(u)) -- and (n,) float32
    ``<g, u>``, summed in float64 in dimension order. The C kernel sweeps each row's critical
    scales; :func:`grid_levels_numpy` sorts them, with the same result."""
    U = np.ascontiguousarray(U, dtype=np.float32)
    if _pack is None:
        return grid_levels_numpy(U, bits)
    out = np.empty(U.shape, dtype=np.uint8)
    dots = np.empty(len(U), dtype=np.float32)
    if U.size:
        _pack.grid_levels(U, U.shape[1], int(bits), out, dots)
    return out, dots


def grid_levels_numpy(U: np.ndarray, bits: int, block: int = 512) -> tuple[np.ndarray, np.ndarray]:
    """:func:`grid_levels` in numpy, a block of rows at a time. ``|g_j| = 2k + 1`` steps up at the
    scales ``t = 2m / |u_j|`` (m = 1 .. 2^(B-1) - 1); sorted, they give every distinct code in
    turn, and the cosine is compared after each group of equal scales (the first best wins)."""
    U = np.asarray(U, dtype=np.float32)
    n, d = U.shape
    K = 2 ** (int(bits) - 1) - 1
    k = np.zeros((n, d), dtype=np.int64)
    if K > 0:
        m = np.arange(1, K + 1, dtype=np.float64)
        for s in range(0, n, block):
            a = np.abs(U[s : s + block].astype(np.float64))
            nb = len(a)
            with np.errstate(divide="ignore"):
                keys = (m[None, None, :] * (1.0 / a)[:, :, None]).reshape(nb, d * K)  # inf where u = 0: never reached
            order = np.argsort(keys, axis=1, kind="stable")  # equal scales: lower dimension first, as the kernel merges
            skeys = np.take_along_axis(keys, order, axis=1)
            dims, steps = order // K, order % K + 1  # the dimension stepping up, and to which k
            dot0 = np.cumsum(a, axis=1)[:, -1:]  # sequential sums, as the kernel adds
            dots = np.cumsum(np.concatenate([dot0, 2.0 * np.take_along_axis(a, dims, axis=1)], axis=1), axis=1)[:, 1:]
            sqs = d + np.cumsum(8.0 * steps, axis=1)
            ends = np.isfinite(skeys) & np.concatenate([skeys[:, 1:] != skeys[:, :-1], np.ones((nb, 1), bool)], axis=1)
            cos = np.where(ends, dots / np.sqrt(sqs), -np.inf)
            cos = np.concatenate([dot0 / np.sqrt(float(d)), cos], axis=1)
            best = np.argmax(cos, axis=1)  # steps taken; the first maximum
            taken = np.arange(d * K)[None, :] < best[:, None]  # (rows, sorted steps) within the best
            kb = np.zeros((nb, d), dtype=np.int64)
            np.add.at(kb, (np.repeat(np.arange(nb), d * K)[taken.ravel()], dims[taken]), 1)
            k[s : s + block] = kb
    g = np.where(U > 0, 2 * k + 1, -(2 * k + 1))
    dots = np.cumsum(g * U.astype(np.float64), axis=1)[:, -1] if d else np.zeros(n)  # sequential, as in C
    return ((g + 2 * K + 1) // 2).astype(np.uint8), dots.astype(np.float32)


@register
class RaBitQ(MeanStats, PlaneScan, Compressor):
    """``bits`` (1 to 4) per dimension plus one float32 per vector.

    Fitting takes the centroid ``c`` (the mean) and a seeded random rotation ``P``. A vector
    ``o`` is coded from ``u = P^T (o - c) / ||o - c||``: the grid vector ``g`` of odd integers
    closest in direction to ``u`` (sign(u) with one bit), stored as ``bits`` bit-planes, and the
    factor ``s = ||o - c|| / <g, u>``. The inner product of a query ``q`` with ``o`` is estimated
    as ``<q, c> + s <P^T q, g>`` -- the unbiased estimator of RaBitQ, with ``<g, u>``
    correcting for the angle between ``u`` and its code. The estimate is what :meth:`decode`
    gives for ``o`` (``c + s P g``) and what the lookup tables compute; the factor counts in
    ``bytes_per_vector`` and is stored at the end of each code row.

    ``rotation="hadamard"`` takes ``rotate``'s structured rotation for ``P`` (applied to documents
    as such, about d log d additions per vector instead of a d x d product); the default ``"haar"``
    draws a dense one."""

    name = "rabitq"
    _positional = "bits"
    _state_arrays = ("center_", "rotation_")
    _choices = {"rotation": KINDS}

    def __init__(self, bits: int = 1, seed: int = 0, rotation: str = "haar"):
        self.bits = bits
        self.seed = seed
        self.rotation = rotation

    def _validate_params(self, n_features: int) -> None:
        if isinstance(self.bits, bool) or self.bits not in BITS:
            raise InputError(f"rabitq bits must be one of {', '.join(map(str, BITS))} per dimension, got {self.bits!r}")
        make_rng(self.seed)

    # ---- statistics combined from blocks (a cluster's row groups) --------------------------------
    def _fit_stats(self, stats: dict, n_features: int) -> None:
        self.center_ = self._stats_mean(stats)
        self.rotation_ = rotation_matrix(self.rotation, n_features, self.seed)

    @property
    def _plane_bytes(self) -> int:
        return (self.n_features_in_ + 7) // 8

    def _transform(self, X: np.ndarray) -> np.ndarray:
        out = np.empty((len(X), self.output_spec.width), dtype=np.uint8)
        return map_rows(self._encode, X, out, blas=True)  # large inputs on several threads

    def _encode(self, X: np.ndarray, *, fused: bool = True) -> np.ndarray:
        """Code rows of ``X``, a block of :data:`ROTATE_BLOCK` rows at a time: the rotation is one
        BLAS call of one fixed size (the last block zero-padded; the structured rotation goes row
        by row), so a vector's code does not depend on its batch, and the temporaries stay in cache. Per block the C
        kernel normalizes, finds the
        grid codes, packs the planes and writes the factors in one pass; :meth:`_encode_block` does
        the same in numpy (``fused=False``, or without the extension)."""
        out = np.empty((len(X), int(self.bits) * self._plane_bytes + FACTOR_BYTES), dtype=np.uint8)
        for s, RP, norms in self._rotated_blocks(X):
            if fused and _pack is not None:
                _pack.encode(RP, norms, self.n_features_in_, int(self.bits), out[s : s + len(RP)])
            else:
                self._encode_block(RP, norms, out[s : s + len(RP)])
        return out

    def _rotated_blocks(self, X: np.ndarray):
        """(first row, the block's rotated residuals, their norms) for each block of
        :data:`ROTATE_BLOCK` rows of ``X``: the step before the grid (views of buffers reused from
        block to block)."""
        d = self.n_features_in_
        buf = np.zeros((ROTATE_BLOCK, d), dtype=np.float32)
        RP = np.empty((ROTATE_BLOCK, d), dtype=np.float32)
        for s in range(0, len(X), ROTATE_BLOCK):
            part = X[s : s + ROTATE_BLOCK]
            n = len(part)
            np.subtract(part, self.center_, out=buf[:n])
            norms = np.linalg.norm(buf[:n], axis=1)
            if self.rotation == "hadamard":  # the structured transform itself, row by row: no padding
                yield s, hadamard_rotate(buf[:n], int(self.seed)), norms
            else:
                if n < ROTATE_BLOCK:
                    buf[n:] = 0
                np.matmul(buf, self.rotation_, out=RP)
                yield s, RP[:n], norms

    def _encode_block(self, RP: np.ndarray, norms: np.ndarray, rows: np.ndarray) -> None:
        """What ``_pack.encode`` writes, in numpy: the code rows of rotated residuals ``RP`` whose
        norms are ``norms``."""
        B, pb = int(self.bits), self._plane_bytes
        U = RP / np.where(norms > 0, norms, 1)[:, None]  # rotated unit residuals
        u, dot = grid_levels(U, B)  # level index 0 .. 2^B - 1 of the odd integers g, and <g, U>
        rows[:, : B * pb] = pack_planes(u, B)
        scale = np.divide(norms, dot, out=np.zeros_like(norms), where=dot > 0).astype("<f4")
        rows[:, B * pb :] = scale.view(np.uint8).reshape(len(RP), FACTOR_BYTES)

    def adc_codes(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The bit-planes (what the tables index) and the per-vector factor ``s``."""
        rows = np.ascontiguousarray(rows, dtype=np.uint8)
        nb = int(self.bits) * self._plane_bytes
        return rows[:, :nb], np.ascontiguousarray(rows[:, nb : nb + FACTOR_BYTES]).view("<f4").reshape(-1).astype(
            np.float32
        )

    def adc_offset(self, Q: np.ndarray) -> np.ndarray:
        return (np.asarray(Q, dtype=np.float32) @ self.center_).astype(np.float32)

    def grid(self, rows: np.ndarray) -> np.ndarray:
        """(n, d) the odd-integer grid vectors ``g`` of stored rows."""
        codes, _ = self.adc_codes(rows)
        u = unpack_planes(codes, int(self.bits), self.n_features_in_).astype(np.int16)
        return 2 * u - (2**self.bits - 1)

    def decode(self, rows: np.ndarray) -> np.ndarray:
        """``c + s P g`` per row: its inner product with a query is the RaBitQ estimate."""
        self._check_fitted()
        _, scale = self.adc_codes(rows)
        return self.center_ + (scale[:, None] * self.grid(rows)) @ self.rotation_.T

    def dense_codes(self) -> tuple[str, int, np.ndarray]:
        """The bit-planes decode to the odd integers ``g`` of every dimension's grid."""
        self._check_fitted()
        B = int(self.bits)
        grid = (2 * np.arange(2**B) - (2**B - 1)).astype(np.float32)
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
                levels = levels - np.float32(2**B - 1)
            tables.append(byte_tables(Qr, levels, 1))
        return np.concatenate(tables, axis=1)

    def plane_layout(self) -> tuple[int, int]:
        self._check_fitted()
        return int(self.bits), self._plane_bytes

    def quantized_queries(self, Q: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``P^T q`` rounded to integers in [-127, 127] at the step ``delta = max_j |(P^T q)_j| /
        127``; with ``g = 2u - (2^B - 1)``, ``<P^T q, g> ~ delta (2 <q8, u> - (2^B - 1) sum_j q8_j)``.
        RaBitQ quantizes its queries (to 4 bits in the paper); at 8 the rounding moves the
        estimated cosine by about ``max_j |q_j| / (127 sqrt(12) ||q||)`` in deviation, 4e-4 for a
        rotated 384-d query, and nDCG@10 on Debian by at most 0.02 point."""
        self._check_fitted()
        Qr = self.dense_queries(Q).astype(np.float64)
        B, pb = self.plane_layout()
        dpad = -(-pb * 8 // 32) * 32
        top = np.abs(Qr).max(axis=1) if Qr.size else np.zeros(len(Qr))
        delta = np.where(top > 0, top / 127.0, 1.0)
        q8 = np.zeros((len(Qr), dpad), dtype=np.int8)
        q8[:, : Qr.shape[1]] = np.clip(np.rint(Qr / delta[:, None]), -127, 127)
        # in bit order: each byte's eight dimensions reversed, as the scan unpacks a byte's bits
        q8 = np.ascontiguousarray(q8.reshape(len(q8), -1, 8)[:, :, ::-1].reshape(len(q8), dpad))
        offset = -(2.0**B - 1) * delta * q8.sum(axis=1, dtype=np.int64)
        return q8, (2.0 * delta).astype(np.float32), offset.astype(np.float32)

    def _state_shapes(self):
        d = self.n_features_in_
        return {"center_": (d,), "rotation_": (d, d)}

    def _output_spec(self) -> OutputSpec:
        nbytes = int(self.bits) * self._plane_bytes + FACTOR_BYTES
        return OutputSpec(kind="codes", dtype="uint8", width=nbytes, nbytes=nbytes, metric="adc")
