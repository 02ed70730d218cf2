"""Top-k over codes of 4-bit codebook indices (``pq:M:nbits=4``, ``opq:M:nbits=4``, ``rq:M:nbits=4``)
with each query's tables rounded to 8 bits and held in vector registers: the "fast scan" of
Andre, Kermarrec and Le Scouarnec (VLDB 2015; faiss's ``IndexPQFastScan``).

A 4-bit codebook has 16 codewords, so a query's table for it is 16 bytes once its entries are
rounded to 8 bits: one register lane. A byte shuffle then looks up that codebook for 32 rows at
once, where the float tables of :func:`~embcompress.search.adc.scan_adc` take a load per row and
byte. The rows are kept transposed in blocks of 32 (:func:`to_blocks`), one 32-byte load holding
a byte of 32 rows.

The rounding is per query (:func:`quantize_tables`): each codebook's table less its smallest entry,
divided by one step ``delta`` (the largest such range over 255), rounded. A row's integer sum ``S``
then stands for ``delta * S + base`` (``base`` the sum of the smallest entries), within ``m *
delta / 2`` of its float table sum. That approximate score, times the per-document factors of the
other scans, is what this scan ranks by and returns: a serving plan's first stage, whose
candidates a wider copy rescores. It is used for one query and for a batch alike, so what
``recommend`` measures is what search serves; the C kernel's AVX2 and portable paths and the
numpy one give the same results on every thread count (same integers, same float operations in
the same order).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..compressors._codes import nibble_indices
from ..core._parallel import num_threads
from .adc import Factors
from .topk import merge_topk, split_scan

try:  # built by setup.py; optional
    from . import _fastscan
except ImportError:  # pragma: no cover - depends on the build
    _fastscan = None

ROWS = 32  # rows per block
#: a scan of fewer queries than threads is split by document range only when each part gets at least this many
#: rows: a million 12-byte rows take about a millisecond on one thread, and on two the second thread's wake-up
#: and the merge of two candidate lists cost more than it saves (a 6 B plan at 2,000 candidates over 1M rows:
#: 3.2 ms on one thread, 4.1 on two, here)
MIN_ROWS_PER_THREAD = 2_000_000
#: rows of one kernel call: its best-k buffer keys rows by their offset in the range, in 32 bits
KERNEL_SPAN = 1 << 32
#: at most this many codebooks: 256 entries of at most 255 sum below 2**16
MAX_BOOKS = 256
LEVELS = 255


def kernel_path() -> str:
    """Which code scores: "avx2", "portable" (the C kernel without AVX2) or "numpy"."""
    return "numpy" if _fastscan is None else _fastscan.simd()


def scans(books: tuple[np.ndarray, bool, int] | None, per_document_scale: bool) -> bool:
    """Whether a family's codes (its ``TableScan.codebooks()``) are scanned so: 4-bit codebooks, at
    most :data:`MAX_BOOKS` of them, and no per-document scale of the codes' own (RaBitQ's)."""
    return books is not None and books[2] == 4 and len(books[0]) <= MAX_BOOKS and not per_document_scale


class Tables(NamedTuple):
    """Each query's tables rounded to 8 bits: ``luts`` (queries, books rounded up to even, 16)
    uint8, and the float32 ``delta`` and ``base`` per query of the score ``delta * S + base``."""

    luts: np.ndarray
    delta: np.ndarray
    base: np.ndarray


def book_tables(books: tuple[np.ndarray, bool, int], Q: np.ndarray) -> np.ndarray:
    """(queries, m, 16) float32: each query's inner product with every codeword of each codebook.
    ``Q`` is in the space of the family's ``table_queries``; ``books`` is its ``codebooks()``:
    codewords side by side (product quantization, each against its slice of the query) or summed
    (residual, each against the whole query)."""
    cb, add, _ = books
    m, ksub, w = cb.shape
    Q = np.asarray(Q, dtype=np.float32)
    if add:
        return (Q @ cb.reshape(m * ksub, w).T).reshape(len(Q), m, ksub).astype(np.float32)
    return np.einsum("qmd,mkd->qmk", Q.reshape(len(Q), m, w), cb, optimize=True).astype(np.float32)


def quantize_tables(T: np.ndarray) -> Tables:
    """(queries, m, 16) float tables -> :class:`Tables`: per query one step ``delta`` for every
    codebook (so the integer sums add up like the floats), each codebook shifted by its smallest
    entry (``base`` adds them back)."""
    T = np.asarray(T, dtype=np.float32)
    nq, m, _ = T.shape
    lo = T.min(axis=2)
    shifted = T - lo[:, :, None]
    top = shifted.reshape(nq, -1).max(axis=1)
    delta = np.where(top > 0, top / LEVELS, 1.0).astype(np.float32)
    luts = np.zeros((nq, m + m % 2, 16), dtype=np.uint8)  # an odd count: the last byte's high half adds 0
    luts[:, :m] = np.clip(np.rint(shifted / delta[:, None, None]), 0, LEVELS).astype(np.uint8)
    return Tables(luts, delta, lo.sum(axis=1, dtype=np.float64).astype(np.float32))


def to_blocks(codes: np.ndarray) -> np.ndarray:
    """(rows, bytes) codes -> (ceil(rows / 32), bytes, 32): blocks of 32 rows, each transposed."""
    codes = np.ascontiguousarray(codes, dtype=np.uint8)
    n, nbytes = codes.shape
    out = np.empty(((n + ROWS - 1) // ROWS, nbytes, ROWS), dtype=np.uint8)
    if _fastscan is not None:
        _fastscan.blocks(codes, nbytes, out)
        return out
    padded = np.zeros((len(out) * ROWS, nbytes), np.uint8)
    padded[:n] = codes
    out[...] = padded.reshape(len(out), ROWS, nbytes).transpose(0, 2, 1)
    return out


def rows_into_blocks(codes: np.ndarray) -> "BlockRows | np.ndarray":
    """``codes`` ((rows, bytes) uint8) made into :func:`to_blocks`' blocks in their own memory, for a caller
    that gives the array up: the rows are never in memory twice, where a copy into blocks held both for a
    moment (ten million 48-byte codes: a peak of 1,215 MiB against 763; bench_load_rss.py). The array grows
    by at most 31 rows (a realloc, which a large array's pages survive without a copy) and each block of 32 rows is
    transposed where it lies; the array then holds the blocks, and no other view of it may be used after.
    An array it cannot take so (not its own data, or no kernel built) is returned as it is."""
    flags = codes.flags
    if _fastscan is None or not (flags.owndata and flags.c_contiguous and flags.writeable and len(codes)):
        return codes
    if codes.ndim != 2 or codes.dtype != np.uint8 or 2 * codes.shape[1] > MAX_BOOKS:
        return codes
    n, nbytes = codes.shape
    padded = -(-n // ROWS) * ROWS
    codes.resize((padded, nbytes), refcheck=False)
    _fastscan.blocks_in_place(codes, n, nbytes)
    return BlockRows(codes.reshape(padded // ROWS, nbytes, ROWS), n)


def table_sums(tables: Tables, codes: np.ndarray) -> np.ndarray:
    """(queries, rows) int64: each row's sum of its codebooks' 8-bit entries (the reference)."""
    idx = nibble_indices(codes, tables.luts.shape[1])
    books = np.arange(idx.shape[1])
    return np.stack([tables.luts[q][books, idx].sum(axis=1, dtype=np.int64) for q in range(len(tables.luts))])


def approximate_scores(tables: Tables, codes: np.ndarray, factors: Factors, rows=slice(None)) -> np.ndarray:
    """(queries, rows) float32 scores as the kernel computes them, in the same order of float operations;
    ``rows`` selects the per-document factors of ``codes``' rows."""
    s = tables.delta[:, None] * table_sums(tables, codes).astype(np.float32)
    s = s + tables.base[:, None]
    if factors.scale is not None:
        s = s * factors.scale[rows][None, :]
    if factors.bias is not None:
        s = s + factors.bias[rows][None, :] * factors.qconst[:, None]
    return s.astype(np.float32)


class BlockRows:
    """The rows of codes kept as :func:`to_blocks` made them, read back as rows: what an index holds in place
    of its row-major codes once they are in blocks, so that they are in memory once (a fast-scan plan's RAM is
    its budget, not twice it). Indexed like a (rows, bytes) uint8 array by a row, a slice, an array of rows or a
    mask, then optionally the bytes; each read copies the rows asked for. ``np.asarray`` of it makes the whole
    row-major array (a copy: for exports and saves, not for search)."""

    ndim = 2
    dtype = np.dtype(np.uint8)

    def __init__(self, blocks: np.ndarray, rows: int):
        self.blocks, self.shape = blocks, (rows, blocks.shape[1])
        self._view = blocks.transpose(0, 2, 1)  # (blocks, 32, bytes), no copy: row r at [r // 32, r % 32]

    def __len__(self) -> int:
        return self.shape[0]

    @property
    def nbytes(self) -> int:
        return self.blocks.nbytes

    def __getitem__(self, key):
        rest = ()
        if isinstance(key, tuple):
            key, rest = key[0], key[1:]
        n = len(self)
        rows = np.arange(*key.indices(n)) if isinstance(key, slice) else np.asarray(key)
        if rows.dtype == bool:
            if rows.shape != (n,):
                raise IndexError(f"a mask of {rows.shape} for {n} rows")
            rows = np.flatnonzero(rows)
        elif rows.dtype.kind not in "iu":
            raise IndexError(f"rows are indexed by integers, slices or a mask, not {rows.dtype}")
        rows = rows.astype(np.int64, copy=False)
        if rows.size and (rows.min() < -n or rows.max() >= n):
            raise IndexError(f"a row out of range for {n} rows")
        rows = np.where(rows < 0, rows + n, rows)
        out = self._view[rows // ROWS, rows % ROWS]
        return out[(slice(None),) * rows.ndim + rest] if rest else out

    def __array__(self, dtype=None, copy=None):
        if copy is False:
            raise ValueError("rows kept as blocks are made into an array by a copy (copy=False asked for none)")
        out = self._view.reshape(-1, self.shape[1])[: len(self)]
        return out if dtype is None else out.astype(dtype, copy=False)


class FastCodes:
    """Codes of 4-bit codebook indices held for :meth:`topk`: where the kernel is built, transposed into
    blocks of 32 rows and kept so only (``codes`` then reads rows back from the blocks: :class:`BlockRows`);
    otherwise the rows as stored, which the numpy path scores."""

    def __init__(self, codes: np.ndarray | BlockRows):
        if isinstance(codes, BlockRows):  # already blocks (rows_into_blocks): held as they are
            self.blocks, self.codes = codes.blocks, codes
            return
        codes = np.ascontiguousarray(codes, dtype=np.uint8)
        self.blocks = to_blocks(codes) if _fastscan is not None else None
        self.codes: np.ndarray | BlockRows = codes if self.blocks is None else BlockRows(self.blocks, len(codes))

    def topk(
        self, tables: Tables, k: int, factors: Factors, *, threads: int | None = None, path: int = 0
    ) -> tuple[np.ndarray, np.ndarray]:
        """(scores, rows) of the ``k`` (1..rows) best rows per query by the approximate score,
        best first, ties by lower row. ``path`` 1: the kernel's portable path (for tests)."""
        nq, nd = len(tables.luts), len(self.codes)
        luts = np.ascontiguousarray(tables.luts)
        delta = np.ascontiguousarray(tables.delta, dtype=np.float32)
        base = np.ascontiguousarray(tables.base, dtype=np.float32)
        sc = b"" if factors.scale is None else np.ascontiguousarray(factors.scale, dtype=np.float32)
        bi = b"" if factors.bias is None else np.ascontiguousarray(factors.bias, dtype=np.float32)
        qc = b"" if factors.bias is None else np.ascontiguousarray(factors.qconst, dtype=np.float32)

        def part(q0: int, q1: int, start: int, end: int) -> tuple[np.ndarray, np.ndarray]:
            kk = min(k, end - start)
            if self.blocks is None:
                return self._numpy_part(tables, factors, q0, q1, start, end, kk)
            if end - start > KERNEL_SPAN:  # over 4 billion rows on one thread: spans merged
                cuts = list(range(start, end, KERNEL_SPAN)) + [end]
                spans = [part(q0, q1, a, b) for a, b in zip(cuts, cuts[1:])]
                return merge_topk([p[0] for p in spans], [p[1] for p in spans], kk, ascending=True)
            s = np.empty((q1 - q0, kk), dtype=np.float32)
            i = np.empty((q1 - q0, kk), dtype=np.int64)
            q = qc if isinstance(qc, bytes) else qc[q0:q1]
            args = (luts[q0:q1], delta[q0:q1], base[q0:q1], sc, bi, q, kk, start, end, s, i, path)
            _fastscan.topk(self.blocks, self.codes.shape[1], nd, *args)
            return s, i

        threads = threads or num_threads()
        if nq < threads and nd < 2 * MIN_ROWS_PER_THREAD:
            threads = 1
        return split_scan(part, nq, nd, k, threads)

    def _numpy_part(self, tables: Tables, factors: Factors, q0: int, q1: int, start: int, end: int, k: int):
        sub = Tables(tables.luts[q0:q1], tables.delta[q0:q1], tables.base[q0:q1])
        f = factors if factors.bias is None else factors._replace(qconst=factors.qconst[q0:q1])
        s = approximate_scores(sub, self.codes[start:end], f, slice(start, end))
        cols = np.broadcast_to(np.arange(start, end), s.shape)
        order = np.lexsort((cols, -s), axis=1)[:, :k]
        return np.take_along_axis(s, order, axis=1), np.take_along_axis(cols, order, axis=1).astype(np.int64)
