"""analyze, report."""

from __future__ import annotations

from dataclasses import dataclass
import time
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from embcompress.report.candidates import code_families, grid_families

from ._common import (
    Bars,
    BatchOpt,
    ColumnOpt,
    JsonOpt,
    OverwriteOpt,
    emit,
    guarded,
    kv_table,
    out,
    progress_bar,
    split_list,
    takes,
)

app = typer.Typer()


@app.command()
@guarded
def analyze(
    input: Path = typer.Argument(..., help="Float embeddings (.parquet/.npy); streamed, any size."),
    threshold: float = typer.Option(
        0.95, "--threshold", min=0.0, max=1.0, help="Variance share for the intrinsic dimensionality."
    ),
    curve: Optional[Path] = typer.Option(
        None, "--curve", help="Write the cumulative explained-variance curve (.csv or .json)."
    ),
    max_rows: Optional[int] = typer.Option(None, "--max-rows", min=2, help="Use the first N rows only."),
    column: Optional[str] = ColumnOpt,
    batch_size: Optional[int] = BatchOpt,
    overwrite: bool = OverwriteOpt,
    json: bool = JsonOpt,
) -> None:
    """Intrinsic dimensionality (PCA components for 95% of the variance) and the explained-variance curve."""
    from embcompress.report import analyze_file

    if curve is not None and curve.suffix not in (".csv", ".json"):
        raise typer.BadParameter("the curve is written as .csv or .json", param_hint="--curve")
    with progress_bar("covariance", None) as advance:
        r = analyze_file(
            input,
            threshold=threshold,
            curve=curve,
            max_rows=max_rows,
            column=column,
            batch_size=batch_size,
            overwrite=overwrite,
            progress=advance,
        )
    emit(r, json, _analyze_table(r, input, threshold))


def _analyze_table(r: dict, input: Path, threshold: float) -> Table:
    marks = {
        k.replace("components_for_", "components for ").replace("pct", "%"): v
        for k, v in r.items()
        if k.startswith("components_for_")
    }
    return kv_table(
        f"{input} ({r['rows']:,} rows, {r['width']} dims)",
        {
            f"intrinsic dimensionality ({100 * threshold:.0f}% "
            "variance)": f"{r['intrinsic_dimensionality']} components ({100 * r['ratio_of_width']:.1f}% of the width)",
            **marks,
            "first 5 components explain": f"{100 * r['first_5_components_explain']:.1f}%",
            **({"note": r["note"]} if "note" in r else {}),
        },
    )


def _report_table(rep: dict) -> Table:
    s = rep["summary"]
    t = Table(title_justify="left")
    for c in (
        "configuration",
        "bytes/vector",
        "score",
        "retention (unseen docs)",
        "retention (in-sample)",
        "rank proxy",
        "",
    ):
        t.add_column(c, justify="left" if c in ("configuration", "") else "right")
    for r in rep["rows"]:
        mark = (
            "best within budget"
            if r["config"] == s.get("best_within_budget")
            else ("pareto" if r.get("pareto") else "")
        )
        t.add_row(
            r["config"] + (" (+ originals)" if r.get("extra_storage") else ""),
            str(r["bytes_per_vector"]),
            f"{r['score']:.4f}",
            f"{100 * r['retention']:.1f}%",
            f"{100 * r['retention_in_sample']:.1f}%",
            f"{r['rank_proxy']:.3f}",
            mark,
        )
    return t


