"""Retrieval metrics as pure functions (trec_eval / BEIR conventions).

A *run* is, per query, the ranked list of retrieved document ids (best first; ties were already
broken by the search, by document row). *qrels* map query id -> {doc id: grade}; grades > 0 are
relevant. Queries without any relevant document are left out of the means, as in BEIR.

* nDCG@k: gain = grade (linear, as trec_eval's ndcg_cut), discount 1 / log2(rank + 1); the ideal
  DCG sorts all judged grades of the query, so relevant documents never retrieved still count.
* recall@k: relevant documents in the top k / relevant documents of the query.
* MRR@k: 1 / rank of the first relevant document in the top k, else 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
import warnings
from typing import Mapping, Sequence

import numpy as np

from ..core.errors import InputError


def dcg(gains: Sequence[float]) -> float:
    return float(sum(g / math.log2(i + 2) for i, g in enumerate(gains)))


def ndcg_at_k(ranked: Sequence[str], judged: Mapping[str, int], k: int) -> float:
    ideal = dcg(sorted((g for g in judged.values() if g > 0), reverse=True)[:k])
    if ideal == 0:
        return 0.0
    return dcg([max(judged.get(d, 0), 0) for d in ranked[:k]]) / ideal


def recall_at_k(ranked: Sequence[str], judged: Mapping[str, int], k: int) -> float:
    relevant = {d for d, g in judged.items() if g > 0}
    if not relevant:
        return 0.0
    return len(relevant.intersection(ranked[:k])) / len(relevant)


def mrr_at_k(ranked: Sequence[str], judged: Mapping[str, int], k: int) -> float:
    for i, d in enumerate(ranked[:k]):
        if judged.get(d, 0) > 0:
            return 1.0 / (i + 1)
    return 0.0


@dataclass
class RetrievalScores:
    ndcg: float
    recall: float
    mrr: float
    k: int
    queries: int  # queries evaluated (in the run and with a relevant document)
    per_query: dict[str, dict[str, float]] = field(default_factory=dict, repr=False)

    def to_dict(self) -> dict:
        return {
            f"ndcg@{self.k}": self.ndcg,
            f"recall@{self.k}": self.recall,
            f"mrr@{self.k}": self.mrr,
            "queries": self.queries,
        }


def evaluate_run(
    run: Mapping[str, Sequence[str]], qrels: Mapping[str, Mapping[str, int]], k: int = 10
) -> RetrievalScores:
    """Mean nDCG@k, recall@k and MRR@k over the queries of ``run`` that have a relevant document."""
    per: dict[str, dict[str, float]] = {}
    for qid, ranked in run.items():
        judged = qrels.get(qid)
        if not judged or not any(g > 0 for g in judged.values()):
            continue
        per[qid] = {
            "ndcg": ndcg_at_k(ranked, judged, k),
            "recall": recall_at_k(ranked, judged, k),
            "mrr": mrr_at_k(ranked, judged, k),
        }
    if not per:
        return RetrievalScores(float("nan"), float("nan"), float("nan"), k, 0, per)
    mean = lambda key: float(np.mean([v[key] for v in per.values()]))  # noqa: E731
    return RetrievalScores(mean("ndcg"), mean("recall"), mean("mrr"), k, len(per), per)


class JudgedQueries:
    """:func:`evaluate_run` for many runs of the same queries: each query's judgments, relevant
    count and ideal DCG@k prepared once, and a run's ranked ids (queries x k) scored a column at
    a time. The figures are :func:`evaluate_run`'s, computed in the same order (a test compares
    them); queries without a relevant document get NaN."""

    def __init__(self, query_ids: Sequence, qrels: Mapping[str, Mapping[str, int]], k: int = 10):
        self.k = k
        self.judged = [qrels.get(str(q)) or {} for q in query_ids]
        self.n_relevant = np.array([sum(1 for g in j.values() if g > 0) for j in self.judged], dtype=np.float64)
        self.ideal = np.array([dcg(sorted((g for g in j.values() if g > 0), reverse=True)[:k]) for j in self.judged])
        self.discounts = [math.log2(i + 2) for i in range(k)]

    def score(self, ranked: np.ndarray) -> dict[str, np.ndarray]:
        """Per-query nDCG@k, recall@k and MRR@k (NaN where a query has no relevant document) of
        ``ranked``: (queries, at most k) document ids, best first."""
        width = min(self.k, ranked.shape[1])
        grades = np.array(
            [[j.get(d, 0) for d in row[:width]] for j, row in zip(self.judged, ranked)], dtype=np.float64
        ).reshape(len(self.judged), width)
        gains = np.maximum(grades, 0)
        dcg_ = np.zeros(len(self.judged))
        for i in range(width):  # the order and operations of dcg(): exactly its sums
            dcg_ += gains[:, i] / self.discounts[i]
        rel = grades > 0
        first = np.where(rel.any(axis=1), rel.argmax(axis=1) + 1.0, np.inf)
        keep = self.n_relevant > 0
        with np.errstate(divide="ignore", invalid="ignore"):
            return {
                "ndcg": np.where(keep, dcg_ / self.ideal, np.nan),  # a relevant document: ideal > 0
                "recall": np.where(keep, rel.sum(axis=1) / self.n_relevant, np.nan),
                "mrr": np.where(keep, 1.0 / first, np.nan),
            }


def retention(compressed: float, full: float) -> float:
    """Compressed score / full score (NaN when the full score is 0)."""
    return float(compressed / full) if full else float("nan")


def check_unique_ids(ids: Sequence | None, what: str) -> None:
    """Relevance judgements name documents and queries by id: refuse ids that repeat (a judged
    document found twice would count twice, and nDCG could pass 1)."""
    if ids is None:
        return
    first: dict[str, int] = {}
    repeats = []
    for row, i in enumerate(map(str, ids)):
        if i in first:
            repeats.append((i, first[i], row))
        else:
            first[i] = row
    if repeats:
        i, a, b = repeats[0]
        raise InputError(
            f"{what}: id {i!r} is on rows {a} and {b} ({len(repeats)} repeated id(s)); relevance "
            "judgements name rows by id, so every id must be unique"
        )


def check_qrels(qrels: Mapping[str, Mapping[str, int]], query_ids: Sequence, doc_ids: Sequence) -> dict[str, int]:
    """Check relevance judgements against the query and document ids: an InputError when an id
    repeats or no judged query is known, a warning counting judgements that name unknown queries
    or documents (they are ignored; unknown documents count as never retrieved). Returns the counts."""
    if not qrels:
        raise InputError("the qrels hold no judgements")
    check_unique_ids(query_ids, "the queries")
    check_unique_ids(doc_ids, "the documents")
    qset, dset = set(map(str, query_ids)), set(map(str, doc_ids))
    unknown_q = sum(1 for q in qrels if q not in qset)
    unknown_d = sum(1 for q, docs in qrels.items() if q in qset for d in docs if d not in dset)
    matched = sum(1 for q in qrels if q in qset)
    if matched == 0:
        raise InputError(
            f"none of the {len(qrels)} queries in the qrels is among the {len(qset)} query ids; check that "
            f"ids match (e.g. {next(iter(qrels))!r} vs {next(iter(qset), None)!r})"
        )
    if unknown_q or unknown_d:
        warnings.warn(
            f"qrels: {unknown_q} judged queries are not in the query file and {unknown_d} judged documents "
            "are not in the corpus; they are ignored (unknown documents count as never retrieved)",
            stacklevel=2,
        )
    return {
        "qrels_queries": len(qrels),
        "qrels_unknown_queries": unknown_q,
        "qrels_unknown_docs": unknown_d,
        "evaluated_queries": matched,
    }
