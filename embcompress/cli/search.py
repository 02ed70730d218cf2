"""search, evaluate."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

import typer
from rich.table import Table

from ._common import (
    Bars,
    ColumnOpt,
    EfConstructionOpt,
    EfSearchOpt,
    HnswMOpt,
    IdColumnOpt,
    JsonOpt,
    OverwriteOpt,
    ThreadsOpt,
    emit,
    err,
    graph_text,
    guarded,
    hnsw_settings,
    kv_table,
    out,
    takes,
)

app = typer.Typer()

NormPowerOpt = typer.Option(
    1.0,
    "--norm-power",
    min=0.0,
    max=4.0,
    help="Codes scored against float queries (lookup tables, asymmetric rerank) rank by <q, x_hat> / |x_hat|^P, x_hat "
    "the reconstruction; 1 (default) is its cosine. The best P depends on the data: measure it with evaluate --qrels "
    "before changing it.",
)


@dataclass(frozen=True)
class SearchRequest:
    """The options of ``search``."""

    index_file: Path = typer.Argument(
        ..., help="Documents: float vectors or codes from binarize/truncate/apply (.parquet/.npy)."
    )
    queries: Path = typer.Argument(..., help="Float query embeddings (.parquet/.npy), same model as the documents.")
    output: Path = typer.Argument(..., help="Ranked results as parquet: query_id, rank, doc_id, row, score.")
    k: Optional[int] = typer.Option(
        None, "--k", "-k", min=1, help="Results per query (default 10, or the plan's k with --plan)."
    )
    model: Optional[Path] = typer.Option(
        None, "--model", help="Saved compressor that made the codes (needed for pca, geopres and other learned maps)."
    )
    rerank: Optional[str] = typer.Option(
        None, "--rerank", help="asymmetric (float query vs the decoded codes) or float (vs --originals)."
    )
    multiplier: int = typer.Option(
        10, "--multiplier", min=1, help="Rerank the top k x multiplier candidates (10: the top 100 for k=10)."
    )
    originals: Optional[Path] = typer.Option(
        None, "--originals", help="Original float document vectors for --rerank float (.npy is fastest)."
    )
    index: str = typer.Option(
        "exact",
        "--index",
        help="exact (scan every document) or hnsw (a faiss HNSW graph over bits or float vectors, built on the fly: "
        "approximate, faster on large sets).",
    )
    ef: Optional[int] = EfSearchOpt
    hnsw_m: Optional[int] = HnswMOpt
    ef_construction: Optional[int] = EfConstructionOpt
    graph_file: Optional[Path] = typer.Option(
        None,
        "--graph",
        help="An HNSW graph that 'export --to faiss --structure hnsw' or 'export --to usearch' wrote for INDEX_FILE: "
        "searched, memory-mapped, instead of building one (implies --index hnsw; --ef still applies).",
    )
    norm_power: float = NormPowerOpt
    plan: Optional[Path] = typer.Option(
        None,
        "--plan",
        help="A serving plan (recommend --ram-budget): INDEX_FILE is then the directory 'apply PLAN IN OUT' wrote, "
        "searched as the plan says (first stage in RAM, candidates rescored from the copy on disk).",
    )
    map_mib: Optional[int] = typer.Option(
        None,
        "--map-limit",
        min=0,
        help="With --plan: memory-map a copy on disk of at most this many MiB for its warm reads (default 512; 0: "
        "read every candidate's row with a system call). The map adds at most its size to resident memory.",
    )
    column: Optional[str] = ColumnOpt
    id_column: Optional[str] = IdColumnOpt
    threads: Optional[int] = ThreadsOpt
    overwrite: bool = OverwriteOpt
    json: bool = JsonOpt

    def keywords(self) -> dict:
        """``search_files``' keyword arguments from these options."""
        return dict(
            model=self.model,
            rerank=self.rerank,
            multiplier=self.multiplier,
            originals=self.originals,
            column=self.column,
            id_column=self.id_column,
            overwrite=self.overwrite,
            threads=self.threads,
            index=self.index,
            norm_power=self.norm_power,
            graph=self.graph_file,
        )


