"""The ids of a plan's tiers kept on disk, in a layout a server reads one row at a time.

A server needs the user's ids only for the k results of each query, yet an index read from the codes' parquet
holds every id in memory: ten million short string ids take 113 MiB as one Arrow column, a billion take more than
the 12 B codes beside them. ``apply`` therefore also writes the ids as plain arrays, from which the server reads
only those of the results it returns (:class:`DiskIds`):

* integer ids: ``ids.npy``, one int64 per row;
* string or binary ids: ``ids.offsets.npy`` (int64, rows + 1: where each row's bytes start, then the end) and
  ``ids.bytes`` (the rows' UTF-8 or binary values, one after the other).

Ids of another type, or with nulls, stay in the codes' file only (``tiers.json`` names no ids file), and are
read into memory as before; so do the ids of tiers written before these files were."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from ..core.errors import FormatError

INTS_FILE = "ids.npy"
OFFSETS_FILE = "ids.offsets.npy"
BYTES_FILE = "ids.bytes"


def id_layout(t: pa.DataType) -> str | None:
    """How ids of Arrow type ``t`` are kept on disk: "int64", "string" or "binary"; None where they are not."""
    if pa.types.is_integer(t) and not (pa.types.is_uint64(t)):
        return "int64"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "string"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return "binary"
    return None


def _header(f, dtype, shape: tuple) -> None:
    np.lib.format.write_array_header_2_0(
        f, {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False, "shape": shape}
    )


class IdsWriter:
    """Writes the ids of ``rows`` rows of Arrow type ``t`` into the directory ``tmp`` in row order (see the module);
    gives up, leaving no file, where the type has no layout or a value is null. :meth:`close` returns the tiers'
    description of what it wrote (None where it gave up)."""

    def __init__(self, tmp: Path, t: pa.DataType, rows: int):
        self.tmp, self.rows, self.written, self.layout = Path(tmp), rows, 0, id_layout(t)
        self._files: list = []
        self._end = 0  # bytes of values written so far
        if self.layout == "int64":
            self._files = [open(self.tmp / INTS_FILE, "xb")]
            _header(self._files[0], np.int64, (rows,))
        elif self.layout is not None:
            self._files = [open(self.tmp / OFFSETS_FILE, "xb"), open(self.tmp / BYTES_FILE, "xb")]
            _header(self._files[0], np.int64, (rows + 1,))
            self._files[0].write(np.zeros(1, np.int64).data)

    def write(self, column: pa.Array) -> None:
        if self.layout is None:
            return
        if column.null_count:
            self._give_up()
            return
        if self.layout == "int64":
            self._files[0].write(np.ascontiguousarray(column.to_numpy(zero_copy_only=False), dtype=np.int64).data)
        else:
            if not (pa.types.is_large_string(column.type) or pa.types.is_large_binary(column.type)):
                column = column.cast(pa.large_binary() if self.layout == "binary" else pa.large_string())
            offsets = np.frombuffer(column.buffers()[1], np.int64)[column.offset : column.offset + len(column) + 1]
            lo, hi = int(offsets[0]), int(offsets[-1])
            self._files[1].write(memoryview(column.buffers()[2])[lo:hi] if hi > lo else b"")
            self._files[0].write((offsets[1:] - lo + self._end).data)
            self._end += hi - lo
        self.written += len(column)

    def _give_up(self) -> None:
        self.close(complete=False)
        self.layout = None

    def close(self, *, complete: bool = True) -> dict[str, Any] | None:
        for f in self._files:
            f.close()
            if not complete:
                os.unlink(f.name)
        self._files = []
        if not complete or self.layout is None:
            return None
        if self.written != self.rows:
            raise FormatError(f"the ids file holds {self.written} rows, the input {self.rows}")
        return {"layout": self.layout, "files": [INTS_FILE] if self.layout == "int64" else [OFFSETS_FILE, BYTES_FILE]}


class DiskIds:
    """A tiers directory's ids on disk: ``at(rows)`` reads only those rows' ids, by positioned reads. Not a memory
    map: the pages a map touches (and the ones around them that the kernel maps too) count in the server's
    resident memory and stay there, 152 MiB after 200 queries over ten million string ids in
    ``benchmarks/serving/bench_ids_rss.py``; what a read brings stays in the page cache only."""

    def __init__(self, out_dir: Path, described: dict[str, Any], rows: int):
        self.layout, self._rows, self._fds = described.get("layout"), rows, []
        paths = [Path(out_dir) / name for name in described.get("files", ())]
        what = "the ids file" if len(paths) == 1 else "the ids files"
        try:
            with open(paths[0], "rb") as f:  # the array's header: its shape and type, and where its values start
                fmt = np.lib.format
                read = {(1, 0): fmt.read_array_header_1_0, (2, 0): fmt.read_array_header_2_0}.get(fmt.read_magic(f))
                if read is None:
                    raise ValueError("not an .npy file of version 1 or 2")
                shape, fortran, dtype = read(f)
                self._start = f.tell()
            self._fds = [os.open(p, os.O_RDONLY) for p in paths[: 2 if self.layout in ("string", "binary") else 1]]
            sizes = [os.fstat(fd).st_size for fd in self._fds]
        except (OSError, ValueError, IndexError) as exc:
            self.close()
            raise FormatError(
                f"{out_dir}: {what} are missing or cut ({exc}); write the tiers again with embcompress apply"
            ) from None
        want = (rows,) if self.layout == "int64" else (rows + 1,)
        if self.layout not in ("int64", "string", "binary") or shape != want or dtype != np.int64 or fortran:
            self.close()
            raise FormatError(
                f"{paths[0]} holds {shape} {dtype}; the tiers need {want[0]:,} int64 values for {rows:,} rows"
            )
        if sizes[0] < self._start + 8 * want[0]:
            self.close()
            raise FormatError(f"{out_dir}: {what} are missing or cut; write the tiers again with embcompress apply")
        if self.layout != "int64":
            first, last = self._ints(np.array([0, rows]))
            if first != 0 or last != sizes[1]:
                self.close()
                raise FormatError(
                    f"{paths[1]} holds {sizes[1]:,} bytes, its offsets end at {last:,}; the ids files are cut or do "
                    "not belong together: write the tiers again with embcompress apply"
                )

    def _ints(self, at: np.ndarray, count: int = 1) -> np.ndarray:
        """The ``count`` int64 values from each of the positions ``at`` of the first file, as (len(at), count)."""
        width = 8 * count
        raw = b"".join(os.pread(self._fds[0], width, self._start + 8 * int(i)) for i in at)
        if len(raw) != width * len(at):
            raise FormatError("the ids file was cut while served; write the tiers again with embcompress apply")
        return np.frombuffer(raw, np.int64).reshape(len(at), count) if count > 1 else np.frombuffer(raw, np.int64)

    def __len__(self) -> int:
        return self._rows

    def at(self, rows: np.ndarray) -> np.ndarray:
        """The ids of ``rows`` (any shape) as an object array of that shape."""
        flat = np.asarray(rows, dtype=np.int64).reshape(-1)
        if flat.size and (flat.min() < 0 or flat.max() >= self._rows):
            raise IndexError(f"rows out of range for {self._rows:,} ids")
        out = np.empty(flat.shape, dtype=object)
        if self.layout == "int64":
            out[:] = self._ints(flat).tolist()
        else:
            spans = self._ints(flat, 2).tolist()
            values = [os.pread(self._fds[1], b - a, a) if b > a else b"" for a, b in spans]
            out[:] = [v.decode() for v in values] if self.layout == "string" else values
        return out.reshape(np.shape(rows))

    def to_arrow(self) -> pa.Array:
        """Every id as one Arrow column (reads them all): int64, large_string or large_binary."""
        n = self._rows + (self.layout != "int64")
        ints = np.frombuffer(os.pread(self._fds[0], 8 * n, self._start), np.int64)
        if len(ints) != n:
            raise FormatError("the ids file was cut while served; write the tiers again with embcompress apply")
        if self.layout == "int64":
            return pa.array(ints)
        data = os.pread(self._fds[1], int(ints[-1]), 0)
        kind = pa.large_string() if self.layout == "string" else pa.large_binary()
        out = pa.Array.from_buffers(kind, self._rows, [None, pa.py_buffer(ints), pa.py_buffer(data)])
        out.validate(full=True)
        return out

    def close(self) -> None:
        for fd in self._fds:
            os.close(fd)
        self._fds = []

    def __del__(self):
        self.close()


__all__ = ["DiskIds", "IdsWriter", "id_layout"]
