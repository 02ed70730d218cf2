"""Streaming vector file I/O (parquet and npy)."""

from .info import describe_path
from .npy import NpyVectors
from .readers import Batch, META_KEY, ParquetVectors, column_to_numpy, file_format
from .sources import open_vectors
from .whole import count_rows, read_all, read_sample
from .writers import VectorWriter, arrow_type, check_output_path, to_arrow

__all__ = [
    "Batch",
    "describe_path",
    "META_KEY",
    "NpyVectors",
    "ParquetVectors",
    "VectorWriter",
    "arrow_type",
    "check_output_path",
    "column_to_numpy",
    "file_format",
    "open_vectors",
    "read_all",
    "read_sample",
    "count_rows",
    "to_arrow",
]