@app.command()
@guarded
@takes(SearchRequest)
def search(req: SearchRequest) -> None:
    """Exact search of float queries against float vectors or compressed codes, with optional rerank."""
    from embcompress.search.files import search_files

    if req.plan is not None:
        return _search_plan(req)
    if req.map_mib is not None:
        raise typer.BadParameter("--map-limit applies to a plan's copy on disk: add --plan", param_hint="--map-limit")
    k = 10 if req.k is None else req.k

    if req.rerank == "float" and req.originals is None:
        raise typer.BadParameter("--rerank float needs --originals FILE", param_hint="--rerank")
    graph = hnsw_settings(req.hnsw_m, req.ef_construction, req.ef)
    if graph is not None and req.index != "hnsw" and req.graph_file is None:
        raise typer.BadParameter(
            "--ef, --hnsw-m and --ef-construction set the HNSW graph; add --index hnsw", param_hint="--index"
        )
    with Bars() as bars:
        s = search_files(req.index_file, req.queries, req.output, k=k, hnsw=graph, stage=bars.stage, **req.keywords())
    if s["k"] < k:
        err.print(f"note: k={k} is larger than the {s['documents']} documents; returning {s['documents']} per query")
    emit(s, req.json, _search_table(s, req))


def _search_table(s: dict, req: SearchRequest) -> Table:
    """What search shows: the sizes, the index (and its graph), the rerank and the time."""
    index = s["structure"]
    if s["graph"] is not None:
        where = (
            f"built in {s['graph_seconds']:.1f} s"
            if s["graph_file"] is None
            else (f"{s['graph_file']}, read in {s['graph_seconds']:.1f} s")
        )
        index += f" ({graph_text(s['graph'])}; {where})"
    return kv_table(
        f"{req.queries.name} -> {req.output.name}",
        {
            "queries x documents": f"{s['queries']:,} x {s['documents']:,} ({s['index']}, "
            f"{s['bytes_per_vector']} bytes/vector)",
            "k": s["k"],
            "index": index,
            "rerank": f"{req.rerank} over {s['candidates']} candidates" if req.rerank else "none",
            "search time": f"{s['seconds']:.3f} s ({s['queries_per_second']:,.0f} queries/s)",
        },
    )


def _search_plan(req: SearchRequest) -> None:
    from embcompress.serving.tiers import search_plan_files

    s = search_plan_files(
        req.index_file,
        req.queries,
        req.output,
        req.plan,
        k=req.k,
        overwrite=req.overwrite,
        threads=req.threads,
        id_column=req.id_column,
        **({} if req.map_mib is None else {"map_limit": req.map_mib << 20}),
    )
    emit(
        s,
        req.json,
        kv_table(
            f"{req.queries.name} -> {req.output.name}",
            {
                "queries x documents": f"{s['queries']:,} x {s['documents']:,}",
                "plan": s["plan"],
                "k": s["k"],
                "memory": f"{s['ram_bytes_per_vector']} B/vector in RAM, {s['disk_bytes_per_vector']} B/vector on disk",
                "search time": f"{s['seconds']:.3f} s ({s['queries_per_second']:,.0f} queries/s)",
            },
        ),
    )


def _table(res: dict, k: int) -> Table:
    t = Table(title_justify="left")
    metric_cols = (
        [f"ndcg@{k}", f"recall@{k}", f"mrr@{k}"] if res["summary"]["mode"] == "qrels" else [f"recall@{k}_vs_float"]
    )
    out_of_sample = res["summary"]["fitted"] != "in-sample"
    kept = ["retention (unseen docs)", "retention (in-sample)"] if out_of_sample else ["retention (in-sample)"]
    for col in ["config", "bytes/vector", "smaller", *metric_cols, *kept, "fit s", "encode rows/s", "queries/s"]:
        t.add_column(col, justify="left" if col == "config" else "right")
    for r in res["rows"]:
        shares = [r["retention"], r["retention_in_sample"]][: len(kept)]
        t.add_row(
            r["config"],
            str(r["bytes_per_vector"]),
            f"{r['compression']:.0f}x",
            *[f"{r[c]:.4f}" for c in metric_cols],
            *["n/a" if v is None else f"{100 * v:.1f}%" for v in shares],
            f"{r['fit_seconds']:.1f}",
            "-" if r["encode_rows_per_second"] is None else f"{r['encode_rows_per_second']:,.0f}",
            f"{r['queries_per_second']:,.0f}",
        )
    return t


@dataclass(frozen=True)
class EvaluateRequest:
    """The options of ``evaluate``."""

    docs: Path = typer.Argument(..., help="Float document embeddings (.parquet with ids, or .npy).")
    queries: Path = typer.Argument(..., help="Float query embeddings from the same model.")
    qrels: Optional[Path] = typer.Option(
        None,
        "--qrels",
        help="BEIR qrels.tsv[.gz] (query-id, corpus-id, score); without it: recall against float search.",
    )
    config: List[str] = typer.Option(
        [], "--config", help="float, SPEC, SPEC@asym, SPEC@float, SPEC@floatxM (repeatable; default: a standard grid)."
    )
    k: int = typer.Option(10, "--k", "-k", min=1, help="Cut-off for nDCG/recall/MRR.")
    fit_sample: Optional[int] = typer.Option(
        None,
        "--fit-sample",
        min=2,
        help="Fit each model on at most N documents (a seeded uniform sample of those it may see).",
    )
    folds: int = typer.Option(
        2,
        "--folds",
        min=1,
        help="Fit on all but one fold, score the fold left out (out-of-sample); 1: fit on every document (in-sample "
        "only).",
    )
    norm_power: float = NormPowerOpt
    json: bool = JsonOpt


