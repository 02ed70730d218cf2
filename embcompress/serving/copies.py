"""The rescoring copy of a plan's tiers (``copy.npy``: float32, float16 or int8 rows, or the int8 residuals of
:mod:`embcompress.serving.residual`) read back.

:class:`DiskCopy` reads it from disk for the candidates only: the rows of a search block are sorted, runs of
neighbouring rows merged, and each run read with one positioned read (``pread``) into a buffer of the
candidates' size; a run not in the page cache is asked for and read after the others, so a cold query's reads
are in flight together (decision 0012). A copy of at most ``map_limit`` bytes (:data:`MAP_LIMIT` by default)
is memory-mapped as well: once a query found all its rows in memory, the next reads them from the map with no
system call each, and goes back to the reads as soon as the map waits for the device (decision 0015). So the
copy shows in the process's resident memory by at most ``map_limit``, whatever its size. Where the C extension
is built, :meth:`DiskCopy.cosines` scores the rows as it reads them (the rescoring itself: no float32 vectors
are made). :class:`RamCopy` holds the copy in memory instead; :meth:`DiskCopy.drop_cache` and :func:`drop_cache`
evict it from the page cache (``posix_fadvise(DONTNEED)``) for cold-start measurements."""

from __future__ import annotations

import mmap
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
#: the largest copy memory-mapped for its warm reads (bytes): what it may add to a server's resident memory
MAP_LIMIT = 512 << 20


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


def open_copy(
    path: str | os.PathLike, kind: str, int8=None, *, rows: int, dim: int, map_limit: int = MAP_LIMIT
) -> "DiskCopy":
    """The copy of ``kind`` in ``path`` (``int8``: its fitted calibration), checked and opened to be read
    row by row and scored as it is read."""
    return DiskCopy(
        path,
        copy_codec(kind, int8)[1],
        rows=rows,
        dim=dim + ROW_EXTRA.get(kind, 0),
        kind=kind,
        affine=int8.affine() if kind == "int8" else None,
        map_limit=map_limit,
    )


def _needs_codes(X: np.ndarray) -> np.ndarray:
    raise InputError("an int8r copy is made from the first stage's codes too: use serving.residual.encode")


