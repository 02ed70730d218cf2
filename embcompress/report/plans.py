"""``recommend --ram-budget``: serving plans ranked on the user's own data.

A plan keeps a compact code in RAM, takes an oversampled candidate list from it and rescores the
candidates from a wider copy of the documents (int8, float16 or float32) read from disk
(:mod:`embcompress.serving`). The ranking crosses every first-stage code within the RAM budget
with every copy within the disk budget, sweeps the number of candidates, and measures each plan as
``recommend --budget`` measures a code: retention on documents the code's fit did not see (two
folds), judged, against labels or label-free.

The candidate count of a (code, copy) pair is the smallest of the sweep that reaches the target,
or without one the point where retention stops rising by more than its uncertainty
(:mod:`.sweep`).

With ``index`` "hnsw" or "any" the first stage may also be an HNSW graph over the codes (bits or
floats; the library's default settings, :data:`GRAPH`): measured the same way, out-of-sample, each
fold's codes searched through a graph of their own, so what the graph misses shows in the
retention; its links count in the RAM budget (:attr:`~embcompress.search.ann.Hnsw.graph_bytes`,
272 B per vector at m = 32).

Latency is measured on this machine for the plans that can win, in the order they would win:
the plan's first stage over the sample's codes and its rescoring from a copy in a file
(:class:`~embcompress.serving.copies.DiskCopy`, the page cache warm), one query at a time and in a
batch. An exact scan's time grows with the rows, so it is scaled from the sample's rows to the
input's; a graph's grows about with their logarithm and, like the rescoring (a fixed number of
rows per query), is taken as measured."""

from __future__ import annotations

import os
import tempfile
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..core.errors import InputError
from ..core.requests import from_keywords
from ..core.registry import from_spec
from ..evaluation.crossfit import check_folds, fold_pool_rows
from ..evaluation.configs import parse_config
from ..evaluation.evaluate import run_configs
from ..evaluation.rows import ResultRow
from ..search.ann import Hnsw, graph_allowed
from ..serving.plan import copy_bytes
from .latency import LatencyBench
from .sweep import GAIN_Z, choose_count, first_stage, further, paired_se, still_rising, sweep_configs, sweep_of
from .grid import validate
from .recommend import _candidates

#: the copies a plan may rescore from, smallest first (int8r: the residual of a table code, serving.residual)
COPY_KINDS = ("int8", "int8r", "float16", "float32")
#: latency is measured for at most this many plans beyond the ones the choice needs
MEASURED_PLANS = 6
#: with a target, at most this many plans reaching it at the least RAM and disk are measured, the fastest winning (a
#: fast-scan code, keeping a little less at a count, was seventh of thirteen at 12 B on an 8,000-row Debian sample)
TARGET_MEASURED_PLANS = 16
#: the graph an HNSW first stage is ranked with and saved with (the library's defaults)
GRAPH = Hnsw()
#: a sweep goes on only while its candidates stay below this fraction (1 / it) of the documents searched: rescoring
#: most of them would measure exact search, not the plan (decision 0009)
SEARCHED_PER_CANDIDATE = 10
#: the first stages a ranking may search: the exact scan, an HNSW graph, or both
INDEXES = ("exact", "hnsw", "any")


@dataclass(frozen=True)
class PlanRow:
    """One ranked plan: its first stage, copy and candidates, what it keeps and costs."""

    config: str  # the measured configuration (``pca:192+binary@int8x10``)
    spec: str  # the first stage's code
    label: str
    copy: str  # none, int8, float16 or float32
    candidates: int
    ram_bytes: int
    disk_bytes: int
    retention: float
    sweep: tuple[tuple[int, float], ...]  # (candidates, retention) of every count tried
    latency_ms: float | None = None  # one query at a time, scaled to the input's rows
    batch_ms: float | None = None  # per query, in batches of LATENCY_BATCH, scaled the same way
    first_stage_ms: float | None = None  # the first stage alone, one query at a time, scaled
    structure: str = "exact"  # the first stage searched by exact scan, or through an HNSW graph ("hnsw")
    rising: bool = False  # its sweep ended still rising (the longest count, or the sample's documents, stopped it)


