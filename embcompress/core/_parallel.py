"""Threads for work that releases the GIL.

* :func:`map_rows` and :func:`run_blocks`: row-parallel numpy kernels (comparisons, packbits,
  float arithmetic) on large in-memory arrays; small inputs run inline, since threads only pay off
  when each part is big enough to amortize the hand-off.
* :func:`ordered_units`: units of streamed work (row groups of a file, decoded and compressed) on
  worker threads, delivered in order, with bounded look-ahead.
"""

from __future__ import annotations

import contextlib
import os
import queue
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterator, Sequence

import numpy as np

MIN_ROWS_PER_THREAD = 8192
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


class _OneBlasThread:
    """While any of our parallel sections that call BLAS runs, BLAS (numpy's OpenBLAS) runs each
    call on one thread: our workers are the parallelism. (An OpenMP-threaded BLAS, like the one
    faiss brings, keeps a count per thread; each streaming worker sets its own, :func:`_share_openmp`.)
    A BLAS that starts its own team inside each of our threads oversubscribes the cores -- RaBitQ's encoder (a 256 x d
    matrix product per block in every worker) ran 5-13x slower
    that way on 2 busy cores (docs/decisions/0006). Sections nest and overlap
    across threads: the first to enter looks up the loaded libraries (threadpoolctl, about 2 ms)
    and sets the limit, later ones set it again (a limit someone set in between is not kept while
    our workers run), the last to leave restores what was there. Enter it from the thread that
    starts the workers: a limit set from a worker thread did not always reach the others. The
    libraries are looked up again only when modules were imported since the last look."""

    def __init__(self):
        self._lock = threading.Lock()
        self._depth = 0
        self._controller = None
        self._modules = -1  # len(sys.modules) when the controller looked the libraries up
        self._limiter = None

    def __enter__(self):
        with self._lock:
            try:
                if self._depth == 0 and (self._controller is None or len(sys.modules) != self._modules):
                    from threadpoolctl import ThreadpoolController

                    # the libraries loaded since the last look (a new BLAS comes with a new
                    # module); looked up again only then: a search of one query cannot pay 2 ms
                    self._controller = ThreadpoolController()
                    self._modules = len(sys.modules)
                limiter = self._controller.limit(limits=1, user_api="blas")
            except ImportError:  # pragma: no cover - threadpoolctl is a dependency
                limiter = None
            if self._depth == 0:
                self._limiter = limiter  # what was there before the first entry
            self._depth += 1
        return self

    def __exit__(self, *exc):
        with self._lock:
            self._depth -= 1
            if self._depth == 0 and self._limiter is not None:
                self._limiter.restore_original_limits()
                self._limiter = None
        return False


one_blas_thread = _OneBlasThread()


def num_threads() -> int:
    """Threads for row-parallel kernels: ``EMBCOMPRESS_NUM_THREADS`` or the CPU count, at most 8
    (these kernels are memory-bound beyond a few cores)."""
    env = os.environ.get("EMBCOMPRESS_NUM_THREADS")
    if env and env.isdigit() and int(env) > 0:
        return int(env)
    return max(1, min(8, os.cpu_count() or 1))


def shared_pool(workers: int) -> ThreadPoolExecutor:
    """The process's one pool of worker threads for short parallel sections (row blocks, scans),
    with at least ``workers`` threads; made on first use and kept, so a search of one query does
    not pay for starting threads. Its tasks never wait on other tasks of the pool."""
    global _pool
    with _pool_lock:
        if _pool is None or _pool._max_workers < workers:
            _pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="embcompress")
        return _pool


