"""Metric maths as pure functions over arrays."""

from __future__ import annotations

import numpy as np


def neighbour_recall(reference: np.ndarray, found: np.ndarray, k: int | None = None) -> float:
    """Label-free recall@k: the mean share of each query's ``k`` reference neighbours (e.g. exact
    float search) that also appear among its first ``k`` found neighbours (compressed search).
    Both arguments are (queries, >=k) index arrays."""
    reference = np.asarray(reference)
    found = np.asarray(found)
    if reference.shape[0] != found.shape[0]:
        raise ValueError(f"reference has {reference.shape[0]} queries but found has {found.shape[0]}")
    k = min(k or reference.shape[1], reference.shape[1])  # fewer documents than k: all of them is full recall
    if reference.shape[0] == 0:
        return float("nan")
    hits = [len(np.intersect1d(r[:k], f[:k], assume_unique=True)) for r, f in zip(reference, found)]
    return float(np.mean(hits) / k)
