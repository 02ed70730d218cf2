"""A direct decoder for float32 vector columns of parquet files: the reader's fast path.

pyarrow decodes a list column value by value through its level machinery: about 1 GB/s per core
for 1024-d float32 vectors. The pages of such a column, though, are mostly a byte copy away from
the numpy array: after decompression, a PLAIN page is the float32 values themselves, preceded by
the repetition and definition levels. This module reads the pages of one row group's column chunk
itself (``os.pread``, which releases the GIL), parses their Thrift headers, verifies their CRC
when the writer stored one, decompresses with pyarrow's codecs, checks the levels in C (every list
holds ``dim`` values, no null anywhere) without materializing them, and copies the values into the
batches. Dictionary-encoded pages (pyarrow's writer starts every float column chunk with them
before falling back to PLAIN) are decoded in C as well.

It covers what writers of embedding dumps produce: ``list`` or ``fixed_size_list`` of float32 at
the top level of the schema, data pages v1 and v2, PLAIN and dictionary encodings, uncompressed,
snappy, zstd, lz4_raw, gzip and brotli. Anything else, and any surprise in a page (a null, a
ragged row, a corrupt page, an unknown encoding), raises :class:`Unsupported`; the reader then
goes on with pyarrow from the same batch, which either decodes it or reports the precise error.
So the fast path never changes a result or an error message; it only makes the common case fast.
Without the C extension (no compiler at install time) the reader always uses pyarrow.
"""

from __future__ import annotations

import bisect
import os
from dataclasses import dataclass
from typing import Iterator

import numpy as np
import pyarrow.parquet as pq

from .schema import DataPageHeader, DataPageHeaderV2, PageHeader
from .page_format import (
    DATA_PAGE,
    DATA_PAGE_V2,
    DICTIONARY_PAGE,
    INDEX_PAGE,
    PLAIN,
    RLE,
    Unsupported,
    _rle,
    check_crc,
    check_levels_v1,
    check_stream,
    codec_of,
    decompress,
    dictionary_values,
    page_header,
    page_values,
)

CHUNK_ENCODINGS = {"PLAIN", "RLE", "RLE_DICTIONARY", "PLAIN_DICTIONARY"}


def available() -> bool:
    return _rle is not None and hasattr(os, "pread")


@dataclass(frozen=True)
class Column:
    """Where a top-level float32 list column sits among the file's leaf columns."""

    index: int  # leaf column index in the parquet schema
    max_def: int


def find_column(pf: pq.ParquetFile, name: str) -> Column | None:
    """The leaf of column ``name`` when the direct decoder can read it: the only leaf under that
    top-level field, FLOAT, in a list at the top level. None otherwise."""
    if not available():
        return None
    schema = pf.schema
    leaves = [i for i in range(len(schema)) if schema.column(i).path.split(".")[0] == name]
    if len(leaves) != 1:
        return None
    leaf = schema.column(leaves[0])
    # name.list.element (or a legacy two-level list, name.array): a list right at the top level
    if leaf.physical_type != "FLOAT" or leaf.max_repetition_level != 1 or len(leaf.path.split(".")) > 3:
        return None
    return Column(leaves[0], int(leaf.max_definition_level))


@dataclass(frozen=True)
class PageIndex:
    """Where the data pages of one column chunk start: their file offsets and the index of their
    first value in the row group (from a scan of the page headers, no page is read)."""

    positions: list
    first_values: list


@dataclass(frozen=True)
class Span:
    """Rows ``(start, stop)`` of a row group, and the :class:`PageIndex` that finds the page holding
    ``start`` (None: decoding starts at the chunk's first page)."""

    rows: tuple[int, int]
    index: PageIndex | None = None


@dataclass(frozen=True)
class _Reading:
    """What every page of a column chunk is read with: the file, the chunk's codec, the column and the
    vectors' width (a new list every ``dim`` values, every value present), and whether checksums are verified."""

    fd: int
    codec: object
    col: Column
    dim: int
    verify_crc: bool

    @property
    def def_width(self) -> int:
        return int(self.col.max_def).bit_length()


