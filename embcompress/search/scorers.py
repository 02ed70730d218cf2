"""How an index scores documents, one class per output kind: float vectors, int8 codes, packed
bits and byte codes (lookup tables or the dense scan). :func:`make_scorer` is the one place an
output kind chooses code; :class:`~embcompress.search.Index` asks its scorer for the exact first
stage and for the asymmetric rerank, and never looks at the kind again.

Every score is "higher is better"; ties are broken by row, lowest first (the scans' contract)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Callable, NamedTuple, Protocol

import numpy as np

from ..core._parallel import one_blas_thread
from ..core._util import normalize_rows
from ..core.errors import InputError
from .adc import Factors, book_vectors, dense_vectors, rows_table_sums, scan_adc, scan_decoded, scan_dense, scan_planes
from .exact import scan_blocks
from .fastscan import BlockRows, FastCodes, book_tables, quantize_tables, scans as fast_scans
from .hamming import scan_hamming

if TYPE_CHECKING:
    from ..core.base import Compressor

#: queries whose lookup tables are built and scanned at once
ADC_QUERY_BLOCK = 1024
#: per-dimension codes of at least this many bits (few-bit SQ, RaBitQ) are scanned decoded rather
#: than by tables when a search brings at least DENSE_MIN_QUERIES queries: decoding a block of
#: documents is paid once for all of them (docs/decisions/0008).
DENSE_MIN_BITS = 2
DENSE_MIN_QUERIES = 64
#: a search of at least this many queries scores byte codes that decode to vectors (per-dimension
#: codes, or codebooks side by side: SQ, PQ, OPQ) as a matrix product of the queries with blocks
#: of decoded documents, when the codes hold at least a byte per DECODED_DIMS_PER_BYTE of the
#: decoded width: the tables cost a lookup per byte and pair, the product a multiply-add per
#: dimension near the core's peak (docs/decisions/0008)
DECODED_MIN_QUERIES = 256
DECODED_DIMS_PER_BYTE = 8
#: codes that decode to a sum of codewords (RQ) pay m codewords per document to decode
DECODED_SUM_MIN_QUERIES = 4096
#: rows decoded at a time for their reconstruction norms, in groups fixed by the row numbers
NORM_ROWS = 16384


@dataclass(frozen=True)
class Stored:
    """What a scorer scores, and all it knows of the index: the output ``kind``, the stored rows (``data``:
    float vectors, normalized for cosine, or codes), the ``compressor`` that made them (None: the originals),
    the ``metric`` and logical ``width`` of a row, and the power of the reconstruction norm that asymmetric
    scores divide by (``norm_power``, see :class:`~embcompress.search.Index`)."""

    kind: str
    data: np.ndarray
    compressor: "Compressor | None"
    metric: str
    width: int
    norm_power: float = 1.0

    @property
    def num_docs(self) -> int:
        return len(self.data)


class Scorer(Protocol):
    def first_stage(self, Q: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The exact top ``k`` (1..documents) of each float query: (scores, rows)."""

    def asymmetric(self, Q: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """(queries, candidates) scores of the float queries against the decoded candidate ``rows``."""


class _Scorer:
    """What every kind shares: the asymmetric score of a float query against decoded codes, as the
    cosine with each document's reconstruction (see :class:`~embcompress.search.Index`)."""

    def __init__(self, stored: Stored):
        self.stored = stored
        self._recon: tuple[np.ndarray, np.ndarray] | None | bool = False  # computed on first use

    def reconstruction(self) -> tuple[np.ndarray, np.ndarray] | None:
        """Each document's reconstruction norm in the original space to the power
        ``-norm_power``, and the original-space point the origin of the quantized space maps to
        (``b0``). With them a float query's score is ``(<q', z_decoded> + <q, b0>) / ||x_hat|| **
        norm_power`` (at 1 the cosine with the reconstruction, which is what float search ranks
        by). None when a stage has no inverse (then the score is the inner product in the
        quantized space)."""
        if self._recon is False:
            try:
                self.adopt_norms(reconstruction_norms(self.stored.compressor, self.stored.data))
            except NotImplementedError:
                self._recon = None
        return self._recon

    def adopt_norms(self, norms: np.ndarray) -> None:
        """Take each document's reconstruction norm as :func:`reconstruction_norms` computed it elsewhere
        (``apply`` writes them beside a plan's codes), so the first query does not decode every code: ten
        million 48 B codes took 40 s."""
        st = self.stored
        if norms.shape != (st.num_docs,):
            raise InputError(f"{len(norms):,} reconstruction norms for an index of {st.num_docs:,} documents")
        space = st.compressor.query_space
        b0 = space.back(np.zeros((1, space.last.n_features_in_), np.float32))[0]
        inv = np.empty(len(norms), np.float32)
        for a in range(0, len(norms), 64 * NORM_ROWS):  # in float64 a slice at a time: 10M rows at once held 200 MiB
            n = norms[a : a + 64 * NORM_ROWS]
            safe = np.where(n > 0, n, 1.0).astype(np.float64)
            inv[a : a + len(n)] = np.where(n > 0, safe**-st.norm_power, 0.0)
        self._recon = (inv, b0.astype(np.float32))

    def asymmetric(self, Q: np.ndarray, rows: np.ndarray) -> np.ndarray:
        comp = self.stored.compressor
        if comp is None:
            raise InputError("asymmetric rerank needs an index of codes; this one holds float vectors")
        space = comp.query_space
        qf = space.linear(Q)  # (q, d') the space the codes quantize, linear part
        nq, nc = rows.shape
        if "rerank_tables" in space.last.traits.scans:  # one table entry per code byte instead of decoding (binary)
            tables, offsets = space.last.rerank_tables(qf)
            dots = rows_table_sums(tables, self.stored.data, rows) + offsets[:, None]
        else:
            dec = space.last.decode(self.stored.data[rows.reshape(-1)])  # (q*c, d') decoded candidates
            dots = np.matmul(dec.reshape(nq, nc, -1), qf[:, :, None])[..., 0]  # (q, c)
        recon = self.reconstruction()
        if recon is None:
            return dots.astype(np.float32)
        inv, b0 = recon
        return ((dots + (Q @ b0)[:, None]) * inv[rows]).astype(np.float32)


class FloatScorer(_Scorer):
    """Float vectors (the originals, or a float-valued code such as PCA's): cosine or inner product."""

    def __init__(self, stored: Stored):
        super().__init__(stored)
        self._unit_docs = None  # reduced floats compared by cosine: normalized once, on first search

    def first_stage(self, Q: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        st, comp = self.stored, self.stored.compressor
        q = Q if comp is None else comp.transform(Q)
        if st.metric == "cosine":
            q = normalize_rows(q)
        docs = st.data if comp is None or st.metric != "cosine" else self._normalized_docs()
        return scan_blocks(lambda q0, q1, d0, d1: q[q0:q1] @ docs[d0:d1].T, len(Q), st.num_docs, k)

    def _normalized_docs(self) -> np.ndarray:
        if self._unit_docs is None:
            self._unit_docs = normalize_rows(self.stored.data)
        return self._unit_docs


class Int8Scorer(_Scorer):
    """int8 codes: the cosine of the float query with each decoded document (norms computed once)."""

    def __init__(self, stored: Stored):
        super().__init__(stored)
        comp, data = stored.compressor, stored.data
        self.norms = np.concatenate(
            [np.linalg.norm(comp.decode(data[s : s + 65536]), axis=1) for s in range(0, len(data), 65536)]
        ).astype(np.float32)

    def first_stage(self, Q: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        st, comp = self.stored, self.stored.compressor
        space = comp.query_space
        qf = normalize_rows(space.forward(Q))
        docs, norms, last = st.data, self.norms, space.last

        def score(q0, q1, d0, d1):
            dec = last.decode(docs[d0:d1])  # (b, d) float32
            return (qf[q0:q1] @ dec.T) / np.where(norms[d0:d1] > 0, norms[d0:d1], 1)

        return scan_blocks(score, len(Q), st.num_docs, k)


class BitsScorer(_Scorer):
    """Packed bits: the Hamming similarity (bits - Hamming distance) of the query's own bits."""

    def first_stage(self, Q: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        st = self.stored
        dist, rows = scan_hamming(st.compressor.transform(Q), st.data, k)
        return (st.width - dist).astype(np.float32), rows


class CodesScorer(_Scorer):
    """Byte codes of a :class:`~embcompress.core.capabilities.TableScan` family: lookup tables, the fast
    scan of 4-bit codebook codes with 8-bit tables in registers (:mod:`~embcompress.search.fastscan`,
    at every batch size), or the dense scan of decoded codes
    (:class:`~embcompress.core.capabilities.DenseScan`) for a search of many queries, or for bit-plane
    codes (:class:`~embcompress.core.capabilities.PlaneScan`, RaBitQ) the scan against 8-bit queries at
    every batch size (faster than both at 1 to 1,000 queries; docs/decisions/0008), with the
    per-document factors of :meth:`reconstruction` and each query's constant."""

    def __init__(self, stored: Stored):
        super().__init__(stored)
        last = stored.compressor.query_space.last
        if "tables" not in last.traits.scans:
            raise InputError(
                f"{last.name} codes cannot be searched: the family does not score them by lookup tables "
                "(embcompress.core.capabilities.TableScan)"
            )
        codes, scale = last.adc_codes(stored.data)
        # the bytes the lookup tables index; rows already in the fast scan's blocks (fastscan.rows_into_blocks) stay so
        self.codes = codes if isinstance(codes, BlockRows) else np.ascontiguousarray(codes, dtype=np.uint8)
        self.scale = None if scale is None else np.ascontiguousarray(scale, dtype=np.float32)  # per document
        self.planes = "planes" in last.traits.scans  # scanned against 8-bit queries, whatever the batch
        form = last.dense_codes() if "dense" in last.traits.scans else None
        self.dense = form if form is not None and form[1] >= DENSE_MIN_BITS else None
        self._scale_inv: np.ndarray | None = None  # scale times the inverse reconstruction norm, made once
        self.decoder = None if self.planes else _decoder(last, form)
        self.decoded_from = None  # the batch from which the decoded product scores these codes
        books = None if self.planes else last.codebooks()
        #: 4-bit codebooks: the fast scan (search.fastscan) at every batch size, so that what a batch
        #: measures is what one query gets
        self.fast = FastCodes(self.codes) if fast_scans(books, self.scale is not None) else None
        if self.fast is None and isinstance(self.codes, BlockRows):  # blocks the numpy paths cannot scan: rows again
            self.codes = np.asarray(self.codes)
        if self.fast is not None and self.fast.blocks is not None and self.codes is stored.data:
            # the stored rows are the codes the tables index: held once, as the kernel's blocks
            self.codes = self.fast.codes
            self.stored = replace(stored, data=self.codes)
        self.books = books
        wide = self.decoder is not None and self.codes.shape[1] * DECODED_DIMS_PER_BYTE >= self.decoder.width
        if self.fast is None and wide:
            self.decoded_from = DECODED_SUM_MIN_QUERIES if self.decoder.sums else DECODED_MIN_QUERIES

    def _factors(self, inv: np.ndarray) -> np.ndarray:
        """The per-document factor times the inverse reconstruction norm, made once (a product over
        every document is a few milliseconds, the scan of a single query over a million codes)."""
        if self._scale_inv is None:
            self._scale_inv = inv if self.scale is None else np.ascontiguousarray(self.scale * inv, dtype=np.float32)
        return self._scale_inv

    def first_stage(self, Q: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """A block of queries at a time (each query's tables take bytes x 1 KiB). The path is
        chosen once per search, so every query of a batch is scored the same way (the two differ
        in the last bits of a float sum)."""
        comp = self.stored.compressor
        last = comp.query_space.last
        dense = self.dense is not None and len(Q) >= DENSE_MIN_QUERIES
        scale, bias, recon = self.scale, None, self.reconstruction()
        if recon is not None:
            scale, bias = self._factors(recon[0]), recon[0]
        if self.decoded_from is not None and len(Q) >= self.decoded_from:
            return self._decoded(Q, k, scale, bias, recon)
        scores = np.empty((len(Q), k), dtype=np.float32)
        rows = np.empty((len(Q), k), dtype=np.int64)
        # the query-side products (tables, rotations) must not start BLAS threads that spin beside
        # the scan's: rq's tables did, and took 4 queries from 35 to 55 ms
        with one_blas_thread:
            for s in range(0, len(Q), ADC_QUERY_BLOCK):
                Qb = Q[s : s + ADC_QUERY_BLOCK]
                qf = comp.query_space.linear(Qb)
                qconst = None if recon is None else _query_constant(Qb, qf, recon, last)
                factors = Factors(scale, bias, qconst)
                if self.fast is not None:
                    tables = quantize_tables(book_tables(self.books, last.table_queries(qf)))
                    out = self.fast.topk(tables, k, factors)
                elif self.planes:
                    bits, plane_bytes = last.plane_layout()
                    out = scan_planes(
                        last.quantized_queries(qf), self.codes, k, bits=bits, plane_bytes=plane_bytes, factors=factors
                    )
                elif dense:
                    out = scan_dense(last.dense_queries(qf), self.codes, k, decoding=self.dense, factors=factors)
                else:
                    out = scan_adc(last.lookup_tables(qf), self.codes, k, scale=scale, bias=bias, qconst=qconst)
                scores[s : s + ADC_QUERY_BLOCK], rows[s : s + ADC_QUERY_BLOCK] = out
        return scores, rows

    def reconstruction_dots(self, Q: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """(queries, candidates) float32 inner products of the float queries with the reconstructions of
        the candidate ``rows`` in the original space, from the lookup tables (nothing decoded): the
        first stage's score before its per-document factor. For codes without a per-document scale of
        their own (RaBitQ's); what an int8 residual copy (serving.residual) adds its rows to."""
        comp = self.stored.compressor
        last = comp.query_space.last
        recon = self.reconstruction()
        if self.scale is not None or recon is None:
            raise InputError(f"{comp!r} codes have no reconstruction the lookup tables sum exactly")
        qf = comp.query_space.linear(Q)
        dots = rows_table_sums(last.lookup_tables(qf), self.codes, rows)
        return (dots + _query_constant(Q, qf, recon, last)[:, None]).astype(np.float32)

    def _decoded(self, Q: np.ndarray, k: int, scale, bias, recon) -> tuple[np.ndarray, np.ndarray]:
        """Every query at once against blocks of decoded documents (``scan_decoded``), the
        factors composed as the table scan composes them."""
        comp = self.stored.compressor
        last = comp.query_space.last
        qf = comp.query_space.linear(Q)
        qconst = None if recon is None else _query_constant(Q, qf, recon, last)
        dec = self.decoder
        return scan_decoded(
            dec.queries(qf),
            lambda d0, d1: dec.vectors(self.codes[d0:d1]),
            len(self.codes),
            k,
            factors=Factors(scale, bias, qconst),
        )


def _query_constant(Q: np.ndarray, qf: np.ndarray, recon: tuple[np.ndarray, np.ndarray], last) -> np.ndarray:
    """Per float query, what its score with a reconstruction holds beyond the table sums: its product with
    the point the quantized space's origin maps to, and the family's offset (``adc_offset`` of ``qf``)."""
    return (Q @ recon[1] + last.adc_offset(qf)).astype(np.float32)


class Decoder(NamedTuple):
    """How a family's table sums are inner products with decoded vectors."""

    vectors: Callable[[np.ndarray], np.ndarray]  # rows of the codes the tables index -> float32 vectors
    queries: Callable[[np.ndarray], np.ndarray]  # queries (the tables' input) -> the vectors' space
    width: int  # of a decoded vector
    sums: bool  # a vector is a sum of codewords (m of them to add per document)


def _decoder(last, dense_form) -> Decoder | None:
    """The :class:`Decoder` of per-dimension codes (``dense_form``, :class:`DenseScan`) or of
    codebooks (``TableScan.codebooks``); None for a family with neither."""
    if dense_form is not None:
        layout, bits, levels = dense_form
        return Decoder(lambda codes: dense_vectors(codes, layout, bits, levels), last.dense_queries, len(levels), False)
    books = last.codebooks()
    if books is None:
        return None
    m, _, w = books[0].shape
    return Decoder(lambda codes: book_vectors(codes, *books), last.table_queries, w if books[1] else m * w, books[1])


#: the scorer of each output kind (OutputSpec.kind)
SCORERS = {"float": FloatScorer, "int8": Int8Scorer, "bits": BitsScorer, "codes": CodesScorer}


def reconstruction_norms(compressor: "Compressor", codes: np.ndarray, offset: int = 0) -> np.ndarray:
    """The norm in the original space of each code's reconstruction (float32), ``codes`` being the file's rows
    from ``offset`` on, decoded :data:`NORM_ROWS` rows at a time (the groups fixed by the row numbers). Whoever
    computes them (an index at its first query, ``apply`` a batch at a time) gets them to float32 rounding, not
    always to the bit: a matrix product's last bits can change with the rows in the call and the thread that
    runs it (seen with OpenBLAS's Zen kernels). NotImplementedError where a stage has no inverse."""
    n = len(codes)
    first = min(-offset % NORM_ROWS or NORM_ROWS, n)
    edges = [0, *range(first, n, NORM_ROWS), n]
    decoded = (compressor.inverse_transform(codes[a:b]) for a, b in zip(edges, edges[1:]) if b > a)
    parts = [np.linalg.norm(x, axis=1) for x in decoded]
    return np.concatenate(parts).astype(np.float32) if parts else np.zeros(0, np.float32)


def keeps_blocks(compressor) -> bool:
    """Whether an index of ``compressor``'s codes scans them with the fast scan, keeping them as its blocks
    (:class:`CodesScorer` with 4-bit codebooks): known before the codes are read, so that ``load_index`` can
    make a file's rows into the blocks where they lie (``fastscan.rows_into_blocks``). Only bit-plane codes
    (RaBitQ) carry a per-document scale of their own, and they have no codebooks."""
    last = compressor.query_space.last
    scans = last.traits.scans
    if SCORERS.get(compressor.output_spec.kind) is not CodesScorer or "tables" not in scans or "planes" in scans:
        return False
    return fast_scans(last.codebooks(), False)


def make_scorer(stored: Stored) -> Scorer:
    try:
        cls = SCORERS[stored.kind]
    except KeyError:
        raise InputError(f"no scorer for {stored.kind!r} outputs; known: {', '.join(SCORERS)}") from None
    return cls(stored)
