"""Analysis of embedding spaces and of what compression keeps."""

from .metrics import neighbour_recall

__all__ = ["neighbour_recall"]