def _plans(rows: list[ResultRow], cands: dict[str, str], dim: int, target: float | None) -> list[PlanRow]:
    """One plan per (first stage, copy) of ``cands``: a graph's first stage costs its links in RAM too."""
    float_score = rows[0].score
    by_config = {r.config: r for r in rows[1:]}
    plans = []
    for cfg, label in cands.items():
        code, c, stage = by_config[cfg], parse_config(cfg), first_stage(cfg)
        graph = round(GRAPH.graph_bytes) if c.structure == "hnsw" else 0
        own = "decoded" if code.rerank == "asymmetric" else "none"  # the codes rescored by themselves, or not
        one = ((code.candidates, code.retention),)
        ram = code.bytes_per_vector + graph
        plans.append(
            PlanRow(cfg, c.spec, label, own, code.candidates, ram, 0, code.retention, one, structure=c.structure)
        )
        for copy in COPY_KINDS:
            sweep = sweep_of(by_config, stage, copy)
            if not sweep:
                continue
            r = choose_count(sweep, float_score, target)
            counts = tuple((s.candidates, s.retention) for s in sweep)
            disk = copy_bytes(copy, dim)
            rising = r is sweep[-1] and still_rising(sweep, float_score, target)
            plans.append(
                PlanRow(
                    r.config,
                    c.spec,
                    label,
                    copy,
                    r.candidates,
                    ram,
                    disk,
                    r.retention,
                    counts,
                    structure=c.structure,
                    rising=rising,
                )
            )
    return plans


def near_ties(winner: PlanRow, ranked: list[PlanRow], per_query: dict, float_score: float) -> list[PlanRow]:
    """The plans that need less RAM or disk than ``winner`` and keep as much within its uncertainty:
    their paired per-query difference from the winner is within :data:`GAIN_Z` standard errors.
    Named, not acted on (the winner is still the pick); without judgments they are the candidates
    worth judging on a few queries of your own."""
    base = per_query[winner.config]
    out = []
    for p in ranked:
        cheaper = (p.ram_bytes, p.disk_bytes) < (winner.ram_bytes, winner.disk_bytes) or (
            p.ram_bytes <= winner.ram_bytes and p.disk_bytes <= winner.disk_bytes and p.candidates < winner.candidates
        )
        if p.config == winner.config or not cheaper:
            continue
        if winner.retention - p.retention <= GAIN_Z * paired_se(per_query[p.config], base, float_score):
            out.append(p)
    return out


def _preference(plans: list[PlanRow], target: float | None) -> list[PlanRow]:
    """Plans in the order they would win: with a target, those reaching it by least RAM (then disk,
    then more retention), then the rest by retention; without, by retention (ties: less RAM)."""
    by_quality = sorted(plans, key=lambda p: (-p.retention, p.ram_bytes, p.disk_bytes, p.config))
    if target is None:
        return by_quality
    reach = sorted((p for p in plans if p.retention >= target), key=lambda p: (p.ram_bytes, p.disk_bytes, -p.retention))
    return reach + [p for p in by_quality if p.retention < target]


def pick(
    plans: list[PlanRow], target: float | None, max_latency_ms: float | None, measure: Callable[[PlanRow], PlanRow]
) -> tuple[PlanRow, list[PlanRow]]:
    """(the winner, the plans with latencies filled in where measured): the first plan in order of
    preference whose measured latency is within ``max_latency_ms``. With a target, the plans that reach it
    at the least RAM and disk (the head of that order) are all measured and the fastest comes first: they
    are equal on what the rule asks, and a fast-scan first stage (``opq:2B:nbits=4``) answers in a fraction
    of the time of a one-byte code that keeps a few hundredths of a point more."""
    order = _preference(plans, target)
    done: dict[str, PlanRow] = {}
    trial = order
    if target is not None and order and order[0].retention >= target:
        least = (order[0].ram_bytes, order[0].disk_bytes)
        head = [p for p in order if p.retention >= target and (p.ram_bytes, p.disk_bytes) == least]
        head = head[:TARGET_MEASURED_PLANS]
        for p in head:
            done[p.config] = measure(p)
        fastest = sorted(head, key=lambda p: done[p.config].latency_ms)  # stable: equal times keep the order
        trial = fastest + order[len(head) :]
    winner = None
    for p in trial:  # the ranking returned keeps the order of preference; only the winner is the fastest
        if p.config not in done:
            done[p.config] = measure(p)
        m = done[p.config]
        if max_latency_ms is None or m.latency_ms <= max_latency_ms:
            winner = m
            break
    if winner is None:
        raise InputError(
            f"no plan answers within {max_latency_ms:g} ms per query on this machine; the fastest took "
            f"{min(d.latency_ms for d in done.values()):.2f} ms. Allow more (--max-latency-ms) or more RAM"
        )
    for p in order[:MEASURED_PLANS]:  # the leaders' latencies, for the table (each plan measured once)
        if p.config not in done:
            done[p.config] = measure(p)
    return winner, [done.get(p.config, p) for p in order]


