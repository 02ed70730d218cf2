"""The rescoring copy of a plan's tiers (``copy.npy``: float32, float16 or int8 rows, or the int8 residuals of
:mod:`embcompress.serving.residual`) read back.

:class:`DiskCopy` reads it from disk for the candidates only: the rows of a search block are sorted, runs of
neighbouring rows merged, and each run read with one positioned read (``pread``) into a buffer of the
candidates' size; a run not in the page cache is asked for and read after the others, so a cold query's reads
are in flight together (decision 0012). Nothing is memory-mapped, so the copy's size never shows in the
process's resident memory. Where the C extension is built, :meth:`DiskCopy.cosines` scores the rows as it
reads them (the rescoring itself: no float32 vectors are made). :class:`RamCopy` holds the copy in memory
instead; :func:`drop_cache` evicts a file from the page cache (``posix_fadvise(DONTNEED)``) for cold-start
measurements."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

import numpy as np

from ..core.errors import FormatError, InputError
from . import residual

try:
    from ..io import _pread
except ImportError:  # built without a C compiler: the same reads, a system call per run from Python
    _pread = None

#: the numpy type of each kind of stored copy
COPY_DTYPES = {"float32": np.float32, "float16": np.float16, "int8": np.int8, residual.KIND: np.int8}
#: values a stored row holds beyond the vector's ``dim``: an int8 residual's scale and norm (serving.residual)
ROW_EXTRA = {residual.KIND: residual.ROW_EXTRA}


def copy_codec(kind: str, int8=None) -> tuple[Callable[[np.ndarray], np.ndarray], Callable[[np.ndarray], np.ndarray]]:
    """(encode, decode) of a stored copy of ``kind``: float32 rows -> the copy's rows, and back to
    float32 vectors to rescore with (``int8``: the fitted calibration of an int8 copy). An int8 residual
    copy's rows are made from the codes too (serving.residual.encode) and read back as they are."""
    if kind == residual.KIND:
        return _needs_codes, lambda rows: rows
    if kind == "int8":
        return int8.transform, int8.decode
    dtype = COPY_DTYPES[kind]
    return (lambda X: np.ascontiguousarray(X, dtype=dtype)), (lambda rows: np.asarray(rows, dtype=np.float32))


def open_copy(path: str | os.PathLike, kind: str, int8=None, *, rows: int, dim: int) -> "DiskCopy":
    """The copy of ``kind`` in ``path`` (``int8``: its fitted calibration), checked and opened to be read
    row by row and scored as it is read."""
    return DiskCopy(
        path,
        copy_codec(kind, int8)[1],
        rows=rows,
        dim=dim + ROW_EXTRA.get(kind, 0),
        kind=kind,
        affine=int8.affine() if kind == "int8" else None,
    )


def _needs_codes(X: np.ndarray) -> np.ndarray:
    raise InputError("an int8r copy is made from the first stage's codes too: use serving.residual.encode")


