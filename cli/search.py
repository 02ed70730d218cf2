"""search, evaluate."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer
from rich.table import Table

from ._common import ColumnOpt, IdColumnOpt, JsonOpt, OverwriteOpt, emit, err, guarded, kv_table, out, warnings_to_stderr


def register(app: typer.Typer) -> None:
    @app.command()
    @guarded
    def search(
        index_file: Path = typer.Argument(..., help="Documents: float vectors or codes from binarize/truncate/apply (.parquet/.npy)."),
        queries: Path = typer.Argument(..., help="Float query embeddings (.parquet/.npy), same model as the documents."),
        output: Path = typer.Argument(..., help="Ranked results as parquet: query_id, rank, doc_id, row, score."),
        k: int = typer.Option(10, "--k", "-k", min=1, help="Results per query."),
        model: Optional[Path] = typer.Option(None, "--model", help="Saved compressor that made the codes (needed for fitted ones: pca, int8, binary:mean...)."),
        rerank: Optional[str] = typer.Option(None, "--rerank", help="asymmetric (float query vs the +-1 bits) or float (vs --originals)."),
        multiplier: int = typer.Option(10, "--multiplier", min=1, help="Rerank the top k x multiplier candidates (10: the seed's top 100 for k=10)."),
        originals: Optional[Path] = typer.Option(None, "--originals", help="Original float document vectors for --rerank float (.npy is fastest)."),
        column: Optional[str] = ColumnOpt, id_column: Optional[str] = IdColumnOpt,
        overwrite: bool = OverwriteOpt, json: bool = JsonOpt,
    ) -> None:
        """Exact search of float queries against float vectors or compressed codes, with optional rerank."""
        from embcompress.search import open_store
        from embcompress.search.files import load_index, load_queries, write_results
        from embcompress.io import check_output_path

        check_output_path(output, overwrite=overwrite, inputs=(index_file, queries))
        if rerank == "float" and originals is None:
            raise typer.BadParameter("--rerank float needs --originals FILE", param_hint="--rerank")
        index = load_index(index_file, model=model, column=column, id_column=id_column)
        Q, qids = load_queries(queries, index)
        store = open_store(originals) if originals is not None else None
        if k > index.num_docs:
            err.print(f"note: k={k} is larger than the {index.num_docs} documents; returning {index.num_docs} per query")
        res = index.search(Q, k, rerank=rerank, multiplier=multiplier, originals=store)
        write_results(output, qids, res, overwrite=overwrite)
        summary = {"queries": len(Q), "documents": index.num_docs, "k": res.rows.shape[1], "index": index.kind,
                   "rerank": rerank, "candidates": res.info["candidates"], "seconds": res.seconds,
                   "queries_per_second": len(Q) / res.seconds, "output": str(output)}
        emit(summary, json, kv_table(f"{queries.name} -> {output.name}", {
            "queries x documents": f"{len(Q):,} x {index.num_docs:,} ({index.kind}, {index.nbytes_per_vector} bytes/vector)",
            "k": summary["k"], "rerank": f"{rerank} over {res.info['candidates']} candidates" if rerank else "none",
            "search time": f"{res.seconds:.3f} s ({summary['queries_per_second']:,.0f} queries/s)"}))

    @app.command()
    @guarded
    def evaluate(
        docs: Path = typer.Argument(..., help="Float document embeddings (.parquet with ids, or .npy)."),
        queries: Path = typer.Argument(..., help="Float query embeddings from the same model."),
        qrels: Optional[Path] = typer.Option(None, "--qrels", help="BEIR qrels.tsv[.gz] (query-id, corpus-id, score); without it: recall against float search."),
        config: List[str] = typer.Option([], "--config", help="float, SPEC, SPEC@asym, SPEC@float, SPEC@floatxM (repeatable; default: a standard grid)."),
        k: int = typer.Option(10, "--k", "-k", min=1, help="Cut-off for nDCG/recall/MRR."),
        fit_sample: Optional[int] = typer.Option(None, "--fit-sample", min=2, help="Fit compressors on the first N documents only."),
        json: bool = JsonOpt,
    ) -> None:
        """Float search against each compressor and search mode: scores, retention, bytes, speed."""
        from embcompress.datasets import read_qrels
        from embcompress.evaluate import evaluate as run_eval
        from embcompress.io import read_all

        D, dids = read_all(docs)
        Q, qids = read_all(queries)
        if len(Q) == 0:
            raise typer.BadParameter(f"{queries} has no queries")
        judged = read_qrels(qrels) if qrels else None
        with warnings_to_stderr():
            res = run_eval(D, Q, doc_ids=dids, query_ids=qids, qrels=judged, configs=config or None, k=k,
                           fit_sample=fit_sample, progress=lambda label: err.print(f"[dim]evaluating {label}[/dim]") if err.is_terminal else None)
        if json:
            emit(res, True)
            return
        s = res["summary"]
        out.print(f"{s['documents']:,} documents, {s['queries']:,} queries, {s['dim']} dims; {s['mode']}")
        t = Table(title_justify="left")
        metric_cols = [f"ndcg@{k}", f"recall@{k}", f"mrr@{k}"] if judged else [f"recall@{k}_vs_float"]
        for col in ["config", "bytes/vector", "smaller", *metric_cols, "retention", "queries/s"]:
            t.add_column(col, justify="left" if col == "config" else "right")
        for r in res["rows"]:
            t.add_row(r["config"], str(r["bytes_per_vector"]), f"{r['compression']:.0f}x",
                      *[f"{r[c]:.4f}" for c in metric_cols], f"{100 * r['retention']:.1f}%", f"{r['queries_per_second']:,.0f}")
        out.print(t)
