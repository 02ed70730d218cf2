"""Search over float vectors and compressed codes."""

from .exact import float_search, hamming_distances, hamming_search, normalize_rows

__all__ = ["float_search", "hamming_distances", "hamming_search", "normalize_rows"]
