"""``.npy`` vector files, memory-mapped and read in spans of batches."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Iterator

import numpy as np

from ..core.checks import check_values
from ..core.errors import FormatError, InputError, first_line
from .readers import Batch, Streamed, Transform, batch_rows, read_sidecar


class NpyVectors(Streamed):
    """A 2-D ``.npy`` array, memory-mapped; metadata from a ``.embcompress.json`` sidecar."""

    id_column = None
    carried_columns: list[str] = []

    def __init__(self, path: Path, *, codes: bool = False):
        self.path = Path(path)
        try:
            self._arr = np.load(self.path, mmap_mode="r", allow_pickle=False)
        except Exception as exc:  # a damaged header raises value, OS, syntax and tokenize errors
            if isinstance(exc, MemoryError):
                raise
            raise FormatError(f"{self.path} is not a readable .npy file ({first_line(exc)})") from None
        if self._arr.ndim != 2:
            raise InputError(
                f"{self.path} holds a {self._arr.ndim}-D array of shape {self._arr.shape}; expected 2-D (rows x dims)"
            )
        kind = self._arr.dtype
        if codes is None:
            if kind.type not in (np.float16, np.float32, np.float64, np.uint8, np.int8):
                raise InputError(f"{self.path} has dtype {kind}; expected float embeddings or uint8/int8 codes")
        elif codes and kind not in (np.uint8, np.int8):
            raise InputError(f"{self.path} has dtype {kind}; expected packed bits (uint8) or int8 codes")
        elif not codes and kind.type not in (np.float16, np.float32, np.float64):
            raise InputError(f"{self.path} has dtype {kind}; only float16, float32 and float64 embeddings are accepted")
        self.num_rows, self.dim = self._arr.shape
        if self.dim == 0 and self.num_rows:
            raise InputError(
                f"{self.path} holds vectors of width 0 (shape {self._arr.shape}); embeddings need at least 1 dimension"
            )
        self.column = "embedding"
        self.metadata = read_sidecar(self.path)
        self.nbytes_per_row = self.dim * kind.itemsize
        self.type = kind

    def units(
        self,
        batch_size: int | None = None,
        *,
        max_rows: int | None = None,
        transform: Transform | None = None,
        result_row_bytes: int | None = None,
        base: int = 0,
        shard: int = 0,
    ) -> tuple[list, int]:
        """As :meth:`ParquetVectors.units`; a unit is a run of 16 batches."""
        batch_size = batch_rows(batch_size, self.nbytes_per_row)
        span = 16 * batch_size
        end = self.num_rows if max_rows is None else min(self.num_rows, int(max_rows))
        units = [
            functools.partial(
                self._read_span,
                start=s,
                stop=min(s + span, self.num_rows),
                batch_size=batch_size,
                transform=transform,
                base=base,
                shard=shard,
            )
            for s in range(0, end, span)
        ]
        return units, span * (result_row_bytes or 4 * self.dim)

    def _read_span(
        self, local: dict, *, start: int, stop: int, batch_size: int, transform, base: int = 0, shard: int = 0
    ) -> Iterator[Batch]:
        for s in range(start, stop, batch_size):
            block = np.asarray(self._arr[s : min(s + batch_size, stop)])
            if block.dtype.kind == "f":
                if block.dtype == np.float64:  # before the cast: 1e300 is out of range, not inf
                    check_values(block, what=str(self.path), row_offset=base + s)
                block = block.astype(np.float32, copy=block.dtype != np.float32)
                if transform is None:
                    check_values(block, what=str(self.path), row_offset=base + s)
            if transform is not None:
                try:
                    block = transform(block, base + s)
                except InputError as exc:
                    raise InputError(f"{self.path}: {exc}") from None
            yield Batch(block, None, base + s, shard)