@dataclass(frozen=True)
class ReportRequest:
    """The options of ``report``."""

    input: Path = typer.Argument(..., help="Float document embeddings (.parquet with ids, or .npy).")
    out_dir: Path = typer.Argument(..., help="Directory for report.json and report.html.")
    queries: Optional[Path] = typer.Option(
        None,
        "--queries",
        help="Float query embeddings (same model): with --qrels, nDCG@10; without, scored against float search "
        "(--reference).",
    )
    qrels: Optional[Path] = typer.Option(None, "--qrels", help="BEIR qrels.tsv[.gz]: task retention as nDCG@10.")
    labels: Optional[str] = typer.Option(
        None, "--labels", help="Column of class labels in INPUT: task retention as kNN accuracy."
    )
    widths: Optional[str] = typer.Option(
        None, "--widths", help="Comma-separated target widths (default: d/2, d/4, d/8)."
    )
    methods: Optional[str] = typer.Option(
        None,
        "--methods",
        help="Comma-separated: truncate, random_select, random_projection, pca, geopres, autoencoder.",
    )
    codes: Optional[str] = typer.Option(
        None,
        "--codes",
        help=f"Code families at 16x-128x, comma-separated: {', '.join(c.name for c in code_families())} (default: "
        f"{','.join(grid_families())}; 'none' for none).",
    )
    budget: Optional[int] = typer.Option(
        None,
        "--budget",
        min=1,
        help="Bytes per vector you can afford: the best configuration within it is highlighted.",
    )
    ram_budgets: Optional[str] = typer.Option(
        None,
        "--ram-budgets",
        help="Comma-separated RAM budgets (bytes per vector, e.g. 48,24,12): the report opens with the best serving "
        "plan at each (codes in RAM, a copy on disk), the code-only answer beside it.",
    )
    sample: Optional[int] = typer.Option(
        None,
        "--sample",
        min=50,
        help="N documents: a seeded uniform sample across the whole file (default 50,000); with --qrels all by "
        "default, or the judged documents of a seeded sample of queries plus random others, N in all.",
    )
    reference: Optional[str] = typer.Option(
        None,
        "--reference",
        help="Without --qrels, how your queries are scored against float search: top1 (its top result as the relevant "
        "one), graded (its top 10, graded), recall (recall@10). Default: top1 for codes, graded for serving plans.",
    )
    geopres: str = typer.Option(
        "", "--geopres-params", help="Extra GeoPres parameters, e.g. 'min_steps=100,batch_size=1024'."
    )
    column: Optional[str] = ColumnOpt
    overwrite: bool = OverwriteOpt
    json: bool = JsonOpt

    def keywords(self) -> dict:
        """``report_files``' keyword arguments from these options."""
        return dict(
            queries=self.queries,
            qrels=self.qrels,
            labels=self.labels,
            widths=split_list(self.widths, int, "--widths"),
            methods=split_list(self.methods, str, "--methods"),
            budget=self.budget,
            sample=self.sample,
            geopres_params=self.geopres,
            codes=[] if self.codes == "none" else split_list(self.codes, str, "--codes"),
            column=self.column,
            overwrite=self.overwrite,
            reference=self.reference,
            ram_budgets=split_list(self.ram_budgets, int, "--ram-budgets"),
        )


@app.command()
@guarded
@takes(ReportRequest)
def report(req: ReportRequest) -> None:
    """Run a grid of compressions and write a retention report (JSON + self-contained HTML)."""
    from embcompress.report import report_files

    t0 = time.perf_counter()
    with Bars() as bars:
        rep = report_files(req.input, req.out_dir, progress=bars.step, **req.keywords())
    if req.json:
        emit(rep, True)
        return
    _show_report(rep, req.out_dir, time.perf_counter() - t0)


def _show_report(rep: dict, out_dir: Path, seconds: float) -> None:
    """What report prints: the sample, the table, the best per ratio and where the files are."""
    s = rep["summary"]
    out.print(
        f"{s['vectors']:,} vectors x {s['dim']} dims; task: {s['metric']}; float32 score {s['float_score']:.4f}; "
        f"intrinsic dimensionality {s['intrinsic_dimensionality']}; proxy/retention Spearman "
        f"{s['proxy_retention_spearman']:.3f}"
    )
    if s.get("sampled_from"):
        from embcompress.report.html import sampled_line

        out.print(sampled_line(s["sampled_from"]))
    if s.get("queries_note"):
        out.print(s["queries_note"])
    out.print(_report_table(rep))
    for b in s.get("best_per_ratio") or []:
        tied = b.get("within_uncertainty")
        out.print(
            f"best at {b['ratio']}x: {b['config']} {100 * b['retention']:.1f}% on unseen documents"
            + (f"; as good within the queries' noise: {', '.join(tied)}" if tied else "")
        )
    out.print(f"wrote {out_dir / 'report.html'} and {out_dir / 'report.json'} in {seconds:,.1f} s")
