"""Streaming readers for vector files: parquet (an embedding column plus ids and other columns),
``.npy`` (memory-mapped, :mod:`.npy`), and datasets of either (a directory, Hive partitions included, or a glob:
:mod:`.sources`, with :func:`~.sources.open_vectors`); whole files and uniform samples of them: :mod:`.whole`.

Readers yield :class:`Batch` objects: a float32 ``(rows, dim)`` array, the carried columns of the
same rows, and the row offset of the batch in the file. A ``list`` or ``fixed_size_list`` of
float32 is the fast path: :mod:`.pages` decodes its pages directly (a decompression and a copy per
page), and pyarrow takes over for every other layout and wherever a page surprises the fast path.
float16/float64 are accepted; nulls, ragged rows and NaN/inf are errors that name the row.
"""

from __future__ import annotations

import functools
import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Protocol, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..core._parallel import ordered_units, prefetch, reader_threads
from ..core.checks import check_values
from ..core.errors import FormatError, InputError, first_line
from . import page_format, pages
from .columns import column_to_numpy, is_vector_type
from .parquet_columns import pick_carried, pick_column, vector_width

META_KEY = b"embcompress"
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


def file_format(path: str | os.PathLike) -> str:
    suffix = Path(path).suffix.lower()
    if suffix in (".parquet", ".pq"):
        return "parquet"
    if suffix == ".npy":
        return "npy"
    raise InputError(f"{path}: unknown file type {suffix or '(no suffix)'!r}; use .parquet (or .pq) or .npy")


def read_group(
    pf: pq.ParquetFile,
    path,
    g: int,
    *,
    column: str,
    dim: int,
    direct: pages.Column | None,
    span: pages.Span | None = None,
    offset: int = 0,
) -> np.ndarray:
    """Row group ``g`` of ``pf`` (or its rows ``span.rows = (start, stop)``) as one checked float32 array
    ``(rows, dim)``: through the direct page decoder (:mod:`.pages`; ``direct`` from
    :func:`~.pages.find_column`, ``span.index`` from :func:`~.pages.scan_pages` to start at the right
    page), and through pyarrow for every layout it does not take. The one row-group read of the
    stores and the Ray workers; errors name rows from ``offset``."""
    rows = None if span is None else span.rows
    X = None if direct is None else pages.read_group(path, pf.metadata, g, direct, dim, span=span)
    if X is not None:
        check_values(X, what=f"column {column!r}", row_offset=offset)
        return X
    col = pf.read_row_group(g, columns=[column]).column(0)
    if rows is not None:
        col = col.slice(rows[0], rows[1] - rows[0])
    return column_to_numpy(col, dim, offset=offset, column=column)


class VectorSource(Protocol):
    """A file or dataset of vectors opened for reading (:func:`~embcompress.io.open_vectors`): a
    parquet file, a ``.npy`` file or a dataset of shards. Every source answers every member; a single
    file has ``shards = None``, and a file without a parquet schema has ``schema = None``."""

    path: Any
    column: str
    num_rows: int
    dim: int
    nbytes_per_row: int
    carried_columns: list[str]  # the id column and kept columns, carried to outputs
    schema: pa.Schema | None
    shards: list | None  # a dataset's shards (sources themselves), None for one file
    metadata: dict | None

    @property
    def num_row_groups(self) -> int: ...

    def batches(
        self,
        batch_size: int | None = None,
        *,
        threads: int | None = None,
        max_rows: int | None = None,
        transform: "Transform | None" = None,
        result_row_bytes: int | None = None,
    ) -> Iterator[Batch]: ...


class Streamed:
    """What every reader shares: :meth:`batches` runs the reader's :meth:`units` of work, and the
    members of :class:`VectorSource` a single file without a parquet schema has."""

    shards = None  # one file; a dataset lists its shards
    schema = None  # no parquet schema (a .npy file)
    carried_columns: list[str] = []
    num_row_groups = 1

    def batches(
        self,
        batch_size: int | None = None,
        *,
        threads: int | None = None,
        max_rows: int | None = None,
        transform: Transform | None = None,
        result_row_bytes: int | None = None,
    ) -> Iterator[Batch]:
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
        units, unit_bytes = self.units(
            batch_size, max_rows=max_rows, transform=transform, result_row_bytes=result_row_bytes
        )
        yield from run_units(units, threads=threads, unit_bytes=unit_bytes)


