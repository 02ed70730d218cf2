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
import warnings
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..core._util import sample_rows
from ..analysis import check_unique_ids
from .crossfit import CrossFit, check_folds, fold_pool_rows
from ..io.datasets import read_qrels
from ..core.errors import InputError
from ..io import read_all
from ..search import ArrayStore, Index, VectorStore
from ..core.requests import from_keywords
from .configs import FLOAT, Config, default_configs, parse_config
from .race import Leader, race_first_model
from .rows import ResultRow, row_of
from .tasks import Copies, LabelFreeTask, QrelsTask, Task, fewer_queries, search_as

#: neighbours per sampled document that the rank proxy looks for
PROXY_K = 10
#: the report and ``recommend`` measure the in-sample figure on a seeded sample of this many of the
#: queries when there are more: it shows how much a code memorizes its fit rows, ranks nothing,
#: and its search was half of their scoring time
IN_SAMPLE_QUERIES = 2_000


# ---- the engine ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ConfigSetting:
    """Where :func:`evaluate_config` measures a configuration: the documents' ids, the folds and fitted models
    (``fits``), the stored originals for float reranks, the label-free ``proxy`` (None: none), the index's
    ``norm_power``, the in-sample measure (True: the task itself; False: none; a task: that one) and the
    ``leader`` of a race (None: no race)."""

    doc_ids: Sequence
    fits: CrossFit
    originals: VectorStore | np.ndarray | None = None
    proxy: RankProxy | None = None
    norm_power: float = 1.0
    in_sample: bool | Task = True
    leader: Leader | None = None


def evaluate_config(
    docs: np.ndarray, cfg: Config, task: Task, *, setting: ConfigSetting | None = None, **given: Any
) -> ResultRow:
    """Fit (or reuse) the configuration's compressors, index ``docs`` as ``fits`` says, search and
    score with ``task``: the headline figure (out-of-sample unless ``fits`` has one fold) and, when
    that is out-of-sample, the in-sample one. ``proxy`` adds the label-free rank proxy (on the
    headline index); ``norm_power``: see :class:`~embcompress.search.Index`. Retention is filled in
    by :func:`run_configs`. ``in_sample=False`` leaves the in-sample figure out (None): one search
    instead of two, for a quick first look; a task (``task`` on fewer queries) measures it with
    that task. With ``leader`` (the best code so far), a code whose first model is slow to fit is
    stopped there when it falls short of it (:func:`~embcompress.evaluation.race.race_first_model`).
    The setting is a :class:`ConfigSetting`, given or as its fields' keyword arguments."""
    (c,) = from_keywords("evaluate_config", given, ConfigSetting, values=(setting,))
    doc_ids, fits, originals, proxy = c.doc_ids, c.fits, c.originals, c.proxy
    norm_power, leader = c.norm_power, c.leader
    inside_task, fewer = (task if c.in_sample is True else c.in_sample), None
    if cfg.spec is None:
        indexes = {"headline": Index(docs, ids=doc_ids)}
        costs = {"fit_seconds": 0.0, "encode_rows_per_second": None}
    else:
        if leader is not None and fits.out_of_sample:
            stopped = race_first_model(cfg, task, doc_ids, fits, originals, norm_power, leader)
            if stopped is not None:
                return stopped
        indexes = fits.indexes(cfg.spec, doc_ids, norm_power, structure=cfg.structure, in_sample=bool(inside_task))
        costs = fits.costs(cfg.spec)
    index = indexes["headline"]
    m = task.measure(index, cfg, originals)
    if cfg.spec is None or not fits.out_of_sample:  # fitted on every document (or float): the headline is in-sample
        inside = m.score
    else:
        inside = inside_task.measure(indexes["in_sample"], cfg, originals).score if inside_task else None
        fewer = len(inside_task.queries) if inside_task and inside_task is not task else None
    return row_of(
        cfg,
        index,
        m,
        inside,
        costs,
        "none" if cfg.spec is None else fits.protocol,
        docs.shape[1],
        fewer,
        rank_proxy=None if proxy is None else proxy(index, cfg, originals),
    )


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


def _float_first(configs: Sequence[str | Config]) -> list[Config]:
    """The configurations read, float search first (added when missing): it is the reference."""
    cfgs = [parse_config(c) for c in configs]
    if not any(c.spec is None for c in cfgs):
        cfgs.insert(0, FLOAT)
    return sorted(cfgs, key=lambda c: c.spec is not None)


def _ids(ids: Sequence | None, n: int) -> list[str]:
    """Row ids as strings: the given ones, or the row numbers."""
    return [str(i) for i in range(n)] if ids is None else [str(i) for i in ids]


def _store(originals: VectorStore | np.ndarray) -> VectorStore:
    return ArrayStore(originals) if isinstance(originals, np.ndarray) else originals