def map_rows(
    fn: Callable[[np.ndarray], np.ndarray], X: np.ndarray, out: np.ndarray, *, blas: bool = False
) -> np.ndarray:
    """``out[i] = fn(X[i])`` row-block by row-block, in parallel when ``X`` is large. ``blas``:
    ``fn`` calls BLAS (a matrix product), which then runs one thread per call (:data:`one_blas_thread`)."""
    n = len(X)
    parts = min(num_threads(), n // MIN_ROWS_PER_THREAD)
    if parts <= 1:
        out[...] = fn(X)
        return out
    pool = shared_pool(parts)
    bounds = np.linspace(0, n, parts + 1).astype(int)

    def work(i: int) -> None:
        s, e = bounds[i], bounds[i + 1]
        out[s:e] = fn(X[s:e])

    with one_blas_thread if blas else contextlib.nullcontext():
        for f in [pool.submit(work, i) for i in range(parts)]:
            f.result()  # re-raises a worker's exception here
    return out


def run_blocks(fn: Callable[[int], None], starts, *, threads: int | None = None) -> None:
    """Call ``fn(start)`` for every block start, on up to ``threads`` threads (numpy work inside
    releases the GIL); exceptions are re-raised here."""
    starts = list(starts)
    threads = min(threads or num_threads(), len(starts))
    if threads <= 1:
        for s in starts:
            fn(s)
        return
    pool = shared_pool(threads)
    with one_blas_thread:
        for f in [pool.submit(fn, s) for s in starts]:
            f.result()


def reader_threads(threads: int | None = None) -> int:
    """Workers for reading and compressing a file: ``threads`` if given (at least 1), else
    ``EMBCOMPRESS_NUM_THREADS``, else every core this process may use (reading and compressing
    scale with the cores until the memory bandwidth or the disk caps them)."""
    if threads is not None:
        if int(threads) < 1:
            from .errors import InputError

            raise InputError(f"threads must be at least 1, got {threads}")
        return int(threads)
    env = os.environ.get("EMBCOMPRESS_NUM_THREADS")
    if env and env.isdigit() and int(env) > 0:
        return int(env)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def idle_cores(window: float = 0.05) -> int | None:
    """How many of this process's cores other processes left idle over ``window`` seconds (at
    least 1), from the machine's CPU time in ``/proc/stat`` less this process's own; None where
    that cannot be read (not Linux). For thread pools whose waits spin: a team that shares a
    core with another job waits at every barrier for its slowest thread (GeoPres's training on
    10,000 rows: 40 s alone, 104 s beside a busy core on 2 threads, 72 s on 1;
    docs/decisions/0006)."""
    try:
        cpus = len(os.sched_getaffinity(0))
        hz = os.sysconf("SC_CLK_TCK")
        before, own0 = _cpu_ticks(), os.times()
        time.sleep(window)
        after, own1 = _cpu_ticks(), os.times()
    except (AttributeError, OSError, ValueError):
        return None
    own = (own1.user + own1.system - own0.user - own0.system) * hz
    return idle_of(after[0] - before[0], after[1] - before[1], own, os.cpu_count() or cpus, cpus)


def _cpu_ticks() -> tuple[int, int]:
    """(busy, total) clock ticks of all the machine's CPUs since boot (``/proc/stat``'s first line;
    idle and iowait are not busy)."""
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:9]]
    return sum(fields) - fields[3] - fields[4], sum(fields)


def idle_of(busy: float, total: float, own: float, machine_cpus: int, cpus: int) -> int | None:
    """:func:`idle_cores` from its tick counts over the window: the machine's cores less those
    other processes kept busy (``busy - own`` of ``total`` ticks), at most ``cpus``, at least 1."""
    if total <= 0:
        return None
    others = max(0.0, busy - own) / total * machine_cpus
    return max(1, min(cpus, machine_cpus - int(round(others))))


Unit = Callable[[dict], Iterator]


