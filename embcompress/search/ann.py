"""Indexes of the serving libraries over an :class:`~embcompress.search.Index`'s documents: faiss
(exact flat indexes, HNSW graphs, scalar-quantizer and product-quantizer indexes) and usearch. One
place builds them, for ``search --index hnsw`` and for ``export``; no graph is home-made here.

What each kind of document becomes (row numbers are the libraries' ids; the user's ids map back
through :attr:`Index.ids`):

=========  =====================================  ===============================  =============
kind       faiss flat                             faiss hnsw                       usearch
=========  =====================================  ===============================  =============
bits       ``IndexBinaryFlat`` (Hamming)          ``IndexBinaryHNSW``              b1, hamming
float      ``IndexFlatIP`` on unit rows (cosine)  ``IndexHNSWFlat``, inner product  f32, cos
int8       ``IndexScalarQuantizer`` QT_8bit with  (none)                           i8, cos (of
           the compressor's ranges, codes copied                                   the decoded
           as they are (inner product)                                             vectors)
pq / opq   ``IndexPQ`` / ``IndexPreTransform``    (none)                           (none)
           with the fitted codebooks, codes
           copied as they are
=========  =====================================  ===============================  =============
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._util import normalize_rows, require
from ..capabilities import FaissExport
from ..errors import InputError

STRUCTURES = ("flat", "hnsw")
#: the serving targets that hold each output kind; codes only where their family declares one
KIND_TARGETS = {"bits": ("faiss", "usearch", "lancedb"), "float": ("faiss", "usearch", "lancedb"),
                "int8": ("faiss", "usearch"), "codes": ()}
TARGETS = ("faiss", "usearch", "lancedb")


def serve_targets(comp, kind: str) -> tuple[str, ...]:
    """Where codes of output ``kind`` made by ``comp`` (None: float vectors) can be exported and
    served: what the kind allows, plus what a whole-compressor family declares
    (:class:`~embcompress.capabilities.FaissExport`)."""
    declared = getattr(comp, "exports", ()) if comp is not None else ()
    return tuple(t for t in TARGETS if t in KIND_TARGETS.get(kind, ()) or t in declared)
HNSW_M = 32  # links per node: faiss' and usearch's usual choice for recall near 0.95+ at ef 64-128
HNSW_EF_CONSTRUCTION = 80
HNSW_EF_SEARCH = 128


def require_faiss():
    return require("faiss", "faiss", "faiss indexes")


def faiss_index(index, structure: str = "flat", *, m: int = HNSW_M, ef_construction: int = HNSW_EF_CONSTRUCTION) -> Any:
    """A faiss index holding ``index``'s documents in its row order (faiss ids = rows)."""
    if structure not in STRUCTURES:
        raise InputError(f"index structure must be one of {', '.join(STRUCTURES)}, got {structure!r}")
    faiss = require_faiss()
    kind, data = index.kind, index.data
    if kind == "bits":
        d = data.shape[1] * 8  # the padding bits are zero in documents and queries alike
        if structure == "hnsw":
            out = faiss.IndexBinaryHNSW(d, m)
            out.hnsw.efConstruction = ef_construction
        else:
            out = faiss.IndexBinaryFlat(d)
        out.add(np.ascontiguousarray(data, dtype=np.uint8))
        return out
    if kind == "float":
        X = np.ascontiguousarray(data, dtype=np.float32)  # cosine indexes hold unit rows already
        if structure == "hnsw":
            out = faiss.IndexHNSWFlat(X.shape[1], m, faiss.METRIC_INNER_PRODUCT)
            out.hnsw.efConstruction = ef_construction
        else:
            out = faiss.IndexFlatIP(X.shape[1])
        out.add(X)
        return out
    if structure == "hnsw":
        raise InputError(f"an HNSW graph is built over bits or float vectors; these are {kind} codes "
                         "(search them exactly, or export them to a flat index)")
    comp = index.compressor.query_space.last
    if kind == "int8":
        lo, hi = comp.ranges_.astype(np.float32)
        d = len(lo)
        out = faiss.IndexScalarQuantizer(d, faiss.ScalarQuantizer.QT_8bit, faiss.METRIC_INNER_PRODUCT)
        faiss.copy_array_to_vector(np.concatenate([lo, hi - lo]).astype(np.float32), out.sq.trained)
        out.is_trained = True
        codes = np.ascontiguousarray(data, dtype=np.int8).view(np.uint8) ^ np.uint8(0x80)  # -128..127 -> 0..255
        faiss.copy_array_to_vector(codes.reshape(-1), out.codes)
        out.ntotal = len(codes)
        return out
    if isinstance(index.compressor, FaissExport):  # the family declares its own faiss index (not in a chain)
        return index.compressor.to_faiss(data)
    raise InputError(f"{index.compressor.name} codes have no faiss index type here; faiss indexes take bits, float "
                     "vectors, int8 and the codes of a family that declares one (unchained pq, opq)")


def faiss_queries(index, Q: np.ndarray) -> np.ndarray:
    """Float queries as the faiss index of ``index`` takes them: compressed to bits, unit rows for
    cosine, decoded space for int8 / pq."""
    comp = index.compressor
    if index.kind == "bits":
        return comp.transform(Q)
    if comp is None:
        return normalize_rows(Q) if index.metric == "cosine" else np.ascontiguousarray(Q, dtype=np.float32)
    return np.ascontiguousarray(comp.query_space.linear(Q), dtype=np.float32)


def hnsw_search(index, graph, Q: np.ndarray, k: int, ef: int = HNSW_EF_SEARCH) -> tuple[np.ndarray, np.ndarray]:
    """(scores, rows) of the ``k`` approximate nearest documents, scored as the exact scan scores
    them (Hamming similarity for bits, cosine for floats); rows of -1 (missing) get score -inf."""
    graph.hnsw.efSearch = max(int(ef), k)
    qs = faiss_queries(index, Q)
    dist, rows = graph.search(qs, k)
    rows = rows.astype(np.int64)
    if index.kind == "bits":
        scores = (index.width - dist).astype(np.float32)
    else:
        scores = dist.astype(np.float32)
    scores[rows < 0] = -np.inf
    return scores, rows


def usearch_index(index) -> Any:
    """A usearch index of ``index``'s documents (keys = rows): b1 / hamming for bits, f32 / cos for
    floats, i8 / cos of the decoded vectors for int8."""
    from_module = require("usearch.index", "export", "usearch indexes")
    comp = index.compressor
    if index.kind == "bits":
        out = from_module.Index(ndim=index.data.shape[1] * 8, metric="hamming", dtype="b1")
        vectors = np.ascontiguousarray(index.data, dtype=np.uint8)
    elif index.kind == "float":
        out = from_module.Index(ndim=index.width, metric="cos", dtype="f32")
        vectors = np.ascontiguousarray(index.data, dtype=np.float32)
    elif index.kind == "int8":
        vectors = normalize_rows(comp.decode(index.data))  # usearch's i8 maps [-1, 1] to [-127, 127]
        out = from_module.Index(ndim=vectors.shape[1], metric="cos", dtype="i8")
    else:
        raise InputError(f"{comp.name} codes have no usearch index type; usearch takes bits, float vectors and int8")
    out.add(np.arange(len(vectors), dtype=np.uint64), vectors)
    return out
