"""Exact top-k Hamming search over packed bits.

Results are sorted by (distance, document index): equal distances, which are common (there are
only ``bits + 1`` possible values), always come back lowest index first, on every machine and
for every thread count. The C kernel (``_hamming``, built at install) scans in cache-sized blocks
with the GIL released, split over threads by query, or by document range for few queries. Where
the kernel could not be built, a numpy implementation gives the same results, slower.
"""

from __future__ import annotations

import numpy as np

from ..core.errors import InputError
from .exact import check_k, hamming_search
from .topk import split_scan

try:  # built by setup.py; optional
    from . import _hamming
except ImportError:  # pragma: no cover - depends on the build
    _hamming = None


def kernel_available() -> bool:
    return _hamming is not None


def _as_codes(codes, what: str) -> np.ndarray:
    arr = np.asarray(codes)
    if arr.ndim != 2 or arr.dtype not in (np.uint8, np.int8):
        raise InputError(f"{what} must be a 2-D array of packed bits (uint8), got {arr.dtype} with shape {arr.shape}")
    return np.ascontiguousarray(arr.view(np.uint8))


def hamming_topk(queries, docs, k: int, *, threads: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """For each query row, the ``k`` nearest document rows by Hamming distance.

    Returns ``(distances int32, indices int64)``, each (queries, min(k, n_docs)), nearest first,
    ties by lower index. ``k`` larger than the corpus returns every document (no padding)."""
    q = _as_codes(queries, "queries")
    d = _as_codes(docs, "documents")
    if q.shape[1] != d.shape[1]:
        raise InputError(
            f"query codes have {q.shape[1]} bytes ({8 * q.shape[1]} bits) but document codes have {d.shape[1]}"
        )
    return scan_hamming(q, d, check_k(k, len(d)), threads=threads)


def scan_hamming(q: np.ndarray, d: np.ndarray, k: int, *, threads: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """:func:`hamming_topk` on validated uint8 code arrays and a ``k`` already in 1..len(d)."""
    if _hamming is None:
        return hamming_search(q, d, k)
    nb = q.shape[1]

    def part(q0: int, q1: int, start: int, end: int) -> tuple[np.ndarray, np.ndarray]:
        kk = min(k, end - start)
        dist = np.empty((q1 - q0, kk), dtype=np.int32)
        idx = np.empty((q1 - q0, kk), dtype=np.int64)
        _hamming.topk(q[q0:q1], d, nb, kk, start, end, dist, idx)
        return dist, idx

    return split_scan(part, len(q), len(d), k, threads, larger_is_better=False)