def ordered_units(units: Sequence[Unit], *, threads: int, window: int) -> Iterator:
    """Run every unit of work on ``threads`` worker threads and yield all items of unit 0, then
    all items of unit 1, and so on: the same items, in the same order, as running them one after
    the other. A unit is a function of a worker-local dict (for per-thread file handles) that
    returns an iterator; its items are produced on the worker while the consumer takes earlier
    units' items. At most ``window`` units run or wait ahead of the consumer, which bounds memory.

    A unit's error is raised here when the consumer reaches that unit, after every earlier
    unit's items, so the error reported is the first in order whatever the timing (the first bad
    row of a file, not the first a worker came upon); units after a failed one are dropped.
    Closing the generator (Ctrl-C, a failed write, a consumer that stops early) stops every
    worker after the item it is producing."""
    n = len(units)
    window = max(1, min(int(window), n))
    tasks: "queue.Queue[int | None]" = queue.Queue()
    outs = [queue.Queue() for _ in range(n)]
    stop = threading.Event()
    first_failed = [n]  # the lowest unit that failed; the units after it are not needed

    share = max(1, reader_threads() // max(1, min(threads, n)))

    workers = [
        threading.Thread(
            target=_work,
            args=(units, tasks, outs, stop, first_failed, share),
            daemon=True,
            name=f"embcompress-reader-{k}",
        )
        for k in range(min(threads, n))
    ]
    limit = one_blas_thread if len(workers) > 1 else contextlib.nullcontext()  # compressors may multiply matrices
    with limit:
        for t in workers:
            t.start()
        submitted = 0
        try:
            for i in range(n):
                while submitted < min(n, i + window, first_failed[0] + 1):
                    tasks.put(submitted)
                    submitted += 1
                while True:
                    try:
                        item = outs[i].get(timeout=0.05)  # a timed wait: Ctrl-C is seen at once
                    except queue.Empty:
                        continue
                    if item is _END:
                        outs[i] = None  # free the unit's queue
                        break
                    if isinstance(item, _Failed):
                        raise item.exc
                    yield item
        finally:
            stop.set()
            for _ in workers:
                tasks.put(None)
            for t in workers:  # each stops after its current item; none may be inside pyarrow when we return
                t.join(timeout=30)


def _work(
    units: Sequence[Unit],
    tasks: "queue.Queue[int | None]",
    outs: list,
    stop: threading.Event,
    first_failed: list[int],
    share: int,
) -> None:
    """A worker of :func:`ordered_units`: takes unit numbers until told to stop (None), puts each
    unit's items on its queue then an end mark, or the unit's error; stops early once a unit
    before it failed or the consumer closed."""
    local: dict = {}
    omp_set = False
    while not stop.is_set():
        try:
            i = tasks.get(timeout=0.05)
        except queue.Empty:
            continue
        if i is None:
            return
        if not omp_set:
            omp_set = _share_openmp(share)
        try:
            for item in units[i](local):
                if stop.is_set():
                    return
                if i > first_failed[0]:
                    break
                outs[i].put(item)
            else:
                outs[i].put(_END)
        except BaseException as exc:  # handed to the consumer when it reaches unit i
            first_failed[0] = min(first_failed[0], i)
            outs[i].put(_Failed(exc))


_END = object()


def _share_openmp(share: int) -> bool:
    """Give this worker thread an OpenMP team of ``share`` threads for faiss's calls (its codes'
    encoders run a team per call, by default one thread per core). Worker threads that each
    start a full team oversubscribe the cores: rq:24 encoded 6,800 rows/s on 2 threads of 2
    cores, and 12,500 with a one-thread team each (opq:24: 27,000 -> 43,000). The setting is
    the calling thread's own (OpenMP's per-thread nthreads). True once done; False while faiss
    is not loaded (then nothing here calls it yet)."""
    import sys

    faiss = sys.modules.get("faiss")
    if faiss is None:
        return False
    faiss.omp_set_num_threads(share)
    return True


class _Failed:
    """A unit's error, queued after the items it produced."""

    def __init__(self, exc: BaseException):
        self.exc = exc


def prefetch(it: Iterator, depth: int = 2) -> Iterator:
    """Run ``it`` in a background thread, ``depth`` items ahead, so that decoding the next batch
    (pyarrow and numpy release the GIL) overlaps with compressing this one. Errors are re-raised
    in the consumer; a consumer that stops early stops the thread."""
    q: queue.Queue = queue.Queue(maxsize=depth)
    done = object()
    stop = threading.Event()

    def put(item) -> bool:
        while not stop.is_set():
            try:
                q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def work() -> None:
        try:
            for item in it:
                if not put(("item", item)):
                    return
            put(("done", done))
        except BaseException as exc:  # handed to the consumer
            put(("error", exc))

    t = threading.Thread(target=work, daemon=True)
    t.start()
    try:
        while True:
            kind, value = q.get()
            if kind == "item":
                yield value
            elif kind == "error":
                raise value
            else:
                return
    finally:
        stop.set()
        t.join(timeout=30)
