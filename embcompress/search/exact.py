"""Exact brute-force search in numpy: float (cosine / inner product) and packed-bit Hamming.

Ties are broken by document index, lowest first, always: the sort key is
``distance * n_docs + index``, so equal distances can never come back in a machine-dependent
order. Hamming distances tie constantly (there are only ``bits + 1`` possible values).
"""

from __future__ import annotations

import numpy as np

from ..errors import InputError

_QBLOCK = 256  # queries per block: bounds the (queries x docs) score matrix held at once


def _check_k(k: int, n_docs: int) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise InputError(f"k must be a positive integer, got {k!r}")
    return int(min(k, n_docs))


def _topk_smallest(keys: np.ndarray, k: int) -> np.ndarray:
    """Row-wise indices of the k smallest (unique) keys, in increasing order of key."""
    if k < keys.shape[1]:
        part = np.argpartition(keys, k - 1, axis=1)[:, :k]
    else:
        part = np.broadcast_to(np.arange(keys.shape[1]), keys.shape).copy()
    order = np.argsort(np.take_along_axis(keys, part, axis=1), axis=1, kind="stable")
    return np.take_along_axis(part, order, axis=1)


def normalize_rows(X: np.ndarray) -> np.ndarray:
    X = np.array(X, dtype=np.float32, copy=True)
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    np.divide(X, norms, out=X, where=norms > 0)
    return X


def float_search(queries: np.ndarray, docs: np.ndarray, k: int, *, metric: str = "cosine") -> tuple[np.ndarray, np.ndarray]:
    """Top-``k`` documents by cosine or inner product. Returns (scores, indices), best first;
    equal scores are ordered by index. ``k`` larger than the corpus returns all documents."""
    if metric not in ("cosine", "inner_product"):
        raise InputError(f"float search metric must be cosine or inner_product, got {metric!r}")
    if queries.shape[1] != docs.shape[1]:
        raise InputError(f"queries have {queries.shape[1]} dimensions but documents have {docs.shape[1]}")
    k = _check_k(k, len(docs))
    if metric == "cosine":
        queries, docs = normalize_rows(queries), normalize_rows(docs)
    idx = np.empty((len(queries), k), dtype=np.int64)
    scores = np.empty((len(queries), k), dtype=np.float32)
    for s in range(0, len(queries), _QBLOCK):
        sim = queries[s : s + _QBLOCK] @ docs.T  # (q, n)
        # descending score, then ascending index: lexsort on (index, -score) within candidates
        cand = np.argpartition(-sim, k - 1, axis=1)[:, :k] if k < sim.shape[1] else np.broadcast_to(np.arange(sim.shape[1]), sim.shape)
        kth = np.take_along_axis(sim, cand, axis=1).min(axis=1, keepdims=True)
        for r in range(len(sim)):
            # every doc tied with the k-th score competes, so ties resolve by index
            pool = np.flatnonzero(sim[r] >= kth[r])
            order = np.lexsort((pool, -sim[r, pool]))[:k]
            idx[s + r] = pool[order]
            scores[s + r] = sim[r, pool[order]]
    return scores, idx


def hamming_distances(qcodes: np.ndarray, dcodes: np.ndarray) -> np.ndarray:
    """All pairwise Hamming distances between packed-bit rows, (q, n) int32."""
    q = np.ascontiguousarray(qcodes, dtype=np.uint8)
    d = np.ascontiguousarray(dcodes, dtype=np.uint8)
    if q.shape[1] != d.shape[1]:
        raise InputError(f"query codes have {q.shape[1]} bytes but document codes have {d.shape[1]}")
    out = np.empty((len(q), len(d)), dtype=np.int32)
    for i in range(len(q)):
        out[i] = np.bitwise_count(np.bitwise_xor(d, q[i])).sum(axis=1, dtype=np.int32)
    return out


def hamming_search(qcodes: np.ndarray, dcodes: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Top-``k`` documents by Hamming distance (smallest first), ties broken by index.
    Returns (distances, indices)."""
    k = _check_k(k, len(dcodes))
    n = len(dcodes)
    base = np.arange(n, dtype=np.int64)
    dist_out = np.empty((len(qcodes), k), dtype=np.int32)
    idx_out = np.empty((len(qcodes), k), dtype=np.int64)
    for s in range(0, len(qcodes), _QBLOCK):
        dist = hamming_distances(qcodes[s : s + _QBLOCK], dcodes)
        keys = dist.astype(np.int64) * n + base  # unique: distance first, then index
        top = _topk_smallest(keys, k)
        idx_out[s : s + len(dist)] = top
        dist_out[s : s + len(dist)] = np.take_along_axis(dist, top, axis=1)
    return dist_out, idx_out
