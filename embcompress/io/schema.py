"""The parquet format's Thrift structures, by name: the field ids of the structs the io package
reads and writes (parquet.thrift of apache/parquet-format), and the enum values it uses.

Every field id outside this module is spelled through these classes, so a reader can see which
field a line touches. ``REWRITE_KNOWS`` lists the fields the footer rewrite of
:class:`embcompress.io.writers` understands in a column chunk copied from pyarrow: a field
outside it (a page index, bloom filter lengths, encryption) could hold an offset the rewrite does
not move, so it is refused instead of written wrong.
"""

from __future__ import annotations

from enum import IntEnum


class FileMetaData(IntEnum):
    VERSION = 1
    SCHEMA = 2
    NUM_ROWS = 3
    ROW_GROUPS = 4
    KEY_VALUE_METADATA = 5
    CREATED_BY = 6
    COLUMN_ORDERS = 7
    ENCRYPTION_ALGORITHM = 8
    FOOTER_SIGNING_KEY_METADATA = 9


class RowGroup(IntEnum):
    COLUMNS = 1
    TOTAL_BYTE_SIZE = 2
    NUM_ROWS = 3
    SORTING_COLUMNS = 4
    FILE_OFFSET = 5
    TOTAL_COMPRESSED_SIZE = 6
    ORDINAL = 7


class ColumnChunk(IntEnum):
    FILE_PATH = 1
    FILE_OFFSET = 2
    META_DATA = 3
    OFFSET_INDEX_OFFSET = 4
    OFFSET_INDEX_LENGTH = 5
    COLUMN_INDEX_OFFSET = 6
    COLUMN_INDEX_LENGTH = 7
    CRYPTO_METADATA = 8
    ENCRYPTED_COLUMN_METADATA = 9


class ColumnMetaData(IntEnum):
    TYPE = 1
    ENCODINGS = 2
    PATH_IN_SCHEMA = 3
    CODEC = 4
    NUM_VALUES = 5
    TOTAL_UNCOMPRESSED_SIZE = 6
    TOTAL_COMPRESSED_SIZE = 7
    KEY_VALUE_METADATA = 8
    DATA_PAGE_OFFSET = 9
    INDEX_PAGE_OFFSET = 10
    DICTIONARY_PAGE_OFFSET = 11
    STATISTICS = 12
    ENCODING_STATS = 13
    BLOOM_FILTER_OFFSET = 14
    BLOOM_FILTER_LENGTH = 15
    SIZE_STATISTICS = 16
    GEOSPATIAL_STATISTICS = 17


class PageHeader(IntEnum):
    TYPE = 1
    UNCOMPRESSED_PAGE_SIZE = 2
    COMPRESSED_PAGE_SIZE = 3
    CRC = 4
    DATA_PAGE_HEADER = 5
    INDEX_PAGE_HEADER = 6
    DICTIONARY_PAGE_HEADER = 7
    DATA_PAGE_HEADER_V2 = 8


class DataPageHeader(IntEnum):
    NUM_VALUES = 1
    ENCODING = 2
    DEFINITION_LEVEL_ENCODING = 3
    REPETITION_LEVEL_ENCODING = 4
    STATISTICS = 5


class DictionaryPageHeader(IntEnum):
    NUM_VALUES = 1
    ENCODING = 2
    IS_SORTED = 3


class DataPageHeaderV2(IntEnum):
    NUM_VALUES = 1
    NUM_NULLS = 2
    NUM_ROWS = 3
    ENCODING = 4
    DEFINITION_LEVELS_BYTE_LENGTH = 5
    REPETITION_LEVELS_BYTE_LENGTH = 6
    IS_COMPRESSED = 7
    STATISTICS = 8


class PageType(IntEnum):
    DATA_PAGE = 0
    INDEX_PAGE = 1
    DICTIONARY_PAGE = 2
    DATA_PAGE_V2 = 3


class Encoding(IntEnum):
    PLAIN = 0
    PLAIN_DICTIONARY = 2
    RLE = 3
    RLE_DICTIONARY = 8


class PhysicalType(IntEnum):
    INT32 = 1
    FLOAT = 4
    FIXED_LEN_BYTE_ARRAY = 7


#: the file offsets in a ColumnMetaData, moved when a column chunk is copied to another place
PAGE_OFFSETS = (
    ColumnMetaData.DATA_PAGE_OFFSET,
    ColumnMetaData.INDEX_PAGE_OFFSET,
    ColumnMetaData.DICTIONARY_PAGE_OFFSET,
    ColumnMetaData.BLOOM_FILTER_OFFSET,
)

#: the fields of a copied column chunk (and of its ColumnMetaData) the footer rewrite understands:
#: offsets among them are moved, the rest hold no offset. BLOOM_FILTER_LENGTH goes with its offset.
REWRITE_KNOWS = {
    ColumnChunk: {ColumnChunk.FILE_PATH, ColumnChunk.FILE_OFFSET, ColumnChunk.META_DATA},
    ColumnMetaData: set(ColumnMetaData),
}


def unknown_fields(struct: type[IntEnum], fields) -> list[int]:
    """The ids among ``fields`` (typed Thrift fields of a ``struct``) the footer rewrite does not know."""
    known = REWRITE_KNOWS[struct]
    return sorted(f.fid for f in fields if f.fid not in known)
