"""Where a rerank finds full-precision document vectors: only the candidate rows are read.

* :class:`ArrayStore`: an array in memory (or any numpy memmap);
* :class:`NpyStore`: a ``.npy`` file, memory-mapped: reads touch only the candidates' pages;
* :class:`ParquetStore`: a parquet file; reads the row groups that hold candidates, one at a
  time, so memory stays at one row group (a ``.npy`` copy of the originals reranks faster);
* :class:`DecodedStore`: int8 (or other) codes decoded by their compressor on the fly.
"""

from __future__ import annotations

import os
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
    def __init__(self, path: str | os.PathLike, column: str | None = None):
        src = open_vectors(path, column=column)
        self.path, self.column, self.dim, self.num_rows = Path(path), src.column, src.dim, src.num_rows
        self._pf = pq.ParquetFile(self.path, pre_buffer=False, buffer_size=READ_BUFFER_BYTES)
        sizes = [self._pf.metadata.row_group(i).num_rows for i in range(self._pf.num_row_groups)]
        self._starts = np.concatenate([[0], np.cumsum(sizes)])

    def get(self, rows: np.ndarray) -> np.ndarray:
        rows = np.asarray(rows, dtype=np.int64)
        out = np.empty((len(rows), self.dim), dtype=np.float32)
        groups = np.searchsorted(self._starts, rows, side="right") - 1
        for g in np.unique(groups):
            sel = np.flatnonzero(groups == g)
            col = self._pf.read_row_group(int(g), columns=[self.column]).column(0)
            X = column_to_numpy(col, self.dim, offset=int(self._starts[g]), column=self.column)
            out[sel] = X[rows[sel] - self._starts[g]]
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