def scan_pages(fd: int, md: pq.FileMetaData, g: int, col: Column, dim: int) -> PageIndex:
    """The page index of row group ``g``'s column chunk (about 10 us per page), so that workers can
    start decoding at any row. Raises :class:`Unsupported` where :func:`decode_group` would."""
    chunk, _, pos, end = _chunk(md, g, col)
    positions, firsts = [], []
    seen = 0
    while pos < end:
        header, hlen, csize = page_header(fd, pos, end)
        kind = header.get(PageHeader.TYPE)
        if kind in (DATA_PAGE, DATA_PAGE_V2):
            sub = header.get(PageHeader.DATA_PAGE_HEADER if kind == DATA_PAGE else PageHeader.DATA_PAGE_HEADER_V2) or {}
            n = sub.get(DataPageHeader.NUM_VALUES if kind == DATA_PAGE else DataPageHeaderV2.NUM_VALUES, -1)
            if not isinstance(n, int) or n < 0:
                raise Unsupported("page value count")
            positions.append(pos)
            firsts.append(seen)
            seen += n
        elif kind not in (DICTIONARY_PAGE, INDEX_PAGE):
            raise Unsupported(f"page type {kind}")
        pos += hlen + csize
    if seen != md.row_group(g).num_rows * dim:
        raise Unsupported(f"{seen} values in the column chunk, expected {md.row_group(g).num_rows * dim}")
    return PageIndex(positions, firsts)


def decode_group(
    fd: int,
    md: pq.FileMetaData,
    g: int,
    col: Column,
    dim: int,
    batch_size: int,
    *,
    span: Span | None = None,
    verify_crc: bool = True,
) -> Iterator[np.ndarray]:
    """The vectors of row group ``g`` (or of its rows ``span.rows = (start, stop)``) as float32
    ``(rows, dim)`` arrays of ``batch_size`` rows from ``start`` (the last one shorter): with
    ``start`` a multiple of ``batch_size``, the batches pyarrow's ``iter_batches`` cuts. With
    ``span.index`` (:func:`scan_pages`) decoding starts at the page that holds ``start``. Raises
    :class:`Unsupported` (before the first batch or between batches) where pyarrow must take over."""
    chunk, codec, pos, end = _chunk(md, g, col)
    r = _Reading(fd, codec, col, dim, verify_crc)
    nrows = md.row_group(g).num_rows
    total = nrows * dim
    first, stop = (0, nrows) if span is None else span.rows
    lo, hi = first * dim, stop * dim  # the values wanted
    index = None if span is None else span.index
    # seen: the index in the row group of the next page's first value
    pos, seen, dictionary = (pos, 0, None) if index is None or lo == 0 else _jump(r, chunk, index, lo, (pos, end))
    fill = _Batches(batch_size, dim, lo, hi)
    while pos < end and seen < hi:
        header, hlen, csize = page_header(fd, pos, end)
        kind, usize = header.get(PageHeader.TYPE), header.get(PageHeader.UNCOMPRESSED_PAGE_SIZE)
        if kind == INDEX_PAGE:
            pos += hlen + csize
            continue
        n = _plain_values(header, codec, csize, lo - seen, hi - seen)
        dests = fill.destinations(n) if n else None
        if dests:  # its values read or decompressed straight into the batches
            _read_plain(r, (pos + hlen, csize), header, n, dests, seen)
            pos += hlen + csize
            seen += n
            yield from fill.advance(n)
            continue
        data = _page_data(r, pos + hlen, csize, header)
        pos += hlen + csize
        if kind == DICTIONARY_PAGE:
            dictionary = dictionary_values(header, decompress(codec, data, usize))
            continue
        if kind == DATA_PAGE:
            n, values, encoding = _v1_values(r, header, data, usize, seen)
        elif kind == DATA_PAGE_V2:
            n, values, encoding = _v2_values(r, header, data, (usize, csize), seen)
        else:
            raise Unsupported(f"page type {kind}")
        if not isinstance(n, int) or n < 0 or seen + n > total:
            raise Unsupported("page value count")
        page = page_values(values, encoding, n, dictionary)
        yield from fill.put(page[max(lo - seen, 0) : min(hi - seen, n)])  # the part of this page that is wanted
        seen += n
    if fill.done != hi or (span is None and seen != total):
        raise Unsupported(f"{seen} values in the column chunk, expected {total}")


def _jump(r: _Reading, chunk, index: PageIndex, lo: int, bounds: tuple[int, int]):
    """(position, index of its first value, the dictionary or None) of the page that holds value
    ``lo``, by ``index``; the chunk's dictionary page (at ``bounds[0]``, the chunk's start) is read first."""
    k = max(bisect.bisect_right(index.first_values, lo) - 1, 0)
    dictionary = _dictionary(r, *bounds) if chunk.has_dictionary_page else None
    return index.positions[k], index.first_values[k], dictionary


