"""Packing of few-bit codes and the lookup tables that score float queries against them."""

from __future__ import annotations

import numpy as np


def pack_codes(codes: np.ndarray, bits: int) -> np.ndarray:
    """(n, d) small integers < 2**bits -> (n, ceil(d * bits / 8)) uint8, most significant first
    (the first dimension in the high bits of the first byte), zero-padded at the end of each row."""
    n, d = codes.shape
    per = 8 // bits
    pad = (-d) % per
    c = np.pad(codes.astype(np.uint8), ((0, 0), (0, pad))).reshape(n, -1, per)
    out = np.zeros(c.shape[:2], dtype=np.uint8)
    for i in range(per):
        out |= c[:, :, i] << np.uint8(bits * (per - 1 - i))
    return out


def unpack_codes(packed: np.ndarray, bits: int, d: int) -> np.ndarray:
    """Inverse of :func:`pack_codes`: (n, d) uint8."""
    per = 8 // bits
    mask = np.uint8(2**bits - 1)
    parts = [(packed >> np.uint8(bits * (per - 1 - i))) & mask for i in range(per)]
    return np.stack(parts, axis=2).reshape(len(packed), -1)[:, :d]


def pack_planes(codes: np.ndarray, bits: int) -> np.ndarray:
    """(n, d) small integers < 2**bits -> (n, bits * ceil(d / 8)) uint8 bit-planes, the most
    significant plane first, each packed as numpy.packbits packs a row of bits."""
    codes = np.asarray(codes, dtype=np.uint8)
    return np.concatenate([np.packbits((codes >> p) & 1, axis=1) for p in range(bits - 1, -1, -1)], axis=1)


def unpack_planes(packed: np.ndarray, bits: int, d: int) -> np.ndarray:
    """Inverse of :func:`pack_planes`: (n, d) uint8."""
    packed = np.asarray(packed, dtype=np.uint8)
    plane = (d + 7) // 8
    u = np.zeros((len(packed), d), dtype=np.uint8)
    for p in range(bits):  # most significant plane first
        u = (u << 1) | np.unpackbits(packed[:, p * plane : (p + 1) * plane], axis=1, count=d)
    return u


def byte_values(bits: int) -> np.ndarray:
    """(256, 8 / bits) the code of each dimension held in a byte value, most significant first."""
    return unpack_codes(np.arange(256, dtype=np.uint8)[:, None], bits, 8 // bits)


def byte_tables(Q: np.ndarray, levels: np.ndarray, bits: int) -> np.ndarray:
    """(nq, nbytes, 256) float32 lookup tables for per-dimension levels ``levels`` (d, 2**bits):
    entry [q, b, v] = sum over the dimensions j packed in byte b of Q[q, j] * levels[j, code_j(v)].
    The padding dimensions of the last byte contribute nothing."""
    Q = np.asarray(Q, dtype=np.float32)
    nq, d = Q.shape
    per = 8 // bits
    nbytes = (d + per - 1) // per
    pad = nbytes * per - d
    Qp = np.pad(Q, ((0, 0), (0, pad))).reshape(nq, nbytes, per)  # (nq, B, per)
    Lp = np.pad(levels, ((0, pad), (0, 0))).reshape(nbytes, per, -1)  # (B, per, L)
    vals = byte_values(bits)  # (256, per)
    # per dimension slot i in the byte: the level chosen by value v, (B, 256, per)
    chosen = np.stack([Lp[:, i, vals[:, i]] for i in range(per)], axis=2)
    return np.einsum("qbi,bvi->qbv", Qp, chosen, optimize=True).astype(np.float32)


def nibble_indices(codes: np.ndarray, m: int) -> np.ndarray:
    """(n, m) codebook indices from rows of 4-bit codes packed two per byte, the first in the low
    half (as faiss packs product and residual quantizer codes)."""
    codes = np.asarray(codes, dtype=np.uint8)
    return np.stack([codes & 15, codes >> 4], axis=2).reshape(len(codes), -1)[:, :m]


def nibble_tables(T: np.ndarray) -> np.ndarray:
    """(nq, m, 16) tables of 4-bit codebooks -> (nq, ceil(m / 2), 256) byte tables: a byte's
    entry adds its low half's and its high half's entries."""
    nq, m, _ = T.shape
    if m % 2:  # the last byte's high half holds no codebook
        T = np.concatenate([T, np.zeros((nq, 1, T.shape[2]), np.float32)], axis=1)
    v = np.arange(256)
    return T[:, 0::2, :][:, :, v & 15] + T[:, 1::2, :][:, :, v >> 4]
