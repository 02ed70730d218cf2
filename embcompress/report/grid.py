"""Run a grid of compressions over a sample of the user's embeddings and measure, for each, the
task score and its retention (compressed / float), the size and the rank-preservation proxy.

Task score, by what the user has:
* queries + qrels: nDCG@10 of exact search (retention: nDCG / float nDCG);
* labels: kNN classification accuracy (k = 10, "Cropping outperforms dropout", 2025);
* nothing: label-free recall@10 of the compressed search against exact float search, with held-out
  rows of the sample as queries.
The rank proxy (:class:`embcompress.evaluation.evaluate.RankProxy`) needs no labels: sampled documents are
searched as queries with each configuration's own search, scored by nDCG@10 against their 10
nearest documents by float cosine.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..analysis import intrinsic_dimensionality, spearman, uniformity
from ..core.errors import InputError
from ..core.requests import from_keywords
from ..evaluation.configs import FLOAT, Config, parse_config, trainable
from ..evaluation.evaluate import IN_SAMPLE_QUERIES, run_configs
from ..evaluation.rows import ResultRow
from ..evaluation.tasks import REFERENCES, LabelFreeTask, LabelTask, QrelsTask
from ..evaluation.crossfit import CrossFit, fold_pool_rows
from .candidates import available_families, candidates, grid_budgets, grid_families
from .candidates import code_families as registered_families
from .task_files import TaskInputs
from .uncertainty import uncertainty

DEFAULT_METHODS = ("truncate", "random_select", "random_projection", "pca", "geopres")
#: code families shown at 16x, 32x, 64x and 128x (see report.candidates)
CODE_FAMILIES = grid_families()
#: methods whose output is chained into binary in the grid
CHAINED = ("pca", "geopres")
K = 10
MIN_VECTORS = 50
#: codes are fitted on one half of the sample and scored on the other (and the reverse): the
#: retention shown is out-of-sample, the in-sample figure of the same fits beside it
FOLDS = 2


def default_widths(dim: int) -> list[int]:
    return [w for w in (dim // 2, dim // 4, dim // 8) if w >= 1]


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of the points not beaten by another with fewer-or-equal bytes and higher-or-equal
    retention (strictly better in one), sorted by bytes."""
    order = sorted(range(len(points)), key=lambda i: (points[i][0], -points[i][1]))
    front, best = [], -np.inf
    for i in order:
        if points[i][1] > best:
            front.append(i)
            best = points[i][1]
    return front


@dataclass
class GridItem:
    label: str  # as shown in the report
    method: str  # family, for colours and grouping
    width: int
    config: Config
    ratio: int | None = None  # a code family's: the compression ratio (16, 32, 64, 128) it was planned for


@dataclass
class Setup:
    """A validated report request: what is indexed, what is measured, and how."""

    docs: np.ndarray
    doc_ids: list[str]
    task: Any
    widths: list[int]
    methods: list[str]
    chain_methods: list[str]
    budget: int | None
    proxy_sample: int
    geopres_params: str
    code_families: list[str] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class GridOptions:
    """What a report's grid holds: the dimension-reducing ``methods`` at each of ``widths`` (default: d/2,
    d/4, d/8), those of ``chain_methods`` also chained with sign bits, the ``code_families`` at 16x-128x,
    GeoPres's extra ``geopres_params``; the rank proxy on ``proxy_sample`` documents; and the ``budget``
    whose best configuration is highlighted."""

    widths: Sequence[int] | None = None
    methods: Sequence[str] = DEFAULT_METHODS
    chain_methods: Sequence[str] = CHAINED
    budget: int | None = None
    proxy_sample: int = 2000
    geopres_params: str = ""
    code_families: Sequence[str] = CODE_FAMILIES