@dataclass(frozen=True)
class RunOptions:
    """How :func:`run_configs` fits and scores. Compressors are fitted and scored as :class:`CrossFit` says:
    ``folds`` (default two, so that ``score`` and ``retention`` are out-of-sample: every document encoded by a
    model that did not see it, and ``score_in_sample`` / ``retention_in_sample`` the in-sample figures of the same
    models; 1 fits on all the documents, in-sample only), each fit on at most ``fit_rows`` rows, or on the given
    vectors ``fit_on``. Float reranks read ``originals`` (default: the documents). Codes scored asymmetrically
    weigh the reconstruction's norm with ``norm_power`` (see :class:`~embcompress.search.Index`). ``proxy_sample``
    documents score the label-free rank proxy. ``per_query`` keeps the main figure of each query (an array).
    ``in_sample``: True measures the in-sample figure on every query, False not at all, a number on a seeded
    sample of that many queries (the row's ``in_sample_queries``; its retention against float search's score on
    the same queries): it only shows how much a code memorizes its fit rows, and its search is half of the
    scoring time. With ``race`` (not with ``proxy_sample``) a code slow to fit whose first model scores below the
    best code so far is stopped there, marked ``stopped_early`` (:mod:`.race`). ``extend``, when given, is asked
    with every row so far once the configurations are scored, and what it returns is scored next with the same
    fitted models, until it returns none (``recommend --ram-budget`` goes on with a candidate sweep that is still
    rising). ``reuse_first_stage`` lets a spec's exact scan answer its next configurations with fewer candidates
    (list the most first): the same results, from one scan, but the rows' search times are then not the
    configurations' own."""

    doc_ids: Sequence | None = None
    originals: VectorStore | np.ndarray | None = None
    folds: int = 2
    fit_rows: int | None = None
    fit_on: np.ndarray | None = None
    proxy_sample: int | None = None
    progress: Callable[[str, int, int], None] | None = None
    norm_power: float = 1.0
    per_query: bool = False
    in_sample: bool | int = True
    race: bool = False
    extend: Callable[[list[ResultRow]], Sequence[str | Config]] | None = None
    reuse_first_stage: bool = False


def run_configs(
    docs: np.ndarray, task: Task, configs: Sequence[str | Config], *, options: RunOptions | None = None, **given: Any
) -> list[ResultRow]:
    """Evaluate each configuration on ``docs`` with ``task`` (the float reference first, added when missing), as
    :class:`RunOptions` (given, or its fields as keyword arguments) says. Returns one row per configuration with
    its scores, retentions, size, fit and encoding costs and search speed."""
    (o,) = from_keywords("run_configs", given, RunOptions, values=(options,))
    progress = o.progress
    cfgs = _float_first(configs)
    doc_ids = _ids(o.doc_ids, len(docs))
    originals = Copies(_store(docs if o.originals is None else o.originals))
    fits = CrossFit(docs, o.folds, fit_on=o.fit_on, fit_rows=o.fit_rows)
    fits.reuse_first_stage = o.reuse_first_stage
    fits.prepare([c.spec for c in cfgs])
    proxy = RankProxy(docs, sample_rows(len(docs), o.proxy_sample, 0)) if o.proxy_sample else None
    inside_task, inside_ref = _in_sample_task(task, o.in_sample, docs, doc_ids, originals)
    rows: list[ResultRow] = []
    leader: Leader | None = None  # the best code so far, for the race
    i = 0
    while i < len(cfgs) or (o.extend is not None and _extended(cfgs, o.extend(rows))):
        cfg = cfgs[i]
        if progress:
            progress(cfg.label, i, len(cfgs))
        setting = ConfigSetting(
            doc_ids, fits, originals, proxy, o.norm_power, inside_task, leader if o.race and proxy is None else None
        )
        row = evaluate_config(docs, cfg, task, setting=setting)
        if cfg.spec is not None and not row.stopped_early and (leader is None or row.score > leader.score):
            leader = Leader(cfg, row.score)
        ref = rows[0] if rows else row
        rows.append(row.with_retention(ref.score, inside_ref, keep_per_query=o.per_query))
        i += 1
    if progress:
        progress("done", len(cfgs), len(cfgs))
    return rows


def _extended(cfgs: list[Config], more: Sequence[str | Config]) -> bool:
    """Whether ``more`` adds a configuration not scored yet to ``cfgs`` (those it adds are appended)."""
    seen = {c.label for c in cfgs}
    new = [c for c in (parse_config(m) for m in more) if c.label not in seen]
    cfgs.extend(dict((c.label, c) for c in new).values())
    return bool(new)


def _default_grid(dim: int, n: int, summary: dict[str, Any]) -> list[str]:
    """The standard grid for ``n`` documents of ``dim`` dimensions; what it leaves out is warned
    about and listed in ``summary``."""
    configs, skipped = default_configs(dim, n)
    if skipped:
        summary["skipped"] = skipped
        warnings.warn(
            f"left out of the default grid, as they cannot apply to {n} document(s) of {dim} "
            f"dimension(s): {', '.join(skipped)}"
        )
    return configs


