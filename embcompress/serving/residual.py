"""The int8 residual copy (``int8r``): what the first stage's code left of each vector, in int8.

A plan's first stage reconstructs each document as ``x_hat`` (its code decoded). This copy keeps the
residual ``r = x - x_hat`` in int8 with one scale a row (its largest magnitude / 127), and the norm of
``x_hat + r~`` (``r~`` the residual as stored), in ``d + 8`` bytes a row: an int8 copy's bytes plus 8.
Its steps are sized to what the code left rather than to the whole vector: on Debian IR with the static
model, rescoring 2,000 candidates of a 12 B code found 0.9943 of the exact top 10 against 0.9843 with an
int8 copy of the vectors and 0.9987 with float16; at the ten-million-row set's density (300 near-copies a
document) 0.990 against 0.971 (``benchmarks/serving/bench_rescore_ceiling.py``).

A candidate's score is the cosine of the query with ``x_hat + r~``: ``<q, x_hat>`` from the first stage's
lookup tables (no decoding), plus the row's scale times ``<q, c>`` of its int8 values, over the stored norm.
So the copy works with codes scored by lookup tables and nothing else per document: PQ, OPQ, RQ and SQ, alone
or after a linear stage (PCA, a rotation); not bits (their own copies are int8 or float) nor RaBitQ (a
per-document scale of its own)."""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..core.base import Compressor
from ..core.errors import InputError
from ..core.registry import from_spec

#: bytes a row holds beyond its ``d`` int8 values: the scale and the norm, float32 each
ROW_EXTRA = 8
KIND = "int8r"


def _last_stage(compressor: Compressor) -> Compressor:
    stages = getattr(compressor, "stages_", None) or getattr(compressor, "stages", None)
    return stages[-1] if stages else compressor


def supports(compressor: Compressor | str) -> bool:
    """Whether a first stage (a compressor or its spec) has the reconstruction this copy adds to: codes
    scored by lookup tables, without per-document factors of their own."""
    comp = from_spec(compressor) if isinstance(compressor, str) else compressor
    scans = _last_stage(comp).traits.scans
    return comp.traits.output == "codes" and "tables" in scans and "planes" not in scans


def check_supported(first: Compressor, where: str = "the plan") -> None:
    if not supports(first):
        raise InputError(
            f"{where}: an int8r copy (the residual of the first stage's code) needs a first stage of codes "
            f"scored by lookup tables (pq, opq, rq, sq, alone or after pca or rotate), not {first!r}; "
            "use an int8, float16 or float32 copy"
        )


