"""Where a rerank finds full-precision document vectors: only the candidate rows are read.

* :class:`ArrayStore`: an array in memory (or any numpy memmap);
* :class:`NpyStore`: a ``.npy`` file, memory-mapped: reads touch only the candidates' pages;
* :class:`ParquetStore`: a parquet file; decodes the row groups that hold candidates (on as many
  threads as there are rerank blocks in flight) and keeps the most recently used ones up to a
  memory budget (256 MiB by default), so a file that fits is decoded once per search and a larger
  one never holds more than the budget (a ``.npy`` copy of the originals reranks faster still);
* :class:`DecodedStore`: int8 (or other) codes decoded by their compressor on the fly.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Protocol

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..core.errors import FormatError, InputError
from ..io.readers import READ_BUFFER_BYTES, ParquetVectors
from ..io.sources import is_dataset, open_vectors


class VectorStore(Protocol):
    num_rows: int
    dim: int

    def get(self, rows: np.ndarray) -> np.ndarray:
        """float32 vectors of ``rows`` (any order, repeats allowed), shape (len(rows), dim)."""


class ArrayStore:
    def __init__(self, X: np.ndarray):
        self.X = X
        self.num_rows, self.dim = X.shape

    def get(self, rows: np.ndarray) -> np.ndarray:
        return np.asarray(self.X[np.asarray(rows)], dtype=np.float32)


class NpyStore(ArrayStore):
    def __init__(self, path: str | os.PathLike):
        src = open_vectors(path)
        super().__init__(src._arr)  # get() fancy-indexes the memmap: only the candidates' pages are read


class ParquetStore:
    """Row groups that hold candidates are decoded on demand; rerank blocks running on several
    threads decode different row groups at the same time (one file handle per thread), and a row
    group another thread is decoding is waited for, not decoded twice. Row groups that the direct
    page decoder splits for the workers (over ``readers.SPLIT_BYTES``) are decoded and cached span
    by span (about ``readers.SPAN_BYTES`` each), so a huge row group does not become one array."""

    #: decoded row groups kept between calls (rerank blocks ask for candidates all over the file)
    DEFAULT_CACHE_BYTES = 256 << 20

    def __init__(self, path: str | os.PathLike, column: str | None = None, *, cache_bytes: int = DEFAULT_CACHE_BYTES):
        src = open_vectors(path, column=column)
        self.path, self.column, self.dim, self.num_rows = Path(path), src.column, src.dim, src.num_rows
        shards = src.shards or [src]  # a dataset's row groups are numbered across its shards
        if any(not isinstance(s, ParquetVectors) for s in shards):
            raise InputError(f"originals in {path} are .npy shards; give parquet shards, or one .npy file")
        # the units decoded and cached: row groups, or spans of the row groups the direct page
        # decoder splits (a row group of pyarrow's default 1Mi rows is 4 GiB of 1024-d floats)
        self._groups = [
            (s.path, g, r0, r1)  # unit -> (file, row group, first row in it, end row in it)
            for s in shards
            for g, n in enumerate(np.diff(s.group_starts()))
            for r0, r1 in s.group_spans(int(n))
        ]
        self._shards = {s.path: s for s in shards}
        sizes = [r1 - r0 for _, _, r0, r1 in self._groups]
        self._starts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self.cache_bytes = int(cache_bytes)
        self._cache: OrderedDict[int, np.ndarray] = OrderedDict()  # unit -> (rows, dim) float32
        self._cached_bytes = 0
        self._lock = threading.Lock()  # guards the cache and the in-progress table
        self._decoding: dict[int, threading.Event] = {}  # unit -> set when its decode ends
        self._local = threading.local()  # a ParquetFile per thread
        self.decoded_groups = 0  # how many row-group decodes this store has done (for tests and tuning)

    def _claim(self, g: int) -> tuple[np.ndarray | None, threading.Event | None, bool]:
        """(cached array, or the event of another thread's decode, or ours to decode)."""
        with self._lock:
            X = self._cache.get(g)
            if X is not None:
                self._cache.move_to_end(g)
                return X, None, False
            if g in self._decoding:
                return None, self._decoding[g], False
            self._decoding[g] = threading.Event()
            return None, None, True

    def _decode(self, g: int) -> np.ndarray:
        try:
            path, local, r0, r1 = self._groups[g]
            files = self._local.__dict__.setdefault("files", {})
            pf = files.get(path)
            if pf is None:
                pf = files[path] = pq.ParquetFile(
                    path, pre_buffer=False, buffer_size=READ_BUFFER_BYTES, page_checksum_verification=True
                )
            X = self._shards[path].read_rows(pf, local, (r0, r1), offset=int(self._starts[g]))
        except BaseException as exc:
            with self._lock:
                self._decoding.pop(g).set()  # waiters wake up and try for themselves
            where, local = self._groups[g][:2]
            if isinstance(exc, InputError):
                raise InputError(f"{where}, row group {local}: {exc}") from None
            if isinstance(exc, (pa.ArrowException, OSError)):
                raise FormatError(
                    f"{where} is corrupt or truncated in row group {local}: {str(exc).strip().splitlines()[0]}"
                ) from None
            raise
        with self._lock:
            event = self._decoding.pop(g)
            self.decoded_groups += 1
            if X.nbytes <= self.cache_bytes:
                self._cache[g] = X
                self._cached_bytes += X.nbytes
                while self._cached_bytes > self.cache_bytes:
                    _, old = self._cache.popitem(last=False)
                    self._cached_bytes -= old.nbytes
        event.set()
        return X

    def _group(self, g: int) -> np.ndarray:
        while True:
            X, event, mine = self._claim(g)
            if X is not None:
                return X
            if mine:
                return self._decode(g)
            event.wait()  # decoded by another thread (or it failed: then claim it again)

    def get(self, rows: np.ndarray) -> np.ndarray:
        rows = np.asarray(rows, dtype=np.int64)
        out = np.empty((len(rows), self.dim), dtype=np.float32)
        groups = np.searchsorted(self._starts, rows, side="right") - 1
        waiting = []
        for g in np.unique(groups):  # first what is cached or nobody decodes yet, then what others decode
            X, event, mine = self._claim(int(g))
            if event is not None:
                waiting.append(int(g))
                continue
            X = X if X is not None else self._decode(int(g))
            sel = np.flatnonzero(groups == g)
            out[sel] = X[rows[sel] - self._starts[g]]
        for g in waiting:
            sel = np.flatnonzero(groups == g)
            out[sel] = self._group(g)[rows[sel] - self._starts[g]]
        return out


class DecodedStore:
    """Codes (e.g. int8) and the compressor that made them; ``get`` decodes candidates only."""

    def __init__(self, codes: np.ndarray, compressor):
        self.codes, self.compressor = codes, compressor
        self.num_rows = len(codes)
        self.dim = compressor.output_spec.width

    def get(self, rows: np.ndarray) -> np.ndarray:
        return self.compressor.decode(self.codes[np.asarray(rows)])


def open_store(path: str | os.PathLike, *, column: str | None = None) -> VectorStore:
    """A store over a float vector file (.npy memory-mapped, or parquet)."""
    suffix = Path(path).suffix.lower()
    if suffix == ".npy":
        return NpyStore(path)
    if suffix in (".parquet", ".pq") or is_dataset(path):
        return ParquetStore(path, column=column)
    raise InputError(f"{path}: originals for a rerank must be .npy or .parquet float vectors")
