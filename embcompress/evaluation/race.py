"""The race of ``run_configs``: a code slow to fit is stopped after its first model when that model
already falls short of the best code so far (:func:`race_first_model`)."""

from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple

import numpy as np

from ..search import Index
from .configs import FLOAT, Config
from .crossfit import CrossFit
from .rows import row_of
from .tasks import Task

#: racing looks at a code's first model alone when that model took at least this long to fit
#: (the faiss codebook families: tens of seconds; the others fit in about a second)
RACE_MIN_FIT_SECONDS = 5.0
#: the race's second test scores the code and the leader on the first fold alone, with the queries
#: whose relevant documents are there: with at least this many of them,
RACE_MIN_QUERIES = 200
#: it stops a code behind the leader there by more than this many standard errors of the paired
#: mean difference (one-sided; about 2% of codes exactly as good would be stopped)
RACE_Z = 2.0


class Leader(NamedTuple):
    """The best code so far in a race: its configuration and score."""

    cfg: Config
    score: float


def race_first_model(cfg: Config, task: Task, doc_ids, fits: CrossFit, originals, norm_power: float, leader: Leader):
    """The row of a code stopped after its first model, or None to go on. Only a code whose first
    model took :data:`RACE_MIN_FIT_SECONDS` or more to fit is raced. It is stopped when

    * encoding every document with that model (the other folds' are its fit rows), it scores
      below the leader: out-of-sample it would score lower still, in expectation
      (``race["test"] == "all documents"``); or
    * on the first fold alone, every document new to that model and to the leader's first model,
      it is behind the leader by more than :data:`RACE_Z` standard errors of the paired
      difference over the queries (``race["test"] == "first fold"``, :func:`gap_on_first_fold`).
      A code that memorizes its fit rows (``rq``) passes the first test on the strength of them.

    The row's score is the first model's on every document, marked ``stopped_early``, with
    ``race`` saying which test stopped it; no other model is fitted."""
    cache = fits.caches[0]
    cache.fit(cfg.spec)
    if cache.fit_seconds[cfg.spec] < RACE_MIN_FIT_SECONDS:
        return None
    index = fits.first_model_index(cfg.spec, doc_ids, norm_power)
    m = task.measure(index, cfg, originals)
    if m.score < leader.score:
        race = {"test": "all documents"}
    else:
        gap = gap_on_first_fold(cfg, leader.cfg, task, doc_ids, fits, norm_power)
        if gap is None or gap["difference"] + RACE_Z * gap["standard_error"] >= 0:
            return None
        race = {"test": "first fold", **gap}
    return replace(
        row_of(cfg, index, m, None, fits.costs(cfg.spec), f"one model of {fits.protocol}", fits.docs.shape[1]),
        per_query=None,
        stopped_early=True,
        race=race,
    )


def gap_on_first_fold(cfg: Config, other: Config, task: Task, doc_ids, fits: CrossFit, norm_power: float):
    """``cfg`` against ``other`` on a corpus of the first fold's documents, each code encoding them
    with its first model (fitted on the other folds): the mean per-query difference of the task's
    figure (``cfg`` minus ``other``) over the queries the task keeps there (``task.on_part``), and
    its standard error. None when the task cannot be restricted, a float rerank needs the
    originals, or fewer than :data:`RACE_MIN_QUERIES` queries are kept."""
    rows = fits.parts[0]
    sub = None if "float" in (cfg.rerank, other.rerank) else task.on_part(doc_ids, rows)
    if sub is None or len(sub.queries) < RACE_MIN_QUERIES:
        return None
    ids = [doc_ids[i] for i in rows]
    docs = fits.part_docs[0]
    if sub.mode == "label-free":  # its reference: float search on this corpus
        sub.measure(Index(docs, ids=ids), FLOAT, None)
    figures = []
    for c in (cfg, other):
        comp = fits.caches[0].fit(c.spec)
        codes = fits.caches[0].encode(c.spec, docs) if c is cfg else comp.transform(docs)  # cfg's are cached
        figures.append(sub.measure(Index(codes, compressor=comp, ids=ids, norm_power=norm_power), c, None).per_query)
    n, difference, standard_error = paired_difference(figures[0], figures[1])
    if n < RACE_MIN_QUERIES:
        return None
    return {"queries": n, "difference": difference, "standard_error": standard_error}


def paired_difference(a: np.ndarray, b: np.ndarray) -> tuple[int, float, float]:
    """(queries, mean, standard error) of the per-query difference ``a - b`` over the queries both
    score (a judged task leaves queries without judgments NaN); the error is NaN under 2 queries."""
    d = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    d = d[np.isfinite(d)]
    if len(d) < 2:
        return len(d), float(d.mean()) if len(d) else float("nan"), float("nan")
    return int(len(d)), float(d.mean()), float(d.std(ddof=1) / np.sqrt(len(d)))