def encode(first: Compressor, X: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """(rows, d + 8) int8: each row's residual after ``first``'s reconstruction of ``codes`` in int8,
    then its scale and the norm of what the row rescoring sees, as float32 bytes."""
    X = np.asarray(X, dtype=np.float32)
    n, d = X.shape
    recon = first.inverse_transform(codes).astype(np.float32, copy=False)
    R = X - recon
    top = np.abs(R).max(axis=1) if d else np.zeros(n, np.float32)
    scale = (top / np.float32(127)).astype(np.float32)
    safe = np.where(scale > 0, scale, np.float32(1))
    c = np.clip(np.rint(R / safe[:, None]), -127, 127).astype(np.int8)
    norm = np.linalg.norm(recon + scale[:, None] * c.astype(np.float32), axis=1).astype(np.float32)
    out = np.empty((n, d + ROW_EXTRA), dtype=np.int8)
    out[:, :d] = c
    out[:, d:] = np.ascontiguousarray(np.stack([scale, norm], axis=1)).view(np.int8)
    return out


def _parts(index) -> list[tuple[np.ndarray, object]]:
    """(global rows, index) of each part of ``index``: a :class:`~embcompress.search.PartedIndex`'s parts (each
    encoded by its own model), or one :class:`~embcompress.search.Index` over every row."""
    parts = getattr(index, "parts", None)
    return list(parts) if parts is not None else [(np.arange(index.num_docs), index)]


def encode_index(index, X: np.ndarray) -> np.ndarray:
    """:func:`encode` of every row of ``X`` against its codes in ``index`` (each part's by its own model)."""
    out = np.empty((index.num_docs, X.shape[1] + ROW_EXTRA), dtype=np.int8)
    for rows, idx in _parts(index):
        out[rows] = encode(idx.compressor, X[rows], idx.data)
    return out


def _split(raw: np.ndarray, d: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(int8 values as float32, scale, norm) of rows as :func:`encode` wrote them."""
    tail = np.ascontiguousarray(raw[:, d:]).view(np.float32)
    return raw[:, :d].astype(np.float32), tail[:, 0], tail[:, 1]


class ResidualCopy:
    """The copy of residuals as a :class:`~embcompress.search.stores.VectorStore` of the vectors
    ``x_hat + r~``, scored by :meth:`cosines` without decoding the codes. ``read(rows)`` gives the stored
    (rows, d + 8) int8 rows (a :class:`~embcompress.serving.copies.DiskCopy` opened on them, or an array);
    ``index`` holds the first stage's codes of the same rows: an :class:`~embcompress.search.Index`, or a
    :class:`~embcompress.search.PartedIndex` whose parts each reconstruct their own rows."""

    def __init__(self, read: Callable[[np.ndarray], np.ndarray], index, *, source=None):
        parts = _parts(index)
        for _, idx in parts:
            if getattr(getattr(idx, "scorer", None), "reconstruction_dots", None) is None:
                raise InputError(
                    "an int8r copy rescores the candidates of codes scored by lookup tables, not float vectors or bits"
                )
            check_supported(idx.compressor, "the index")
        self._read, self.index, self._source = read, index, source
        self._parted = hasattr(index, "parts")
        self.num_rows, self.dim = index.num_docs, parts[0][1].compressor.n_features_in_

    @classmethod
    def of_array(cls, rows: np.ndarray, index) -> "ResidualCopy":
        return cls(lambda r: rows[np.asarray(r)], index)

    def get(self, rows: np.ndarray) -> np.ndarray:
        """float32 vectors ``x_hat + r~`` of ``rows`` (the codes decoded: slower than :meth:`cosines`)."""
        rows = np.asarray(rows, dtype=np.int64).reshape(-1)
        c, scale, _ = _split(self._read(rows), self.dim)
        out = scale[:, None] * c
        if not self._parted:
            return out + self.index.compressor.inverse_transform(self.index.data[rows])
        owner, local = self.index.part_rows(rows)
        for p, (_, idx) in enumerate(self.index.parts):
            mine = owner == p
            out[mine] += idx.compressor.inverse_transform(idx.data[local[mine]])
        return out

    def _hat(self, Qn: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """(queries, candidates) inner products with the reconstructions, each row's by its own part."""
        if not self._parted:
            return self.index.scorer.reconstruction_dots(Qn, rows)
        return self.index.own_part_scores(Qn, rows, lambda idx, Q, local: idx.scorer.reconstruction_dots(Q, local))

    def cosines(self, Qn: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """(queries, candidates) cosines of the unit queries with ``x_hat + r~`` at ``rows``: read and scored in
        C where the rows come from a :class:`~embcompress.serving.copies.DiskCopy` (never held as float32),
        else in numpy."""
        nq, nc = rows.shape
        hat = self._hat(Qn, rows)
        fused = getattr(self._source, "cosines", None)
        scores = None if fused is None else fused(Qn, rows, hat)
        if scores is not None:
            return scores
        c, scale, norm = _split(self._read(rows.reshape(-1)), self.dim)
        dots = hat + scale.reshape(nq, nc) * np.matmul(c.reshape(nq, nc, -1), Qn[:, :, None])[..., 0]
        norm = norm.reshape(nq, nc)
        return np.divide(dots, norm, out=np.zeros_like(dots), where=norm > 0).astype(np.float32)

    def drop_cache(self) -> bool:
        """The rows' source dropped from the page cache (a cold read next), where it is a file."""
        drop = getattr(self._source, "drop_cache", None)
        return bool(drop and drop())

    def close(self) -> None:
        if self._source is not None and hasattr(self._source, "close"):
            self._source.close()
