"""Search over float vectors and compressed codes: exact float / int8 / Hamming, and rerank."""

from .exact import float_search, hamming_distances, hamming_search, normalize_rows, topk_by_blocks
from .hamming import hamming_topk, kernel_available
from .index import DEFAULT_MULTIPLIER, RERANKS, Index, PartedIndex, SearchResult
from .stores import ArrayStore, DecodedStore, NpyStore, ParquetStore, VectorStore, open_store

__all__ = [
    "ArrayStore",
    "DEFAULT_MULTIPLIER",
    "DecodedStore",
    "Index",
    "NpyStore",
    "PartedIndex",
    "ParquetStore",
    "RERANKS",
    "SearchResult",
    "VectorStore",
    "float_search",
    "hamming_distances",
    "hamming_search",
    "hamming_topk",
    "kernel_available",
    "normalize_rows",
    "open_store",
    "topk_by_blocks",
]