class DiskCopy:
    """The rescoring copy in ``path``, read for the asked rows only (a :class:`VectorStore`)."""

    _fd: int | None = None  # open once the file has passed its checks; close() and __del__ see None before

    def __init__(
        self,
        path: str | os.PathLike,
        decode: Callable[[np.ndarray], np.ndarray],
        *,
        rows: int,
        dim: int,
        kind: str,
        affine: tuple[np.ndarray, np.ndarray] | None = None,
    ):
        self.path = Path(path)
        if not self.path.is_file():
            raise InputError(
                f"{self.path}: the rescoring copy is missing; write the tiers again with "
                "embcompress apply PLAN_DIR IN OUT"
            )
        with open(self.path, "rb") as f:
            try:
                major, _ = np.lib.format.read_magic(f)
                read = np.lib.format.read_array_header_1_0 if major == 1 else np.lib.format.read_array_header_2_0
                shape, fortran, dtype = read(f)
            except ValueError as exc:
                raise FormatError(f"{self.path} is not a .npy rescoring copy: {exc}") from None
            self.offset = f.tell()
        if fortran or shape != (rows, dim) or dtype != np.dtype(COPY_DTYPES[kind]):
            raise FormatError(f"{self.path} holds {shape} {dtype} values; the plan's tiers need ({rows}, {dim}) {kind}")
        self.dtype, self.num_rows, self.dim = dtype, rows, dim
        self.row_bytes = dim * dtype.itemsize
        need = self.offset + rows * self.row_bytes
        size = self.path.stat().st_size
        if size != need:
            raise FormatError(
                f"{self.path} is {size:,} bytes; {rows:,} rows of {self.row_bytes} bytes need {need:,} "
                "(truncated or not this plan's copy)"
            )
        self._decode = decode
        if kind == residual.KIND or (kind == "int8" and affine is None):
            self._fused = None  # rows whose decoding is not x = a * c + b: get() and numpy score them
        else:
            a, b = affine if kind == "int8" else (np.empty(0, np.float32), np.empty(0, np.float32))
            self._fused = ({"float32": "f", "float16": "h", "int8": "b"}[kind], _f32(a), _f32(b))
        self._fd = os.open(self.path, os.O_RDONLY)
        if hasattr(os, "posix_fadvise"):  # no readahead: a cold candidate costs its own page, not the next 32 too
            os.posix_fadvise(self._fd, 0, 0, os.POSIX_FADV_RANDOM)

    def get(self, rows: np.ndarray) -> np.ndarray:
        """float32 vectors of ``rows`` (any order, repeats allowed), read from the file."""
        rows = np.asarray(rows, dtype=np.int64).reshape(-1)
        uniq, back = np.unique(rows, return_inverse=True)  # sorted by offset
        buf = np.empty((len(uniq), self.row_bytes), dtype=np.uint8)
        self._check_read(self._read(uniq, buf))
        return self._decode(buf.view(self.dtype).reshape(len(uniq), self.dim))[back]

    def cosines(self, Q: np.ndarray, rows: np.ndarray) -> np.ndarray | None:
        """(queries, candidates) cosines of the unit queries ``Q`` with the copy's vectors at ``rows``
        (one row of candidates per query), each query's rows read and scored in C in one pass, never held as
        float32 vectors. None where that cannot be done (no C extension, or int8 rows without their
        calibration): :func:`~embcompress.search.index.float_rerank_scores` then scores :meth:`get`'s vectors."""
        if _pread is None or self._fused is None:
            return None
        kind, a, b = self._fused
        out = np.empty(rows.shape, dtype=np.float32)
        for i in range(len(rows)):
            uniq, back = np.unique(rows[i].astype(np.int64, copy=False), return_inverse=True)
            got = np.empty(len(uniq), dtype=np.float32)
            self._check_read(_pread.cosines(self._fd, uniq, self.row_bytes, self.offset, kind, _f32(Q[i]), a, b, got))
            out[i] = got[back]
        return out

    def _check_read(self, short: int) -> None:
        """A FormatError when a read met the end of the file at row ``short`` (-1: every row was read)."""
        if short >= 0:
            raise FormatError(f"{self.path}: short read at row {short} (the file changed or was truncated)")

    def _read(self, uniq: np.ndarray, buf: np.ndarray) -> int:
        """Read the sorted, unique rows ``uniq`` into ``buf``, one positioned read per run of neighbouring
        rows (in C without the GIL where the extension is built); -1, or the row where the file ended."""
        if _pread is not None:
            return _pread.read_rows(self._fd, uniq, self.row_bytes, self.offset, buf)
        cut = np.flatnonzero(np.diff(uniq) != 1) + 1
        for s, e in zip(np.r_[0, cut], np.r_[cut, len(uniq)]):
            want = int(e - s) * self.row_bytes
            if (
                os.preadv(self._fd, [memoryview(buf[s:e]).cast("B")], self.offset + int(uniq[s]) * self.row_bytes)
                != want
            ):
                return int(uniq[s])
        return -1

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __del__(self) -> None:
        self.close()


class RamCopy:
    """The rescoring copy read into memory (a plan whose copy is kept in RAM)."""

    def __init__(self, disk: DiskCopy):
        self.num_rows, self.dim = disk.num_rows, disk.dim
        self._rows = np.fromfile(disk.path, dtype=disk.dtype, offset=disk.offset).reshape(disk.num_rows, disk.dim)
        self._decode = disk._decode
        disk.close()

    def get(self, rows: np.ndarray) -> np.ndarray:
        return self._decode(self._rows[np.asarray(rows)])


def _f32(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x, dtype=np.float32)


def drop_cache(path: str | os.PathLike) -> bool:
    """Ask the kernel to drop ``path``'s pages from the page cache (a cold read next); False where
    the platform cannot."""
    if not hasattr(os, "posix_fadvise"):
        return False
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    return True
