"""Metric maths as pure functions over arrays."""

from __future__ import annotations

import numpy as np


def neighbour_recall(reference: np.ndarray, found: np.ndarray, k: int | None = None) -> float:
    """Label-free recall@k: the mean share of each query's ``k`` reference neighbours (e.g. exact
    float search) that also appear among its first ``k`` found neighbours (compressed search).
    Both arguments are (queries, >=k) index arrays."""
    per = neighbour_recall_per_query(reference, found, k)
    return float(per.mean()) if len(per) else float("nan")


def neighbour_recall_per_query(reference: np.ndarray, found: np.ndarray, k: int | None = None) -> np.ndarray:
    """:func:`neighbour_recall` of each query."""
    reference = np.asarray(reference)
    found = np.asarray(found)
    if reference.shape[0] != found.shape[0]:
        raise ValueError(f"reference has {reference.shape[0]} queries but found has {found.shape[0]}")
    k = min(k or reference.shape[1], reference.shape[1])  # fewer documents than k: all of them is full recall
    hits = [len(np.intersect1d(r[:k], f[:k], assume_unique=True)) for r, f in zip(reference, found)]
    return np.asarray(hits, dtype=np.float64) / k


def pseudo_relevance_ndcg(reference: np.ndarray, found: np.ndarray, k: int, depth: int) -> np.ndarray:
    """Per query, nDCG@``k`` of the ``found`` ranking when the first ``depth`` documents of the
    ``reference`` ranking (exact float search) are taken as the relevant ones, graded ``depth``
    for the first down to 1 for the last (``depth=1``: the float top-1 is the one relevant
    document). Linear gains and log2 discounts, as :func:`~embcompress.analysis.ndcg_at_k`. Both
    arguments are (queries, n) row arrays."""
    reference = np.asarray(reference)[:, :depth]
    found = np.asarray(found)[:, :k]
    if reference.shape[0] != found.shape[0]:
        raise ValueError(f"reference has {reference.shape[0]} queries but found has {found.shape[0]}")
    depth = reference.shape[1]
    grade = np.arange(depth, 0, -1, dtype=np.float64)  # depth .. 1
    match = found[:, :, None] == reference[:, None, :]  # (queries, k, depth)
    gains = (match * grade).sum(axis=2)  # the grade of each found document (0: not a reference one)
    discount = 1.0 / np.log2(np.arange(2, max(found.shape[1], depth) + 2))
    ideal = (grade[: found.shape[1]] * discount[: min(depth, found.shape[1])]).sum()
    return gains @ discount[: found.shape[1]] / ideal
