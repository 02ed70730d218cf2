"""Streaming readers for vector files: parquet (an embedding column plus ids and other columns),
``.npy`` (memory-mapped), and datasets of either (a directory, Hive partitions included, or a glob).

Readers yield :class:`Batch` objects: a float32 ``(rows, dim)`` array, the carried columns of the
same rows, and the row offset of the batch in the file. A ``list`` or ``fixed_size_list`` of
float32 is the fast path: :mod:`.pages` decodes its pages directly (a decompression and a copy per
page), and pyarrow takes over for every other layout and wherever a page surprises the fast path.
float16/float64 are accepted; nulls, ragged rows and NaN/inf are errors that name the row.
"""

from __future__ import annotations

import functools
import glob as globlib
import json
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .._parallel import ordered_units, prefetch, reader_threads
from .._util import sample_rows
from ..base import check_values
from ..errors import FormatError, InputError
from . import pages

META_KEY = b"embcompress"
FLOAT_TYPES = (pa.float16(), pa.float32(), pa.float64())
DEFAULT_COLUMN_NAMES = ("embedding", "embeddings", "vector", "vectors", "emb")
DEFAULT_ID_NAMES = ("id", "_id", "doc_id", "corpus_id", "query_id")
SIDECAR_SUFFIX = ".embcompress.json"
READ_BUFFER_BYTES = 4 << 20
#: target bytes of float values per batch: measured on pyarrow 26 with 1024-d float32, small
#: batches read fastest and keep peak memory low (the list reader over-allocates per batch)
BATCH_TARGET_BYTES = 4 << 20
#: results of row groups decoded ahead of the consumer, at most (the parallel reader's look-ahead)
READ_MEMORY_BYTES = 512 << 20
#: row groups of more float bytes than this are split among the workers in spans of about
#: SPAN_BYTES of values (where the direct page decoder reads them: pyarrow cannot start mid-group)
SPLIT_BYTES = 256 << 20
SPAN_BYTES = 64 << 20
_INDEX_LOCK = threading.Lock()


