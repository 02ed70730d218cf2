"""Top-k lists: the one merge of partial results, and the one way a C scan kernel is spread over
threads. Every scan (lookup tables, dense codes, Hamming, float blocks, parted indexes) keeps
its top ``k`` per query in the same order: best value first, ties by lower row."""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from ..core._parallel import num_threads, shared_pool

#: below this many documents a thread of its own costs more than it gains
MIN_DOCS_PER_THREAD = 50_000


def merge_topk(
    values: Sequence[np.ndarray],
    rows: Sequence[np.ndarray],
    k: int,
    *,
    larger_is_better: bool = True,
    ascending: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """The best ``k`` of several (queries, n_i) result blocks whose rows are already global:
    (values, rows), best first (largest similarity or smallest distance), ties by lower row.
    ``ascending``: the blocks hold disjoint row ranges in ascending order, each best first with ties by lower
    row (a scan's blocks of documents); a tie's lower row is then its earlier position, and one stable sort
    by value merges them instead of a sort by value and row (seconds at thousands of candidates and queries)."""
    v = np.concatenate(values, axis=1)
    r = np.concatenate(rows, axis=1)
    if ascending:
        return _merge_in_order(v, r, k, larger_is_better)
    return _merge_by_sort(v, r, k, larger_is_better)


def _merge_by_sort(v: np.ndarray, r: np.ndarray, k: int, larger_is_better: bool) -> tuple[np.ndarray, np.ndarray]:
    order = np.lexsort((r, -v if larger_is_better else v), axis=1)[:, :k]
    return np.take_along_axis(v, order, axis=1), np.take_along_axis(r, order, axis=1)


def _merge_in_order(v: np.ndarray, r: np.ndarray, k: int, larger_is_better: bool) -> tuple[np.ndarray, np.ndarray]:
    """:func:`merge_topk` of blocks in row order: a stable sort by value alone keeps ties in position order,
    which is row order here, and finds the blocks already sorted (runs it merges in one pass)."""
    order = np.argsort(-v if larger_is_better else v, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(v, order, axis=1), np.take_along_axis(r, order, axis=1)


def split_scan(
    part: Callable[[int, int, int, int], tuple[np.ndarray, np.ndarray]],
    nq: int,
    nd: int,
    k: int,
    threads: int | None,
    *,
    larger_is_better: bool = True,
    queries_per_thread: int = 1,
) -> tuple[np.ndarray, np.ndarray]:
    """``part(q0, q1, d0, d1)`` -> (values, rows) of the top ``min(k, d1 - d0)`` of queries
    ``q0:q1`` over documents ``d0:d1``, run on threads: by query when there are at least
    ``queries_per_thread`` queries per thread (no merge), else by document range, merged with
    :func:`merge_topk`. A kernel that decodes each document once for all the queries it is given
    asks for more queries per thread before the split by query pays."""
    threads = threads or num_threads()
    by_query = nq >= threads * queries_per_thread
    if threads <= 1 or (not by_query and nd < 2 * MIN_DOCS_PER_THREAD):
        return part(0, nq, 0, nd)
    pool = shared_pool(threads)  # kept between searches: starting threads costs a single query
    if by_query:
        bounds = np.linspace(0, nq, threads + 1).astype(int)
        parts = list(pool.map(lambda j: part(bounds[j], bounds[j + 1], 0, nd), range(threads)))
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
    n_parts = max(1, min(threads, nd // MIN_DOCS_PER_THREAD))
    bounds = np.linspace(0, nd, n_parts + 1).astype(int)
    parts = list(pool.map(lambda j: part(0, nq, bounds[j], bounds[j + 1]), range(n_parts)))
    return merge_topk(
        [p[0] for p in parts], [p[1] for p in parts], k, larger_is_better=larger_is_better, ascending=True
    )
