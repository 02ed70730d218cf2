"""What the evaluation engine measures (:mod:`embcompress.evaluation.evaluate`): a *task* scores one
configuration's search of its queries. :class:`QrelsTask`: nDCG@k against relevance judgements;
:class:`LabelFreeTask`: agreement with exact float search, without judgements;
:class:`LabelTask`: kNN classification accuracy of the decoded vectors."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping, Protocol, Sequence

import numpy as np

from ..analysis import JudgedQueries, check_qrels, knn_accuracy, neighbour_recall_per_query, pseudo_relevance_ndcg
from ..core.errors import InputError
from ..core._util import sample_rows
from ..search import Index, PartedIndex
from ..search.stores import ArrayStore, DecodedStore, VectorStore
from ..serving import residual

if TYPE_CHECKING:
    from .configs import Config


#: the int8 copy's calibration is fitted on a seeded sample of at most this many documents
INT8_CALIBRATION_ROWS = 10_000


class Copies:
    """The rescoring copies a float rerank reads: the float32 ``originals``, and float16 and int8 copies
    of them, each made on first use (int8 calibrated on a seeded sample of at most
    :data:`INT8_CALIBRATION_ROWS` documents; the plan ``recommend --ram-budget`` saves is calibrated
    on the whole file, whose ranges hold the sample's), and the int8 residual of an index's codes
    (made for the last index asked: a ranking asks for one index's copy at every count in turn)."""

    def __init__(self, originals: VectorStore):
        self.float32 = originals
        self.num_rows, self.dim = originals.num_rows, originals.dim
        self._made: dict[str, VectorStore] = {"float32": originals}
        self._residual: tuple[Index | None, VectorStore | None] = (None, None)

    def get(self, rows: np.ndarray) -> np.ndarray:  # a VectorStore itself: the float32 copy
        return self.float32.get(rows)

    def store(self, kind: str, index: "Index | None" = None) -> VectorStore:
        if kind == residual.KIND:
            if index is None:
                raise InputError("an int8r copy is the residual of an index's codes: give the index")
            if self._residual[0] is not index:
                X = self.float32.get(np.arange(self.num_rows))
                self._residual = (index, residual.ResidualCopy.of_array(residual.encode_index(index, X), index))
            return self._residual[1]
        if kind not in self._made:
            X = self.float32.get(np.arange(self.num_rows))
            if kind == "float16":
                self._made[kind] = ArrayStore(X.astype(np.float16))
            else:
                from ..compressors import Int8

                sample = sample_rows(self.num_rows, INT8_CALIBRATION_ROWS, 0)
                int8 = Int8().fit(X[sample])
                self._made[kind] = DecodedStore(int8.transform(X), int8)
        return self._made[kind]


def search_as(index: Index, queries: np.ndarray, k: int, cfg: "Config", originals):
    """``queries`` searched the way ``cfg`` says: on the codes, then its rerank if it has one (a float
    rerank reads the copy ``cfg`` names when ``originals`` holds several)."""
    store = None
    if cfg.rerank == "float":
        store = originals.store(cfg.copy, index) if isinstance(originals, Copies) else originals
    return index.search(queries, k, rerank=cfg.rerank, multiplier=cfg.multiplier, originals=store)


@dataclass
class Measured:
    score: float  # the task's main figure (higher is better)
    metrics: dict[str, float]  # every figure, by name
    seconds: float  # search time
    queries: int
    candidates: int
    per_query: np.ndarray | None = None  # the main figure of each query (for a bootstrap over queries)


class Task(Protocol):
    """What is measured: :class:`QrelsTask`, :class:`LabelFreeTask` or :class:`LabelTask`. Every task
    answers every member; a task that has no queries (``LabelTask``) says so with ``queries = None``,
    and one that cannot be restricted to a part of the corpus returns None from ``on_part``."""

    k: int
    metric: str  # the main figure's name, shown in tables
    mode: str  # "qrels", "label-free" or "labels"
    queries: np.ndarray | None  # the float queries, or None when the task has none (labels)
    source: str  # what the queries are: "queries" (the user's), "documents" (standing in), "labels" (none)

    def check(self, docs: np.ndarray, doc_ids: Sequence) -> dict[str, int]: ...

    def measure(self, index: Index, cfg: "Config", originals) -> "Measured": ...

    def subset(self, rows: np.ndarray) -> "Task": ...

    def on_part(self, doc_ids: Sequence, rows: np.ndarray) -> "Task | None": ...


class QrelsTask:
    """nDCG@k (with recall@k and MRR@k) of float ``queries`` against BEIR-style ``qrels``."""

    source = "queries"

    def __init__(self, queries: np.ndarray, query_ids: Sequence, qrels: Mapping[str, Mapping[str, int]], k: int = 10):
        self.queries, self.query_ids, self.qrels, self.k = queries, [str(q) for q in query_ids], qrels, k
        self.metric = f"nDCG@{k}"
        self.mode = "qrels"
        self._judged: JudgedQueries | None = None  # the judgments prepared for scoring, on first use

    def subset(self, rows: np.ndarray) -> "QrelsTask":
        """The same task on the queries at ``rows``, each with its judgments."""
        ids = [self.query_ids[i] for i in rows]
        return QrelsTask(self.queries[rows], ids, {q: self.qrels[q] for q in ids if q in self.qrels}, self.k)

    def on_part(self, doc_ids: Sequence, rows: np.ndarray) -> "QrelsTask":
        """The same task for a corpus of the documents at ``rows``: the queries with a relevant
        document there, each with its judgments."""
        inside = {str(doc_ids[i]) for i in np.asarray(rows, dtype=np.int64)}
        keep = [
            j
            for j, q in enumerate(self.query_ids)
            if any(g > 0 and d in inside for d, g in self.qrels.get(q, {}).items())
        ]
        return self.subset(np.asarray(keep, dtype=np.int64))

    def check(self, docs: np.ndarray, doc_ids: Sequence) -> dict[str, int]:
        if self.queries.shape[1] != docs.shape[1]:
            raise InputError(f"queries have {self.queries.shape[1]} dimensions but documents have {docs.shape[1]}")
        if len(self.query_ids) != len(self.queries):
            raise InputError(f"{len(self.query_ids)} query ids for {len(self.queries)} queries")
        return check_qrels(self.qrels, self.query_ids, doc_ids)

    def measure(self, index: Index, cfg: Config, originals) -> Measured:
        res = search_as(index, self.queries, self.k, cfg, originals)
        if self._judged is None:
            self._judged = JudgedQueries(self.query_ids, self.qrels, self.k)
        per = self._judged.score(res.ids)  # evaluate_run's figures, per query
        judged = ~np.isnan(per["ndcg"])
        mean = {name: float(np.mean(v[judged])) if judged.any() else float("nan") for name, v in per.items()}
        metrics = {f"ndcg@{self.k}": mean["ndcg"], f"recall@{self.k}": mean["recall"], f"mrr@{self.k}": mean["mrr"]}
        return Measured(mean["ndcg"], metrics, res.seconds, len(self.queries), res.info["candidates"], per["ndcg"])


#: how a label-free score reads the float search's ranking (LabelFreeTask's ``reference``)
REFERENCES = {
    "top1": "nDCG@{k} with the float top-1 as the relevant document",
    "graded": "nDCG@{k} with the float top-{k} as relevant documents, graded {k} to 1",
    "recall": "recall@{k} vs float",
}
#: the reference for the user's own queries without judgments: of the three, the one whose ranking of
#: codes agreed best with the judged ranking on the sets measured (docs/decisions/0007)
DEFAULT_REFERENCE = "top1"
#: the reference a serving-plan ranking scores the user's queries with: a plan keeps float search's whole top k
#: when its candidates hold them, which top1 does not see (it stops the candidate sweep once the top result is in);
#: the top 10 graded kept the judged pick's retention on the sets measured (docs/decisions/0010)
PLAN_REFERENCE = "graded"


def reference_for(reference: str | None, plans: bool = False) -> str:
    """The reference given, or without one the default of the ranking: :data:`PLAN_REFERENCE` for serving plans,
    :data:`DEFAULT_REFERENCE` for codes."""
    return reference if reference is not None else (PLAN_REFERENCE if plans else DEFAULT_REFERENCE)


class LabelFreeTask:
    """A score without judgments: the configuration's ranking of each query against exact float
    search's ranking of the same query, read as ``reference`` says (:data:`REFERENCES`): the
    float top-1 as a pseudo-relevant document, the float top-k graded, or recall@k against the
    float top-k (the default here; :data:`DEFAULT_REFERENCE` is what reports and ``recommend``
    use for the user's own queries). ``source`` says what the queries are: the user's own
    ``"queries"``, or ``"documents"`` standing in for them."""

    def __init__(self, queries: np.ndarray, k: int = 10, *, reference: str = "recall", source: str = "documents"):
        if reference not in REFERENCES:
            raise InputError(f"reference must be one of {', '.join(REFERENCES)}, got {reference!r}")
        self.queries, self.k, self.reference, self.source = queries, k, reference, source
        self.metric = REFERENCES[reference].format(k=k) + (
            " (label-free)" if source == "documents" else " (label-free, your queries)"
        )
        self.mode = "label-free"
        self._reference: np.ndarray | None = None

    def subset(self, rows: np.ndarray) -> "LabelFreeTask":
        """The same task on the queries at ``rows`` (their float reference is searched anew)."""
        return LabelFreeTask(self.queries[rows], self.k, reference=self.reference, source=self.source)

    def check(self, docs: np.ndarray, doc_ids: Sequence) -> dict[str, int]:
        if self.queries.shape[1] != docs.shape[1]:
            raise InputError(f"queries have {self.queries.shape[1]} dimensions but documents have {docs.shape[1]}")
        return {}

    def on_part(self, doc_ids: Sequence, rows: np.ndarray) -> "LabelFreeTask":
        """The same task for a corpus of the documents at ``rows`` (its float reference is searched
        anew there)."""
        return self.subset(np.arange(len(self.queries)))

    def measure(self, index: Index, cfg: Config, originals) -> Measured:
        res = search_as(index, self.queries, self.k, cfg, originals)
        if cfg.spec is None:
            self._reference = res.rows
        if self._reference is None:
            raise InputError("label-free scores need the float reference evaluated first (run_configs does that)")
        if self.reference == "recall":
            per, name = neighbour_recall_per_query(self._reference, res.rows, self.k), f"recall@{self.k}_vs_float"
        else:
            depth = 1 if self.reference == "top1" else self.k
            per, name = (
                pseudo_relevance_ndcg(self._reference, res.rows, self.k, depth),
                f"ndcg@{self.k}_vs_float_{self.reference}",
            )
        score = float(per.mean())
        return Measured(score, {name: score}, res.seconds, len(self.queries), res.info["candidates"], per)


class LabelTask:
    """kNN classification accuracy (k = 10, Euclidean, seeded 9:1 split) of the decoded vectors.
    Reranks do not apply: a configuration with one is refused."""

    queries = None  # scored on the documents themselves
    source = "labels"

    def __init__(self, labels: Sequence, k: int = 10):
        self.labels, self.k = np.asarray(labels), k
        self.metric = f"kNN accuracy (k={k})"
        self.mode = "labels"

    def subset(self, rows: np.ndarray) -> "LabelTask":
        """The task itself: it has no queries to sample (every document is classified)."""
        return self

    def on_part(self, doc_ids: Sequence, rows: np.ndarray) -> None:
        """None: kNN accuracy is not restricted to a part of the corpus."""
        return None

    def check(self, docs: np.ndarray, doc_ids: Sequence) -> dict[str, int]:
        if len(self.labels) != len(docs):
            raise InputError(f"{len(self.labels)} labels for {len(docs)} vectors")
        return {}

    def measure(self, index: Index, cfg: Config, originals) -> Measured:
        if cfg.rerank is not None:
            raise InputError(f"{cfg.label}: a rerank has no meaning for kNN accuracy; use the configuration without @")
        t0 = time.perf_counter()
        comp = index.compressor
        if isinstance(index, PartedIndex):
            Z = index.decoded()
        else:
            Z = index.data if comp is None else comp.query_space.last.decode(index.data)
        acc = knn_accuracy(Z, self.labels, k=self.k)
        return Measured(acc, {"knn_accuracy": acc}, time.perf_counter() - t0, len(Z), self.k)


def fewer_queries(task, n: int, seed: int = 0):
    """``task`` on a seeded sample of ``n`` of its queries (its ``subset``: judged ones with their
    qrels, or label-free ones); the task itself when it has no more queries than that or is scored
    by labels (no subset)."""
    if task.queries is None or len(task.queries) <= n:
        return task
    return task.subset(np.sort(np.random.default_rng(seed).choice(len(task.queries), n, replace=False)))
