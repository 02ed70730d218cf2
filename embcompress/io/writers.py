"""Writers for compressed vector files, atomic: output goes to a temporary name in the target
directory and is renamed into place only when everything was written. A failure leaves nothing
behind, and an existing file is never replaced unless ``overwrite=True``."""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..core._parallel import reader_threads
from .._version import __version__
from ..core._fs import commit_file, storage_error, sweep_stale, temp_name, writable
from ..core.specs import OutputSpec
from ..core.errors import EmbcompressError, InputError, OutputExistsError
from . import page_encoder, thrift
from .columns import NUMPY_DTYPES, column_to_numpy, values_view
from .schema import PAGE_OFFSETS, ColumnChunk, ColumnMetaData, FileMetaData, RowGroup, unknown_fields
from .readers import META_KEY, SIDECAR_SUFFIX, file_format

#: about this many bytes of codes (plus carried columns) per parquet row group
ROW_GROUP_BYTES = 64 << 20
MAX_GROUP_ROWS = 1 << 20


def group_rows(spec: OutputSpec, carried_columns: int) -> int:
    """Rows per output row group, from the output's width alone (16 bytes counted per carried
    column), so that row groups, and the file's bytes, do not depend on how the input was cut
    into batches, by threads, shards or another engine."""
    row_bytes = spec.nbytes + 16 * carried_columns
    return int(min(MAX_GROUP_ROWS, max(1024, ROW_GROUP_BYTES // max(row_bytes, 1))))


def arrow_type(spec: OutputSpec) -> pa.DataType:
    if spec.packed:
        return pa.binary(spec.nbytes)
    if spec.kind == "int8":
        return pa.list_(pa.int8(), spec.width)
    return pa.list_(pa.float32(), spec.width)


def to_arrow(values: np.ndarray, spec: OutputSpec) -> pa.Array:
    """Codes or vectors -> the arrow array of :func:`arrow_type` (no copy for contiguous input)."""
    values = np.ascontiguousarray(values)
    n = len(values)
    if spec.packed:
        return pa.FixedSizeBinaryArray.from_buffers(pa.binary(spec.nbytes), n, [None, pa.py_buffer(values)])
    # from the buffer, not pa.array(): that imports pandas when it is installed (0.4 s of a
    # streaming command, holding the GIL)
    flat = pa.Array.from_buffers(arrow_type(spec).value_type, values.size, [None, pa.py_buffer(values)])
    return pa.FixedSizeListArray.from_arrays(flat, spec.width)


class PageWriter:
    """A parquet writer for a table whose last column holds the codes, a list of int8 or float32
    or packed codes (fixed_size_binary): that column's chunks are encoded by
    :func:`.page_encoder.encode_chunk` (pyarrow's nested writer encodes list columns at about 65
    MB/s, a level for every value, and compresses every column's pages on one thread when a row
    group is written: 0.14 s of binarize's 1 GB, after the reading), the other columns of each row group
    by pyarrow in memory and spliced in, and the footer is pyarrow's own footer for the schema
    (types, the Arrow schema, the metadata) with the row groups put in. Same interface as the part
    of ``pq.ParquetWriter`` that :class:`VectorWriter` uses; pyarrow reads the files back as it
    reads its own (tested)."""

    def __init__(
        self, path, schema: pa.Schema, *, compression: str | None, codes_compression: str | None, threads: int = 1
    ):
        self.schema, self.compression = schema, compression  # the carried columns' codec
        self.codes_compression = codes_compression  # the list column's
        self.threads = threads  # that compress the codes column's pages
        self.is_open = False
        template = _parquet_bytes(pa.Table.from_batches([], schema=schema), compression)  # (empty_table imports pandas)
        pf = pq.ParquetFile(pa.BufferReader(template))
        leaf = pf.schema.column(len(pf.schema) - 1)
        self._path, self._max_def = leaf.path.split("."), int(leaf.max_definition_level)
        self._footer = _footer(template)
        thrift.put(
            self._footer,
            FileMetaData.CREATED_BY,
            thrift.BINARY,
            f"embcompress version {__version__} (list codes; other columns by "
            f"parquet-cpp-arrow version {pa.__version__})".encode(),
        )
        self._row_groups: list = []
        self._rows = 0
        self._f = open(path, "wb")
        self.is_open = True
        self._f.write(b"PAR1")
        self._pos = 4

    def write_table(self, table: pa.Table, row_group_size: int | None = None) -> None:
        chunks, start = [], self._pos
        if table.num_columns > 1:  # the carried columns, by pyarrow, moved to this place in the file
            buf = _parquet_bytes(table.select(range(table.num_columns - 1)), self.compression)
            group = thrift.get(_footer(buf), FileMetaData.ROW_GROUPS).value.items[0]
            for cc in thrift.get(group, RowGroup.COLUMNS).value.items:
                chunks.append(self._moved_chunk(cc, buf))
        column = table.column(table.num_columns - 1)
        if pa.types.is_fixed_size_binary(column.type):  # packed codes: a row's bytes, uint8
            width, values = column.type.byte_width, np.dtype(np.uint8)
            blocks = [column_to_numpy(c, width) for c in column.chunks]
        else:
            width, values = column.type.list_size, NUMPY_DTYPES[column.type.value_type]
            blocks = [
                values_view(c.flatten()).reshape(len(c), width) for c in column.chunks
            ]  # no copy: one view per chunk
        blocks = blocks or [np.empty((0, width), dtype=values)]
        parts, meta = page_encoder.encode_chunk(
            blocks,
            self._pos,
            max_def=self._max_def,
            path=self._path,
            codec=self.codes_compression,
            threads=self.threads,
        )
        for part in parts:
            self._put(part)
        chunks.append(
            [
                thrift.Field(ColumnChunk.FILE_OFFSET, thrift.I64, 0),
                thrift.Field(ColumnChunk.META_DATA, thrift.STRUCT, meta),
            ]
        )
        metas = [thrift.get(cc, ColumnChunk.META_DATA).value for cc in chunks]
        self._row_groups.append(
            [
                thrift.Field(RowGroup.COLUMNS, thrift.LIST, thrift.List(thrift.STRUCT, chunks)),
                thrift.Field(
                    RowGroup.TOTAL_BYTE_SIZE,
                    thrift.I64,
                    sum(thrift.get(m, ColumnMetaData.TOTAL_UNCOMPRESSED_SIZE).value for m in metas),
                ),
                thrift.Field(RowGroup.NUM_ROWS, thrift.I64, table.num_rows),
                thrift.Field(RowGroup.FILE_OFFSET, thrift.I64, start),
                thrift.Field(
                    RowGroup.TOTAL_COMPRESSED_SIZE,
                    thrift.I64,
                    sum(thrift.get(m, ColumnMetaData.TOTAL_COMPRESSED_SIZE).value for m in metas),
                ),
            ]
        )
        if len(self._row_groups) <= 32767:  # the ordinal is an i16 (optional)
            self._row_groups[-1].append(thrift.Field(RowGroup.ORDINAL, thrift.I16, len(self._row_groups) - 1))
        self._rows += table.num_rows

    def _moved_chunk(self, cc: list, buf: bytes) -> list:
        """A ColumnChunk of pyarrow's bytes ``buf``, its pages written here and its offsets moved
        to where they now are. A field the rewrite does not know is refused (it might hold an
        offset that would then point to the wrong bytes)."""
        meta = thrift.get(cc, ColumnChunk.META_DATA).value
        unknown = [f"ColumnChunk field {i}" for i in unknown_fields(ColumnChunk, cc)] + [
            f"ColumnMetaData field {i}" for i in unknown_fields(ColumnMetaData, meta)
        ]
        if unknown:
            raise ValueError(
                f"pyarrow {pa.__version__} wrote {', '.join(unknown)} in a carried column, which the "
                "footer rewrite does not know; update embcompress/io/schema.py's REWRITE_KNOWS"
            )
        lo = min(
            f.value
            for f in meta
            if f.fid in (ColumnMetaData.DATA_PAGE_OFFSET, ColumnMetaData.DICTIONARY_PAGE_OFFSET) and f.value
        )
        length = thrift.get(meta, ColumnMetaData.TOTAL_COMPRESSED_SIZE).value
        for f in meta:
            if f.fid in PAGE_OFFSETS and f.value:
                f.value += self._pos - lo
        f0 = thrift.get(cc, ColumnChunk.FILE_OFFSET)
        if f0 is not None and f0.value:
            f0.value += self._pos - lo
        self._put(buf[lo : lo + length])
        return cc

    def _put(self, data) -> None:
        """Write bytes or bytes-like memory (a page's values) at the end of the file."""
        self._f.write(data)
        self._pos += memoryview(data).nbytes

    def close(self) -> None:
        if not self.is_open:
            return
        self.is_open = False
        try:
            thrift.put(self._footer, FileMetaData.NUM_ROWS, thrift.I64, self._rows)
            thrift.put(self._footer, FileMetaData.ROW_GROUPS, thrift.LIST, thrift.List(thrift.STRUCT, self._row_groups))
            footer = thrift.write_struct(self._footer)
            self._f.write(footer + struct.pack("<I", len(footer)) + b"PAR1")
        finally:
            self._f.close()


def _parquet_bytes(table: pa.Table, compression: str | None) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(
        table, sink, compression=compression or "none", write_page_checksum=True, row_group_size=max(table.num_rows, 1)
    )
    return sink.getvalue().to_pybytes()


def _footer(data: bytes) -> list:
    """The FileMetaData of a parquet file's bytes, as typed Thrift fields."""
    (length,) = struct.unpack_from("<I", data, len(data) - 8)
    fields, _ = thrift.read_struct(data[len(data) - 8 - length : len(data) - 8], 0)
    return fields


def check_output_path(path: str | os.PathLike, *, overwrite: bool, inputs: tuple = ()) -> Path:
    """Fail before any work if ``path`` cannot be (over)written."""
    path = Path(path)
    for src in inputs:
        if Path(src).exists() and path.exists() and path.resolve() == Path(src).resolve():
            raise InputError(f"output {path} is the same file as the input; write to another path")
    if path.exists() and not overwrite:
        raise OutputExistsError(f"{path} already exists; pass --overwrite (overwrite=True) to replace it")
    if path.is_dir():
        raise InputError(f"output {path} is a directory; give a file name ending in .parquet or .npy")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise InputError(f"cannot write {path}: directory {parent} does not exist")
    if not writable(parent):
        raise InputError(f"cannot write {path}: directory {parent} is not writable")
    return path


class VectorWriter:
    """Write batches of codes (plus carried columns) to parquet or npy, then rename into place.

    Use as a context manager; the file appears only if the ``with`` block ends without an error.
    """

    def __init__(
        self,
        path: str | os.PathLike,
        spec: OutputSpec,
        *,
        column: str = "embedding",
        carried_schema: pa.Schema | None = None,
        metadata: dict[str, Any] | None = None,
        num_rows: int | None = None,
        overwrite: bool = False,
        threads: int | None = None,
    ):
        self.path = check_output_path(path, overwrite=overwrite)
        self.format = file_format(self.path)
        self.spec = spec
        self.column = column
        self.metadata = metadata or {}
        self.overwrite = overwrite
        sweep_stale(self.path)
        self.tmp = temp_name(self.path)
        self.rows = 0
        self._pending: list[pa.RecordBatch] = []
        self._pending_rows = 0
        self._group_rows = group_rows(spec, len(carried_schema) if carried_schema is not None else 0)
        self._writer = None
        self._mm = None
        try:
            if self.format == "npy":
                if num_rows is None:
                    raise InputError("writing .npy needs the row count up front")
                self._mm = np.lib.format.open_memmap(
                    self.tmp, mode="w+", dtype=np.dtype(spec.dtype), shape=(num_rows, spec.row_width)
                )
                self._expected = num_rows
                reserve(self.tmp)
            else:
                fields = list(carried_schema) if carried_schema is not None else []
                fields.append(pa.field(column, arrow_type(spec), nullable=False))
                schema = pa.schema(fields, metadata={META_KEY: json.dumps(self.metadata, sort_keys=True).encode()})
                self.schema = schema
                # float vectors are written uncompressed: snappy left embeddings' float32 at 1.000 of
                # their size (MiniLM's and random ones) and spent up to 0.2 s per 256 MB of the
                # writer's one thread for nothing; codes (bits, bytes, int8) compress with zstd
                carried = "zstd" if spec.kind != "float" else "snappy"  # ids and kept columns, as before
                codes = "zstd" if spec.kind != "float" else None
                self._writer = PageWriter(
                    self.tmp, schema, compression=carried, codes_compression=codes, threads=reader_threads(threads)
                )
        except BaseException as exc:
            self._discard()
            if isinstance(exc, OSError) and not isinstance(exc, EmbcompressError):
                raise storage_error(exc, self.path) from None
            raise

    def write(self, codes: np.ndarray, carried: pa.RecordBatch | None = None) -> None:
        try:
            self._write(codes, carried)
        except OSError as exc:
            if isinstance(exc, EmbcompressError):
                raise
            raise storage_error(exc, self.path) from None

    def _write(self, codes: np.ndarray, carried: pa.RecordBatch | None) -> None:
        n = len(codes)
        if self._mm is not None:
            self._mm[self.rows : self.rows + n] = codes
        else:
            arrays = list(carried.columns) if carried is not None else []
            arrays.append(to_arrow(codes, self.spec))
            rb = pa.RecordBatch.from_arrays(arrays, schema=self.schema)
            # every write_table call makes at least one row group: gather small batches first
            self._pending.append(rb)
            self._pending_rows += n
            while self._pending_rows >= self._group_rows:
                self._flush(self._group_rows)
        self.rows += n

    def _flush(self, rows: int | None = None) -> None:
        """Write the first ``rows`` pending rows (all when None) as one row group."""
        if not self._pending:
            return
        table = pa.Table.from_batches(self._pending, schema=self.schema)
        rows = table.num_rows if rows is None else rows
        self._writer.write_table(table.slice(0, rows), row_group_size=rows)
        rest = table.slice(rows)
        self._pending = rest.to_batches() if rest.num_rows else []
        self._pending_rows = rest.num_rows

    def __enter__(self) -> "VectorWriter":
        return self

    def _discard(self) -> None:
        """Close whatever is open and remove the temporary file (after any failure)."""
        try:
            if self._writer is not None:
                self._writer.close()
        except Exception:  # the failure being reported matters more than this one
            self._writer.is_open = False  # or pyarrow tries to close it again when collected
        self._writer = None
        self._mm = None
        self.tmp.unlink(missing_ok=True)

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            self._discard()
            return
        try:
            if self._writer is not None:
                self._flush()
                self._writer.close()
                self._writer = None
            if self._mm is not None:
                self._mm.flush()
                self._mm = None
            if self.format == "npy" and self.rows != self._expected:
                raise InputError(f"wrote {self.rows} rows but {self._expected} were announced")
            commit_file(self.tmp, self.path, overwrite=self.overwrite)
            if self.format == "npy":
                Path(str(self.path) + SIDECAR_SUFFIX).write_text(
                    json.dumps(self.metadata, indent=2, sort_keys=True) + "\n"
                )
        except BaseException as err:
            self._discard()
            if isinstance(err, OSError) and not isinstance(err, EmbcompressError):
                raise storage_error(err, self.path) from None
            raise


def reserve(path: Path) -> None:
    """Allocate a freshly created (sparse) file's blocks for real, so that a full disk is an
    error now, not a SIGBUS when a memory-mapped write reaches a hole later."""
    if not hasattr(os, "posix_fallocate"):  # not on this platform: writes find out later
        return
    size = path.stat().st_size
    if size:
        fd = os.open(path, os.O_RDWR)
        try:
            os.posix_fallocate(fd, 0, size)
        finally:
            os.close(fd)
