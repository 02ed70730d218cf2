"""analyze, report."""

from __future__ import annotations

import json as jsonlib
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from ._common import BatchOpt, ColumnOpt, JsonOpt, OverwriteOpt, emit, err, guarded, kv_table, out, progress_bar, warnings_to_stderr


def _parse_widths(text: Optional[str]) -> Optional[list[int]]:
    if not text:
        return None
    try:
        return [int(w) for w in text.split(",") if w.strip()]
    except ValueError:
        raise typer.BadParameter(f"widths must be comma-separated integers, got {text!r}", param_hint="--widths") from None


def register(app: typer.Typer) -> None:
    @app.command()
    @guarded
    def analyze(
        input: Path = typer.Argument(..., help="Float embeddings (.parquet/.npy); streamed, any size."),
        threshold: float = typer.Option(0.95, "--threshold", min=0.0, max=1.0, help="Variance share for the intrinsic dimensionality."),
        curve: Optional[Path] = typer.Option(None, "--curve", help="Write the cumulative explained-variance curve (.csv or .json)."),
        max_rows: Optional[int] = typer.Option(None, "--max-rows", min=2, help="Use the first N rows only."),
        column: Optional[str] = ColumnOpt, batch_size: Optional[int] = BatchOpt, overwrite: bool = OverwriteOpt,
        json: bool = JsonOpt,
    ) -> None:
        """Intrinsic dimensionality (PCA components for 95% of the variance) and the explained-variance curve."""
        import numpy as np

        from embcompress import PCA
        from embcompress.analysis import intrinsic_dimensionality
        from embcompress.io import check_output_path, open_vectors
        from embcompress.stream import fit_file

        if curve is not None:
            if curve.suffix not in (".csv", ".json"):
                raise typer.BadParameter("the curve is written as .csv or .json", param_hint="--curve")
            check_output_path(curve, overwrite=overwrite)
        src = open_vectors(input, column=column)
        rows = min(src.num_rows, max_rows or src.num_rows)
        with progress_bar("covariance", rows) as advance:
            pca = fit_file(PCA(dim=src.dim), input, column=column, batch_size=batch_size, max_rows=max_rows, progress=advance)
        intr = intrinsic_dimensionality(None, threshold, eigenvalues=pca.eigenvalues_)
        cum = np.cumsum(intr.explained_variance_ratio)
        marks = {f"components for {int(round(100 * t))}%": int(np.searchsorted(cum, t - 1e-12) + 1) for t in (0.5, 0.8, 0.9, 0.95, 0.99)}
        result = {"path": str(input), "rows": rows, "width": src.dim, "threshold": threshold,
                  "intrinsic_dimensionality": intr.components, "ratio_of_width": intr.components / src.dim,
                  **{k.replace(" ", "_").replace("%", "pct"): v for k, v in marks.items()},
                  "top10_explained_variance": intr.explained_variance_ratio[:10].round(5).tolist()}
        if curve is not None:
            if curve.suffix == ".csv":
                curve.write_text("component,explained_variance_ratio,cumulative\n" + "".join(
                    f"{i + 1},{r:.8f},{c:.8f}\n" for i, (r, c) in enumerate(zip(intr.explained_variance_ratio, cum))))
            else:
                curve.write_text(jsonlib.dumps({"explained_variance_ratio": intr.explained_variance_ratio.tolist(), "cumulative": cum.tolist()}))
            result["curve"] = str(curve)
        emit(result, json, kv_table(f"{input} ({rows:,} rows, {src.dim} dims)", {
            f"intrinsic dimensionality ({100 * threshold:.0f}% variance)": f"{intr.components} components ({100 * intr.components / src.dim:.1f}% of the width)",
            **marks, "first 5 components explain": f"{100 * cum[min(4, len(cum) - 1)]:.1f}%"}))

    @app.command()
    @guarded
    def report(
        input: Path = typer.Argument(..., help="Float document embeddings (.parquet with ids, or .npy)."),
        out_dir: Path = typer.Argument(..., help="Directory for report.json and report.html."),
        queries: Optional[Path] = typer.Option(None, "--queries", help="Float query embeddings (same model), with --qrels."),
        qrels: Optional[Path] = typer.Option(None, "--qrels", help="BEIR qrels.tsv[.gz]: task retention as nDCG@10."),
        labels: Optional[str] = typer.Option(None, "--labels", help="Column of class labels in INPUT: task retention as kNN accuracy."),
        widths: Optional[str] = typer.Option(None, "--widths", help="Comma-separated target widths (default: d/2, d/4, d/8)."),
        methods: Optional[str] = typer.Option(None, "--methods", help="Comma-separated: truncate, random_select, random_projection, pca, geopres, autoencoder."),
        budget: Optional[int] = typer.Option(None, "--budget", min=1, help="Bytes per vector you can afford: the best configuration within it is highlighted."),
        sample: int = typer.Option(50_000, "--sample", min=50, help="Use the first N vectors (without qrels)."),
        geopres: str = typer.Option("", "--geopres-params", help="Extra GeoPres parameters, e.g. 'min_steps=100,batch_size=1024'."),
        column: Optional[str] = ColumnOpt, overwrite: bool = OverwriteOpt, json: bool = JsonOpt,
    ) -> None:
        """Run a grid of compressions and write a retention report (JSON + self-contained HTML)."""
        from embcompress.datasets import read_qrels
        from embcompress.errors import InputError, OutputExistsError
        from embcompress.io import open_vectors, read_all
        from embcompress.report import DEFAULT_METHODS, build_report, write_report

        if out_dir.exists() and any(out_dir.iterdir()) and not overwrite:
            raise OutputExistsError(f"{out_dir} already exists and is not empty; pass --overwrite to replace it")
        if (queries is None) != (qrels is None):
            raise InputError("--queries and --qrels go together (task retention needs both)")
        if labels and qrels:
            raise InputError("give either --labels or --queries/--qrels, not both")
        keep = [labels] if labels else []
        src = open_vectors(input, column=column, keep_columns=keep)  # fails early on a missing labels column
        D, ids, lab = _load(src, None if qrels else sample, labels)
        Q = qids = judged = None
        if qrels:
            Q, qids = read_all(queries)
            judged = read_qrels(qrels)
        method_list = [m.strip() for m in methods.split(",")] if methods else list(DEFAULT_METHODS)
        with warnings_to_stderr(), progress_bar("report grid", None) as advance:
            state = {"done": 0}

            def progress(label: str, i: int, n: int) -> None:
                advance(i - state["done"])
                state["done"] = i
                if err.is_terminal:
                    err.print(f"[dim]{label}[/dim]")

            rep = build_report(D, doc_ids=ids, queries=Q, query_ids=qids, qrels=judged, labels=lab,
                               widths=_parse_widths(widths), methods=method_list, budget=budget,
                               geopres_params=geopres, progress=progress)
        write_report(rep, out_dir, overwrite=overwrite)
        if json:
            emit(rep, True)
            return
        s = rep["summary"]
        out.print(f"{s['vectors']:,} vectors x {s['dim']} dims; task: {s['metric']}; float32 score {s['float_score']:.4f}; "
                  f"intrinsic dimensionality {s['intrinsic_dimensionality']}; proxy/retention Spearman {s['proxy_retention_spearman']:.3f}")
        t = Table(title_justify="left")
        for c in ("configuration", "bytes/vector", "score", "retention", "rank proxy", ""):
            t.add_column(c, justify="left" if c in ("configuration", "") else "right")
        for r in rep["rows"]:
            mark = "best within budget" if r["config"] == s.get("best_within_budget") else ("pareto" if r.get("pareto") else "")
            t.add_row(r["config"] + (" (+ originals)" if r.get("extra_storage") else ""), str(r["bytes_per_vector"]),
                      f"{r['score']:.4f}", f"{100 * r['retention']:.1f}%", f"{r['rank_proxy']:.3f}", mark)
        out.print(t)
        out.print(f"wrote {out_dir / 'report.html'} and {out_dir / 'report.json'}")


def _load(src, limit, labels):
    """The first ``limit`` rows (all when None): vectors, ids and labels."""
    import numpy as np

    parts, ids, lab = [], [], []
    seen = 0
    for b in src.batches():
        x = b.vectors
        take = len(x) if limit is None else min(len(x), limit - seen)
        parts.append(np.array(x[:take]))
        if b.carried is not None:
            if src.id_column:
                ids.extend(b.carried.column(src.id_column).to_pylist()[:take])
            if labels:
                lab.extend(b.carried.column(labels).to_pylist()[:take])
        seen += take
        if limit is not None and seen >= limit:
            break
    D = np.concatenate(parts) if parts else np.empty((0, src.dim), np.float32)
    return D, (ids or None), (lab or None) if labels else None
