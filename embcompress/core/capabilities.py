"""What a compressor family can do, declared by the mixins it inherits, the way scikit-learn's
mixins and tags declare an estimator's kind. Each mixin adds itself to the compressor's
:class:`~embcompress.core.specs.Traits`; search, streaming, the Ray engine, ``recommend`` and the
report read ``stage.traits`` and use the methods listed here; nothing in the
layers below the report names a family. Which codes ``recommend`` and the report offer for a byte
budget is their policy, not the family's (:mod:`embcompress.report.candidates`).

- :class:`TableScan`: ``"codes"`` outputs scored against a float query by summing one table
  entry per code byte (PQ, RQ, SQ, RaBitQ).
- :class:`DenseScan`: codes with one small integer per dimension, which search may also decode
  block by block and score with multiply-adds (SQ and RaBitQ at 2+ bits).
- :class:`BlockStats`: a fit from statistics computed on any block of rows and merged in any
  order (PCA, binary thresholds, int8 ranges, means), so that a cluster fits it in one pass.
- :class:`Affine`: a float map ``z = A x + b`` with an offset, whose linear part queries take
  before meeting decoded codes (PCA, centred rotations).
- :class:`FaissExport`: codes a faiss index of the family's own type holds as they are.
- :class:`RerankTables`: codes whose asymmetric rerank sums one table entry per code byte of the
  candidates instead of decoding them (binary).

A new family is then its module (a ``Compressor`` subclass with the mixins that apply), its
tests and one import in ``embcompress/compressors/__init__.py``, which registers it; to be offered
for a byte budget, one :func:`embcompress.report.candidates.offer` call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Iterable, Iterator

import numpy as np

if TYPE_CHECKING:
    from .base import Compressor
    from .specs import Traits


class RerankTables:
    """Candidates rescored against a float query by tables over their code bytes (search.scorers)."""

    @property
    def traits(self) -> "Traits":
        return super().traits.but(scans={"rerank_tables"})  # type: ignore[misc]

    def rerank_tables(self, Q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(tables, offsets)``: (queries, code bytes, 256) float32 tables and (queries,) offsets such
        that a query's inner product with a decoded code row is its offset plus one entry per byte."""
        raise NotImplementedError


