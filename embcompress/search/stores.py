"""Where a rerank finds full-precision document vectors: only the candidate rows are read.

* :class:`ArrayStore`: an array in memory (or any numpy memmap);
* :class:`NpyStore`: a ``.npy`` file, memory-mapped: reads touch only the candidates' pages;
* :class:`ParquetStore`: a parquet file; decodes the row groups that hold candidates and keeps
  the most recently used ones up to a memory budget (256 MiB by default), so a file that fits is
  decoded once per search and a larger one never holds more than the budget (a ``.npy`` copy of
  the originals reranks faster still);
* :class:`DecodedStore`: int8 (or other) codes decoded by their compressor on the fly.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Protocol

import numpy as np
import pyarrow.parquet as pq

from ..errors import InputError
from ..io.readers import READ_BUFFER_BYTES, column_to_numpy, open_vectors


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
    #: decoded row groups kept between calls (rerank blocks ask for candidates all over the file)
    DEFAULT_CACHE_BYTES = 256 << 20

    def __init__(self, path: str | os.PathLike, column: str | None = None, *, cache_bytes: int = DEFAULT_CACHE_BYTES):
        src = open_vectors(path, column=column)
        self.path, self.column, self.dim, self.num_rows = Path(path), src.column, src.dim, src.num_rows
        self._pf = pq.ParquetFile(self.path, pre_buffer=False, buffer_size=READ_BUFFER_BYTES)
        sizes = [self._pf.metadata.row_group(i).num_rows for i in range(self._pf.num_row_groups)]
        self._starts = np.concatenate([[0], np.cumsum(sizes)])
        self.cache_bytes = int(cache_bytes)
        self._cache: OrderedDict[int, np.ndarray] = OrderedDict()  # row group -> (rows, dim) float32
        self._cached_bytes = 0
        self._lock = threading.Lock()  # rerank blocks run on threads; one reader of the file at a time
        self.decoded_groups = 0  # how many row-group decodes this store has done (for tests and tuning)

    def _group(self, g: int) -> np.ndarray:
        with self._lock:
            X = self._cache.get(g)
            if X is not None:
                self._cache.move_to_end(g)
                return X
            col = self._pf.read_row_group(g, columns=[self.column]).column(0)
            X = column_to_numpy(col, self.dim, offset=int(self._starts[g]), column=self.column)
            self.decoded_groups += 1
            if X.nbytes <= self.cache_bytes:
                self._cache[g] = X
                self._cached_bytes += X.nbytes
                while self._cached_bytes > self.cache_bytes:
                    _, old = self._cache.popitem(last=False)
                    self._cached_bytes -= old.nbytes
            return X

    def get(self, rows: np.ndarray) -> np.ndarray:
        rows = np.asarray(rows, dtype=np.int64)
        out = np.empty((len(rows), self.dim), dtype=np.float32)
        groups = np.searchsorted(self._starts, rows, side="right") - 1
        for g in np.unique(groups):
            sel = np.flatnonzero(groups == g)
            out[sel] = self._group(int(g))[rows[sel] - self._starts[g]]
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
    if suffix in (".parquet", ".pq"):
        return ParquetStore(path, column=column)
    raise InputError(f"{path}: originals for a rerank must be .npy or .parquet float vectors")