def validate(docs, inputs: TaskInputs | None = None, grid: GridOptions | None = None, **given: Any) -> Setup:
    """Check the request and choose the task: qrels (nDCG@10), labels (kNN accuracy), the
    user's own queries without judgments (label-free against float search, read as the inputs'
    ``reference`` says: :data:`~embcompress.evaluation.evaluate.REFERENCES`), or neither (recall@10 against float
    search, with held-out rows of the sample standing in for queries)."""
    inputs, grid = from_keywords("validate", given, TaskInputs, GridOptions, values=(inputs, grid))
    docs = np.ascontiguousarray(docs, dtype=np.float32)
    n, dim = docs.shape
    if n < MIN_VECTORS:
        raise InputError(f"a report needs at least {MIN_VECTORS} vectors, got {n}")
    widths = _checked_grid(grid.widths, dim, grid.methods, grid.code_families)
    if inputs.qrels is not None and inputs.queries is None:
        raise InputError("qrels judge queries: give the queries too")
    if inputs.reference not in REFERENCES:
        raise InputError(f"reference must be one of {', '.join(REFERENCES)}, got {inputs.reference!r}")
    if inputs.labels is not None and inputs.queries is not None:
        raise InputError("give either labels or queries (with or without qrels), not both")
    task, docs, doc_ids = _task_of(docs, inputs)
    info = task.check(docs, doc_ids)
    g = grid
    return Setup(
        docs,
        doc_ids,
        task,
        widths,
        list(g.methods),
        list(g.chain_methods),
        g.budget,
        g.proxy_sample,
        g.geopres_params,
        list(g.code_families),
        info,
    )


def _checked_grid(widths, dim: int, methods, code_families) -> list[int]:
    """The report's widths, largest first (default: :func:`default_widths`), once the widths, methods
    and code families are checked."""
    widths = sorted(set(widths or default_widths(dim)), reverse=True)
    bad = [w for w in widths if not 1 <= w < dim]
    if bad:
        raise InputError(
            f"widths {bad} are out of range: the embeddings have {dim} dimensions, allowed is 1..{dim - 1}"
        )
    unknown = sorted(set(methods) - set(DEFAULT_METHODS) - {"autoencoder"})
    if unknown:
        raise InputError(f"unknown report method(s) {unknown}; known: {', '.join(DEFAULT_METHODS)}, autoencoder")
    known_codes = [cls.name for cls in registered_families()]
    bad_codes = sorted(set(code_families) - set(known_codes))
    if bad_codes:
        raise InputError(
            f"unknown code famil{'ies' if len(bad_codes) > 1 else 'y'} {bad_codes}; known: {', '.join(known_codes)}"
        )
    return widths


