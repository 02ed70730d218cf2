"""The report on files: the retention grid of :mod:`.grid` on a sample of the user's file, and with RAM
budgets the serving plans of :mod:`.plans`, written as report.json and report.html."""

from __future__ import annotations

import os
from typing import Any, Callable, Mapping, Sequence

from ..core._fs import check_output_dir
from ..core.errors import InputError
from ..evaluation.tasks import DEFAULT_REFERENCE
from ..io import count_rows
from .candidates import available_families
from .grid import CODE_FAMILIES, DEFAULT_METHODS, build_report
from .task_files import load_task_files
from .html import write_report
from .plans import plan_setup, rank_plans


def report_files(
    input: str | os.PathLike,
    out_dir: str | os.PathLike,
    *,
    queries: str | os.PathLike | None = None,
    qrels: str | os.PathLike | None = None,
    labels: str | None = None,
    widths: Sequence[int] | None = None,
    methods: Sequence[str] | None = None,
    codes: Sequence[str] | None = None,
    budget: int | None = None,
    sample: int | None = None,
    geopres_params: str = "",
    column: str | None = None,
    overwrite: bool = False,
    reference: str = DEFAULT_REFERENCE,
    ram_budgets: Sequence[int] | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> dict[str, Any]:
    """The report on files: documents from ``input`` (a uniform sample of ``sample`` rows, 50,000 by default;
    with qrels all of them, or a judged sample: :func:`load_task_files`), queries and BEIR qrels or
    a label column, written to ``out_dir`` as report.json and report.html. Outputs and inputs are
    checked before the grid runs."""
    check_output_dir(out_dir, overwrite=overwrite)
    if ram_budgets and labels is not None:
        raise InputError("serving plans rescore search results; kNN accuracy (--labels) has none: drop --ram-budgets")
    data = load_task_files(input, queries=queries, qrels=qrels, labels=labels, sample=sample, column=column)
    docs = data["docs"]
    rep = build_report(
        data.pop("docs"),
        **data,
        widths=widths,
        methods=list(methods or DEFAULT_METHODS),
        budget=budget,
        geopres_params=geopres_params,
        code_families=available_families(CODE_FAMILIES) if codes is None else list(codes),
        reference=reference,
        progress=progress,
    )
    if ram_budgets:
        rep["plans"] = plans_for(
            docs, data, sorted(set(ram_budgets), reverse=True), reference, count_rows(input, column=column), progress
        )
    write_report(rep, out_dir, overwrite=overwrite)
    return rep


def plans_for(
    docs, data: Mapping[str, Any], ram_budgets: Sequence[int], reference: str, total_rows: int, progress
) -> dict[str, Any]:
    """Serving plans ranked at each RAM budget (:func:`embcompress.report.plans.rank_plans`) on the report's sample."""
    setup = plan_setup({**data, "docs": docs}, reference)
    return {str(b): rank_plans(setup, b, total_rows=total_rows, progress=progress) for b in ram_budgets}