class ParquetVectors(Streamed):
    """A parquet file with one embedding column, read in record batches."""

    def __init__(self, path: Path, *, column=None, id_column=None, keep_columns=(), codes=False):
        self.path = Path(path)
        try:
            # buffered column reads: without buffer_size, pyarrow loads a whole column chunk (a
            # whole row group, gigabytes in some dumps) before yielding the first batch
            self._pf = pq.ParquetFile(
                self.path, pre_buffer=False, buffer_size=READ_BUFFER_BYTES, page_checksum_verification=True
            )
            schema = self._pf.schema_arrow
        except (pa.ArrowException, OSError, ValueError) as exc:  # ValueError: names that are not UTF-8
            raise FormatError(f"{self.path} is not a readable parquet file ({first_line(exc)})") from None
        self.schema = schema
        self.num_rows = self._pf.metadata.num_rows
        meta = schema.metadata or {}
        self.metadata: dict[str, Any] | None = None
        if META_KEY in meta:
            try:
                self.metadata = json.loads(meta[META_KEY])
            except ValueError:
                self.metadata = None
        self.column, self.type = pick_column(self.path, schema, column, codes)
        self.id_column, self.carried_columns = pick_carried(
            self.path, schema.names, self.column, id_column, keep_columns
        )
        self.dim = vector_width(self._pf, self.path, self.column, self.type)
        # the direct decoder of float32 list columns (io.pages), where it applies
        self._direct = (
            pages.find_column(self._pf, self.column)
            if is_vector_type(self.type) and self.type.value_type == pa.float32()
            else None
        )

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
            raise FormatError(f"{self.path} has corrupt row group metadata: {first_line(exc)}") from None
        return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)

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
                units.append(
                    functools.partial(
                        self._read_group,
                        g=g,
                        start=base + int(starts[g]),
                        batch_size=batch_size,
                        transform=transform,
                        shard=shard,
                        rows=None if len(spans) == 1 else (r0, r1),
                    )
                )
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

    def read_rows(self, pf, g: int, rows: tuple[int, int], *, offset: int = 0) -> np.ndarray:
        """Rows ``rows`` of row group ``g`` (the first numbered ``offset`` in errors) as one
        checked float32 array, by :func:`read_group` (starting at the page that holds the first
        of them when the direct decoder applies)."""
        whole = rows == (0, pf.metadata.row_group(g).num_rows)
        index = None if whole or self._direct is None else self._page_index(pf, g)
        direct = self._direct if whole or index is not None else None
        return read_group(
            pf,
            self.path,
            g,
            column=self.column,
            dim=self.dim,
            direct=direct,
            span=None if whole else pages.Span(rows, index),
            offset=offset,
        )

    def _read_group(
        self,
        local: dict,
        *,
        g: int,
        start: int,
        batch_size: int,
        transform,
        shard: int = 0,
        rows: tuple[int, int] | None = None,
    ) -> Iterator[Batch]:
        """Row group ``g`` (rows ``rows`` of it, when given), whose first row is row ``start``."""
        pf = local.get(self.path)
        if pf is None:  # one file handle per worker thread
            pf = local[self.path] = pq.ParquetFile(
                self.path, pre_buffer=False, buffer_size=READ_BUFFER_BYTES, page_checksum_verification=True
            )
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
            yield from self._read_group_arrow(
                pf, g, offset, batch_size, transform, shard, skip=first // batch_size + done, end=start + stop
            )
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
                except (page_format.Unsupported, OSError):
                    cache[g] = None
            return cache[g]

    def _read_group_direct(
        self, pf, g: int, offset: int, batch_size: int, transform, shard: int, rows: tuple[int, int] | None, index
    ) -> Iterator[tuple[int, Batch]]:
        """(rows, batch) of row group ``g`` (or of its ``rows``) through :mod:`.pages`, until it is
        done or hands over to pyarrow (then this stops early and the caller goes on from the next
        batch)."""
        with open(self.path, "rb", buffering=0) as f:  # closed when the row group is done or abandoned
            span = None if rows is None else pages.Span(rows, index)
            vectors_it = pages.decode_group(f.fileno(), pf.metadata, g, self._direct, self.dim, batch_size, span=span)
            carried = None
            if self.carried_columns:
                carried = pf.iter_batches(
                    batch_size=batch_size, row_groups=[g], columns=self.carried_columns, use_threads=False
                )
                for _ in range((rows or (0, 0))[0] // batch_size):  # the batches before the span
                    next(carried, None)
            while True:
                try:
                    vectors = next(vectors_it)
                except StopIteration:
                    return
                except (page_format.Unsupported, OSError):  # pyarrow decodes it, or names the problem
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

    def _read_group_arrow(
        self, pf, g: int, offset: int, batch_size: int, transform, shard: int, *, skip: int = 0, end: int | None = None
    ) -> Iterator[Batch]:
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
                raise FormatError(
                    f"{self.path} is corrupt or truncated in row group {g} near row {offset}: {first_line(exc)}"
                ) from None
            if skip:  # delivered already
                skip -= 1
                continue
            vectors = column_to_numpy(
                rb.column(0), self.dim, offset=offset, column=self.column, finite=transform is None
            )
            if transform is not None:
                vectors = transform(vectors, offset)
            yield Batch(vectors, rb.select(self.carried_columns) if self.carried_columns else None, offset, shard)
            offset += rb.num_rows


Transform = Callable[[np.ndarray, int], np.ndarray]  # (vectors, row offset) -> codes


def run_units(
    units: Sequence[Callable[[dict], Iterator[Batch]]], *, threads: int | None, unit_bytes: int
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