@dataclass(frozen=True)
class PlanOptions:
    """How serving plans are ranked: the rescoring copy within ``disk_budget`` bytes per vector (None: any;
    0: none), the plan with the least RAM that reaches ``target`` (without one, the best), only plans that
    answer a query within ``max_latency_ms`` on this machine; ``folds``; ``progress``; ``index``: first stages
    searched by exact scan, through an HNSW graph, or either (:data:`INDEXES`). (The results per query, ``k``,
    are the task's: :class:`~embcompress.report.task_files.TaskInputs`.)"""

    disk_budget: int | None = None
    target: float | None = None
    max_latency_ms: float | None = None
    folds: int = 2
    progress: Callable[[str, int, int], None] | None = None
    index: str = "exact"

    def check(self, ram_budget, k: int = 10) -> None:
        """An InputError for a budget, ``k``, target or latency limit out of range."""
        for name, v, low in (("ram budget", ram_budget, 1), ("disk budget", self.disk_budget, 0), ("k", k, 1)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < low):
                raise InputError(f"{name} must be a whole number of at least {low}, got {v!r}")
        if self.target is not None and not 0 < self.target <= 1:
            raise InputError(f"target must be a retention in (0, 1], e.g. 0.99, got {self.target!r}")
        if self.max_latency_ms is not None and not self.max_latency_ms > 0:
            raise InputError(f"max latency must be a positive number of milliseconds, got {self.max_latency_ms!r}")
        if self.index not in INDEXES:
            raise InputError(f"index must be one of {', '.join(INDEXES)}, got {self.index!r}")


def plan_setup(data: dict[str, Any], reference: str, k: int = 10):
    """The validated request of a plan ranking, from what :func:`~embcompress.report.task_files.load_task_files`
    read: documents with their ids, and queries with their ids and qrels when given."""
    return validate(
        data["docs"],
        doc_ids=data.get("doc_ids"),
        queries=data.get("queries"),
        query_ids=data.get("query_ids"),
        qrels=data.get("qrels"),
        reference=reference,
        k=k,
    )


@dataclass(frozen=True)
class PlanGrid:
    """Every (code, copy, candidate count) of a ranking measured: the result rows (float's first), the
    first-stage candidates (config -> label) and the copies tried."""

    rows: tuple[ResultRow, ...]
    cands: dict[str, str]
    copies: tuple[str, ...]
    dim: int

    def plans(self, target: float | None) -> list[PlanRow]:
        """One plan per (code, copy), its candidate count chosen by :func:`choose_count`."""
        return _plans(list(self.rows), self.cands, self.dim, target)