def _task_of(docs: np.ndarray, inputs: TaskInputs):
    """(the task the inputs allow, the documents indexed, their ids as strings): see :func:`validate`."""
    n, k = len(docs), inputs.k
    doc_ids = [str(i) for i in (inputs.doc_ids if inputs.doc_ids is not None else range(n))]
    queries = None if inputs.queries is None else np.ascontiguousarray(inputs.queries, dtype=np.float32)
    if inputs.qrels is not None:
        query_ids = [str(i) for i in (inputs.query_ids if inputs.query_ids is not None else range(len(queries)))]
        task = QrelsTask(queries, query_ids, inputs.qrels, k)
    elif inputs.labels is not None:
        task = LabelTask(inputs.labels, k)
    elif queries is not None:  # the user's own queries, unjudged: scored against float search's ranking
        task = LabelFreeTask(queries, k, reference=inputs.reference, source="queries")
    else:  # held-out rows of the sample are the queries; the rest is indexed
        n_q = min(1000, max(1, n // 10))
        task = LabelFreeTask(docs[:n_q], k)
        docs, doc_ids = docs[n_q:], doc_ids[n_q:]
    return task, docs, doc_ids


def grid_items(setup: Setup) -> list[GridItem]:
    """The grid: each method at each width (and then binary, for the chained methods), binary with
    and without reranks, int8; reranks are left out where the task has no use for them."""
    dim = setup.docs.shape[1]
    items = [GridItem("float32", "float", dim, FLOAT)]
    for m in setup.methods:
        for w in setup.widths:
            spec = f"{m}:{w}" + (f":{setup.geopres_params}" if m == "geopres" and setup.geopres_params else "")
            items.append(GridItem(f"{m} {w}", m, w, parse_config(spec)))
            if m in setup.chain_methods:
                items.append(GridItem(f"{m} {w} + binary", f"{m}+binary", w, parse_config(f"{spec}+binary")))
    items.append(GridItem("binary", "binary", dim, parse_config("binary")))
    if not isinstance(setup.task, LabelTask):
        items.append(GridItem("binary + asymmetric rerank", "binary+rerank", dim, parse_config("binary@asym")))
        items.append(GridItem("binary + float rerank", "binary+rerank", dim, parse_config("binary@float")))
    items.append(GridItem("int8", "int8", dim, parse_config("int8")))
    seen = set()
    too_small = []
    for ratio, nbytes in grid_budgets(dim) if setup.code_families else ():
        for c in candidates(dim, nbytes, families=tuple(setup.code_families), full=False):
            config = c.config.replace("@asym", "") if isinstance(setup.task, LabelTask) else c.config
            if config not in seen:  # a code smaller than a budget can be the best fit of the next one too
                seen.add(config)
                item = GridItem(c.label, f"codes: {c.family}", dim, parse_config(config), ratio)
                if not trainable(item.config.spec, fold_pool_rows(len(setup.docs), FOLDS)):
                    too_small.append(item.label)
                else:
                    items.append(item)
    if too_small:
        warnings.warn(
            f"left out of the report, as {fold_pool_rows(len(setup.docs), FOLDS)} document(s) (half of the "
            f"{len(setup.docs)}) are too few to train them: {', '.join(too_small)}"
        )
    return items


def run(
    setup: Setup, items: Sequence[GridItem], progress: Callable[[str, int, int], None] | None = None
) -> list[ResultRow]:
    """Every grid item through the evaluation engine: one result row per item, in the items' order."""
    by_config = {it.config.label: it for it in items}
    step = (
        (lambda label, i, n: progress(by_config[label].label if label in by_config else label, i, n))
        if progress
        else None
    )
    return run_configs(
        setup.docs,
        setup.task,
        [it.config for it in items],
        doc_ids=setup.doc_ids,
        folds=FOLDS,
        proxy_sample=setup.proxy_sample,
        progress=step,
        in_sample=IN_SAMPLE_QUERIES,
        per_query=True,
    )


def report_row(it: GridItem, r: ResultRow) -> dict[str, Any]:
    """The report's row of a grid item: its result row's figures, labelled for the report."""
    label = it.label if it.ratio is None else f"{it.label} ({r.compression:.0f}x)"  # its own size
    return {
        "config": label,
        "method": it.method,
        "width": it.width,
        "kind": r.kind,
        "ratio": it.ratio,
        "bytes_per_vector": r.bytes_per_vector,
        "extra_storage": r.extra_storage,
        "rerank": r.rerank,
        "score": r.score,
        "retention": r.retention,
        "score_in_sample": r.score_in_sample,
        "retention_in_sample": r.retention_in_sample,
        "in_sample_queries": r.in_sample_queries,
        "fitted": r.fitted,
        "rank_proxy": r.rank_proxy,
        "fit_seconds": r.fit_seconds,
        "encode_rows_per_second": r.encode_rows_per_second,
        "eval_seconds": round(r.search_seconds, 3),
    }


def summarize(
    setup: Setup, items: Sequence[GridItem], results: Sequence[ResultRow], all_docs: np.ndarray
) -> dict[str, Any]:
    """The report: one row per grid item, marked on the Pareto front and within the budget, the best
    per ratio with its uncertainty, intrinsic dimensionality, uniformity and the proxy/retention
    correlation around them."""
    base = [report_row(it, r) for it, r in zip(items, results)]
    per = {row["config"]: r.per_query for row, r in zip(base, results)}
    standalone = [r for r in base if r["extra_storage"] is None]
    front = {
        standalone[i]["config"] for i in pareto_front([(r["bytes_per_vector"], r["retention"]) for r in standalone])
    }
    best = _best_within(standalone, setup.budget)
    answers, notes = best_per_ratio(base, per, base[0]["score"])
    rows = [
        {
            **r,
            **({"pareto": True} if r["config"] in front else {}),
            **({} if setup.budget is None else {"within_budget": r["bytes_per_vector"] <= setup.budget}),
            **notes.get(r["config"], {}),
        }
        for r in base
    ]
    intr = intrinsic_dimensionality(all_docs)
    # every row's proxy runs that row's own search (reranks included), so all are compared
    scored = rows[1:]
    corr = (
        spearman([r["rank_proxy"] for r in scored], [r["retention"] for r in scored])
        if len(scored) > 1
        else float("nan")
    )
    n, dim = all_docs.shape
    task = setup.task
    return {
        "format": "embcompress.report",
        "format_version": 1,
        "summary": {
            "vectors": n,
            "dim": dim,
            "metric": task.metric,
            "float_score": rows[0]["score"],
            "mode": task.mode,
            "queries": None if task.queries is None else len(task.queries),
            "widths": setup.widths,
            "methods": setup.methods,
            "intrinsic_dimensionality": intr.components,
            "intrinsic_threshold": intr.threshold,
            "uniformity": uniformity(all_docs),
            "proxy_retention_spearman": corr,
            "proxy_retention_configs": len(scored),
            "budget_bytes": setup.budget,
            "best_within_budget": best,
            "fitted": CrossFit.describe(FOLDS),
            **setup.info,
            "best_per_ratio": answers,
        },
        "explained_variance": np.cumsum(intr.explained_variance_ratio).round(6).tolist(),
        "rows": rows,
    }


def _best_within(rows: Sequence[Mapping[str, Any]], budget: int | None) -> str | None:
    """The configuration that keeps the most within ``budget`` bytes per vector (ties: fewer bytes)."""
    within = [] if budget is None else [r for r in rows if r["bytes_per_vector"] <= budget]
    return max(within, key=lambda r: (r["retention"], -r["bytes_per_vector"]))["config"] if within else None


def best_per_ratio(
    rows: Sequence[Mapping[str, Any]], per: Mapping[str, np.ndarray | None], ref_score: float
) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """(the answers, the uncertainty of each code by config). Per compression ratio the codes were
    planned for (16x, 32x, 64x, 128x), the code that keeps the most on documents its fit did not
    see, with its cost: the report's answer. With per-query figures (``per``, by config), every code
    of the ratio gets its ``retention_ci95`` and ``within_uncertainty``
    (:func:`~embcompress.report.uncertainty.uncertainty`), and the answer names the codes its lead
    over is not significant (``within_uncertainty``): which of them is best can turn with the
    queries drawn."""
    out, notes = [], {}
    for ratio in sorted({r["ratio"] for r in rows if r.get("ratio")}):
        group = [r for r in rows if r.get("ratio") == ratio and r["retention"] is not None]
        if group:
            b = max(group, key=lambda r: (r["retention"], -r["bytes_per_vector"]))
            u = uncertainty(group, per, ref_score, b["config"])
            notes.update(u)
            tied = [r["config"] for r in group if u[r["config"]]["within_uncertainty"] and r is not b]
            out.append(
                {
                    "ratio": ratio,
                    "config": b["config"],
                    "bytes_per_vector": b["bytes_per_vector"],
                    "retention": b["retention"],
                    "retention_ci95": u[b["config"]]["retention_ci95"],
                    "retention_in_sample": b["retention_in_sample"],
                    "within_uncertainty": tied or None,
                    "fit_seconds": b["fit_seconds"],
                    "encode_rows_per_second": b["encode_rows_per_second"],
                }
            )
    return out, notes


def build_report(
    docs: np.ndarray,
    inputs: TaskInputs | None = None,
    grid: GridOptions | None = None,
    *,
    progress: Callable[[str, int, int], None] | None = None,
    **given: Any,
) -> dict[str, Any]:
    """Run the grid; returns the report as a JSON-able dict (see module docstring): validate, plan, run through
    the evaluation engine, summarize. The keyword arguments are the fields of
    :class:`~embcompress.report.task_files.TaskInputs` and of :class:`GridOptions`, or those two values."""
    inputs, grid = from_keywords("build_report", given, TaskInputs, GridOptions, values=(inputs, grid))
    if grid.code_families == CODE_FAMILIES:  # the default: the families whose dependencies are installed
        grid = replace(grid, code_families=available_families(CODE_FAMILIES))
    setup = validate(docs, inputs, grid)
    items = grid_items(setup)
    rep = summarize(setup, items, run(setup, items, progress), np.ascontiguousarray(docs, dtype=np.float32))
    # judged_subset's or the uniform sample's counts
    rep["summary"]["sampled_from"] = dict(inputs.sampled) if inputs.sampled else None
    rep["summary"]["queries_note"] = queries_note(setup.task)
    return rep


def queries_note(task) -> str | None:
    """One line on what stands in for judged queries, when something does."""
    if task.mode != "label-free":
        return None
    if task.source == "documents":
        return (
            "no queries given: held-out documents stand in for them, scored against float search's neighbours; "
            "documents are longer and closer to each other than real queries are to them, so this can favour "
            "codes that keep fine local structure over those that keep what a query needs (give --queries)"
        )
    return (
        f"your queries are not judged: each is scored against float search's ranking of it "
        f"({task.metric}); a code can only lose against that reference, never beat it"
    )
