"""Exact top-k search over byte codes scored with lookup tables (asymmetric distance computation,
Jegou et al., 2011): product-quantization, few-bit scalar and RaBitQ codes.

Codes with one small integer per dimension (few-bit SQ, RaBitQ) can also be scanned densely
(:func:`scan_dense`): a block of documents is decoded to floats once and multiplied with the
queries, d multiply-adds per pair where the tables take d * bits / 8 lookups into tables of
bits * d / 8 KiB per query, which outgrow the caches when the codes are long.

Codes whose table sums are inner products with decoded vectors (per-dimension codes, PQ's and
RQ's codebooks) can also be scanned as a matrix product (:func:`scan_decoded`): a block of
documents decoded once and multiplied with a large batch of queries by BLAS.

A query comes as its tables: ``tables[b, v]`` is what byte value ``v`` at byte ``b`` of a code
adds to the score, so a document's score is the sum of one entry per byte (times an optional
per-document ``scale``, as RaBitQ's correction factor). Higher is better. Results are sorted by
(score descending, document index ascending), on every machine and for every thread count. The
C kernel (``_adc``, built at install) scans in cache-sized blocks with the GIL released, split
over threads by query, or by document range for few queries; a numpy path gives the same results
where it could not be built.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np

from ..compressors._codes import nibble_indices, unpack_codes, unpack_planes
from ..core.errors import InputError
from .exact import QUERY_BLOCK, block_topk, check_k, scan_blocks
from .topk import merge_topk, split_scan

try:  # built by setup.py; optional
    from . import _adc
except ImportError:  # pragma: no cover - depends on the build
    _adc = None


def kernel_available() -> bool:
    return _adc is not None


class Factors(NamedTuple):
    """What a scan does to a code's raw score: ``raw * scale[j] + bias[j] * qconst[q]``, with a per-document
    ``scale`` and ``bias`` and a per-query ``qconst`` (each optional; ``qconst`` goes with ``bias``)."""

    scale: np.ndarray | None = None
    bias: np.ndarray | None = None
    qconst: np.ndarray | None = None


NO_FACTORS = Factors()


def adc_scores(
    tables: np.ndarray,
    codes: np.ndarray,
    scale: np.ndarray | None = None,
    bias: np.ndarray | None = None,
    qconst: np.ndarray | None = None,
) -> np.ndarray:
    """(queries, documents) float32 scores ``sum_b tables[q, b, codes[j, b]] * scale[j] +
    bias[j] * qconst[q]`` (scale and bias optional), in numpy: the reference for the kernel."""
    nq, nb, _ = tables.shape
    out = np.zeros((nq, len(codes)), dtype=np.float32)
    for b in range(nb):
        out += tables[:, b, :][:, codes[:, b]]
    return _with_factors(out, scale, bias, qconst)


def _with_factors(
    out: np.ndarray, scale: np.ndarray | None, bias: np.ndarray | None, qconst: np.ndarray | None
) -> np.ndarray:
    """(queries, documents) sums, in place: times the per-document ``scale``, plus ``bias[j] *
    qconst[q]`` (each when given), as the kernels compose a score."""
    if scale is not None:
        out *= scale[None, :]
    if bias is not None:
        out += bias[None, :] * np.asarray(qconst, dtype=np.float32)[:, None]
    return out


def adc_topk(
    tables: np.ndarray,
    codes: np.ndarray,
    k: int,
    *,
    scale: np.ndarray | None = None,
    bias: np.ndarray | None = None,
    qconst: np.ndarray | None = None,
    threads: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """For each query's tables (queries, bytes, 256), the ``k`` best document rows of ``codes``
    (documents, bytes) by the scores of :func:`adc_scores`. Returns (scores float32, indices
    int64), best first, ties by lower index."""
    tables = np.ascontiguousarray(tables, dtype=np.float32)
    codes = np.ascontiguousarray(codes, dtype=np.uint8)
    if tables.ndim != 3 or tables.shape[2] != 256 or codes.ndim != 2 or tables.shape[1] != codes.shape[1]:
        raise InputError(
            f"tables of shape {tables.shape} do not fit codes of shape {codes.shape}; expected (queries, bytes, 256)"
        )
    if scale is not None:
        scale = np.ascontiguousarray(scale, dtype=np.float32)
        if scale.shape != (len(codes),):
            raise InputError(f"scale has shape {scale.shape}; expected one value per document ({len(codes)})")
    if bias is not None:
        bias = np.ascontiguousarray(bias, dtype=np.float32)
        qconst = np.ascontiguousarray(qconst, dtype=np.float32)
        if bias.shape != (len(codes),) or qconst.shape != (len(tables),):
            raise InputError(
                f"bias needs one value per document ({len(codes)}) and qconst one per query ({len(tables)})"
            )
    return scan_adc(tables, codes, check_k(k, len(codes)), scale=scale, bias=bias, qconst=qconst, threads=threads)


def scan_adc(
    tables: np.ndarray,
    codes: np.ndarray,
    k: int,
    *,
    scale: np.ndarray | None = None,
    bias: np.ndarray | None = None,
    qconst: np.ndarray | None = None,
    threads: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`adc_topk` on validated arrays and a ``k`` already in 1..len(codes)."""
    tables = np.ascontiguousarray(tables, dtype=np.float32)
    nq, nb, _ = tables.shape
    nd = len(codes)
    if bias is not None:
        qconst = np.ascontiguousarray(qconst, dtype=np.float32)
    if _adc is None:
        return scan_blocks(
            lambda q0, q1, d0, d1: adc_scores(
                tables[q0:q1],
                codes[d0:d1],
                None if scale is None else scale[d0:d1],
                None if bias is None else bias[d0:d1],
                None if bias is None else qconst[q0:q1],
            ),
            nq,
            nd,
            k,
        )
    sc = b"" if scale is None else scale
    bi = b"" if bias is None else bias

    def run(q0: int, q1: int, start: int, end: int, s: np.ndarray, i: np.ndarray) -> None:
        _adc.topk(
            codes, tables[q0:q1], sc, bi, b"" if bias is None else qconst[q0:q1], nb, i.shape[1], start, end, s, i
        )

    return _split(run, nq, nd, k, threads)


