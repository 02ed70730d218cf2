"""The column chunk of a top-level list column of codes or vectors, encoded here rather than by
pyarrow's nested writer (which writes a level for every value, about 65 MB/s): the writing half of
:mod:`.pages`, used by :class:`.writers.PageWriter`.

Data pages v1 of whole rows, half to one :data:`PAGE_VALUE_BYTES` of values each (see
:func:`_page_rows`); repetition levels as
two RLE runs per row, definition levels as one run per page; float32 values PLAIN, written from
the rows' own memory; int8 values (physical INT32) through a dictionary of all 256 values, whose
indices bit-packed at 8 bits are the code bytes themselves. Packed codes (a fixed_size_binary
column, a row's bytes a value) are PLAIN FIXED_LEN_BYTE_ARRAY pages, without levels when the
column is required. Every page carries its CRC-32; a chunk's pages are compressed on several
threads (:meth:`_Pages.flush`).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence

import numpy as np
import pyarrow as pa

from ..core._parallel import shared_pool
from . import thrift
from .page_format import DATA_PAGE, DICTIONARY_PAGE, PLAIN, RLE, RLE_DICTIONARY, crc32
from .schema import ColumnMetaData, DataPageHeader, DictionaryPageHeader, PageHeader, PhysicalType

#: about this many bytes of values per data page (pyarrow's default page size)
PAGE_VALUE_BYTES = 1 << 20
CODEC_IDS = {None: 0, "snappy": 1, "gzip": 2, "brotli": 4, "zstd": 6, "lz4_raw": 7}
INT32, FLOAT, FIXED_LEN_BYTE_ARRAY = PhysicalType.INT32, PhysicalType.FLOAT, PhysicalType.FIXED_LEN_BYTE_ARRAY


class _Pages:
    """The parts of a column chunk as its pages are added, and its sizes so far. Pages wait in
    :meth:`add` until :meth:`flush`, which compresses their bodies (on ``threads`` threads: the
    codec releases the GIL, and on one thread zstd was the writer's main cost for int8 codes,
    0.8 s per 256 MB) and then writes their headers in order."""

    def __init__(self, codec: str | None, checksum: bool):
        self.codec = pa.Codec(codec) if codec else None
        self.checksum = checksum
        self.parts: list = []
        self.uncompressed = self.compressed = 0  # headers included: the next page starts at offset + compressed
        self._waiting: list = []

    def add(self, kind: int, raw: list, sub_id: int, sub: list) -> None:
        """A page of type ``kind`` whose uncompressed body is the buffers ``raw``, one after the
        other (compressed as one when the chunk has a codec), with its header struct ``sub``."""
        self._waiting.append((kind, raw, sub_id, sub))

    def _body(self, raw: list) -> tuple[list, int]:
        """(the page's body buffers, their CRC-32 or 0)."""
        body = raw if self.codec is None else [self.codec.compress(b"".join(raw), asbytes=True)]
        crc = 0
        if self.checksum:
            for b in body:
                crc = crc32(b, crc)
        return body, crc

    def flush(self, threads: int = 1) -> None:
        """Compress and checksum the waiting pages (in parallel when there are several and a
        codec), then append each header and body."""
        waiting, self._waiting = self._waiting, []
        raws = [w[1] for w in waiting]
        if self.codec is not None and threads > 1 and len(raws) > 1:
            bodies = list(shared_pool(threads).map(self._body, raws))
        else:
            bodies = [self._body(raw) for raw in raws]
        for (kind, raw, sub_id, sub), (body, crc) in zip(waiting, bodies):
            raw_len = sum(memoryview(r).nbytes for r in raw)
            body_len = sum(memoryview(b).nbytes for b in body)
            fields = [
                thrift.Field(PageHeader.TYPE, thrift.I32, kind),
                thrift.Field(PageHeader.UNCOMPRESSED_PAGE_SIZE, thrift.I32, raw_len),
                thrift.Field(PageHeader.COMPRESSED_PAGE_SIZE, thrift.I32, body_len),
            ]
            if self.checksum:
                fields.append(thrift.Field(PageHeader.CRC, thrift.I32, crc - (1 << 32) if crc >= 1 << 31 else crc))
            fields.append(thrift.Field(sub_id, thrift.STRUCT, [thrift.Field(i, thrift.I32, v) for i, v in sub]))
            header = thrift.write_struct(fields)
            self.parts.append(header)
            self.parts.extend(body)
            self.uncompressed += len(header) + raw_len
            self.compressed += len(header) + body_len


def encode_chunk(
    blocks: Sequence[np.ndarray],
    offset: int,
    *,
    max_def: int,
    path: list[str],
    codec: str | None,
    checksum: bool = True,
    threads: int = 1,
) -> tuple[list, list[thrift.Field]]:
    """The column chunk of a top-level list column whose rows are those of ``blocks`` ((n, d)
    int8 or float32 arrays of one width, no nulls), one after the other, to be written at file
    ``offset``: (its parts, in order: bytes and, for uncompressed float32 pages, the rows' own
    memory, so the values are not copied before the file write; its ColumnMetaData). Pages are cut by
    :func:`_page_rows`. uint8 blocks are packed codes: a fixed_size_binary(d) column (physical
    FIXED_LEN_BYTE_ARRAY, PLAIN), with definition levels only when ``max_def`` > 0, no repetition."""
    blocks = list(blocks)
    if not blocks or any(b.ndim != 2 or b.shape[1] != blocks[0].shape[1] or b.dtype != blocks[0].dtype for b in blocks):
        raise ValueError("encode_chunk takes (n, d) blocks of one width and dtype")
    n, d = sum(len(b) for b in blocks), blocks[0].shape[1]
    dtype = blocks[0].dtype
    pages = _Pages(codec, checksum)
    physical, encoding, encodings, dict_offset = _layout(dtype, max_def, pages, offset)
    data_offset = offset + pages.compressed
    packed = dtype == np.uint8  # a row is one value
    for block in _page_rows(blocks, max(1, PAGE_VALUE_BYTES // max(d * dtype.itemsize, 1))):
        values = len(block) if packed else block.size
        pages.add(
            DATA_PAGE,
            [_levels(len(block), d, max_def, not packed), _encoded_values(block, encoding)],
            PageHeader.DATA_PAGE_HEADER,
            [
                (DataPageHeader.NUM_VALUES, values),
                (DataPageHeader.ENCODING, encoding),
                (DataPageHeader.DEFINITION_LEVEL_ENCODING, RLE),
                (DataPageHeader.REPETITION_LEVEL_ENCODING, RLE),
            ],
        )
    pages.flush(threads)
    C = ColumnMetaData
    meta = [
        thrift.Field(C.TYPE, thrift.I32, physical),
        thrift.Field(C.ENCODINGS, thrift.LIST, thrift.List(thrift.I32, encodings)),
        thrift.Field(C.PATH_IN_SCHEMA, thrift.LIST, thrift.List(thrift.BINARY, [p.encode() for p in path])),
        thrift.Field(C.CODEC, thrift.I32, CODEC_IDS[codec]),
        thrift.Field(C.NUM_VALUES, thrift.I64, n if packed else n * d),
        thrift.Field(C.TOTAL_UNCOMPRESSED_SIZE, thrift.I64, pages.uncompressed),
        thrift.Field(C.TOTAL_COMPRESSED_SIZE, thrift.I64, pages.compressed),
        thrift.Field(C.DATA_PAGE_OFFSET, thrift.I64, data_offset),
    ]
    if dict_offset is not None:
        meta.append(thrift.Field(C.DICTIONARY_PAGE_OFFSET, thrift.I64, dict_offset))
    return pages.parts, meta


def _layout(dtype: np.dtype, max_def: int, pages: "_Pages", offset: int):
    """(physical type, data page encoding, the chunk's encodings, the dictionary page's offset or None)
    of a column chunk of ``dtype`` values; int8's dictionary page goes into ``pages`` first."""
    dict_offset = None
    if dtype == np.int8:
        dict_offset = offset
        pages.add(
            DICTIONARY_PAGE,
            [np.arange(-128, 128, dtype="<i4").tobytes()],
            PageHeader.DICTIONARY_PAGE_HEADER,
            [(DictionaryPageHeader.NUM_VALUES, 256), (DictionaryPageHeader.ENCODING, PLAIN)],
        )
        pages.flush()  # its size places the data pages
        physical, encoding, encodings = INT32, RLE_DICTIONARY, [PLAIN, RLE, RLE_DICTIONARY]
    elif dtype == np.float32:
        physical, encoding, encodings = FLOAT, PLAIN, [PLAIN, RLE]
    elif dtype == np.uint8:
        physical, encoding, encodings = FIXED_LEN_BYTE_ARRAY, PLAIN, [PLAIN, RLE] if max_def else [PLAIN]
    else:
        raise ValueError(f"encode_chunk writes int8, float32 or packed uint8 values, not {dtype}")
    return physical, encoding, encodings, dict_offset


def _levels(rows: int, d: int, max_def: int, repeated: bool) -> bytes:
    """A v1 data page's levels for ``rows`` rows: for a list column of ``d`` values a row, its
    repetition levels (two RLE runs a row) then its definition levels (one run); for a flat column
    (a packed code a row) its definition levels only, and none at all when ``max_def`` is 0."""
    def_bytes = (int(max_def).bit_length() + 7) // 8
    if not repeated and not max_def:
        return b""
    dfl = _rle_run(rows * d if repeated else rows, max_def, def_bytes)
    out = struct.pack("<I", len(dfl)) + dfl
    if repeated:
        rep = (_rle_run(1, 0, 1) + (_rle_run(d - 1, 1, 1) if d > 1 else b"")) * rows
        out = struct.pack("<I", len(rep)) + rep + out
    return out


def _page_rows(blocks: Sequence[np.ndarray], rows_per_page: int) -> Iterator[np.ndarray]:
    """The rows of the blocks, one after the other, in pages of at most ``rows_per_page`` rows,
    views of the blocks where they can be: a block is cut into full pages, and what is left of it
    goes out as a page of its own when it has at least half a page of rows; only shorter rests are
    put together with the next block's first rows (a copy). So blocks whose lengths are not a
    multiple of the page (a batch cut at an input row group's end shifts every later one) are
    written without copies, in pages of half to one page."""
    pending: list = []
    pending_rows = 0
    half = max(1, rows_per_page // 2)
    for X in blocks:
        s = 0
        if pending_rows:  # a short rest of earlier blocks: fill it up to a page from this one
            s = min(rows_per_page - pending_rows, len(X))
            pending.append(X[:s])
            pending_rows += s
            if pending_rows >= half:
                yield np.concatenate(pending)
                pending, pending_rows = [], 0
        while len(X) - s >= rows_per_page:
            yield X[s : s + rows_per_page]
            s += rows_per_page
        if len(X) - s >= half:
            yield X[s:]
        elif s < len(X):
            pending.append(X[s:])
            pending_rows += len(X) - s
    if pending_rows:
        yield np.concatenate(pending)


def _encoded_values(block: np.ndarray, encoding: int):
    """A data page's values: float32 PLAIN (the contiguous block itself, little-endian, as
    bytes-like memory), or int8 as dictionary indices bit-packed at 8 bits (index = value + 128 =
    the byte with its top bit flipped)."""
    if encoding == PLAIN:  # float32 values, or packed codes' bytes
        return memoryview(
            np.ascontiguousarray(block if block.dtype == np.uint8 else block.astype("<f4", copy=False))
        ).cast("B")
    k = block.size
    groups = (k + 7) // 8
    head = bytes([8]) + thrift.encode_uvarint(groups << 1 | 1)
    out = bytearray(len(head) + groups * 8)  # the padding stays zero
    out[: len(head)] = head
    # the indices written once, in place (four passes before: zeros, xor, tobytes, concatenation)
    np.bitwise_xor(
        block.reshape(-1).view(np.uint8), 0x80, out=np.frombuffer(out, dtype=np.uint8, count=k, offset=len(head))
    )
    return out


def _rle_run(count: int, value: int, width_bytes: int) -> bytes:
    """One RLE run of the hybrid encoding: ``count`` copies of ``value``."""
    return thrift.encode_uvarint(count << 1) + int(value).to_bytes(width_bytes, "little")
