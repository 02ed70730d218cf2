"""The evaluation engine: fit -> index -> search -> score -> retention, in one place.

Every caller that measures what a compression keeps goes through :func:`run_configs`: the
``evaluate`` command, the retention report, ``recommend``, the demo and the temperature study.

A *configuration* names a compressor spec and a search mode: ``float`` (exact float search, the
reference), ``SPEC`` (search the compressed codes), ``SPEC@asym`` (first stage on the codes, then
the top ``k x multiplier`` re-scored with the float query against the decoded codes: no storage
beyond the codes), ``SPEC@float`` (re-scored against the original float vectors), optionally with
a candidate multiplier: ``binary@floatx4`` reranks the top 4k. The default multiplier is 10: for
k = 10 the top 100 candidates, as in Dinu et al. (2025), section 5.

A *task* says what is measured (:mod:`embcompress.evaluation.tasks`: :class:`QrelsTask`, :class:`LabelFreeTask`,
:class:`LabelTask`): nDCG@k against relevance judgements, recall@k against exact float search
(label-free), or kNN classification accuracy. Retention is the configuration's score divided by
the float reference's.
"""

from __future__ import annotations

import os
import re
import warnings
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping, NamedTuple, Sequence

import numpy as np

from ..core._util import sample_rows
from ..analysis import check_unique_ids
from .crossfit import CrossFit, check_folds, fold_pool_rows
from ..io.datasets import read_qrels
from ..core.errors import InputError
from ..io import read_all
from ..core.registry import from_spec
from ..search import DEFAULT_MULTIPLIER, ArrayStore, Index, VectorStore
from .rows import ResultRow
from .tasks import (Copies, LabelFreeTask, QrelsTask, Task, fewer_queries, search_as)

#: neighbours per sampled document that the rank proxy looks for
PROXY_K = 10
#: the report and ``recommend`` measure the in-sample figure on a seeded sample of this many of the
#: queries when there are more: it shows how much a code memorizes its fit rows, ranks nothing,
#: and its search was half of their scoring time
IN_SAMPLE_QUERIES = 2_000

_CONFIG = re.compile(r"^(?P<spec>[^@]+?)(?:@(?P<rerank>asym|asymmetric|float|float32|float16|f16|int8)(?:x(?P<mult>\d+))?)?$")
#: the rescoring copy each float-rerank word reads (``SPEC@int8x10``: the top 10k rescored from an int8 copy)
_COPY_WORDS = {"float": "float32", "float32": "float32", "float16": "float16", "f16": "float16", "int8": "int8"}


@dataclass(frozen=True)
class Config:
    label: str
    spec: str | None  # None: float reference
    rerank: str | None = None
    multiplier: int = DEFAULT_MULTIPLIER
    copy: str = "float32"  # with rerank "float": the copy it rescores from (float32, float16 or int8)


FLOAT = Config("float", None)


def parse_config(text: str | Config) -> Config:
    if isinstance(text, Config):
        return text
    text = text.strip()
    if text in ("float", "float32"):
        return FLOAT
    m = _CONFIG.match(text)
    if not m:
        raise InputError(f"cannot read configuration {text!r}; use float, SPEC, SPEC@asym, SPEC@float, SPEC@f16, "
                         "SPEC@int8, each optionally with xM (e.g. binary@int8x4: the top 4k rescored from an int8 copy)")
    word = m.group("rerank")
    rerank = None if word is None else "asymmetric" if word.startswith("asym") else "float"
    mult = int(m.group("mult")) if m.group("mult") else DEFAULT_MULTIPLIER
    if mult < 1:
        raise InputError(f"multiplier must be at least 1 in {text!r}")
    from_spec(m.group("spec"))  # validates the spec early
    return Config(text, m.group("spec"), rerank, mult, _COPY_WORDS.get(word, "float32"))


def trainable(spec: str | None, rows: int) -> bool:
    """Whether the compressor of ``spec`` (None: float) can be fitted on ``rows`` rows."""
    return spec is None or from_spec(spec).traits.fit.min_rows <= rows


