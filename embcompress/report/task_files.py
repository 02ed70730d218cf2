"""What a report and ``recommend`` read from files: the documents (a seeded sample of a large file), their
ids and labels, the queries and their judgments; with judgments, the sample keeps the judged documents
(:func:`judged_subset`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from ..analysis import check_unique_ids
from ..core.errors import InputError
from ..io import count_rows, read_all, read_sample
from ..evaluation.tasks import DEFAULT_REFERENCE
from ..io.datasets import read_qrels


@dataclass(frozen=True)
class TaskInputs:
    """What scores a sample of documents: their ids, the queries with their ids and judgments (``qrels``), or
    class ``labels``; ``sampled``, what :func:`judged_subset` kept (None: a uniform sample); how queries without
    judgments are scored against float search (``reference``: top1, graded or recall) and the cutoff ``k``."""

    doc_ids: Sequence | None = None
    queries: np.ndarray | None = None
    query_ids: Sequence | None = None
    qrels: Mapping[str, Mapping[str, int]] | None = None
    labels: Sequence | None = None
    sampled: Mapping[str, int] | None = None
    reference: str = DEFAULT_REFERENCE
    k: int = 10


def load_task_files(
    input,
    *,
    queries=None,
    qrels=None,
    labels=None,
    sample: int | None = None,
    default_sample: int = 50_000,
    column: str | None = None,
) -> dict[str, Any]:
    """What a report or ``recommend`` reads from files: documents, their ids and labels, queries
    and qrels. Keyword arguments for :func:`~.grid.validate` / :func:`~.grid.build_report` (``docs`` first), and
    ``sampled`` (None, or what :func:`judged_subset` kept).

    Without qrels: a seeded uniform sample of ``sample`` rows (``default_sample`` when not given)
    drawn across the whole file, so a file sorted by source, date or cluster is sampled as a
    shuffled one would be; ``sampled`` then says how many rows it was drawn from. With qrels, every
    document by default (judged documents may be anywhere in the file); with ``sample``, the judged
    documents of a seeded sample of queries and random others, ``sample`` in all."""
    if qrels is not None and queries is None:
        raise InputError("--qrels judges queries: give --queries too")
    if labels and queries:
        raise InputError("give either --labels or --queries (with or without --qrels), not both")
    limit = None if qrels else (sample or default_sample)
    D, ids, lab = read_sample(input, limit=limit, column=column, label_column=labels)
    Q = qids = judged = sampled = None
    if limit is not None and (total := count_rows(input, column=column)) > len(D):
        sampled = {"documents": total, "kept_documents": len(D), "seed": 0}
    if queries and not qrels:
        Q, qids = read_all(queries)
    if qrels:
        Q, qids = read_all(queries)
        judged = read_qrels(qrels)
        check_unique_ids(ids, str(input))
        check_unique_ids(qids, str(queries))
        if sample is not None and sample < len(D):
            rows, keep_q, judged, sampled = judged_subset(ids, qids, judged, sample)
            D, ids = D[rows], [ids[i] for i in rows]
            lab = None if lab is None else [lab[i] for i in rows]
            Q, qids = Q[keep_q], [qids[i] for i in keep_q]
    return {
        "docs": D,
        "doc_ids": ids,
        "queries": Q,
        "query_ids": qids,
        "qrels": judged,
        "labels": lab,
        "sampled": sampled,
    }


def judged_subset(
    doc_ids: Sequence, query_ids: Sequence, qrels: Mapping[str, Mapping[str, int]], n: int, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, dict[str, dict[str, int]], dict[str, int]]:
    """``n`` documents for a quicker run with qrels: the documents judged relevant to queries drawn
    in a seeded random order, as long as they fill at most half of ``n``, and random other
    documents for the rest (so that the judged ones still compete with as many distractors). A
    smaller corpus scores higher, but each code's *retention* (its score over float32's on the
    same sample) is what the report compares. Returns the kept document rows and query rows (in
    file order), the qrels restricted to them, and counts for the report."""
    if n < 2:
        raise InputError(f"--sample {n}: a sample with qrels needs at least 2 documents")
    pos = {str(d): i for i, d in enumerate(doc_ids)}
    rng = np.random.default_rng(seed)
    judged: set[int] = set()
    keep_q: list[int] = []
    for qi in rng.permutation(len(query_ids)):
        rel = {pos[d] for d, g in qrels.get(str(query_ids[qi]), {}).items() if g > 0 and d in pos}
        if rel and len(judged) + len(rel - judged) <= n // 2:  # no copy of the growing set per query
            judged |= rel
            keep_q.append(int(qi))
    if not keep_q:
        raise InputError(
            f"--sample {n} is too small for these qrels: no query's relevant documents fit in half of "
            f"it; give a larger --sample, or none to use every document"
        )
    others = np.setdiff1d(np.arange(len(doc_ids)), np.fromiter(judged, dtype=np.int64))
    rows = np.sort(
        np.concatenate(
            [
                np.fromiter(judged, dtype=np.int64),
                rng.choice(others, size=min(n - len(judged), len(others)), replace=False),
            ]
        )
    )
    kept = {str(doc_ids[i]) for i in rows}
    q_rows = np.sort(np.asarray(keep_q, dtype=np.int64))
    sub = {str(query_ids[q]): {d: g for d, g in qrels[str(query_ids[q])].items() if d in kept} for q in q_rows}
    counts = {
        "documents": len(doc_ids),
        "queries": len(query_ids),
        "kept_documents": int(len(rows)),
        "kept_queries": int(len(q_rows)),
        "judged_documents": len(judged),
        "seed": seed,
    }
    return rows, q_rows, sub, counts