class DiskCopy:
    """The rescoring copy in ``path``, read for the asked rows only (a :class:`VectorStore`). A file of at most
    ``map_limit`` bytes is memory-mapped too, for the reads of a copy found in memory (0: never)."""

    _fd: int | None = None  # open once the file has passed its checks; close() and __del__ see None before
    _map: mmap.mmap | None = None

    def __init__(
        self,
        path: str | os.PathLike,
        decode: Callable[[np.ndarray], np.ndarray],
        *,
        rows: int,
        dim: int,
        kind: str,
        affine: tuple[np.ndarray, np.ndarray] | None = None,
        map_limit: int = MAP_LIMIT,
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
        self._decode, self._size = decode, need
        if kind == "int8" and affine is None:
            self._fused = None  # int8 rows without their calibration: get() decodes them and numpy scores them
        else:
            a, b = affine if kind == "int8" else (np.empty(0, np.float32), np.empty(0, np.float32))
            self._fused = ({"float32": "f", "float16": "h", "int8": "b", residual.KIND: "r"}[kind], _f32(a), _f32(b))
        self._fd = os.open(self.path, os.O_RDONLY)
        if hasattr(os, "posix_fadvise"):  # no readahead: a cold candidate costs its own page, not the next 32 too
            os.posix_fadvise(self._fd, 0, 0, os.POSIX_FADV_RANDOM)
        self._warm = False  # whether the last query found every row in memory: the next reads from the map
        if _pread is not None and 0 < size <= map_limit and hasattr(mmap.mmap, "madvise"):
            self._map = mmap.mmap(self._fd, 0, access=mmap.ACCESS_READ)
            self._map.madvise(mmap.MADV_RANDOM)  # a page read from the device is that page, not a window around it

    def get(self, rows: np.ndarray) -> np.ndarray:
        """float32 vectors of ``rows`` (any order, repeats allowed), read from the file."""
        rows = np.asarray(rows, dtype=np.int64).reshape(-1)
        uniq, back = by_offset(rows)
        buf = np.empty((len(uniq), self.row_bytes), dtype=np.uint8)
        self._check_read(self._read(uniq, buf))
        return self._decode(buf.view(self.dtype).reshape(len(uniq), self.dim))[back]

    def cosines(self, Q: np.ndarray, rows: np.ndarray, hat: np.ndarray | None = None) -> np.ndarray | None:
        """(queries, candidates) cosines of the unit queries ``Q`` with the copy's vectors at ``rows``
        (one row of candidates per query), each query's rows read and scored in C in one pass, never held as
        float32 vectors. An int8 residual copy needs ``hat``: the queries' inner products with the candidates'
        reconstructions, shaped as ``rows`` (serving.residual). None where that cannot be done (no C extension,
        int8 rows without their calibration, residuals without ``hat``):
        :func:`~embcompress.search.index.float_rerank_scores` then scores :meth:`get`'s vectors."""
        if _pread is None or self._fused is None or (self._fused[0] == "r") != (hat is not None):
            return None
        kind, a, b = self._fused
        out = np.empty(rows.shape, dtype=np.float32)
        for i in range(len(rows)):
            uniq, back = by_offset(rows[i].astype(np.int64, copy=False))
            got = np.empty(len(uniq), dtype=np.float32)
            extra = ()
            if hat is not None:  # each distinct row's (a repeated row's are equal)
                extra = (np.empty(len(uniq), dtype=np.float32),)
                extra[0][back] = hat[i]
            q = _f32(Q[i])
            self._check_read(
                _pread.cosines(self._fd, uniq, self.row_bytes, self.offset, kind, q, a, b, got, self._mapped(), *extra)
            )
            out[i] = got[back]
        return out

    def _mapped(self) -> mmap.mmap | None:
        """The map, where the last query found its rows in memory and the file is still whole (a row past the end
        of a cut file would be a bus error through the map; read, it is a short read)."""
        if self._map is None or not self._warm or os.fstat(self._fd).st_size < self._size:
            return None
        return self._map

    def _check_read(self, got: tuple[int, bool]) -> None:
        """A FormatError when a read met the end of the file at row ``short`` (-1: every row was read); notes
        whether every row was in memory (``not cold``), for the next query's choice of the map."""
        short, cold = got
        self._warm = not cold
        if short >= 0:
            raise FormatError(f"{self.path}: short read at row {short} (the file changed or was truncated)")

    def drop_cache(self) -> bool:
        """Evict the copy from the page cache and this process's map (a cold read next, for measurements);
        False where the platform cannot."""
        self._warm = False
        if self._map is not None:
            self._map.madvise(mmap.MADV_DONTNEED)  # the mapped pages let go: the page cache can drop them
        return drop_cache(self.path)

    def _read(self, uniq: np.ndarray, buf: np.ndarray) -> tuple[int, bool]:
        """Read the sorted, unique rows ``uniq`` into ``buf``, one positioned read per run of neighbouring
        rows (in C without the GIL where the extension is built, from the map where it may): (-1, or the row
        where the file ended; whether any row had to come from the device, where that is known)."""
        if _pread is not None:
            return _pread.read_rows(self._fd, uniq, self.row_bytes, self.offset, buf, self._mapped())
        cut = np.flatnonzero(np.diff(uniq) != 1) + 1
        for s, e in zip(np.r_[0, cut], np.r_[cut, len(uniq)]):
            want = int(e - s) * self.row_bytes
            if (
                os.preadv(self._fd, [memoryview(buf[s:e]).cast("B")], self.offset + int(uniq[s]) * self.row_bytes)
                != want
            ):
                return int(uniq[s]), False
        return -1, False

    def close(self) -> None:
        if self._map is not None:
            self._map.close()
            self._map = None
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


def by_offset(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the distinct ``rows``, sorted: in the file's order; where each of ``rows`` is among them). A first stage's
    candidates are distinct, so a sort is enough (``np.unique``'s stable sort took 0.8 ms of 10,000)."""
    order = np.argsort(rows)
    uniq = rows[order]
    if len(uniq) > 1 and not (uniq[1:] != uniq[:-1]).all():
        return np.unique(rows, return_inverse=True)
    back = np.empty_like(order)
    back[order] = np.arange(len(order))
    return uniq, back


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
