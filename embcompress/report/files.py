"""The report on files: the retention grid of :mod:`.grid` on a sample of the user's file, and with RAM
budgets the serving plans of :mod:`.plans`, written as report.json and report.html."""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any, Callable, Mapping, Sequence

from ..core._fs import check_output_dir
from ..core.errors import InputError
from ..io import count_rows
from .candidates import available_families
from ..core.requests import from_keywords
from ..evaluation.tasks import reference_for
from .grid import CODE_FAMILIES, DEFAULT_METHODS, GridOptions, build_report
from .recommend import TaskFiles
from .task_files import TaskInputs, load_task_files
from .html import write_report
from .plans import plan_setup, rank_plans


def report_files(
    input: str | os.PathLike,
    out_dir: str | os.PathLike,
    *,
    codes: Sequence[str] | None = None,
    overwrite: bool = False,
    ram_budgets: Sequence[int] | None = None,
    progress: Callable[[str, int, int], None] | None = None,
    **given: Any,
) -> dict[str, Any]:
    """The report on files: documents from ``input`` (a uniform sample of ``sample`` rows, 50,000 by default;
    with qrels all of them, or a judged sample: :func:`~embcompress.report.task_files.load_task_files`), queries
    and BEIR qrels or a label column, written to ``out_dir`` as report.json and report.html. ``codes``: the code
    families of the grid (None: those installed); with ``ram_budgets``, the serving plans at each. The other
    keyword arguments are the fields of :class:`~embcompress.report.recommend.TaskFiles` and of
    :class:`~embcompress.report.grid.GridOptions`. Outputs and inputs are checked before the grid runs."""
    files, grid = from_keywords("report_files", given, TaskFiles, GridOptions)
    check_output_dir(out_dir, overwrite=overwrite)
    if ram_budgets and files.labels is not None:
        raise InputError("serving plans rescore search results; kNN accuracy (--labels) has none: drop --ram-budgets")
    data = load_task_files(
        input, queries=files.queries, qrels=files.qrels, labels=files.labels, sample=files.sample, column=files.column
    )
    docs = data.pop("docs")
    families = available_families(CODE_FAMILIES) if codes is None else list(codes)
    grid = replace(grid, methods=list(grid.methods or DEFAULT_METHODS), code_families=families)
    rep = build_report(docs, TaskInputs(**data, reference=reference_for(files.reference)), grid, progress=progress)
    if ram_budgets:
        rows = count_rows(input, column=files.column)
        reference = reference_for(files.reference, plans=True)
        rep["plans"] = plans_for(docs, data, sorted(set(ram_budgets), reverse=True), reference, rows, progress)
    write_report(rep, out_dir, overwrite=overwrite)
    return rep


def plans_for(
    docs, data: Mapping[str, Any], ram_budgets: Sequence[int], reference: str, total_rows: int, progress
) -> dict[str, Any]:
    """Serving plans ranked at each RAM budget (:func:`embcompress.report.plans.rank_plans`) on the report's sample."""
    setup = plan_setup({**data, "docs": docs}, reference)
    return {str(b): rank_plans(setup, b, total_rows=total_rows, progress=progress) for b in ram_budgets}
