"""Search indexes over float vectors or compressed codes, with optional rerank.

An :class:`Index` holds document vectors or codes, the compressor that made them (if any) and the
user's document ids. ``search`` takes *float* queries in the original embedding space and
compresses them the same way, so callers never compare codes of different compressors.

Scores are "higher is better" everywhere: cosine or inner product for floats; for bits the
Hamming similarity (bits - Hamming distance, the number of equal positions: Dinu et al., 2025, section 4).
Ties are broken by document row, lowest first, in every mode.

Rerank (Dinu et al., 2025, section 5, after Yamada et al. 2021): the binary search returns the top
``k * multiplier`` candidates (default multiplier 10, i.e. Dinu et al.'s top 100 for k = 10), which
are re-scored with
* ``"asymmetric"``: the float query (in the space the bits were taken from) against the documents'
  bits unpacked to +-1 — no storage beyond the bits;
* ``"float"``: the float query against the original document vectors, read for the candidates only
  from a :class:`~embcompress.search.stores.VectorStore` (npy memmap, parquet, int8 codes...).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

import numpy as np
import pyarrow as pa

from ..core._parallel import run_blocks
from ..core._util import check_positive_int, normalize_rows
from ..core.base import Compressor
from ..core.checks import check_array
from ..core.errors import InputError
from . import ann
from .exact import check_k
from .fastscan import BlockRows
from .scorers import Stored, make_scorer
from .stores import ArrayStore, VectorStore
from .topk import merge_topk

DEFAULT_MULTIPLIER = 10
RERANKS = ("asymmetric", "float")
#: first-stage structures: the exact scan, or an HNSW graph (faiss) over bits or float vectors
STRUCTURES = ("exact", "hnsw")


@dataclass
class SearchResult:
    rows: np.ndarray  # (queries, k) int64: row numbers in the indexed documents
    scores: np.ndarray  # (queries, k) float32: higher is better
    ids: np.ndarray | None = None  # (queries, k) the user's document ids, when the index has them
    seconds: float = 0.0
    info: dict[str, Any] = field(default_factory=dict)


def id_column(ids: Sequence | pa.Array | pa.ChunkedArray | None, n: int):
    """The user's document ids as an index keeps them: an Arrow column as it is (compact; what
    :func:`~embcompress.search.files.load_index` reads), ids read on demand as they are (an object with
    ``at(rows)``, as a plan's tiers keep them on disk), any other sequence as an object array."""
    if ids is None:
        return None
    if len(ids) != n:
        raise InputError(f"{len(ids)} ids for {n} documents")
    if isinstance(ids, pa.ChunkedArray) and ids.num_chunks > 1:
        # one contiguous column: a take from many chunks cost 1.8 ms per query over 1M ids read as 31 row
        # groups, a third of a served plan's time; a string column past 2 GiB stays chunked (32-bit offsets)
        try:
            return ids.combine_chunks()
        except (pa.ArrowInvalid, pa.ArrowCapacityError):
            return ids
    if isinstance(ids, (pa.Array, pa.ChunkedArray)) or hasattr(ids, "at"):
        return ids
    return np.asarray(ids, dtype=object)


def arrow_ids(ids) -> pa.Array | pa.ChunkedArray:
    """An index's ids (:func:`id_column`) as an Arrow column, to be written beside it."""
    if isinstance(ids, (pa.Array, pa.ChunkedArray)):
        return ids
    return ids.to_arrow() if hasattr(ids, "to_arrow") else pa.array(ids.tolist())


def ids_at(ids, rows: np.ndarray) -> np.ndarray | None:
    """The ids of ``rows`` (any shape) as an object array of that shape, None for a row of -1 (a graph's missing
    result); None without ids."""
    if ids is None:
        return None
    missing = rows < 0
    found = np.where(missing, 0, rows)
    if isinstance(ids, np.ndarray) or hasattr(ids, "at"):
        out = ids[found] if isinstance(ids, np.ndarray) else ids.at(found)
    else:
        out = np.fromiter(ids.take(pa.array(found.reshape(-1))).to_pylist(), object, rows.size).reshape(rows.shape)
    out[missing] = None
    return out


class Index:
    """Exact search over ``data``: float vectors (``compressor=None``) or codes made by the fitted
    ``compressor``. ``ids`` are the user's document ids (any values), returned with results.

    Codes scored asymmetrically (lookup tables, and the asymmetric rerank) rank a document by
    ``<q, x_hat> / ||x_hat|| ** norm_power``, ``x_hat`` its reconstruction. The default, 1, is
    the cosine with the reconstruction, as float search ranks by cosine. Other powers lift (above
    1) or lower the documents the code shrank most; which power ranks best depends on the data
    and the code (docs/decisions/0003). Measure on your queries before changing it."""

    def __init__(
        self,
        data: np.ndarray,
        *,
        compressor: Compressor | None = None,
        ids: Sequence | None = None,
        metric: str = "cosine",
        structure: str = "exact",
        hnsw: ann.Hnsw | None = None,
        norm_power: float = 1.0,
    ):
        if structure not in STRUCTURES:
            raise InputError(f"index must be one of {', '.join(STRUCTURES)}, got {structure!r}")
        if isinstance(norm_power, bool) or not isinstance(norm_power, (int, float)) or not 0 <= norm_power <= 4:
            raise InputError(
                f"norm_power must be a number from 0 to 4 (1: cosine with the reconstruction), got {norm_power!r}"
            )
        self.norm_power = float(norm_power)
        self.structure = structure
        self.hnsw = hnsw or ann.Hnsw()  # the graph's settings (structure "hnsw")
        self._graph = None  # the faiss HNSW graph, built on first search
        #: an evaluation's sweep of candidate counts: the exact scan's last (queries, k, scores, rows) answers
        #: the same queries' smaller counts (a prefix: scans order equal scores by row). Off when timing.
        self.reuse_first_stage = False
        self._last_first: tuple[np.ndarray, int, np.ndarray, np.ndarray] | None = None
        self.compressor = compressor
        if compressor is None:
            data = check_array(data, what="documents")
            self.kind = "float"
            if metric not in ("cosine", "inner_product"):
                raise InputError(f"metric must be cosine or inner_product, got {metric!r}")
            self.metric = metric
            self.width = data.shape[1]
        else:
            spec = compressor.output_spec
            self.kind, self.metric, self.width = spec.kind, spec.metric, spec.width
            data = data if isinstance(data, BlockRows) else np.ascontiguousarray(data)  # blocks: load_index's
            expected = spec.row_width
            if data.ndim != 2 or data.shape[1] != expected or data.dtype != np.dtype(spec.dtype):
                raise InputError(
                    f"codes have shape {data.shape} and dtype {data.dtype}, but {compressor.name} produces "
                    f"{spec.dtype} rows of {expected} values"
                )
        if len(data) == 0:
            raise InputError("cannot index an empty set of documents")
        if structure == "hnsw" and not ann.graph_allowed(self.kind):
            raise InputError(
                f"an HNSW graph is built over bits or float vectors; these are {self.kind} codes "
                "(search them with the exact scan)"
            )
        self.data = data
        self.num_docs = len(data)
        self.ids = id_column(ids, len(data))
        if self.kind == "float" and self.metric == "cosine":
            self.data = normalize_rows(data)
        self.scorer = make_scorer(Stored(self.kind, self.data, compressor, self.metric, self.width, self.norm_power))
        self.data = self.scorer.stored.data  # codes a fast scan keeps as blocks only (search.fastscan.BlockRows)

    @property
    def nbytes_per_vector(self) -> int:
        return self.compressor.output_spec.nbytes if self.compressor else 4 * self.width

    # ---- first stage ----------------------------------------------------------------------------
    def first_stage(self, Q: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(scores, rows) of the top ``k`` (1..documents, not checked here) of each float query
        (queries, width) by the index's own first stage: its scorer's exact scan, or the HNSW graph."""
        if self.structure == "hnsw":
            self.build_graph()
            # a graph over bits ranks by Hamming distance: its codes, decoded, can rank against the float query
            asym = ann.SERVING[self.kind].faiss_binary and self.compressor is not None
            wide = min(k * self.hnsw.explore, self.num_docs) if asym else k
            scores, rows = ann.hnsw_search(self, self._graph, Q, wide, self.hnsw.ef_search)
            if wide == k:
                return scores, rows
            return _rerank_blocks(Q, rows, k, lambda q, c: self._asymmetric_or_missing(Q[q], c), 32, None)
        if not self.reuse_first_stage:
            return self.scorer.first_stage(Q, k)
        last = self._last_first
        if last is not None and last[1] >= k and last[0].shape == Q.shape and np.array_equal(last[0], Q):
            return last[2][:, :k], last[3][:, :k]
        scores, rows = self.scorer.first_stage(Q, k)
        self._last_first = (Q.copy(), k, scores, rows)
        return scores, rows

    def build_graph(self, progress: Callable[[int], None] | None = None) -> float:
        """Build the HNSW graph (structure ``"hnsw"``) now rather than at the first search; the
        seconds it took (0 if it was built before). ``progress(n)``: called as each block of
        documents is in the graph."""
        if self.structure != "hnsw":
            raise InputError("only an index with structure 'hnsw' has a graph to build")
        if self._graph is not None:
            return 0.0
        t0 = time.perf_counter()
        self._graph = ann.faiss_index(self, "hnsw", self.hnsw, progress=progress)
        return time.perf_counter() - t0

    def load_graph(self, path, ef_search: int | None = None) -> float:
        """Search through the HNSW graph that ``export --to faiss --structure hnsw`` or ``--to
        usearch`` wrote for these documents (:func:`ann.load_graph` checks it is theirs) instead
        of building one; ``ef_search``: candidates per query (None: the graph's own setting). The
        seconds it took."""
        if self.structure != "hnsw":
            raise InputError("only an index with structure 'hnsw' searches a graph")
        t0 = time.perf_counter()
        self._graph, hnsw = ann.load_graph(self, path)
        # the file's graph, searched with this index's own exploration (and ef_search, when given)
        ef = hnsw.ef_search if ef_search is None else ef_search
        self.hnsw = replace(hnsw, explore=self.hnsw.explore, ef_search=ef)
        return time.perf_counter() - t0

    def _asymmetric_or_missing(self, Q: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Asymmetric scores of a graph's rows, -inf where it found none (row -1)."""
        scores = self.scorer.asymmetric(Q, np.maximum(rows, 0))
        scores[rows < 0] = -np.inf
        return scores

    # ---- rerank -------------------------------------------------------------------------------
    def rerank_scores(self, Q: np.ndarray, rows: np.ndarray, how: str, originals: VectorStore | None) -> np.ndarray:
        """(queries, candidates) float32 scores of the candidate ``rows`` for the float queries,
        by ``how``: "asymmetric" (the decoded codes) or "float" (the ``originals``)."""
        if how == "asymmetric":
            return self.scorer.asymmetric(Q, rows)
        return float_rerank_scores(Q, rows, check_originals(originals, self.num_docs, Q.shape[1]))

    def search(
        self,
        queries: np.ndarray,
        k: int = 10,
        *,
        rerank: str | None = None,
        multiplier: int = DEFAULT_MULTIPLIER,
        originals: VectorStore | np.ndarray | None = None,
        query_block: int = 32,
        threads: int | None = None,
        candidates: int | None = None,
    ) -> SearchResult:
        """Top-``k`` documents for each float query (original embedding space). A rerank rescores the
        first stage's top ``candidates`` (None: ``k * multiplier``) and runs its query blocks on
        ``threads`` threads (None: up to 8, or ``EMBCOMPRESS_NUM_THREADS``)."""
        t0 = time.perf_counter()
        Q = check_array(queries, what="queries")
        if len(Q) == 0:
            raise InputError("no queries to search with (0 rows)")
        in_width = self.compressor.n_features_in_ if self.compressor else self.width
        if Q.shape[1] != in_width:
            raise InputError(f"queries have {Q.shape[1]} dimensions but the index expects {in_width}")
        k = check_k(k, self.num_docs)  # the one check of k in a search; the scans below trust it
        _check_rerank(rerank, self.kind, self.compressor)
        if isinstance(originals, np.ndarray):
            originals = ArrayStore(originals)
        if rerank is None:
            scores, rows = self.first_stage(Q, k)
            info = {"candidates": k}
        else:
            wanted = (
                k * check_positive_int("multiplier", multiplier)
                if candidates is None
                else max(check_positive_int("candidates", candidates), k)
            )
            n_cand = min(wanted, self.num_docs)
            _, cand = self.first_stage(Q, n_cand)
            t_first = time.perf_counter() - t0
            # small query blocks keep each (queries x candidates x dim) gather in cache
            # (docs/decisions/0008)
            scores, rows = _rerank_blocks(
                Q, cand, k, lambda q, c: self.rerank_scores(Q[q], c, rerank, originals), query_block, threads
            )
            info = {
                "candidates": n_cand,
                "rerank": rerank,
                "first_stage_seconds": t_first,
                "rerank_seconds": time.perf_counter() - t0 - t_first,
            }
        ids = ids_at(self.ids, rows)
        return SearchResult(rows=rows, scores=scores, ids=ids, seconds=time.perf_counter() - t0, info=info)


def check_originals(originals: VectorStore | None, num_docs: int, dim: int) -> VectorStore:
    """``originals`` if a float rerank over ``num_docs`` documents with ``dim``-wide queries can read them."""
    if originals is None:
        raise InputError("float rerank needs the original document vectors (originals=...)")
    if originals.num_rows != num_docs:
        raise InputError(f"originals hold {originals.num_rows} vectors but the index holds {num_docs} documents")
    if originals.dim != dim:
        raise InputError(f"originals have {originals.dim} dimensions but queries have {dim}")
    return originals


def float_rerank_scores(Q: np.ndarray, rows: np.ndarray, originals: VectorStore) -> np.ndarray:
    """(queries, candidates) cosines of the float queries with the ``originals`` at ``rows``."""
    nq, nc = rows.shape
    Qn = normalize_rows(Q)
    fused = getattr(originals, "cosines", None)  # a store that scores its rows as it reads them (a copy on disk)
    scores = None if fused is None else fused(Qn, rows)  # None: it cannot here, and get() serves
    if scores is not None:
        return scores
    X = originals.get(rows.reshape(-1))  # (q*c, d) float32, candidates only
    dots = np.matmul(X.reshape(nq, nc, -1), Qn[:, :, None])[..., 0]  # (q, c)
    norms = np.sqrt(np.einsum("ij,ij->i", X, X)).reshape(nq, nc)  # (q, c), no normalized copy of X
    return np.divide(dots, norms, out=np.zeros_like(dots), where=norms > 0).astype(np.float32)


def _rerank_blocks(Q: np.ndarray, cand: np.ndarray, k: int, score, query_block: int, threads: int | None):
    """The top ``k`` of each query's candidates by ``score(query rows slice, candidates)``, in
    blocks of ``query_block`` queries (each block's gather stays in cache) run on ``threads``
    threads; ties by lower row."""
    scores = np.empty((len(Q), k), dtype=np.float32)
    rows = np.empty((len(Q), k), dtype=np.int64)

    def block(s: int) -> None:
        c = cand[s : s + query_block]
        sc = score(slice(s, s + len(c)), c)
        order = np.lexsort((c, -sc), axis=1)[:, :k]
        scores[s : s + len(c)] = np.take_along_axis(sc, order, axis=1)
        rows[s : s + len(c)] = np.take_along_axis(c, order, axis=1)

    run_blocks(block, range(0, len(Q), query_block), threads=threads)
    return scores, rows


def _check_rerank(rerank: str | None, kind: str, compressor) -> None:
    """An InputError for a rerank the index cannot run: an unknown one, or an asymmetric rerank of float
    outputs (a projection's own scan already scores them exactly; there is no quantization to undo)."""
    if rerank is not None and rerank not in RERANKS:
        raise InputError(f"rerank must be one of {', '.join(RERANKS)} or None, got {rerank!r}")
    if rerank == "asymmetric" and kind == "float" and compressor is not None:
        raise InputError(
            f"an asymmetric rerank rescores quantized codes; {compressor!r} outputs float vectors, which its own "
            "search scores exactly already: search them without it, or rerank with the originals (float)"
        )


class PartedIndex:
    """One corpus whose documents were encoded by several fitted compressors of the same spec, each
    holding its own part (``parts``: the global rows of a part and the :class:`Index` of their
    codes), searched as one: it returns what a single index would if each document were scored
    by its own part's model. This is how codes are measured on documents their fit did not see
    (:mod:`embcompress.evaluation.evaluate` fits one model per fold and lets each encode the folds it was not
    fitted on), and how a corpus encoded by successive refits would be searched.

    The first stage takes each part's top ``k`` (with a rerank: ``k x multiplier``) and keeps the
    best of them overall; a rerank then re-scores those candidates with their own part's model,
    so a search sees as many candidates as on a single index. Scores must be comparable across
    parts, as they are for one spec: cosines (float, asymmetric, lookup tables) or Hamming
    similarities over the same number of bits."""

    def __init__(self, parts: Sequence[tuple[np.ndarray, Index]], ids: Sequence | None = None):
        if not parts:
            raise InputError("a parted index needs at least one part")
        self.parts = [(np.asarray(r, dtype=np.int64), idx) for r, idx in parts]
        for r, idx in self.parts:
            if len(r) != idx.num_docs:
                raise InputError(f"a part lists {len(r)} rows for {idx.num_docs} documents")
        self.num_docs = sum(len(r) for r, _ in self.parts)
        if np.unique(np.concatenate([r for r, _ in self.parts])).size != self.num_docs:
            raise InputError("the parts' rows must number the documents 0..n-1, each once")
        first = self.parts[0][1]
        self.compressor, self.kind, self.nbytes_per_vector = first.compressor, first.kind, first.nbytes_per_vector
        self.ids = id_column(ids, self.num_docs)
        self._part_of = np.empty(self.num_docs, dtype=np.int64)  # each global row's part, and its row there
        self._local = np.empty(self.num_docs, dtype=np.int64)
        for p, (r, _) in enumerate(self.parts):
            self._part_of[r], self._local[r] = p, np.arange(len(r))

    def decoded(self) -> np.ndarray:
        """Every document decoded by its own part's model, in row order."""
        out = None
        for rows, idx in self.parts:
            z = idx.data if idx.compressor is None else idx.compressor.query_space.last.decode(idx.data)
            if out is None:
                out = np.empty((self.num_docs, z.shape[1]), dtype=np.float32)
            out[rows] = z
        return out

    def part_rows(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(the part of each global row of ``rows``, its row within that part), in the shape of ``rows``."""
        return self._part_of[rows], self._local[rows]

    def own_part_scores(
        self, Q: np.ndarray, cand: np.ndarray, score: Callable[[Index, np.ndarray, np.ndarray], np.ndarray]
    ) -> np.ndarray:
        """(queries, candidates) scores of the global rows ``cand``, each candidate scored by its own part
        only, ``score(part index, Q, local rows)``: a part's candidates are gathered to the front of each
        row (padded with its row 0 to the longest), scored, and put back."""
        owner = self._part_of[cand]
        out = np.zeros(cand.shape, dtype=np.float32)
        for p, (_, idx) in enumerate(self.parts):
            mine = owner == p
            width = int(mine.sum(axis=1).max())
            if width == 0:
                continue
            pos = np.argsort(~mine, axis=1, kind="stable")[:, :width]  # (q, width): this part's candidates first
            keep = np.take_along_axis(mine, pos, axis=1)
            local = np.where(keep, self._local[np.take_along_axis(cand, pos, axis=1)], 0)
            s = score(idx, Q, local)
            qi = np.broadcast_to(np.arange(len(cand))[:, None], pos.shape)
            out[qi[keep], pos[keep]] = s[keep]
        return out

    def search(
        self,
        queries: np.ndarray,
        k: int = 10,
        *,
        rerank: str | None = None,
        multiplier: int = DEFAULT_MULTIPLIER,
        originals: VectorStore | np.ndarray | None = None,
        query_block: int = 32,
        threads: int | None = None,
    ) -> SearchResult:
        """Top-``k`` documents for each float query, as :meth:`Index.search`; a rerank scores
        blocks of ``query_block`` queries on ``threads`` threads."""
        t0 = time.perf_counter()
        Q = check_array(queries, what="queries")
        if len(Q) == 0:
            raise InputError("no queries to search with (0 rows)")
        k = check_k(k, self.num_docs)
        _check_rerank(rerank, self.kind, self.compressor)
        if isinstance(originals, np.ndarray):
            originals = ArrayStore(originals)
        if rerank is None:
            found = [idx.search(Q, min(k, idx.num_docs), threads=threads) for _, idx in self.parts]
            scores, rows = merge_topk(
                [f.scores for f in found], [self.parts[i][0][f.rows] for i, f in enumerate(found)], k
            )
            info = {"candidates": k}
        else:
            n_cand = min(k * check_positive_int("multiplier", multiplier), self.num_docs)
            firsts = [idx.first_stage(Q, min(n_cand, idx.num_docs)) for _, idx in self.parts]
            _, cand = merge_topk(
                [s for s, _ in firsts], [self.parts[i][0][r] for i, (_, r) in enumerate(firsts)], n_cand
            )
            if rerank == "float":  # the originals are global: no part's model takes part
                store = check_originals(originals, self.num_docs, Q.shape[1])
                score = lambda q, c: float_rerank_scores(Q[q], c, store)  # noqa: E731
            else:
                score = lambda q, c: self.own_part_scores(  # noqa: E731
                    Q[q], c, lambda idx, Qp, local: idx.rerank_scores(Qp, local, rerank, None)
                )
            scores, rows = _rerank_blocks(Q, cand, k, score, query_block, threads)
            info = {"candidates": n_cand, "rerank": rerank}
        ids = ids_at(self.ids, rows)
        return SearchResult(rows=rows, scores=scores, ids=ids, seconds=time.perf_counter() - t0, info=info)
