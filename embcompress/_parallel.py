"""Row-parallel execution of numpy kernels that release the GIL (comparisons, packbits, float
arithmetic), for large in-memory arrays. Small inputs run inline: threads only pay off when each
part is big enough to amortize the hand-off."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

import numpy as np

MIN_ROWS_PER_THREAD = 8192
_pool: ThreadPoolExecutor | None = None


def num_threads() -> int:
    """Threads for row-parallel kernels: ``EMBCOMPRESS_NUM_THREADS`` or the CPU count, at most 8
    (these kernels are memory-bound beyond a few cores)."""
    env = os.environ.get("EMBCOMPRESS_NUM_THREADS")
    if env and env.isdigit() and int(env) > 0:
        return int(env)
    return max(1, min(8, os.cpu_count() or 1))


def map_rows(fn: Callable[[np.ndarray], np.ndarray], X: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``out[i] = fn(X[i])`` row-block by row-block, in parallel when ``X`` is large."""
    global _pool
    n = len(X)
    parts = min(num_threads(), n // MIN_ROWS_PER_THREAD)
    if parts <= 1:
        out[...] = fn(X)
        return out
    if _pool is None or _pool._max_workers < parts:
        _pool = ThreadPoolExecutor(max_workers=parts, thread_name_prefix="embcompress")
    bounds = np.linspace(0, n, parts + 1).astype(int)

    def work(i: int) -> None:
        s, e = bounds[i], bounds[i + 1]
        out[s:e] = fn(X[s:e])

    for f in [_pool.submit(work, i) for i in range(parts)]:
        f.result()  # re-raises a worker's exception here
    return out


def run_blocks(fn: Callable[[int], None], starts, *, threads: int | None = None) -> None:
    """Call ``fn(start)`` for every block start, on up to ``threads`` threads (numpy work inside
    releases the GIL); exceptions are re-raised here."""
    global _pool
    starts = list(starts)
    threads = min(threads or num_threads(), len(starts))
    if threads <= 1:
        for s in starts:
            fn(s)
        return
    if _pool is None or _pool._max_workers < threads:
        _pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="embcompress")
    for f in [_pool.submit(fn, s) for s in starts]:
        f.result()