@app.command()
@guarded
@takes(EvaluateRequest)
def evaluate(req: EvaluateRequest) -> None:
    """Float search against each compressor and search mode: scores, retention on documents the fit
    did not see and in-sample, bytes, fit and encoding cost, speed."""
    from embcompress.evaluation.evaluate import evaluate_files

    with Bars() as bars:
        res = evaluate_files(
            req.docs,
            req.queries,
            qrels=req.qrels,
            configs=req.config or None,
            k=req.k,
            fit_sample=req.fit_sample,
            folds=req.folds,
            progress=bars.step,
            norm_power=req.norm_power,
        )
    if req.json:
        emit(res, True)
        return
    s = res["summary"]
    out.print(
        f"{s['documents']:,} documents, {s['queries']:,} queries, {s['dim']} dims; {s['mode']}; codes "
        + (
            "fitted on every document they encode (in-sample)"
            if s["fitted"] == "in-sample"
            else f"scored {s['fitted']}: each document encoded by a model fitted without it, in-sample beside"
        )
    )
    out.print(_table(res, req.k))
    if "note" in s:
        err.print(f"note: {s['note']}", highlight=False)


@dataclass(frozen=True)
class ExportRequest:
    """The options of ``export``."""

    codes: Path = typer.Argument(
        ..., help="Codes or float vectors (.parquet/.npy) written by binarize/truncate/apply, or float embeddings."
    )
    output: Path = typer.Argument(
        ...,
        help="faiss / usearch: the index file (ids and the description go beside it); lancedb: a database directory.",
    )
    to: str = typer.Option(..., "--to", help="faiss, usearch or lancedb.")
    structure: str = typer.Option(
        "flat", "--structure", help="faiss only: flat (exact) or hnsw (a graph over bits or float vectors)."
    )
    hnsw_m: Optional[int] = HnswMOpt
    ef_construction: Optional[int] = EfConstructionOpt
    ef: Optional[int] = EfSearchOpt
    table: str = typer.Option("vectors", "--table", help="lancedb only: the table name.")
    model: Optional[Path] = typer.Option(
        None, "--model", help="Saved compressor that made the codes (for learned maps and product codes)."
    )
    plan: Optional[Path] = typer.Option(
        None,
        "--plan",
        help="A serving plan: CODES is then the directory 'apply PLAN IN OUT' wrote; the first stage is exported (as "
        "the plan searches it) with the rescoring copy beside it where the target cannot hold it.",
    )
    column: Optional[str] = ColumnOpt
    id_column: Optional[str] = IdColumnOpt
    overwrite: bool = OverwriteOpt
    json: bool = JsonOpt


@app.command()
@guarded
@takes(ExportRequest)
def export(req: ExportRequest) -> None:
    """Export codes or vectors to the index of a serving library: faiss, usearch or LanceDB."""
    from embcompress.serving.export import export as run_export
    from embcompress.serving.plan_export import export_plan

    with Bars() as bars:
        if req.plan is not None:
            res = export_plan(
                req.codes, req.plan, req.output, to=req.to, overwrite=req.overwrite, table=req.table, stage=bars.stage
            )
        else:
            res = run_export(
                req.codes,
                req.output,
                to=req.to,
                model=req.model,
                structure=req.structure,
                table=req.table,
                column=req.column,
                id_column=req.id_column,
                overwrite=req.overwrite,
                hnsw=hnsw_settings(req.hnsw_m, req.ef_construction, req.ef),
                stage=bars.stage,
            )
    if res.get("note"):
        err.print(f"note: {res['note']}")
    emit(res, req.json, _export_table(res, req))


def _export_table(res: dict, req: ExportRequest) -> Table:
    """What export shows: the target (and its structure or table), the rows and the files written."""
    g = res.get("graph")
    return kv_table(
        f"{req.codes.name} -> {req.output.name}",
        {
            "target": f"{res['target']}"
            + (f" ({res['structure']})" if res.get("structure") else f", table {res.get('table')}")
            + (f", {graph_text(g)}" if g else ""),
            "rows": f"{res['rows']:,} ({res['kind']})",
            "written": ", ".join(res.get("files", [res["output"]])),
        },
    )