class _Batches:
    """The batches of values ``lo`` to ``hi`` as pages fill them: the current one (``out``, its
    first ``filled`` values written) and, once a page reaches past its end, the next."""

    def __init__(self, batch_size: int, dim: int, lo: int, hi: int):
        self.size, self.dim, self.done, self.hi = batch_size * dim, dim, lo, hi  # done: values delivered or written
        self.out = np.empty(min(self.size, hi - lo), dtype=np.float32)
        self.filled = 0
        self.next: np.ndarray | None = None

    def destinations(self, n: int) -> list[np.ndarray] | None:
        """Where the next ``n`` values go: the rest of this batch and the start of the next
        (allocated now) when they reach past its end; None when they would reach past that too."""
        room = len(self.out) - self.filled
        if n <= room:
            return [self.out[self.filled : self.filled + n]]
        if self.next is None:
            self.next = np.empty(min(self.size, self.hi - self.done - room), dtype=np.float32)
        return [self.out[self.filled :], self.next[: n - room]] if n - room <= len(self.next) else None

    def advance(self, n: int) -> Iterator[np.ndarray]:
        """``n`` values were written where :meth:`destinations` said: yield the batches they filled."""
        while n:
            take = min(n, len(self.out) - self.filled)
            self.filled += take
            self.done += take
            n -= take
            if self.filled == len(self.out):
                yield self.out.reshape(-1, self.dim)
                nxt = (
                    self.next
                    if self.next is not None
                    else np.empty(min(self.size, self.hi - self.done), dtype=np.float32)
                )
                self.out, self.next, self.filled = nxt, None, 0

    def put(self, values: np.ndarray) -> Iterator[np.ndarray]:
        """Copy ``values`` into the batches, yielding each as it fills."""
        i = 0
        while i < len(values):
            take = min(len(values) - i, len(self.out) - self.filled)
            self.out[self.filled : self.filled + take] = values[i : i + take]
            i += take
            yield from self.advance(take)


def _plain_values(header: dict, codec, csize: int, first: int, last: int) -> int:
    """The value count of a v1 data page of PLAIN float32 values, uncompressed or snappy, all of
    them wanted (``first`` <= 0 and ``last`` >= the count, in the page's numbering): a page
    :func:`_read_plain` reads; else 0."""
    sub = header.get(PageHeader.DATA_PAGE_HEADER) or {}
    n, usize = sub.get(DataPageHeader.NUM_VALUES, -1), header.get(PageHeader.UNCOMPRESSED_PAGE_SIZE)
    snappy = codec is not None and codec.name == "snappy" and hasattr(_rle, "snappy_split")
    if (
        header.get(PageHeader.TYPE) != DATA_PAGE
        or not (codec is None and usize == csize or snappy)
        or sub.get(DataPageHeader.ENCODING) != PLAIN
        or not isinstance(n, int)
        or n <= 0
        or first > 0
        or last < n
        or 4 * n > usize
    ):
        return 0
    return n


def _read_plain(r: _Reading, where: tuple[int, int], header: dict, n: int, dests: list[np.ndarray], seen: int) -> None:
    """A page :func:`_plain_values` accepted (its body at ``where = (offset, compressed size)``): its
    levels into a scratch buffer and its ``n`` values straight into ``dests`` (one or two float32 views,
    ``n`` values in all), by one ``preadv`` or one snappy decompression (no copy of the values in between),
    checksummed and checked as :func:`_page_data` and :func:`_v1_values` do."""
    fd, codec = r.fd, r.codec
    at, csize = where
    sub = header.get(PageHeader.DATA_PAGE_HEADER) or {}
    levels = bytearray(header.get(PageHeader.UNCOMPRESSED_PAGE_SIZE) - 4 * n)
    values = [memoryview(d).cast("B") for d in dests]
    if codec is not None:  # snappy
        try:
            _rle.snappy_split(_page_data(r, at, csize, header), levels, *values)
        except ValueError as exc:
            raise Unsupported(str(exc)) from None
    else:
        if os.preadv(fd, [levels, *values], at) != csize:
            raise Unsupported("file ends inside a page")
        check_crc(header, r.verify_crc, levels, *values)
    if _v1_levels(r, sub, memoryview(levels), n, seen) != len(levels):
        raise Unsupported("page values")  # the values start right after the levels, and are exactly 4 n bytes


def _v1_values(r: _Reading, header: dict, data, usize: int, seen: int):
    """(value count, the encoded values, their encoding) of a v1 data page, its levels checked: every
    value present, a new list every ``dim`` values from value ``seen`` of the chunk."""
    sub = header.get(PageHeader.DATA_PAGE_HEADER) or {}
    n = sub.get(DataPageHeader.NUM_VALUES, -1)
    raw = memoryview(decompress(r.codec, data, usize))
    at = _v1_levels(r, sub, raw, n, seen)
    return n, raw[at:], sub.get(DataPageHeader.ENCODING)