def default_configs(dim: int, rows: int = 2) -> tuple[list[str], list[str]]:
    """The standard grid for ``dim``-wide inputs and ``rows`` documents, and what of it was left
    out because it cannot apply (a width below 1, a PCA fitted on fewer than 2 rows)."""
    grid = {"float": True, "binary": True, "binary@asym": True, "binary@float": True, "int8": True,
            "int8@float": True, f"truncate:{dim // 2}": dim // 2 >= 1,
            f"pca:{dim // 4}": dim // 4 >= 1 and rows >= 2, f"pca:{dim // 2}+binary": dim // 2 >= 1 and rows >= 2}
    return [c for c, ok in grid.items() if ok], [c for c, ok in grid.items() if not ok]


# ---- the engine ------------------------------------------------------------------------------------
def evaluate_config(docs: np.ndarray, cfg: Config, task: Task, *, doc_ids: Sequence, fits: CrossFit,
                    originals: VectorStore | np.ndarray | None = None, proxy: RankProxy | None = None,
                    norm_power: float = 1.0, in_sample: bool | Task = True, leader: Leader | None = None) -> ResultRow:
    """Fit (or reuse) the configuration's compressors, index ``docs`` as ``fits`` says, search and
    score with ``task``: the headline figure (out-of-sample unless ``fits`` has one fold) and, when
    that is out-of-sample, the in-sample one. ``proxy`` adds the label-free rank proxy (on the
    headline index); ``norm_power``: see :class:`~embcompress.search.Index`. Retention is filled in
    by :func:`run_configs`. ``in_sample=False`` leaves the in-sample figure out (None): one search
    instead of two, for a quick first look; a task (``task`` on fewer queries) measures it with
    that task. With ``leader`` (the best code so far), a code whose first model is slow to fit is
    stopped there when it falls short of it (:func:`_race`)."""
    if cfg.spec is None:
        indexes = {"headline": Index(docs, ids=doc_ids)}
        costs = {"fit_seconds": 0.0, "encode_rows_per_second": None}
    else:
        if leader is not None and fits.out_of_sample:
            stopped = _race(cfg, task, doc_ids, fits, originals, norm_power, leader)
            if stopped is not None:
                return stopped
        indexes = fits.indexes(cfg.spec, doc_ids, norm_power)
        costs = fits.costs(cfg.spec)
    index = indexes["headline"]
    m = task.measure(index, cfg, originals)
    inside_task, fewer = (task if in_sample is True else in_sample), None
    if "in_sample" not in indexes:  # fitted on every document (or float): the headline is in-sample
        inside = m.score
    else:
        inside = inside_task.measure(indexes["in_sample"], cfg, originals).score if inside_task else None
        fewer = len(inside_task.queries) if inside_task and inside_task is not task else None
    return _row(cfg, index, m, inside, costs, "none" if cfg.spec is None else fits.protocol, docs.shape[1], fewer,
                rank_proxy=None if proxy is None else proxy(index, cfg, originals))


def _row(cfg: Config, index, m, inside: float | None, costs: Mapping[str, Any], fitted: str, dim: int,
         in_sample_queries: int | None = None, **more: Any) -> ResultRow:
    comp = index.compressor
    return ResultRow(
        config=cfg.label, spec=cfg.spec, rerank=cfg.rerank,
        kind="float" if comp is None else comp.output_spec.kind,
        bytes_per_vector=index.nbytes_per_vector, compression=4 * dim / index.nbytes_per_vector,
        extra_storage=None if cfg.rerank != "float" else "original float vectors" if cfg.copy == "float32" else
        f"a {cfg.copy} copy of the documents",
        copy=cfg.copy if cfg.rerank == "float" else None,
        fitted=fitted, score=m.score, metrics=dict(m.metrics), score_in_sample=inside,
        in_sample_queries=in_sample_queries, fit_seconds=costs["fit_seconds"],
        encode_rows_per_second=costs["encode_rows_per_second"], search_seconds=m.seconds,
        queries_per_second=m.queries / m.seconds if m.seconds > 0 else float("inf"), candidates=m.candidates,
        per_query=m.per_query, **more)


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


def _race(cfg: Config, task: Task, doc_ids, fits: CrossFit, originals, norm_power: float, leader: Leader):
    """The row of a code stopped after its first model, or None to go on. Only a code whose first
    model took :data:`RACE_MIN_FIT_SECONDS` or more to fit is raced. It is stopped when

    * encoding every document with that model (the other folds' are its fit rows), it scores
      below the leader: out-of-sample it would score lower still, in expectation
      (``race["test"] == "all documents"``); or
    * on the first fold alone, every document new to that model and to the leader's first model,
      it is behind the leader by more than :data:`RACE_Z` standard errors of the paired
      difference over the queries (``race["test"] == "first fold"``, :func:`_gap_on_first_fold`).
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
        gap = _gap_on_first_fold(cfg, leader.cfg, task, doc_ids, fits, norm_power)
        if gap is None or gap["difference"] + RACE_Z * gap["standard_error"] >= 0:
            return None
        race = {"test": "first fold", **gap}
    return replace(_row(cfg, index, m, None, fits.costs(cfg.spec), f"one model of {fits.protocol}", fits.docs.shape[1]),
                   per_query=None, stopped_early=True, race=race)


def _gap_on_first_fold(cfg: Config, other: Config, task: Task, doc_ids, fits: CrossFit, norm_power: float):
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


class RankProxy:
    """The label-free rank proxy: how well a configuration's own search finds each sampled
    document's nearest neighbours. The sampled documents are searched as queries over all the
    documents, exactly as the configuration searches (Hamming, lookup-table or float first
    stage, then its rerank); the proxy is the mean nDCG@``k`` of those rankings when a query's
    ``k`` nearest documents by float cosine (itself left out) are its relevant ones. 1 for float
    search. It needs no labels, and it measures what retrieval retention measures: whether the
    right documents reach the top ``k`` among all of them (Kalyfommatos et al., 2025, section 6,
    correlate a local rank statistic with retention; scoring the whole search predicts it better,
    as the report shows for each data set: its Spearman correlation with retention)."""

    def __init__(self, docs: np.ndarray, rows: np.ndarray, k: int = PROXY_K):
        self.rows = np.asarray(rows, dtype=np.int64)
        self.queries = np.ascontiguousarray(docs[self.rows], dtype=np.float32)
        self.k = min(k, len(docs) - 1)
        self.reference = self._ranked(Index(docs).search(self.queries, self.k + 1).rows) if self.k > 0 else None

    def _ranked(self, found: np.ndarray) -> np.ndarray:
        """The first ``k`` rows of each ranking with the query's own row left out."""
        keep = found != self.rows[:, None]
        order = np.argsort(~keep, axis=1, kind="stable")[:, : self.k]
        return np.take_along_axis(found, order, 1)

    def __call__(self, index: Index, cfg: Config, originals) -> float:
        if cfg.spec is None or self.reference is None:
            return 1.0
        found = self._ranked(search_as(index, self.queries, self.k + 1, cfg, originals).rows)
        relevant = (found[:, :, None] == self.reference[:, None, :]).any(axis=2)
        discount = 1.0 / np.log2(np.arange(2, self.k + 2))
        return float((relevant @ discount).mean() / discount.sum())


def _in_sample_task(task: Task, in_sample: bool | int, docs, doc_ids, originals):
    """(the task that measures the in-sample figure, or False for none; float search's score on
    it when that is ``task`` on fewer queries, else None)."""
    if isinstance(in_sample, bool):
        return in_sample and task, None
    sub = fewer_queries(task, int(in_sample), seed=1)
    if sub is task:
        return task, None
    return sub, sub.measure(Index(docs, ids=doc_ids), FLOAT, originals).score  # float first: label-free needs it


def run_configs(docs: np.ndarray, task: Task, configs: Sequence[str | Config], *, doc_ids: Sequence | None = None,
                originals: VectorStore | np.ndarray | None = None, folds: int = 2, fit_rows: int | None = None,
                fit_on: np.ndarray | None = None, proxy_sample: int | None = None,
                progress: Callable[[str, int, int], None] | None = None, norm_power: float = 1.0,
                per_query: bool = False, in_sample: bool | int = True, race: bool = False) -> list[ResultRow]:
    """Evaluate each configuration on ``docs`` with ``task`` (the float reference first, added
    when missing). Compressors are fitted and scored as :class:`CrossFit` says: by default on two
    folds, so that ``score`` and ``retention`` are out-of-sample (every document encoded by a
    model that did not see it) and ``score_in_sample`` / ``retention_in_sample`` are the in-sample
    figures of the same models; ``folds=1`` fits on all the documents (in-sample only) and
    ``fit_on`` on given vectors. Codes scored asymmetrically weigh the reconstruction's norm with
    ``norm_power`` (see :class:`~embcompress.search.Index`). Returns one row per configuration
    with its scores, retentions, size, fit and encoding costs and search speed (and with
    ``per_query``, the main figure of each query as an array, under that key). ``in_sample``: True
    measures the in-sample figure on every query, False not at all, a number on a seeded sample of
    that many queries (the row's ``in_sample_queries``; its retention against float search's score
    on the same queries): that figure only shows how much a code memorizes its fit rows, and its
    search is half of the scoring time. With ``race`` (not
    with ``proxy_sample``) a code slow to fit whose first model scores below the best code so far
    is stopped there, marked ``stopped_early`` (:func:`_race`)."""
    cfgs = [parse_config(c) for c in configs]
    if not any(c.spec is None for c in cfgs):
        cfgs.insert(0, FLOAT)
    cfgs.sort(key=lambda c: c.spec is not None)  # float first: it is the reference
    doc_ids = [str(i) for i in range(len(docs))] if doc_ids is None else [str(i) for i in doc_ids]
    originals = docs if originals is None else originals
    if isinstance(originals, np.ndarray):
        originals = ArrayStore(originals)
    originals = Copies(originals)
    fits = CrossFit(docs, folds, fit_on=fit_on, fit_rows=fit_rows)
    fits.prepare([c.spec for c in cfgs])
    proxy = None
    if proxy_sample:
        proxy = RankProxy(docs, sample_rows(len(docs), proxy_sample, 0))
    inside_task, inside_ref = _in_sample_task(task, in_sample, docs, doc_ids, originals)
    rows: list[ResultRow] = []
    leader: Leader | None = None
    for i, cfg in enumerate(cfgs):
        if progress:
            progress(cfg.label, i, len(cfgs))
        row = evaluate_config(docs, cfg, task, doc_ids=doc_ids, fits=fits, originals=originals, proxy=proxy,
                              norm_power=norm_power, in_sample=inside_task,
                              leader=leader if race and proxy is None else None)
        if cfg.spec is not None and not row.stopped_early and (leader is None or row.score > leader.score):
            leader = Leader(cfg, row.score)
        ref = rows[0] if rows else row
        rows.append(row.with_retention(ref.score, inside_ref, keep_per_query=per_query))
    if progress:
        progress("done", len(cfgs), len(cfgs))
    return rows


def evaluate(
    docs: np.ndarray,
    queries: np.ndarray,
    *,
    doc_ids: Sequence | None = None,
    query_ids: Sequence | None = None,
    qrels: Mapping[str, Mapping[str, int]] | None = None,
    configs: Sequence[str | Config] | None = None,
    k: int = 10,
    originals: VectorStore | np.ndarray | None = None,
    fit_sample: int | None = None,
    folds: int = 2,
    progress: Callable[[str, int, int], None] | None = None,
    norm_power: float = 1.0,
) -> dict[str, Any]:
    """Evaluate each configuration; returns ``{"rows": [...], "summary": {...}}``.

    With ``qrels``, nDCG@k, recall@k and MRR@k; without, label-free recall@k against exact float
    search. Compressors are fitted as :class:`CrossFit` says: by default each on half of ``docs``
    and scored on the other half (``retention``, out-of-sample), with the in-sample figure beside
    it (``retention_in_sample``); ``folds=1`` fits on all of them, in-sample only; ``fit_sample``
    caps the rows each model is fitted on (a seeded uniform sample of its pool). Float reranks
    read ``originals`` (default: ``docs`` themselves). ``norm_power``: how codes scored
    asymmetrically weigh their reconstruction's norm (see :class:`~embcompress.search.Index`)."""
    docs = np.ascontiguousarray(docs, dtype=np.float32)
    if len(queries) == 0:
        raise InputError("no queries to evaluate with (0 rows)")
    dim = docs.shape[1]
    doc_ids = [str(i) for i in range(len(docs))] if doc_ids is None else [str(i) for i in doc_ids]
    query_ids = [str(i) for i in range(len(queries))] if query_ids is None else [str(i) for i in query_ids]
    task = QrelsTask(queries, query_ids, qrels, k) if qrels else LabelFreeTask(queries, k)
    summary: dict[str, Any] = {"documents": len(docs), "queries": len(queries), "dim": dim, "k": k,
                               "mode": "qrels" if qrels else "label-free (recall@k against exact float search)",
                               **task.check(docs, doc_ids)}
    if not configs:
        configs, skipped = default_configs(dim, len(docs))
        if skipped:
            summary["skipped"] = skipped
            warnings.warn(f"left out of the default grid, as they cannot apply to {len(docs)} document(s) of {dim} "
                          f"dimension(s): {', '.join(skipped)}")
    folds = check_folds(folds)
    if folds > 1 and len(docs) < 2 * folds:
        warnings.warn(f"{len(docs)} document(s) are too few for {folds}-fold fitting (two per fold); the codes are "
                      "fitted on all of them and scored in-sample")
        folds = 1
    summary["fitted"] = CrossFit.describe(folds)
    if fit_sample is not None:  # how many rows each fit's sample is drawn from
        pool = fold_pool_rows(len(docs), folds)
        summary["fit_sample"] = {"rows": min(pool, fit_sample), "drawn_from": pool, "uniform": True}
    rows = run_configs(docs, task, configs, doc_ids=doc_ids, originals=originals, folds=folds, fit_rows=fit_sample,
                       progress=progress, norm_power=norm_power)
    if any(r.retention != r.retention for r in rows):  # NaN: the float reference scored 0
        summary["note"] = (f"retention is undefined (shown as n/a): exact float search scores 0 on this task ({task.metric}), "
                           "so there is nothing for a compressed form to keep; check that the qrels match the ids")
        rows = [r.without_nan_retention() for r in rows]
    return {"summary": summary, "rows": [r.to_dict() for r in rows]}


def evaluate_files(docs: str | os.PathLike, queries: str | os.PathLike, *, qrels: str | os.PathLike | None = None,
                   configs: Sequence[str | Config] | None = None, k: int = 10, fit_sample: int | None = None,
                   folds: int = 2, progress: Callable[[str, int, int], None] | None = None, norm_power: float = 1.0) -> dict[str, Any]:
    """:func:`evaluate` on files: document and query embeddings, and optionally BEIR qrels."""
    D, dids = read_all(docs)
    Q, qids = read_all(queries)
    if len(Q) == 0:
        raise InputError(f"{queries} has no queries (0 rows)")
    if len(D) == 0:
        raise InputError(f"{docs} has no documents (0 rows)")
    judged = read_qrels(qrels) if qrels else None
    if judged:
        check_unique_ids(dids, str(docs))
        check_unique_ids(qids, str(queries))
    return evaluate(D, Q, doc_ids=dids, query_ids=qids, qrels=judged, configs=configs, k=k, fit_sample=fit_sample,
                    folds=folds, progress=progress, norm_power=norm_power)
