"""``recommend --ram-budget`` on files: serving plans ranked on a sample of the user's file
(:mod:`.plans`), the winner fitted on all of it and saved as a plan, ready for ``apply``."""

from __future__ import annotations

import time
from typing import Any


from ..core.errors import InputError
from ..core.registry import from_spec
from ..core.requests import from_keywords
from ..evaluation.tasks import reference_for
from .plans import GRAPH, PlanOptions, plan_setup, rank_plans
from .recommend import TaskFiles
from .task_files import load_task_files


def recommend_plan_files(
    input, plan_dir, ram_budget: int, *, k: int = 10, overwrite: bool = False, fit_progress=None, **given: Any
) -> dict[str, Any]:
    """Rank serving plans on a seeded sample of ``input`` (with queries and qrels when given), fit the winner's first
    stage (and an int8 copy's calibration) on the whole file, streaming, and save the plan to ``plan_dir``, ready
    for ``embcompress apply PLAN_DIR IN OUT``; ``k`` results per query. The keyword arguments are the fields of
    :class:`~embcompress.report.recommend.TaskFiles` (without ``labels``) and of :class:`PlanOptions`."""
    from ..compressors import Int8
    from ..core._fs import check_output_dir
    from ..engines.local import fit_file
    from ..io import count_rows
    from ..serving.plan import Plan, save_plan

    files, opts = from_keywords("recommend_plan_files", given, TaskFiles, PlanOptions)
    if files.labels is not None:
        raise InputError("serving plans rescore search results; kNN accuracy (labels) has none: give queries")
    opts.check(ram_budget, k)
    column = files.column
    check_output_dir(plan_dir, overwrite=overwrite)
    data = load_task_files(
        input, queries=files.queries, qrels=files.qrels, sample=files.sample, default_sample=20_000, column=column
    )
    setup = plan_setup(data, reference_for(files.reference, plans=True), k)
    t0 = time.perf_counter()
    res = rank_plans(setup, ram_budget, total_rows=count_rows(input, column=column), options=opts)
    t1 = time.perf_counter()
    w = res["winner"] = _for_the_file(res["winner"], setup, res["sample"], res["total_rows"], k)
    first = fit_file(from_spec(w["spec"]), input, column=column, progress=fit_progress)
    copy_model = fit_file(Int8(), input, column=column) if w["copy"] == "int8" else None
    kept = ("retention", "latency_ms", "batch_ms", "ram_bytes", "disk_bytes", "sample_candidates", "growth_exponent")
    measured = {key: w[key] for key in kept if key in w}
    plan = Plan(
        structure=w["structure"],
        graph=GRAPH if w["structure"] == "hnsw" else None,
        copy=w["copy"],
        candidates=w["candidates"] if w["copy"] != "none" else k,
        k=k,
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


def _for_the_file(winner: dict[str, Any], setup, sample: int, total_rows: int, k: int) -> dict[str, Any]:
    """The winning plan with its candidate count scaled from the sample's documents to the file's rows
    (:mod:`.scaling`), its single-query latency's rescoring share scaled with the count (a batch's in the same
    proportion); unchanged without a copy or when the sample is the file."""
    from .scaling import growth_exponent, scaled_count

    if winner["copy"] == "none" or total_rows <= sample:
        return winner
    a = growth_exponent(winner["spec"], setup.docs, setup.task.queries, k, winner["candidates"])
    count = scaled_count(winner["candidates"], sample, total_rows, a, k)
    out = {**winner, "candidates": count, "sample_candidates": winner["candidates"], "growth_exponent": a}
    if winner.get("latency_ms") and winner.get("first_stage_ms") is not None:
        rescoring = winner["latency_ms"] - winner["first_stage_ms"]
        out["latency_ms"] = winner["first_stage_ms"] + rescoring * count / winner["candidates"]
        if winner.get("batch_ms") is not None:  # not timed by stage: grown in the single query's proportion
            out["batch_ms"] = winner["batch_ms"] * out["latency_ms"] / winner["latency_ms"]
    return out
