"""Exact brute-force search in numpy: float scores (cosine / inner product, or any scores computed
block by block, e.g. against int8 codes decoded on the fly) and a reference Hamming search.

Ties are broken by document index, lowest first, always. Documents are scored in blocks, so the
score matrix held at once is (query block x document block) whatever the corpus size.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..core._util import check_positive_int, normalize_rows
from ..core.errors import InputError
from .topk import merge_topk

try:  # built by setup.py; optional
    from . import _adc
except ImportError:  # pragma: no cover - depends on the build
    _adc = None

QUERY_BLOCK = 1024
DOC_BLOCK = 32768


def check_k(k, n_docs: int) -> int:
    k = check_positive_int("k", k)
    if n_docs == 0:
        raise InputError("cannot search an empty set of documents")
    return int(min(k, n_docs))


def block_topk(sim: np.ndarray, k: int, offset: int) -> tuple[np.ndarray, np.ndarray]:
    """Top-k of each row of a score block by (score desc, index asc); indices shifted by offset.
    float32 blocks go through the C kernel's one pass (``_adc.rows_topk``, about 30x numpy's
    partition and sorts); rows it cannot fill (fewer than k scores above -inf) and other dtypes
    take the numpy path, which orders the same way."""
    if _adc is not None and sim.dtype == np.float32 and sim.ndim == 2 and len(sim):
        sim = np.ascontiguousarray(sim)
        s = np.empty((len(sim), k), dtype=np.float32)
        i = np.empty((len(sim), k), dtype=np.int64)
        _adc.rows_topk(sim, sim.shape[1], k, offset, s, i)
        short = np.flatnonzero(i[:, -1] == np.iinfo(np.int64).max)
        if len(short):
            s[short], i[short] = numpy_block_topk(sim[short], k, offset)
        return s, i
    return numpy_block_topk(sim, k, offset)


def numpy_block_topk(sim: np.ndarray, k: int, offset: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`block_topk` in numpy."""
    n = sim.shape[1]
    if k < n:
        part = np.argpartition(-sim, k - 1, axis=1)[:, :k]
        kth = np.take_along_axis(sim, part, axis=1).min(axis=1)
        tied = (sim >= kth[:, None]).sum(axis=1) > k  # rows whose k-th score ties beyond the cut
        for r in np.flatnonzero(tied):  # rare: resolve by index over every doc at or above the k-th
            pool = np.flatnonzero(sim[r] >= kth[r])
            part[r] = pool[np.lexsort((pool, -sim[r, pool]))[:k]]
    else:
        part = np.broadcast_to(np.arange(n), sim.shape)
    scores = np.take_along_axis(sim, part, axis=1)
    order = np.lexsort((part, -scores), axis=1)
    return np.take_along_axis(scores, order, axis=1), np.take_along_axis(part, order, axis=1) + offset


def topk_by_blocks(
    score: Callable[[int, int, int, int], np.ndarray],
    n_queries: int,
    n_docs: int,
    k: int,
    *,
    doc_block: int = DOC_BLOCK,
    query_block: int = QUERY_BLOCK,
) -> tuple[np.ndarray, np.ndarray]:
    """Generic exact top-k: ``score(q0, q1, d0, d1)`` returns the (q1-q0, d1-d0) float32 scores
    of a block (larger is better). Returns (scores, indices), best first, ties by lower index."""
    return scan_blocks(score, n_queries, n_docs, check_k(k, n_docs), doc_block=doc_block, query_block=query_block)


def scan_blocks(
    score: Callable[[int, int, int, int], np.ndarray],
    n_queries: int,
    n_docs: int,
    k: int,
    *,
    doc_block: int = DOC_BLOCK,
    query_block: int = QUERY_BLOCK,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`topk_by_blocks` with ``k`` already validated (1..n_docs)."""
    out_s = np.empty((n_queries, k), dtype=np.float32)
    out_i = np.empty((n_queries, k), dtype=np.int64)
    for q0 in range(0, n_queries, query_block):
        q1 = min(q0 + query_block, n_queries)
        best_s = best_i = None
        for d0 in range(0, n_docs, doc_block):
            d1 = min(d0 + doc_block, n_docs)
            s, i = block_topk(score(q0, q1, d0, d1), min(k, d1 - d0), d0)
            if best_s is None:
                best_s, best_i = s, i
                continue
            best_s, best_i = merge_topk([best_s, s], [best_i, i], k, ascending=True)
        out_s[q0:q1], out_i[q0:q1] = best_s, best_i
    return out_s, out_i


def float_search(
    queries: np.ndarray, docs: np.ndarray, k: int, *, metric: str = "cosine"
) -> tuple[np.ndarray, np.ndarray]:
    """Top-``k`` documents by cosine or inner product. Returns (scores, indices), best first;
    equal scores are ordered by index. ``k`` larger than the corpus returns all documents."""
    if metric not in ("cosine", "inner_product"):
        raise InputError(f"float search metric must be cosine or inner_product, got {metric!r}")
    queries = np.ascontiguousarray(queries, dtype=np.float32)
    docs = np.ascontiguousarray(docs, dtype=np.float32)
    if queries.ndim != 2 or docs.ndim != 2 or queries.shape[1] != docs.shape[1]:
        raise InputError(f"queries have shape {queries.shape} but documents have shape {docs.shape}; widths must match")
    if metric == "cosine":
        queries, docs = normalize_rows(queries), normalize_rows(docs)
    return topk_by_blocks(lambda q0, q1, d0, d1: queries[q0:q1] @ docs[d0:d1].T, len(queries), len(docs), k)


def hamming_distances(qcodes: np.ndarray, dcodes: np.ndarray) -> np.ndarray:
    """All pairwise Hamming distances between packed-bit rows, (q, n) int32 (reference code)."""
    q = np.ascontiguousarray(qcodes, dtype=np.uint8)
    d = np.ascontiguousarray(dcodes, dtype=np.uint8)
    if q.shape[1] != d.shape[1]:
        raise InputError(f"query codes have {q.shape[1]} bytes but document codes have {d.shape[1]}")
    out = np.empty((len(q), len(d)), dtype=np.int32)
    for i in range(len(q)):
        out[i] = np.bitwise_count(np.bitwise_xor(d, q[i])).sum(axis=1, dtype=np.int32)
    return out


def hamming_search(qcodes: np.ndarray, dcodes: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Reference top-``k`` by Hamming distance (smallest first), ties by index; numpy only."""
    k = check_k(k, len(dcodes))
    n = len(dcodes)
    base = np.arange(n, dtype=np.int64)
    dist_out = np.empty((len(qcodes), k), dtype=np.int32)
    idx_out = np.empty((len(qcodes), k), dtype=np.int64)
    for s in range(0, len(qcodes), 256):
        dist = hamming_distances(qcodes[s : s + 256], dcodes)
        keys = dist.astype(np.int64) * n + base  # unique: distance first, then index
        if k < n:
            top = np.argpartition(keys, k - 1, axis=1)[:, :k]
        else:
            top = np.broadcast_to(np.arange(n), keys.shape).copy()
        top = np.take_along_axis(top, np.argsort(np.take_along_axis(keys, top, axis=1), axis=1), axis=1)
        idx_out[s : s + len(dist)] = top
        dist_out[s : s + len(dist)] = np.take_along_axis(dist, top, axis=1)
    return dist_out, idx_out
