"""``recommend --ram-budget`` on files: serving plans ranked on a sample of the user's file
(:mod:`.plans`), the winner fitted on all of it and saved as a plan, ready for ``apply``."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ..core.errors import InputError
from ..core.registry import from_spec
from ..core.requests import from_keywords
from .plans import plan_setup, rank_plans
from .recommend import TaskFiles
from .task_files import load_task_files


@dataclass(frozen=True)
class PlanOptions:
    """How serving plans are ranked: the rescoring copy within ``disk_budget`` bytes per vector (None: any;
    0: none), the plan with the least RAM that reaches ``target`` (without one, the best), only plans that
    answer a query within ``max_latency_ms`` on this machine, ``k`` results per query; ``folds``; ``progress``."""

    disk_budget: int | None = None
    target: float | None = None
    max_latency_ms: float | None = None
    k: int = 10
    folds: int = 2
    progress: Callable[[str, int, int], None] | None = None

    def check(self, ram_budget) -> None:
        """An InputError for a budget, k, target or latency limit out of range."""
        for name, v, low in (("ram budget", ram_budget, 1), ("disk budget", self.disk_budget, 0), ("k", self.k, 1)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < low):
                raise InputError(f"{name} must be a whole number of at least {low}, got {v!r}")
        if self.target is not None and not 0 < self.target <= 1:
            raise InputError(f"target must be a retention in (0, 1], e.g. 0.99, got {self.target!r}")
        if self.max_latency_ms is not None and not self.max_latency_ms > 0:
            raise InputError(f"max latency must be a positive number of milliseconds, got {self.max_latency_ms!r}")


def recommend_plan_files(
    input, plan_dir, ram_budget: int, *, overwrite: bool = False, fit_progress=None, **given: Any
) -> dict[str, Any]:
    """Rank serving plans on a seeded sample of ``input`` (with queries and qrels when given), fit the winner's
    first stage (and an int8 copy's calibration) on the whole file, streaming, and save the plan to
    ``plan_dir``, ready for ``embcompress apply PLAN_DIR IN OUT``. The keyword arguments are the fields of
    :class:`~embcompress.report.recommend.TaskFiles` (without ``labels``) and of :class:`PlanOptions`."""
    from ..compressors import Int8
    from ..core._fs import check_output_dir
    from ..engines.local import fit_file
    from ..io import count_rows
    from ..serving.plan import Plan, save_plan

    files, opts = from_keywords("recommend_plan_files", given, TaskFiles, PlanOptions)
    if files.labels is not None:
        raise InputError("serving plans rescore search results; kNN accuracy (labels) has none: give queries")
    opts.check(ram_budget)
    column = files.column
    check_output_dir(plan_dir, overwrite=overwrite)
    data = load_task_files(
        input, queries=files.queries, qrels=files.qrels, sample=files.sample, default_sample=20_000, column=column
    )
    setup = plan_setup(data, files.reference, opts.k)
    t0 = time.perf_counter()
    res = rank_plans(
        setup,
        ram_budget,
        disk_budget=opts.disk_budget,
        target=opts.target,
        max_latency_ms=opts.max_latency_ms,
        total_rows=count_rows(input, column=column),
        folds=opts.folds,
        progress=opts.progress,
    )
    t1 = time.perf_counter()
    w = res["winner"]
    first = fit_file(from_spec(w["spec"]), input, column=column, progress=fit_progress)
    copy_model = fit_file(Int8(), input, column=column) if w["copy"] == "int8" else None
    measured = {key: w[key] for key in ("retention", "latency_ms", "batch_ms", "ram_bytes", "disk_bytes")}
    plan = Plan(
        copy=w["copy"],
        candidates=w["candidates"] if w["copy"] != "none" else opts.k,
        k=opts.k,
        measured={
            **measured,
            "mode": res["mode"],
            "metric": res["metric"],
            "fitted": res["fitted"],
            "total_rows": res["total_rows"],
        },
    )
    save_plan(plan, first, plan_dir, copy_model=copy_model, overwrite=overwrite)
    res.update(
        {
            "plan_dir": str(plan_dir),
            "plan": plan.describe(first),
            "seconds": {"rank": round(t1 - t0, 2), "fit_winner": round(time.perf_counter() - t1, 2)},
        }
    )
    return res