def rows_table_sums(tables: np.ndarray, codes: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """(queries, candidates) float32: for each query, the sum of its (code bytes, 256) table's
    entries over each code row at ``rows[q]`` (rows of ``codes``, (n, code bytes) uint8)."""
    tables = np.ascontiguousarray(tables, dtype=np.float32)
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    out = np.empty(rows.shape, dtype=np.float32)
    if _adc is None:
        c = codes[rows]  # (q, c, nb)
        q, b = np.arange(len(rows))[:, None, None], np.arange(c.shape[2])[None, None, :]
        out[...] = tables[q, b, c].sum(axis=2, dtype=np.float32)
    elif isinstance(codes, np.ndarray):
        _adc.rows_adc(np.ascontiguousarray(codes, dtype=np.uint8), codes.shape[1], tables, rows, out)
    else:  # rows read back from blocks (search.fastscan.BlockRows): the candidates' rows gathered first
        local = np.arange(rows.size, dtype=np.int64).reshape(rows.shape)
        _adc.rows_adc(np.ascontiguousarray(codes[rows.reshape(-1)]), codes.shape[1], tables, local, out)
    return out


def _split(
    run, nq: int, nd: int, k: int, threads: int | None, queries_per_thread: int = 1
) -> tuple[np.ndarray, np.ndarray]:
    """Calls ``run(q0, q1, d0, d1, scores_out, indices_out)`` of a kernel through :func:`split_scan`."""

    def part(q0: int, q1: int, start: int, end: int) -> tuple[np.ndarray, np.ndarray]:
        kk = min(k, end - start)
        s = np.empty((q1 - q0, kk), dtype=np.float32)
        i = np.empty((q1 - q0, kk), dtype=np.int64)
        run(q0, q1, start, end, s, i)
        return s, i

    return split_scan(part, nq, nd, k, threads, queries_per_thread=queries_per_thread)


#: how per-dimension codes are laid out in a row: bit-planes (RaBitQ) or packed (few-bit SQ)
LAYOUTS = ("planes", "packed")


def unpack_dense(codes: np.ndarray, layout: str, bits: int, d: int) -> np.ndarray:
    """(n, d) uint8 per-dimension codes of rows in one of :data:`LAYOUTS`."""
    return (unpack_codes if layout == "packed" else unpack_planes)(codes, bits, d)


def dense_scores(
    queries: np.ndarray,
    codes: np.ndarray,
    layout: str,
    bits: int,
    levels: np.ndarray,
    scale: np.ndarray | None = None,
    bias: np.ndarray | None = None,
    qconst: np.ndarray | None = None,
) -> np.ndarray:
    """(queries, documents) float32 ``<queries[q], levels[j, u_j]> * scale + bias * qconst`` for
    per-dimension codes ``u`` in ``layout``, in numpy: the reference for :func:`scan_dense`."""
    X = dense_vectors(codes, layout, bits, levels)
    return _with_factors((np.asarray(queries, np.float32) @ X.T).astype(np.float32), scale, bias, qconst)


def dense_vectors(codes: np.ndarray, layout: str, bits: int, levels: np.ndarray) -> np.ndarray:
    """(n, d) float32 ``levels[j, u_j]`` of per-dimension codes ``u`` in ``layout`` (the C
    kernel's decoder where it was built: the same values)."""
    levels = np.ascontiguousarray(levels, dtype=np.float32)
    if _adc is not None and len(codes):
        codes = np.ascontiguousarray(codes, dtype=np.uint8)
        out = np.empty((len(codes), levels.shape[0]), dtype=np.float32)
        _adc.dense_decode(codes, codes.shape[1], LAYOUTS.index(layout), bits, levels.shape[0], levels, out)
        return out
    u = unpack_dense(codes, layout, bits, levels.shape[0])
    return np.take_along_axis(levels[None], u[:, :, None].astype(np.intp), axis=2)[:, :, 0]


def book_vectors(codes: np.ndarray, books: np.ndarray, add: bool, nbits: int) -> np.ndarray:
    """Rows of codeword indices decoded as ``TableScan.codebooks`` describes: float32 (n, m * w)
    codewords side by side, or (n, w) their sum (added in codebook order; C or numpy, the same
    values)."""
    books = np.ascontiguousarray(books, dtype=np.float32)
    m, ksub, w = books.shape
    idx = np.ascontiguousarray(codes if nbits == 8 else nibble_indices(codes, m), dtype=np.uint8)
    if idx.shape[1] != m:
        raise InputError(f"codes hold {idx.shape[1]} indices per row; the codebooks expect {m}")
    if _adc is not None and len(idx):
        out = np.empty((len(idx), w if add else m * w), dtype=np.float32)
        _adc.book_decode(idx, m, books, ksub, w, add, out)
        return out
    if not add:
        return books[np.arange(m), idx].reshape(len(idx), m * w)
    out = np.zeros((len(idx), w), dtype=np.float32)
    for j in range(m):
        out += books[j][idx[:, j]]
    return out


def scan_dense(
    queries: np.ndarray,
    codes: np.ndarray,
    k: int,
    *,
    decoding: tuple[str, int, np.ndarray],
    factors: Factors = NO_FACTORS,
    threads: int | None = None,
    portable: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Top-``k`` (1..len(codes), validated by the caller) of per-dimension codes by the scores of
    :func:`dense_scores` (with ``factors``), best first, ties by lower index; ``decoding`` is the family's
    ``(layout, bits, levels)`` (:meth:`~embcompress.core.capabilities.DenseScan.dense_codes`). The C
    kernel's AVX2 path and its portable one (``portable=True``) give the same results; numpy where it was
    not built."""
    layout, bits, levels = decoding
    scale, bias, qconst = factors
    queries = np.ascontiguousarray(queries, dtype=np.float32)
    levels = np.ascontiguousarray(levels, dtype=np.float32)
    codes = np.ascontiguousarray(codes, dtype=np.uint8)
    if layout not in LAYOUTS:
        raise InputError(f"layout must be one of {', '.join(LAYOUTS)}, got {layout!r}")
    nq, nd, d = len(queries), len(codes), levels.shape[0]
    if queries.ndim != 2 or queries.shape[1] != d or levels.shape != (d, 2**bits):
        raise InputError(
            f"queries of shape {queries.shape} and levels of shape {levels.shape} do not fit "
            f"{d} dimensions of {bits}-bit codes"
        )
    if bias is not None:
        qconst = np.ascontiguousarray(qconst, dtype=np.float32)
    if _adc is None:

        def block(q0: int, q1: int, d0: int, d1: int) -> np.ndarray:
            docs = (None if a is None else a[d0:d1] for a in (scale, bias))
            qc = None if bias is None else qconst[q0:q1]
            return dense_scores(queries[q0:q1], codes[d0:d1], layout, bits, levels, *docs, qc)

        return scan_blocks(block, nq, nd, k)
    sc = b"" if scale is None else np.ascontiguousarray(scale, dtype=np.float32)
    bi = b"" if bias is None else np.ascontiguousarray(bias, dtype=np.float32)
    fixed = (codes, codes.shape[1], LAYOUTS.index(layout), bits, d, levels)

    def run(q0: int, q1: int, start: int, end: int, s: np.ndarray, i: np.ndarray) -> None:
        qc = b"" if bias is None else qconst[q0:q1]
        _adc.dense_topk(*fixed, queries[q0:q1], sc, bi, qc, i.shape[1], start, end, portable, s, i)

    return _split(run, nq, nd, k, threads)


#: documents decoded at once by :func:`scan_decoded` (a block of 384-d vectors is 12 MiB)
DECODED_DOC_BLOCK = 8192


def scan_decoded(
    queries: np.ndarray,
    vectors: Callable[[int, int], np.ndarray],
    nd: int,
    k: int,
    *,
    factors: Factors = NO_FACTORS,
    doc_block: int = DECODED_DOC_BLOCK,
    query_block: int = QUERY_BLOCK,
) -> tuple[np.ndarray, np.ndarray]:
    """Top-``k`` (1..nd, validated by the caller) of ``<queries[q], vectors(d0, d1)[j]> * scale +
    bias * qconst`` (``factors``) over ``nd`` documents, best first, ties by lower index: each block of
    documents is decoded once (``vectors(d0, d1)``, float32) and multiplied with every query by BLAS. For a
    large batch this beats lookup tables, which cost a lookup per code byte and pair where the
    product runs near the core's peak (docs/decisions/0008)."""
    scale, bias, qconst = factors
    queries = np.ascontiguousarray(queries, dtype=np.float32)
    nq = len(queries)
    if bias is not None:
        qconst = np.ascontiguousarray(qconst, dtype=np.float32)
    best_s = best_i = None
    for d0 in range(0, nd, doc_block):
        d1 = min(d0 + doc_block, nd)
        X = np.ascontiguousarray(vectors(d0, d1), dtype=np.float32)
        parts_s, parts_i = [], []
        for q0 in range(0, nq, query_block):
            q1 = min(q0 + query_block, nq)
            S = _with_factors(
                queries[q0:q1] @ X.T,
                None if scale is None else scale[d0:d1],
                None if bias is None else bias[d0:d1],
                None if bias is None else qconst[q0:q1],
            )
            s, i = block_topk(S, min(k, d1 - d0), d0)
            parts_s.append(s)
            parts_i.append(i)
        s, i = np.concatenate(parts_s), np.concatenate(parts_i)
        best_s, best_i = (s, i) if best_s is None else merge_topk([best_s, s], [best_i, i], k, ascending=True)
    return best_s, best_i


#: the plane scan unpacks a document once for every query it is given, so a search splits by
#: document range until each thread would get this many queries (then by query, no merge)
PLANE_QUERIES_PER_THREAD = 32
#: the plane kernel's paths, in the order the kernel numbers them
PLANE_PATHS = ("auto", "portable", "avx2")


def planes_scores(
    queries: tuple[np.ndarray, np.ndarray, np.ndarray],
    codes: np.ndarray,
    bits: int,
    plane_bytes: int,
    factors: Factors = NO_FACTORS,
) -> np.ndarray:
    """(queries, documents) float32 ``(<q8, u> * step + offset) * scale + bias * qconst`` for the quantized
    ``queries`` ``(q8, step, offset)`` (:meth:`~embcompress.core.capabilities.PlaneScan.quantized_queries`)
    and rows of ``bits`` bit-planes of ``plane_bytes`` bytes (``u``: the per-dimension code), in numpy: the
    reference for :func:`scan_planes`. The inner product is exact (integers)."""
    q8, step, offset = queries
    scale, bias, qconst = factors
    u = unpack_planes(np.ascontiguousarray(codes[:, : bits * plane_bytes]), bits, plane_bytes * 8).astype(np.int64)
    q = np.asarray(q8, np.int64)[:, : plane_bytes * 8].reshape(len(q8), plane_bytes, 8)[:, :, ::-1]  # bit order
    dots = q.reshape(len(q8), -1) @ u.T
    out = dots.astype(np.float32) * np.asarray(step, np.float32)[:, None] + np.asarray(offset, np.float32)[:, None]
    return _with_factors(out.astype(np.float32), scale, bias, qconst)


def scan_planes(
    queries: tuple[np.ndarray, np.ndarray, np.ndarray],
    codes: np.ndarray,
    k: int,
    *,
    bits: int,
    plane_bytes: int,
    factors: Factors = NO_FACTORS,
    threads: int | None = None,
    path: str = "auto",
) -> tuple[np.ndarray, np.ndarray]:
    """Top-``k`` (1..len(codes), validated by the caller) of bit-plane codes for 8-bit queries ``(q8, step,
    offset)`` by the scores of :func:`planes_scores`, best first, ties by lower index. The integer inner
    products are exact, so every path of the kernel (``path``: "auto", the best this CPU has; "avx2", at most
    AVX2; "portable") and numpy (where the kernel was not built) give the same results."""
    q8, step, offset = queries
    scale, bias, qconst = factors
    if path not in PLANE_PATHS:
        raise InputError(f"path must be one of {', '.join(PLANE_PATHS)}, got {path!r}")
    q8 = np.ascontiguousarray(q8, dtype=np.int8)
    step = np.ascontiguousarray(step, dtype=np.float32)
    offset = np.ascontiguousarray(offset, dtype=np.float32)
    codes = np.ascontiguousarray(codes, dtype=np.uint8)
    nq, nd = len(q8), len(codes)
    if bias is not None:
        qconst = np.ascontiguousarray(qconst, dtype=np.float32)
    if _adc is None:

        def block(q0: int, q1: int, d0: int, d1: int) -> np.ndarray:
            docs = (None if a is None else a[d0:d1] for a in (scale, bias))
            qc = None if bias is None else qconst[q0:q1]
            qs = (q8[q0:q1], step[q0:q1], offset[q0:q1])
            return planes_scores(qs, codes[d0:d1], bits, plane_bytes, Factors(*docs, qc))

        return scan_blocks(block, nq, nd, k)
    sc = b"" if scale is None else np.ascontiguousarray(scale, dtype=np.float32)
    bi = b"" if bias is None else np.ascontiguousarray(bias, dtype=np.float32)

    def run(q0: int, q1: int, start: int, end: int, s: np.ndarray, i: np.ndarray) -> None:
        qs = (q8[q0:q1], step[q0:q1], offset[q0:q1])
        qc = b"" if bias is None else qconst[q0:q1]
        _adc.planes_topk(
            codes,
            codes.shape[1],
            bits,
            plane_bytes,
            *qs,
            sc,
            bi,
            qc,
            i.shape[1],
            start,
            end,
            PLANE_PATHS.index(path),
            s,
            i,
        )

    return _split(run, nq, nd, k, threads, queries_per_thread=PLANE_QUERIES_PER_THREAD)
