"""The parts of a parquet page the direct decoder (:mod:`.pages`) reads, and what the page writer
(:mod:`.page_encoder`) shares with it: the encodings and page types, the codecs, the checksum, the
Thrift page header, the level checks and the values of one page. Any surprise raises
:class:`Unsupported`: the reader then hands the batch to pyarrow."""

from __future__ import annotations

import os
import struct
import zlib

import numpy as np
import pyarrow as pa

from . import thrift
from .schema import DictionaryPageHeader, Encoding, PageHeader, PageType

try:
    from . import _rle
except ImportError:  # pragma: no cover - the optional extension was not built
    _rle = None

#: zlib.crc32's value (pages' checksums), by the extension's carry-less multiplication where the
#: CPU has it (5-6x zlib 1.2's speed: the checksum was most of the writer's time for float pages)
crc32 = _rle.crc32 if _rle is not None and _rle.fast_crc32() else zlib.crc32

#: parquet compression codec name (pyarrow's metadata spelling) -> pyarrow codec name
CODECS = {
    "SNAPPY": "snappy",
    "ZSTD": "zstd",
    "LZ4_RAW": "lz4_raw",
    "LZ4": "lz4_raw",
    "GZIP": "gzip",
    "BROTLI": "brotli",
}
PLAIN, PLAIN_DICTIONARY, RLE, RLE_DICTIONARY = (
    Encoding.PLAIN,
    Encoding.PLAIN_DICTIONARY,
    Encoding.RLE,
    Encoding.RLE_DICTIONARY,
)
DATA_PAGE, INDEX_PAGE, DICTIONARY_PAGE, DATA_PAGE_V2 = (
    PageType.DATA_PAGE,
    PageType.INDEX_PAGE,
    PageType.DICTIONARY_PAGE,
    PageType.DATA_PAGE_V2,
)
HEADER_READ = 512


class Unsupported(Exception):
    """The direct decoder does not handle this row group (or this page); pyarrow does."""


def check_crc(header: dict, verify_crc: bool, *parts) -> None:
    """The page's checksum, when it has one and ``verify_crc``, against its stored bytes ``parts``
    (one after the other)."""
    if verify_crc and PageHeader.CRC in header:
        crc = 0
        for part in parts:
            crc = crc32(part, crc)
        if crc != header[PageHeader.CRC] & 0xFFFFFFFF:
            raise Unsupported("page checksum mismatch")


def dictionary_values(header: dict, raw) -> np.ndarray:
    sub = header.get(PageHeader.DICTIONARY_PAGE_HEADER) or {}
    if sub.get(DictionaryPageHeader.ENCODING, PLAIN) not in (PLAIN, PLAIN_DICTIONARY):
        raise Unsupported("dictionary page encoding")
    n = sub.get(DictionaryPageHeader.NUM_VALUES, -1)
    if not isinstance(n, int) or n < 0 or 4 * n > len(raw):
        raise Unsupported("dictionary page size")
    return np.frombuffer(raw, dtype=np.float32, count=n)


def codec_of(compression: str):
    if compression == "UNCOMPRESSED":
        return None
    name = CODECS.get(compression)
    if name is None or not pa.Codec.is_available(name):
        raise Unsupported(f"codec {compression}")
    return pa.Codec(name)


def decompress(codec, data, size: int):
    if codec is None:
        return data
    if codec.name == "lz4_raw" and len(data) >= 8 and struct.unpack_from(">II", data) == (size, len(data) - 8):
        raise Unsupported("LZ4 with Hadoop framing")  # pyarrow reports LZ4_RAW and the old LZ4 alike
    try:
        return codec.decompress(data, decompressed_size=size)
    except (pa.ArrowException, ValueError) as exc:
        raise Unsupported(f"decompression: {exc}") from None


def check_levels_v1(raw: memoryview, at: int, width: int, n: int, level: int, period: int, phase: int) -> int:
    """Levels of a v1 page (4-byte length, then the stream) starting at ``at``, checked as
    :func:`check_stream` does; returns where they end."""
    if at + 4 > len(raw):
        raise Unsupported("page ends in its levels")
    length = struct.unpack_from("<I", raw, at)[0]
    if at + 4 + length > len(raw):
        raise Unsupported("page ends in its levels")
    check_stream(raw[at + 4 : at + 4 + length], width, n, level, period, phase)
    return at + 4 + length


def check_stream(buf, width: int, n: int, level: int, period: int, phase: int) -> None:
    """``n`` levels of ``width`` bits: with ``period`` > 0 the repetition levels of lists of
    ``period`` values (0 where a list starts, ``level`` elsewhere; ``phase``: the index in the row
    group of the first value), else every level equal to ``level``."""
    try:
        _, bad = _rle.check_levels(buf, width, n, level, period, phase)
    except ValueError as exc:
        raise Unsupported(str(exc)) from None
    if bad >= 0:  # a null, an empty or ragged list: pyarrow names the row
        raise Unsupported("levels")


def page_values(values: memoryview, encoding, n: int, dictionary) -> np.ndarray:
    if encoding == PLAIN:
        if 4 * n > len(values):
            raise Unsupported("page ends in its values")
        return np.frombuffer(values, dtype=np.float32, count=n)
    if encoding in (RLE_DICTIONARY, PLAIN_DICTIONARY):
        if dictionary is None or len(values) < 1:
            raise Unsupported("dictionary page missing")
        page = np.empty(n, dtype=np.float32)
        try:
            _rle.decode_dict(values[1:], values[0], n, dictionary, page)
        except ValueError as exc:
            raise Unsupported(str(exc)) from None
        return page
    raise Unsupported(f"value encoding {encoding}")


def page_header(fd: int, pos: int, end: int) -> tuple[dict, int, int]:
    """The Thrift-compact page header at ``pos``: (fields by id, its length in bytes, the length
    of the page data after it)."""
    size = HEADER_READ
    while True:
        buf = os.pread(fd, min(size, end - pos), pos)
        try:
            typed, used = thrift.read_struct(buf, 0)
            fields = thrift.plain(typed)
            usize, csize = fields.get(PageHeader.UNCOMPRESSED_PAGE_SIZE), fields.get(PageHeader.COMPRESSED_PAGE_SIZE)
            if (
                not isinstance(usize, int)
                or not isinstance(csize, int)
                or usize < 0
                or csize < 0
                or pos + used + csize > end
            ):
                raise Unsupported("bad page header")
            return fields, used, csize
        except IndexError:  # header longer than what was read (large statistics)
            if len(buf) < size or size >= 1 << 24:
                raise Unsupported("truncated page header") from None
            size *= 16
        except RecursionError:  # garbage nesting structs without end
            raise Unsupported("page header nests too deep") from None
        except thrift.ThriftError as exc:
            raise Unsupported(f"page header: {exc}") from None