def measure_grid(
    setup,
    ram_budget: int,
    *,
    cands: dict[str, str] | None = None,
    disk_budget: int | None = None,
    target: float | None = None,
    folds: int = 2,
    progress=None,
    index: str = "exact",
) -> PlanGrid:
    """Measure every plan a ranking chooses from, on the validated request ``setup`` (:func:`plan_setup`):
    each first-stage candidate of ``cands`` (config -> label, each within ``ram_budget``; None:
    ``recommend --budget``'s) alone and with each copy within ``disk_budget`` at every candidate
    count of :data:`MULTIPLIERS`, out-of-sample over ``folds``; a sweep still rising at its end, short of
    ``target``, goes on with :data:`FURTHER_MULTIPLIERS` (:func:`still_rising`) below a tenth of the documents.
    ``index`` (:data:`INDEXES`):
    the first stages are exact scans of the codes, HNSW graphs over them (:func:`graph_candidates`), or both."""
    docs, task = setup.docs, setup.task
    folds = check_folds(folds, len(docs))
    if cands is None:  # recommend --budget's candidates within the RAM budget (with a graph: what it leaves)
        n_fit = fold_pool_rows(len(docs), folds)
        exact = (
            _candidates(docs.shape[1], int(ram_budget), None, False, n_fit, by_quality=True) if index != "hnsw" else {}
        )
        cands = {**exact, **(graph_candidates(docs.shape[1], int(ram_budget), n_fit) if index != "exact" else {})}
    dim = docs.shape[1]
    copies = tuple(c for c in COPY_KINDS if disk_budget is None or copy_bytes(c, dim) <= disk_budget)
    rows = run_configs(
        docs,
        task,
        ["float", *sweep_configs(cands, list(copies))],
        doc_ids=setup.doc_ids,
        folds=folds,
        progress=progress,
        per_query=True,
        in_sample=False,
        extend=further(cands, copies, target, len(docs) // SEARCHED_PER_CANDIDATE, round(GRAPH.graph_bytes)),
        reuse_first_stage=True,  # the rows' search times are not read: latency is measured apart
    )
    return PlanGrid(tuple(rows), dict(cands), copies, dim)


def graph_candidates(dim: int, ram_budget: int, n_fit: int) -> dict[str, str]:
    """The first stages searched through an HNSW graph (:data:`GRAPH`) within ``ram_budget`` bytes per vector, the
    graph's links counted: ``recommend --budget``'s codes within what the links leave that a graph can hold (bits
    or floats), as ``hnsw/`` configurations. An InputError when none fits."""
    links = GRAPH.graph_bytes
    left = int(ram_budget - links)
    found = {}
    if left >= 1:
        try:
            found = _candidates(dim, left, None, False, n_fit, by_quality=True)
        except InputError:  # no code within what the links leave
            pass
    graphable = {
        c: f"{label} (HNSW)"
        for c, label in found.items()
        if graph_allowed(from_spec(parse_config(c).spec).traits.output)
    }
    if not graphable:
        raise InputError(
            f"an HNSW graph's links take {links:.0f} B per vector in RAM (m = {GRAPH.m}); a RAM budget of "
            f"{ram_budget} B leaves no room for codes a graph can hold (bits or floats). Give at least "
            f"{links + 8:.0f} B, or --index exact"
        )
    return {f"hnsw/{c}": label for c, label in graphable.items()}


def rank_plans(
    setup,
    ram_budget: int,
    *,
    cands: dict[str, str] | None = None,
    total_rows: int | None = None,
    grid: PlanGrid | None = None,
    options: PlanOptions | None = None,
    **given: Any,
) -> dict[str, Any]:
    """Rank serving plans on the validated request ``setup`` (:func:`plan_setup`) over the first-stage
    candidates ``cands`` (config -> label, each within ``ram_budget``; None: ``recommend --budget``'s),
    measured by :func:`measure_grid` (or given as ``grid``, measured so already), as :class:`PlanOptions`
    (given, or its fields as keyword arguments) says; latencies scaled to ``total_rows``."""
    (o,) = from_keywords("rank_plans", given, PlanOptions, values=(options,))
    disk_budget, target, max_latency_ms = o.disk_budget, o.target, o.max_latency_ms
    docs, task = setup.docs, setup.task
    folds = check_folds(o.folds, len(docs))
    if grid is None:
        measured = dict(disk_budget=disk_budget, target=target, folds=folds, progress=o.progress, index=o.index)
        grid = measure_grid(setup, ram_budget, cands=cands, **measured)
    rows, copies = list(grid.rows), list(grid.copies)
    plans = grid.plans(target)
    queries = task.queries
    total = total_rows or len(docs)
    with tempfile.TemporaryDirectory(prefix="embcompress-plans-") as scratch:
        bench = LatencyBench(docs, queries, total, task.k, Path(scratch), GRAPH)
        try:
            winner, ranked = pick(plans, target, max_latency_ms, lambda p: replace(p, **bench.measure(p)))
        finally:
            bench.close()
    code_only = max((p for p in ranked if p.copy not in COPY_KINDS), key=lambda p: p.retention)
    per = {r.config: r.per_query for r in rows[1:]}
    tied = near_ties(winner, ranked, per, rows[0].score)
    return {
        "ram_budget": int(ram_budget),
        "disk_budget": disk_budget,
        "target": target,
        "max_latency_ms": max_latency_ms,
        "k": task.k,
        "metric": task.metric,
        "mode": task.mode,
        "fitted": rows[1].fitted,
        "sample": len(docs),
        "fit_rows": fold_pool_rows(len(docs), folds),
        "total_rows": total,
        "float_score": rows[0].score,
        "copies": copies,
        "ranking": [asdict(p) for p in ranked],
        "winner": asdict(winner),
        "code_only": asdict(code_only),
        "target_reached": None if target is None else winner.retention >= target,
        "within_uncertainty": [asdict(p) for p in tied],
        "latency_note": (
            f"latency on this machine ({os.cpu_count()} cores), one thread: the exact first stage "
            f"timed over the {len(docs):,} sampled rows and scaled to {total:,}, an HNSW graph's search and the "
            "rescoring from a copy in a file (page cache warm) as measured"
        ),
    }