def auto_batch_size(row_bytes: int) -> int:
    """Rows per batch for rows of ``row_bytes`` bytes: about 4 MiB of values, 256..65536 rows."""
    return int(min(65536, max(256, BATCH_TARGET_BYTES // max(row_bytes, 1))))


@dataclass
class Batch:
    vectors: np.ndarray  # (rows, dim) float32, or the raw codes for code columns
    carried: pa.RecordBatch | None  # the id column and any kept columns, same rows
    offset: int  # index of the first row in the file (in the dataset, for a shard of one)
    shard: int = 0  # which shard of a dataset the rows come from


def _is_list(t: pa.DataType) -> bool:
    return pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)


def is_vector_type(t: pa.DataType) -> bool:
    return _is_list(t) and t.value_type in FLOAT_TYPES


def is_code_type(t: pa.DataType) -> bool:
    """Columns written by compressors: packed bits, or int8 lists."""
    return pa.types.is_fixed_size_binary(t) or (_is_list(t) and t.value_type == pa.int8())


def file_format(path: str | os.PathLike) -> str:
    suffix = Path(path).suffix.lower()
    if suffix in (".parquet", ".pq"):
        return "parquet"
    if suffix == ".npy":
        return "npy"
    raise InputError(f"{path}: unknown file type {suffix or '(no suffix)'!r}; use .parquet (or .pq) or .npy")


def open_vectors(
    path: str | os.PathLike,
    *,
    column: str | None = None,
    id_column: str | None = None,
    keep_columns: Sequence[str] = (),
    codes: bool | None = False,
) -> "ParquetVectors | NpyVectors":
    """Open a vector file for streaming. ``codes=True`` reads compressed code columns (packed
    bits or int8) instead of float embeddings; ``codes=None`` accepts either."""
    if is_dataset(path):
        return DatasetVectors(path, column=column, id_column=id_column, keep_columns=keep_columns, codes=codes)
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path} does not exist")
    if path.is_dir():
        raise InputError(f"{path} is a saved compressor, not vectors; expected a .parquet or .npy file or a dataset directory")
    fmt = file_format(path)
    if fmt == "npy":
        if column or id_column or keep_columns:
            raise InputError(f"{path} is .npy: it has no named columns (drop --column/--id-column/--keep)")
        return NpyVectors(path, codes=codes)
    return ParquetVectors(path, column=column, id_column=id_column, keep_columns=keep_columns, codes=codes)


class Streamed:
    """What every reader shares: :meth:`batches` runs the reader's :meth:`units` of work."""

    def batches(self, batch_size: int | None = None, *, threads: int | None = None, max_rows: int | None = None,
                transform: Transform | None = None, result_row_bytes: int | None = None) -> Iterator[Batch]:
        """The rows in order, in batches of ``batch_size`` rows (batches never span row
        groups, so every reading path cuts the same batches). ``max_rows``: decode only the row
        groups that hold the first ``max_rows`` rows. ``transform(vectors, offset)``, when given,
        replaces each batch's vectors, runs where the batch was decoded, and must refuse
        non-finite values itself (``Compressor.transform`` does; the reader then skips its own
        check, one pass less over the data).

        With ``threads`` > 1 (None: every core) and several units of work (row groups, or spans
        of large row groups where the direct page decoder applies; see :meth:`units`), units are
        decoded (and transformed) on that many worker threads and delivered in order; at most
        :data:`READ_MEMORY_BYTES` of results (``result_row_bytes`` per row; default: the input's
        float32 width) wait ahead of the consumer. A single unit, or units too big for that
        budget, are read by a single reader two batches ahead of the consumer."""
        units, unit_bytes = self.units(batch_size, max_rows=max_rows, transform=transform, result_row_bytes=result_row_bytes)
        yield from run_units(units, threads=threads, unit_bytes=unit_bytes)


class ParquetVectors(Streamed):
    """A parquet file with one embedding column, read in record batches."""

    def __init__(self, path: Path, *, column=None, id_column=None, keep_columns=(), codes=False):
        self.path = Path(path)
        try:
            # buffered column reads: without buffer_size, pyarrow loads a whole column chunk (a
            # whole row group, gigabytes in some dumps) before yielding the first batch
            self._pf = pq.ParquetFile(self.path, pre_buffer=False, buffer_size=READ_BUFFER_BYTES,
                                                 page_checksum_verification=True)
            schema = self._pf.schema_arrow
        except (pa.ArrowException, OSError, ValueError) as exc:  # ValueError: names that are not UTF-8
            raise FormatError(f"{self.path} is not a readable parquet file ({_first_line(exc)})") from None
        self.schema = schema
        self.num_rows = self._pf.metadata.num_rows
        meta = schema.metadata or {}
        self.metadata: dict[str, Any] | None = None
        if META_KEY in meta:
            try:
                self.metadata = json.loads(meta[META_KEY])
            except ValueError:
                self.metadata = None
        if codes is None:  # either kind
            accept = lambda t: is_vector_type(t) or is_code_type(t)  # noqa: E731
            wanted = "float vectors or compressed codes"
        elif codes:
            accept, wanted = is_code_type, "a packed-bit (fixed_size_binary) or int8 list column"
        else:
            accept, wanted = is_vector_type, "a list or fixed_size_list of float16/float32/float64"
        names = schema.names
        if column is None:
            column = self._guess_column(accept, wanted)
        elif column not in names:
            raise InputError(f"{self.path} has no column {column!r}; its columns are: {', '.join(names)}")
        t = schema.field(column).type
        if not accept(t):
            hint = ""
            if not codes and is_code_type(t):
                hint = " (this file holds compressed codes, not float embeddings)"
            raise InputError(f"column {column!r} in {self.path} has type {t}; expected {wanted}{hint}")
        self.column = column
        self.type = t
        if id_column is None:
            id_column = next((n for n in DEFAULT_ID_NAMES if n in names and n != column), None)
        elif id_column not in names:
            raise InputError(f"{self.path} has no id column {id_column!r}; its columns are: {', '.join(names)}")
        if id_column is not None and id_column == column:
            raise InputError(f"the id column cannot be the embedding column {column!r} of {self.path}; "
                             f"pick another with --id-column (columns: {', '.join(names)})")
        if column in keep_columns:
            raise InputError(f"--keep {column!r} names the embedding column of {self.path}, which becomes the codes; "
                             "keep other columns only")
        self.id_column = id_column
        missing = [c for c in keep_columns if c not in names]
        if missing:
            raise InputError(f"{self.path} has no column(s) {', '.join(map(repr, missing))}; its columns are: {', '.join(names)}")
        carried = [id_column] if id_column else []
        carried += [c for c in keep_columns if c not in carried and c != column]
        self.carried_columns = carried
        self.dim = self._find_dim()
        # the direct decoder of float32 list columns (io.pages), where it applies
        self._direct = pages.find_column(self._pf, column) if is_vector_type(t) and t.value_type == pa.float32() else None

    def _guess_column(self, accept, wanted: str) -> str:
        candidates = [f.name for f in self.schema if accept(f.type)]
        if len(candidates) == 1:
            return candidates[0]
        if not candidates:
            cols = ", ".join(f"{f.name} ({f.type})" for f in self.schema)
            raise InputError(f"{self.path} has no column of {wanted}; its columns are: {cols}")
        for name in DEFAULT_COLUMN_NAMES:
            if name in candidates:
                return name
        raise InputError(f"{self.path} has several embedding columns ({', '.join(candidates)}); pick one with --column")

    def _find_dim(self) -> int:
        t = self.type
        if pa.types.is_fixed_size_binary(t):
            return t.byte_width
        if pa.types.is_fixed_size_list(t):
            return t.list_size
        if self.num_rows == 0:
            return 0
        try:
            first = next(self._pf.iter_batches(batch_size=1, columns=[self.column]))
        except (pa.ArrowException, OSError, StopIteration) as exc:
            raise FormatError(f"{self.path} is corrupt or truncated in row group 0 near row 0: "
                              f"{_first_line(exc)}") from None
        value = first.column(0)[0]
        if not value.is_valid:
            raise InputError(f"column {self.column!r} row 0 is null; every row needs a vector")
        return len(value)

    @property
    def nbytes_per_row(self) -> int:
        t = self.type
        if pa.types.is_fixed_size_binary(t):
            return t.byte_width
        return self.dim * t.value_type.bit_width // 8

    @property
    def num_row_groups(self) -> int:
        return self._pf.num_row_groups

    def group_starts(self) -> np.ndarray:
        md = self._pf.metadata
        try:
            sizes = [md.row_group(g).num_rows for g in range(md.num_row_groups)]
        except (pa.ArrowException, OSError) as exc:
            raise FormatError(f"{self.path} has corrupt row group metadata: {_first_line(exc)}") from None
        return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)

    def units(self, batch_size: int | None = None, *, max_rows: int | None = None, transform: Transform | None = None,
              result_row_bytes: int | None = None, base: int = 0, shard: int = 0) -> tuple[list, int]:
        """The units of parallel work and the largest one's result bytes; rows are numbered from
        ``base`` and batches tagged with ``shard`` (for datasets). A unit is a row group, or,
        where the direct page decoder reads a row group of more than :data:`SPLIT_BYTES`, a span
        of whole batches of it (about :data:`SPAN_BYTES` of values), so that even a file of one
        huge row group is decoded on every worker."""
        batch_size = batch_rows(batch_size, self.nbytes_per_row)
        starts = self.group_starts()
        units, largest = [], 0
        for g in range(len(starts) - 1):
            spans = self.group_spans(int(starts[g + 1] - starts[g]), batch_size)
            for r0, r1 in spans:
                if max_rows is not None and starts[g] + r0 >= max_rows:
                    break
                units.append(functools.partial(self._read_group, g=g, start=base + int(starts[g]), batch_size=batch_size,
                                               transform=transform, shard=shard, rows=None if len(spans) == 1 else (r0, r1)))
                largest = max(largest, r1 - r0)
        row_bytes = (result_row_bytes or 4 * self.dim) + 16 * len(self.carried_columns)
        return units, largest * row_bytes

    def group_spans(self, n: int, multiple: int = 1) -> list[tuple[int, int]]:
        """How a row group of ``n`` rows is cut into units of work: ``[(0, n)]``, or where the
        direct page decoder reads a row group of more than :data:`SPLIT_BYTES`, spans of about
        :data:`SPAN_BYTES` of values, each a whole number of ``multiple`` rows (batches)."""
        span = n
        if self._direct is not None and n * self.nbytes_per_row > SPLIT_BYTES:
            span = max(1, SPAN_BYTES // (self.nbytes_per_row * multiple)) * multiple
        return [(r0, min(r0 + span, n)) for r0 in range(0, max(n, 1), max(span, 1))]

    def read_direct(self, pf, g: int, rows: tuple[int, int]) -> np.ndarray | None:
        """Rows ``rows`` of row group ``g`` as one float32 array through the direct page decoder
        (from the page that holds the first of them), or None where pyarrow must read them."""
        if self._direct is None:
            return None
        whole = rows == (0, pf.metadata.row_group(g).num_rows)
        index = None if whole else self._page_index(pf, g)
        if not whole and index is None:
            return None
        return pages.read_group(self.path, pf.metadata, g, self._direct, self.dim, rows=None if whole else rows, index=index)

    def _read_group(self, local: dict, *, g: int, start: int, batch_size: int, transform, shard: int = 0,
                    rows: tuple[int, int] | None = None) -> Iterator[Batch]:
        """Row group ``g`` (rows ``rows`` of it, when given), whose first row is row ``start``."""
        pf = local.get(self.path)
        if pf is None:  # one file handle per worker thread
            pf = local[self.path] = pq.ParquetFile(self.path, pre_buffer=False, buffer_size=READ_BUFFER_BYTES,
                                                 page_checksum_verification=True)
        first, stop = rows or (0, pf.metadata.row_group(g).num_rows)
        offset = start + first
        try:
            done = 0  # batches delivered by the direct decoder
            index = self._page_index(pf, g) if rows is not None and self._direct is not None else None
            if self._direct is not None and (rows is None or index is not None):
                for n, batch in self._read_group_direct(pf, g, offset, batch_size, transform, shard, rows, index):
                    yield batch
                    offset += n  # rows (the batch may hold a transform's result of another length)
                    done += 1
                if offset == start + stop:
                    return
            yield from self._read_group_arrow(pf, g, offset, batch_size, transform, shard, skip=first // batch_size + done,
                                              end=start + stop)
        except InputError as exc:
            raise InputError(f"{self.path}, row group {g}: {exc}") from None

    def _page_index(self, pf, g: int) -> pages.PageIndex | None:
        """Where row group ``g``'s pages start (scanned once, shared by the workers), or None
        where the direct decoder does not apply."""
        with _INDEX_LOCK:
            cache = self.__dict__.setdefault("_page_indexes", {})
            if g not in cache:
                try:
                    with open(self.path, "rb", buffering=0) as f:
                        cache[g] = pages.scan_pages(f.fileno(), pf.metadata, g, self._direct, self.dim)
                except (pages.Unsupported, OSError):
                    cache[g] = None
            return cache[g]

    def _read_group_direct(self, pf, g: int, offset: int, batch_size: int, transform, shard: int,
                           rows: tuple[int, int] | None, index) -> Iterator[tuple[int, Batch]]:
        """(rows, batch) of row group ``g`` (or of its ``rows``) through :mod:`.pages`, until it is
        done or hands over to pyarrow (then this stops early and the caller goes on from the next
        batch)."""
        with open(self.path, "rb", buffering=0) as f:  # closed when the row group is done or abandoned
            vectors_it = pages.decode_group(f.fileno(), pf.metadata, g, self._direct, self.dim, batch_size,
                                            rows=rows, index=index)
            carried = None
            if self.carried_columns:
                carried = pf.iter_batches(batch_size=batch_size, row_groups=[g], columns=self.carried_columns,
                                          use_threads=False)
                for _ in range((rows or (0, 0))[0] // batch_size):  # the batches before the span
                    next(carried, None)
            while True:
                try:
                    vectors = next(vectors_it)
                except StopIteration:
                    return
                except (pages.Unsupported, OSError):  # pyarrow decodes it, or names the problem
                    return
                rb = None
                if carried is not None:
                    try:
                        rb = next(carried)
                    except (StopIteration, pa.ArrowException, OSError):
                        return
                    if rb.num_rows != len(vectors):
                        return
                n = len(vectors)
                if transform is None:
                    check_values(vectors, what=f"column {self.column!r}", row_offset=offset)
                else:
                    vectors = transform(vectors, offset)
                yield n, Batch(vectors, rb, offset, shard)
                offset += n

    def _read_group_arrow(self, pf, g: int, offset: int, batch_size: int, transform, shard: int, *,
                          skip: int = 0, end: int | None = None) -> Iterator[Batch]:
        """Row group ``g`` through pyarrow, from its batch ``skip`` (the earlier ones were
        delivered already), up to the row numbered ``end``."""
        columns = [self.column, *self.carried_columns]
        it = pf.iter_batches(batch_size=batch_size, row_groups=[g], columns=columns, use_threads=False)
        while end is None or offset < end:
            try:
                rb = next(it)
            except StopIteration:
                return
            except (pa.ArrowException, OSError) as exc:
                raise FormatError(f"{self.path} is corrupt or truncated in row group {g} near row {offset}: "
                                  f"{_first_line(exc)}") from None
            if skip:  # delivered already
                skip -= 1
                continue
            vectors = column_to_numpy(rb.column(0), self.dim, offset=offset, column=self.column,
                                      finite=transform is None)
            if transform is not None:
                vectors = transform(vectors, offset)
            yield Batch(vectors, rb.select(self.carried_columns) if self.carried_columns else None, offset, shard)
            offset += rb.num_rows


Transform = Callable[[np.ndarray, int], np.ndarray]  # (vectors, row offset) -> codes


def run_units(units: Sequence[Callable[[dict], Iterator[Batch]]], *, threads: int | None, unit_bytes: int,
              ) -> Iterator[Batch]:
    """Every unit's batches in order: on worker threads when there are several units and the
    look-ahead (two units per worker) fits :data:`READ_MEMORY_BYTES`; else one unit after the
    other on a single worker thread that stays two batches ahead of the consumer."""
    threads = reader_threads(threads)
    window = min(2 * threads, READ_MEMORY_BYTES // max(unit_bytes, 1))
    if threads > 1 and len(units) > 1 and window >= 2:
        yield from ordered_units(units, threads=threads, window=window)
        return
    local: dict = {}
    yield from prefetch(b for unit in units for b in unit(local))


def column_to_numpy(arr: pa.Array, dim: int, *, offset: int = 0, column: str = "embedding",
                    finite: bool = True) -> np.ndarray:
    """A list / fixed_size_list / fixed_size_binary arrow array -> 2-D numpy array (float32 for
    float lists, raw dtype for codes), refusing nulls, ragged rows and (unless ``finite`` is
    False) non-finite values."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if arr.null_count:
        row = int(np.flatnonzero(arr.is_null().to_numpy(zero_copy_only=False))[0]) + offset
        raise InputError(f"column {column!r} row {row} is null; every row needs a vector")
    t = arr.type
    n = len(arr)
    if pa.types.is_fixed_size_binary(t):
        buf = arr.buffers()[1]
        data = np.frombuffer(buf, dtype=np.uint8, count=(arr.offset + n) * t.byte_width)
        return data[arr.offset * t.byte_width :].reshape(n, t.byte_width)
    if not pa.types.is_fixed_size_list(t):
        lengths = pc.list_value_length(arr).to_numpy(zero_copy_only=False)
        bad = np.flatnonzero(lengths != dim)
        if len(bad):
            row = int(bad[0])
            raise InputError(
                f"column {column!r} row {row + offset} has {lengths[row]} values, expected {dim} "
                f"(as in row 0); rows of different lengths cannot be compressed together"
            )
    values = arr.flatten()
    if values.null_count:
        pos = int(np.flatnonzero(values.is_null().to_numpy(zero_copy_only=False))[0])
        raise InputError(f"column {column!r} row {pos // dim + offset} has a null value at dimension {pos % dim}")
    flat = values.to_numpy(zero_copy_only=False)
    X = flat.reshape(n, dim)
    if X.dtype.kind == "f":
        if X.dtype == np.float64:  # before the cast (even for a transform): 1e300 is out of range, not inf
            check_values(X, what=f"column {column!r}", row_offset=offset)
        if X.dtype != np.float32:
            X = X.astype(np.float32)
        if finite:
            check_values(X, what=f"column {column!r}", row_offset=offset)
    return X


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
            raise FormatError(f"{self.path} is not a readable .npy file ({_first_line(exc)})") from None
        if self._arr.ndim != 2:
            raise InputError(f"{self.path} holds a {self._arr.ndim}-D array of shape {self._arr.shape}; expected 2-D (rows x dims)")
        kind = self._arr.dtype
        if codes is None:
            if kind.type not in (np.float16, np.float32, np.float64, np.uint8, np.int8):
                raise InputError(f"{self.path} has dtype {kind}; expected float embeddings or uint8/int8 codes")
        elif codes and kind not in (np.uint8, np.int8):
            raise InputError(f"{self.path} has dtype {kind}; expected packed bits (uint8) or int8 codes")
        elif not codes and kind.type not in (np.float16, np.float32, np.float64):
            raise InputError(f"{self.path} has dtype {kind}; only float16, float32 and float64 embeddings are accepted")
        self.num_rows, self.dim = self._arr.shape
        self.column = "embedding"
        self.metadata = read_sidecar(self.path)
        self.nbytes_per_row = self.dim * kind.itemsize
        self.type = kind

    def units(self, batch_size: int | None = None, *, max_rows: int | None = None, transform: Transform | None = None,
              result_row_bytes: int | None = None, base: int = 0, shard: int = 0) -> tuple[list, int]:
        """As :meth:`ParquetVectors.units`; a unit is a run of 16 batches."""
        batch_size = batch_rows(batch_size, self.nbytes_per_row)
        span = 16 * batch_size
        end = self.num_rows if max_rows is None else min(self.num_rows, int(max_rows))
        units = [functools.partial(self._read_span, start=s, stop=min(s + span, self.num_rows), batch_size=batch_size,
                                   transform=transform, base=base, shard=shard) for s in range(0, end, span)]
        return units, span * (result_row_bytes or 4 * self.dim)

    def _read_span(self, local: dict, *, start: int, stop: int, batch_size: int, transform, base: int = 0,
                   shard: int = 0) -> Iterator[Batch]:
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


# ---- datasets: a directory (Hive partitions included) or a glob of shards ----------------------

SHARD_SUFFIXES = (".parquet", ".pq", ".npy")


def is_dataset(path: str | os.PathLike) -> bool:
    """A directory that is not a saved compressor, or a glob pattern."""
    p = Path(path)
    if p.is_dir():
        return not (p / "config.json").is_file()
    return not p.exists() and bool(re.search(r"[*?\[]", str(path)))


def find_shards(path: str | os.PathLike) -> tuple[Path, list[str]]:
    """(root, relative paths of the shards, sorted). Hidden files and directories (temporary
    outputs, ``_SUCCESS``-style markers) are skipped."""
    text = str(path)
    if Path(text).is_dir():
        root = Path(text)
        files = [f for f in root.rglob("*") if f.is_file() and f.suffix.lower() in SHARD_SUFFIXES]
        what = f"directory {root}"
    else:
        matches = sorted(globlib.glob(text, recursive=True))
        files = [Path(f) for f in matches if Path(f).is_file() and Path(f).suffix.lower() in SHARD_SUFFIXES]
        root = Path(os.path.commonpath([str(f.parent) for f in files])) if files else Path(text).parent
        what = f"pattern {text!r}"
    rels = sorted(str(f.relative_to(root)) for f in files
                  if not any(part.startswith((".", "_")) for part in f.relative_to(root).parts))
    if not rels:
        raise InputError(f"{what} holds no .parquet or .npy files" if "directory" in what
                         else f"{what} matches no .parquet or .npy files")
    return root, rels


class DatasetVectors(Streamed):
    """Several vector files read as one: the interface of :class:`~embcompress.io.ParquetVectors`
    (rows, width, columns, batches), plus ``shards`` and ``rels`` (relative paths)."""

    def __init__(self, path: str | os.PathLike, *, column=None, id_column=None, keep_columns: Sequence[str] = (),
                 codes=False):
        self.path = Path(str(path))
        self.root, self.rels = find_shards(path)
        formats = {file_format(r) for r in self.rels}
        if len(formats) > 1:
            raise InputError(f"{path} mixes .parquet and .npy shards; a dataset is one or the other")
        self.shards = []
        for rel in self.rels:
            self.shards.append(open_vectors(self.root / rel, column=column, id_column=id_column,
                                            keep_columns=keep_columns, codes=codes))
            self._check_alike(self.shards[0], self.shards[-1], rel)
        first = self.shards[0]
        self.column, self.id_column, self.type, self.dim = first.column, first.id_column, first.type, first.dim
        self.carried_columns = list(first.carried_columns)
        self.schema = getattr(first, "schema", None)
        self.metadata = first.metadata
        self.nbytes_per_row = first.nbytes_per_row
        self.num_rows = sum(s.num_rows for s in self.shards)
        self.starts = [0]
        for s in self.shards:
            self.starts.append(self.starts[-1] + s.num_rows)

    def _check_alike(self, first, shard, rel: str) -> None:
        if shard is first:
            return
        for name, a, b in (("embedding column", first.column, shard.column), ("type", str(first.type), str(shard.type)),
                           ("width", first.dim, shard.dim), ("id column", first.id_column, shard.id_column),
                           ("kept columns", first.carried_columns, shard.carried_columns)):
            if a != b:
                raise InputError(f"shard {self.root / rel} has {name} {b!r} but {self.root / self.rels[0]} has {a!r}; "
                                 "every shard of a dataset needs the same columns")
        fa = (first.metadata or {}).get("compressor", {}).get("fingerprint")
        fb = (shard.metadata or {}).get("compressor", {}).get("fingerprint")
        if fa != fb:
            raise InputError(f"shard {self.root / rel} holds codes of compressor fingerprint {fb} but "
                             f"{self.root / self.rels[0]} of {fa}; codes of different compressors cannot be mixed")

    @property
    def num_row_groups(self) -> int:
        return sum(getattr(s, "num_row_groups", 1) for s in self.shards)

    def units(self, batch_size: int | None = None, *, max_rows: int | None = None, transform: Transform | None = None,
              result_row_bytes: int | None = None) -> tuple[list, int]:
        """Every shard's units in order, batches tagged with their shard, one row numbering across
        shards: the row groups of all shards are the units of the parallel reader."""
        units, unit_bytes = [], 0
        for i, shard in enumerate(self.shards):
            if max_rows is not None and self.starts[i] >= max_rows:
                break
            u, b = shard.units(batch_size, max_rows=None if max_rows is None else max_rows - self.starts[i],
                               transform=transform, result_row_bytes=result_row_bytes, base=self.starts[i], shard=i)
            units += u
            unit_bytes = max(unit_bytes, b)
        return units, unit_bytes


def batch_rows(batch_size: int | None, row_bytes: int) -> int:
    if batch_size is None:
        return auto_batch_size(row_bytes)
    if batch_size < 1:
        raise InputError(f"batch size must be at least 1, got {batch_size}")
    return int(batch_size)


def read_sidecar(path: Path) -> dict | None:
    side = Path(str(path) + SIDECAR_SUFFIX)
    if not side.exists():
        return None
    try:
        return json.loads(side.read_text())
    except ValueError:
        return None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _pylist(col: pa.Array, take, path, name: str, offset: int) -> list:
    """The first ``take`` values of a carried column (or the values at the row numbers ``take``)."""
    try:
        return (col.slice(0, take) if isinstance(take, int) else col.take(pa.array(take))).to_pylist()
    except UnicodeDecodeError as exc:
        last = offset + (take if isinstance(take, int) else len(col)) - 1
        raise FormatError(f"column {name!r} of {path} holds bytes that are not UTF-8 text in rows {offset}.."
                          f"{last} ({exc.reason}); the file is corrupt or was written with another encoding") from None


def read_all(path: str | os.PathLike, *, column: str | None = None, id_column: str | None = None,
             codes: bool | None = False, threads: int | None = None) -> tuple[np.ndarray, list | None]:
    """Load a whole (small) vector file: (vectors or codes, ids or None). For files that fit in
    memory; streaming code uses :func:`open_vectors`."""
    X, ids, _ = read_sample(path, column=column, id_column=id_column, codes=codes, threads=threads)
    return X, ids


def read_sample(path: str | os.PathLike, *, limit: int | None = None, column: str | None = None,
                id_column: str | None = None, label_column: str | None = None,
                codes: bool | None = False, threads: int | None = None,
                seed: int = 0) -> tuple[np.ndarray, list | None, list | None]:
    """A seeded uniform sample of ``limit`` rows of a vector file, drawn across all of it (every
    row group and shard) and returned in file order; every row when ``limit`` is None or not
    smaller than the file. (vectors, ids or None, labels or None). ``label_column`` names a column
    read beside the vectors (an error names the columns there are when it is missing). The file is
    streamed once; only the sampled rows are kept. :func:`count_rows` says how many rows the
    sample was drawn from."""
    src = open_vectors(path, column=column, id_column=id_column, codes=codes,
                       keep_columns=[label_column] if label_column else ())
    wanted = None if limit is None or src.num_rows <= limit else sample_rows(src.num_rows, limit, seed)
    parts, ids, labels = [], [], []
    for b in src.batches(threads=threads):
        if wanted is None:
            take = len(b.vectors)
            parts.append(np.array(b.vectors))
        else:
            lo, hi = np.searchsorted(wanted, [b.offset, b.offset + len(b.vectors)])
            if lo == hi:
                continue
            take = wanted[lo:hi] - b.offset
            parts.append(np.asarray(b.vectors)[take])
        if b.carried is not None:
            if src.id_column:
                ids.extend(_pylist(b.carried.column(src.id_column), take, src.path, src.id_column, b.offset))
            if label_column:
                labels.extend(_pylist(b.carried.column(label_column), take, src.path, label_column, b.offset))
    arr = np.concatenate(parts) if parts else np.empty((0, src.dim), dtype=np.float32)
    return arr, (ids if src.id_column else None), (labels if label_column else None)


def count_rows(path: str | os.PathLike, *, column: str | None = None) -> int:
    """How many rows a vector file or dataset holds (from its metadata; nothing is decoded)."""
    return int(open_vectors(path, column=column).num_rows)