def _folds_for(folds: int, n: int) -> int:
    """``folds``, checked; 1 (with a warning) when ``n`` documents are too few for them."""
    folds = check_folds(folds)
    if folds > 1 and n < 2 * folds:
        warnings.warn(
            f"{n} document(s) are too few for {folds}-fold fitting (two per fold); the codes are "
            "fitted on all of them and scored in-sample"
        )
        return 1
    return folds


@dataclass(frozen=True)
class EvaluateOptions:
    """What :func:`evaluate` scores and how: the documents' and queries' ids; with ``qrels``, nDCG@k, recall@k
    and MRR@k, without, label-free recall@k against exact float search (``k``); the ``configs`` (default: the
    standard grid). Compressors are fitted as :class:`CrossFit` says: by default each on half of the documents and
    scored on the other half (``retention``, out-of-sample), with the in-sample figure beside it
    (``retention_in_sample``); ``folds=1`` fits on all of them, in-sample only; ``fit_sample`` caps the rows each
    model is fitted on (a seeded uniform sample of its pool). Float reranks read ``originals`` (default: the
    documents themselves). ``norm_power``: how codes scored asymmetrically weigh their reconstruction's norm (see
    :class:`~embcompress.search.Index`)."""

    doc_ids: Sequence | None = None
    query_ids: Sequence | None = None
    qrels: Mapping[str, Mapping[str, int]] | None = None
    configs: Sequence[str | Config] | None = None
    k: int = 10
    originals: VectorStore | np.ndarray | None = None
    fit_sample: int | None = None
    folds: int = 2
    progress: Callable[[str, int, int], None] | None = None
    norm_power: float = 1.0


def evaluate(docs: np.ndarray, queries: np.ndarray, *, options: EvaluateOptions | None = None, **given: Any) -> dict:
    """Evaluate each configuration as :class:`EvaluateOptions` (given, or its fields as keyword arguments) says;
    returns ``{"rows": [...], "summary": {...}}``."""
    (o,) = from_keywords("evaluate", given, EvaluateOptions, values=(options,))
    k, qrels, configs, folds = o.k, o.qrels, o.configs, o.folds
    docs = np.ascontiguousarray(docs, dtype=np.float32)
    if len(queries) == 0:
        raise InputError("no queries to evaluate with (0 rows)")
    doc_ids, query_ids = _ids(o.doc_ids, len(docs)), _ids(o.query_ids, len(queries))
    task = QrelsTask(queries, query_ids, qrels, k) if qrels else LabelFreeTask(queries, k)
    summary: dict[str, Any] = {
        "documents": len(docs),
        "queries": len(queries),
        "dim": docs.shape[1],
        "k": k,
        "mode": "qrels" if qrels else "label-free (recall@k against exact float search)",
        **task.check(docs, doc_ids),
    }
    configs = configs or _default_grid(docs.shape[1], len(docs), summary)
    folds = _folds_for(folds, len(docs))
    summary["fitted"] = CrossFit.describe(folds)
    if o.fit_sample is not None:  # how many rows each fit's sample is drawn from
        pool = fold_pool_rows(len(docs), folds)
        summary["fit_sample"] = {"rows": min(pool, o.fit_sample), "drawn_from": pool, "uniform": True}
    rows = run_configs(
        docs,
        task,
        configs,
        doc_ids=doc_ids,
        originals=o.originals,
        folds=folds,
        fit_rows=o.fit_sample,
        progress=o.progress,
        norm_power=o.norm_power,
    )
    if any(r.retention != r.retention for r in rows):  # NaN: the float reference scored 0
        summary["note"] = (
            f"retention is undefined (shown as n/a): exact float search scores 0 on this task ({task.metric}), "
            "so there is nothing for a compressed form to keep; check that the qrels match the ids"
        )
        rows = [r.without_nan_retention() for r in rows]
    return {"summary": summary, "rows": [r.to_dict() for r in rows]}


def evaluate_files(
    docs: str | os.PathLike, queries: str | os.PathLike, *, qrels: str | os.PathLike | None = None, **given: Any
) -> dict[str, Any]:
    """:func:`evaluate` on files: document and query embeddings (their ids read with them), and optionally BEIR
    qrels; the other keyword arguments are those of :class:`EvaluateOptions` but the ids and ``originals``."""
    if {"doc_ids", "query_ids", "qrels", "originals", "options"} & set(given):
        raise TypeError("evaluate_files() reads the ids and the documents from the files; give the other options")
    (o,) = from_keywords("evaluate_files", given, EvaluateOptions)
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
    return evaluate(D, Q, options=replace(o, doc_ids=dids, query_ids=qids, qrels=judged))