def _v1_levels(r: _Reading, sub: dict, raw: memoryview, n: int, seen: int) -> int:
    """Check the levels at the start of a v1 page's uncompressed body ``raw`` (header ``sub``):
    RLE, every value present, a new list every ``dim`` values from value ``seen`` of the chunk.
    Returns where the values start."""
    if (
        sub.get(DataPageHeader.DEFINITION_LEVEL_ENCODING, RLE) != RLE
        or sub.get(DataPageHeader.REPETITION_LEVEL_ENCODING, RLE) != RLE
    ):
        raise Unsupported("level encoding")
    at = check_levels_v1(raw, 0, 1, n, 1, r.dim, seen)
    return check_levels_v1(raw, at, r.def_width, n, r.col.max_def, 0, 0) if r.def_width else at


def _v2_values(r: _Reading, header: dict, data, sizes: tuple[int, int], seen: int):
    """As :func:`_v1_values`, for a v2 data page (levels stored uncompressed before the values; ``sizes``:
    the page's uncompressed and compressed sizes)."""
    usize, csize = sizes
    sub = header.get(PageHeader.DATA_PAGE_HEADER_V2) or {}
    n, nulls = sub.get(DataPageHeaderV2.NUM_VALUES, -1), sub.get(DataPageHeaderV2.NUM_NULLS, -1)
    rep_len = sub.get(DataPageHeaderV2.REPETITION_LEVELS_BYTE_LENGTH, -1)
    def_len = sub.get(DataPageHeaderV2.DEFINITION_LEVELS_BYTE_LENGTH, -1)
    if nulls != 0 or not all(isinstance(v, int) and v >= 0 for v in (n, rep_len, def_len)) or rep_len + def_len > csize:
        raise Unsupported("v2 page header")
    levels = memoryview(data)[: rep_len + def_len]
    check_stream(levels[:rep_len], 1, n, 1, r.dim, seen)
    if r.def_width:
        check_stream(levels[rep_len:], r.def_width, n, r.col.max_def, 0, 0)
    body = memoryview(data)[rep_len + def_len :]
    compressed = sub.get(DataPageHeaderV2.IS_COMPRESSED, True)
    return (
        n,
        memoryview(decompress(r.codec, body, usize - rep_len - def_len)) if compressed else body,
        sub.get(DataPageHeaderV2.ENCODING),
    )


def _chunk(md: pq.FileMetaData, g: int, col: Column):
    """(column chunk metadata, codec, offset of its first page, its end)."""
    chunk = md.row_group(g).column(col.index)
    codec = codec_of(chunk.compression)
    if not set(chunk.encodings) <= CHUNK_ENCODINGS:
        raise Unsupported(f"encodings {chunk.encodings}")
    pos = chunk.data_page_offset
    if chunk.has_dictionary_page and 0 < (chunk.dictionary_page_offset or 0) < pos:
        pos = chunk.dictionary_page_offset
    return chunk, codec, pos, pos + chunk.total_compressed_size


def _page_data(r: _Reading, at: int, csize: int, header: dict) -> bytes:
    data = os.pread(r.fd, csize, at)
    if len(data) != csize:
        raise Unsupported("file ends inside a page")
    check_crc(header, r.verify_crc, data)
    return data


def _dictionary(r: _Reading, pos: int, end: int) -> np.ndarray:
    """The dictionary page at the start of a chunk."""
    header, hlen, csize = page_header(r.fd, pos, end)
    if header.get(PageHeader.TYPE) != DICTIONARY_PAGE:
        raise Unsupported("no dictionary page where the metadata says")
    raw = _page_data(r, pos + hlen, csize, header)
    return dictionary_values(header, decompress(r.codec, raw, header.get(PageHeader.UNCOMPRESSED_PAGE_SIZE)))


def read_group(
    path, md: pq.FileMetaData, g: int, col: Column, dim: int, *, span: Span | None = None
) -> np.ndarray | None:
    """Row group ``g`` (or its rows ``span.rows``; ``span.index`` from :func:`scan_pages` to start at the
    right page) as one ``(rows, dim)`` float32 array, or None where pyarrow must read it."""
    first, stop = (0, md.row_group(g).num_rows) if span is None else span.rows
    if stop <= first:
        return None
    try:
        with open(path, "rb", buffering=0) as f:
            (X,) = decode_group(f.fileno(), md, g, col, dim, stop - first, span=span)
    except (Unsupported, OSError):
        return None
    return X