class TableScan:
    """Codes searched through lookup tables (``search.adc.scan_adc``)."""

    @property
    def traits(self) -> "Traits":
        return super().traits.but(output="codes", scans={"tables"})  # type: ignore[misc]

    def lookup_tables(self, Q: np.ndarray) -> np.ndarray:
        """(queries, code bytes, 256) float32 tables such that a code's score for a query (the
        inner product with its decoded vector, up to a per-query constant and the per-document
        scale of :meth:`adc_codes`) is the sum of one entry per byte. ``Q`` is in the space of
        ``query_space.forward``."""
        raise NotImplementedError

    def adc_offset(self, Q: np.ndarray) -> np.ndarray:
        """Per query, what the decoded vectors hold beyond the table sums (times the per-document
        scale): ``<q, c>`` for RaBitQ's centroid ``c``, 0 by default."""
        return np.zeros(len(Q), dtype=np.float32)

    def adc_codes(self, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """The part of each stored row the tables index, and a per-document scale (or None)."""
        return codes, None

    def codebooks(self) -> tuple[np.ndarray, bool, int] | None:
        """``(books, add, nbits)`` when the rows the tables index (:meth:`adc_codes`) hold ``m``
        codeword indices of ``nbits`` bits (8, or 4 packed two to a byte, the first in the low
        half) into ``books`` ((m, 2**nbits, w) float32): a row decodes to its codewords side by
        side (``add`` false, product quantization) or to their sum (``add`` true, residual),
        whose inner product with :meth:`table_queries` is the row's table sum, up to rounding.
        Search multiplies blocks so decoded with a large batch of queries
        (``search.adc.scan_decoded``). None: no such form."""
        return None

    def table_queries(self, Q: np.ndarray) -> np.ndarray:
        """Queries (in the space of ``query_space.forward``) mapped to the space of :meth:`codebooks`."""
        return np.asarray(Q, dtype=np.float32)


class DenseScan(TableScan):
    """Codes holding one small integer ``u_j`` per dimension, which search can also scan decoded
    (``search.adc.scan_dense``): cheaper than tables when a batch brings many queries."""

    @property
    def traits(self) -> "Traits":
        return super().traits.but(scans={"dense"})  # type: ignore[misc]

    def dense_codes(self) -> tuple[str, int, np.ndarray]:
        """``(layout, bits, levels)``: the layout of ``search.adc.unpack_dense`` ("planes" or
        "packed") and the (d, 2**bits) float32 values the codes decode to, such that the table sum
        of :meth:`lookup_tables` equals ``<dense_queries(q), levels[j, u_j]>``."""
        raise NotImplementedError

    def dense_queries(self, Q: np.ndarray) -> np.ndarray:
        """Queries (in the space of ``query_space.forward``) mapped to the space of :meth:`dense_codes`."""
        return np.asarray(Q, dtype=np.float32)


class PlaneScan(DenseScan):
    """Codes stored as bit-planes of a grid (RaBitQ), which search scans against queries quantized
    to 8 bits (``search.adc.scan_planes``): an exact integer inner product per document, a few
    vector instructions per 32 dimensions, where tables take a lookup per byte of every plane."""

    @property
    def traits(self) -> "Traits":
        return super().traits.but(scans={"planes"})  # type: ignore[misc]

    def plane_layout(self) -> tuple[int, int]:
        """``(bits, plane bytes)``: the planes, most significant first, open each stored row."""
        raise NotImplementedError

    def quantized_queries(self, Q: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(q8, step, offset)``: (queries, plane bytes x 8 rounded up to 32) int8 in bit order
        (each byte's eight dimensions reversed, as ``scan_planes`` unpacks them) and a float32
        step and offset per query, such that ``<q8, u> * step + offset`` (``u`` the per-dimension
        code) estimates the table sum of :meth:`lookup_tables`."""
        raise NotImplementedError


class BlockStats:
    """A fit from per-block statistics computed anywhere and merged in any order (a family whose
    statistics are cheap enough to compute for every batch says so: ``with_fit(stats_per_batch=True)``)."""

    @property
    def traits(self) -> "Traits":
        return super().traits.with_fit(block_stats=True)  # type: ignore[misc]

    def _block_stats(self, X: np.ndarray) -> dict[str, np.ndarray]:
        raise NotImplementedError

    @staticmethod
    def _merge_stats(a: dict, b: dict) -> dict:
        raise NotImplementedError

    def _fit_stats(self, stats: dict, n_features: int) -> None:
        raise NotImplementedError

    @property
    def rows_after_stats(self) -> int | None:
        """Rows (from the start, in order) that a fit from statistics still reads afterwards, in
        :meth:`_after_stats` (binary's decoding levels need the thresholds first); None: none."""
        return None

    def _after_stats(self, batches) -> None:
        """The part of a fit that reads the first :attr:`rows_after_stats` rows after
        :meth:`fit_from_stats`."""

    def _fit(self, batches: Callable[[], Iterator[np.ndarray]], n_features: int) -> None:
        """The family's one fit, whatever runs it: the statistics of each batch (of the first
        ``traits.fit.first_rows`` rows where the fit reads only those), merged in order, then
        :meth:`_fit_stats`, then :meth:`_after_stats` on the first rows where it needs them. A
        family that learns nothing from the rows gets ``_fit_stats(None, n_features)``."""
        tags = self.traits.fit  # type: ignore[attr-defined]
        if not tags.learns:
            self._fit_stats(None, n_features)
            return
        self._fit_stats(self._merged(self._block_stats(b) for b in _first(batches(), tags.first_rows)), n_features)
        if self.rows_after_stats:
            self._after_stats(batches)

    def _merged(self, blocks: Iterable[dict]) -> dict:
        """Block statistics merged in the order given."""
        merged = None
        for block in blocks:
            merged = block if merged is None else self._merge_stats(merged, block)
        return merged

    def fit_from_stats(self, stats: dict[str, np.ndarray], n_features: int) -> "Compressor":
        """Fit from merged block statistics (the fit frame checks the row count ``n`` where the
        statistics hold one). Returns self."""
        rows = None if "n" not in stats else (lambda need: int(np.asarray(stats["n"]).sum()))
        return self._fitted(n_features, lambda n: self._fit_stats(stats, n), rows=rows)  # type: ignore[attr-defined]

    def fit_from_block_stats(
        self, blocks: Iterable[dict], n_features: int, first_rows: Callable[[], Iterator[np.ndarray]] | None = None
    ) -> "Compressor":
        """Fit from per-block statistics merged in the order given; then, where
        :attr:`rows_after_stats` asks for them, from the first rows (``first_rows``: a function
        returning a fresh iterator of their batches). Returns self."""
        self.fit_from_stats(self._merged(blocks), n_features)
        if self.rows_after_stats:
            self._after_stats(first_rows)
        return self  # type: ignore[return-value]


def _first(batches: Iterator[np.ndarray], rows: int | None) -> Iterator[np.ndarray]:
    """The non-empty batches up to ``rows`` rows in all (the last one cut; None: every batch)."""
    seen = 0
    for b in batches:
        if rows is not None:
            b = b[: rows - seen]
        seen += len(b)
        if len(b):
            yield b
        if rows is not None and seen >= rows:
            return


class Affine:
    """A float map ``z = A x + b`` whose offset ``b`` queries leave out before an inner product
    with decoded codes (see :meth:`embcompress.core.specs.QuerySpace.linear`)."""

    @property
    def traits(self) -> "Traits":
        return super().traits.but(affine=True)  # type: ignore[misc]

    def linear_part(self, X: np.ndarray) -> np.ndarray:
        """``A x``: the map without its offset."""
        raise NotImplementedError


class FaissExport:
    """A family whose codes a faiss index of its own type holds as they are (PQ: ``IndexPQ``; OPQ:
    the same behind its rotation), so ``export --to faiss`` writes them without re-encoding.
    Declared by the family; an index of bits, float vectors or int8 needs no declaration."""

    @property
    def traits(self) -> "Traits":  # faiss holds its codes (when the family is the whole compressor)
        return super().traits.but(exports=("faiss",))  # type: ignore[misc]

    def to_faiss(self, codes: "np.ndarray"):
        """A faiss index holding ``codes`` (documents x bytes) in row order, scored by inner product."""
        raise NotImplementedError
