"""info, embed, demo."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from embcompress.stream import info as describe_path

from ._common import JsonOpt, OverwriteOpt, emit, guarded, human_bytes, kv_table, out, progress_bar


def register(app: typer.Typer) -> None:
    @app.command()
    @guarded
    def info(
        path: Path = typer.Argument(..., help="A vector file (.parquet/.npy) or a saved compressor directory."),
        json: bool = JsonOpt,
    ) -> None:
        """Say what a file or saved compressor is: rows, width, dtype, which compressor made it."""
        d = describe_path(path)
        if d["kind"] == "compressor":
            rows = {"compressor": d["name"], "params": d["params"], "input width": d["fitted"]["n_features_in_"],
                    "output": d["output"], "fingerprint": d["fingerprint"]}
        else:
            rows = {"rows": f"{d['rows']:,}", "column": f"{d['column']} ({d['type']})", "id column": d["id_column"],
                    "width": d["width"], "bytes per vector": d["bytes_per_vector"], "file size": human_bytes(d["file_bytes"])}
            if d.get("compressor"):
                rows["produced by"] = f"{d['compressor']} {d['compressor_params']} (fingerprint {d['fingerprint']})"
                rows["input width"] = d["input_width"]
                if "bit_order" in d:
                    rows["bit order"] = d["bit_order"]
                    rows["padding"] = d["padding"]
            elif d.get("model"):
                rows["embedded with"] = f"{d['model']} (normalized: {d['normalized']})"
            else:
                rows["produced by"] = "unknown (no embcompress metadata): float embeddings"
        emit(d, json, kv_table(str(path), rows))

    @app.command()
    @guarded
    def embed(
        texts: Path = typer.Argument(..., help="Texts: .txt (one per line), .jsonl[.gz] or .parquet with a text field."),
        output: Path = typer.Argument(..., help="Output parquet vector dump (id, embedding)."),
        model: Optional[str] = typer.Option(None, "--model", "-m", help="Local sentence-transformers model directory (default: packaged all-MiniLM-L6-v2)."),
        text_field: Optional[str] = typer.Option(None, "--text-field", help="Field/column holding the text."),
        id_field: Optional[str] = typer.Option(None, "--id-field", help="Field/column holding the id."),
        batch_size: int = typer.Option(64, "--batch-size", "-b", min=1, help="Texts per model batch."),
        normalize: bool = typer.Option(True, "--normalize/--no-normalize", help="Unit-length embeddings."),
        device: Optional[str] = typer.Option(None, "--device", help="torch device, e.g. cpu or cuda (default: best available)."),
        overwrite: bool = OverwriteOpt, json: bool = JsonOpt,
    ) -> None:
        """Embed texts with a sentence-transformers model into a parquet vector dump (offline)."""
        from embcompress.embed import embed_file

        bars = []

        def factory(total: int):
            cm = progress_bar("embedding", total)
            bars.append(cm)
            return cm.__enter__()

        try:
            res = embed_file(texts, output, model=model, text_field=text_field, id_field=id_field,
                             batch_size=batch_size, normalize=normalize, overwrite=overwrite, device=device,
                             progress_factory=factory)
        finally:
            for cm in bars:
                cm.__exit__(None, None, None)
        emit(res, json, kv_table(f"wrote {output}", {"rows": f"{res['rows']:,}", "width": res["width"], "model": res["model"]}))

    @app.command()
    @guarded
    def demo(
        out_dir: Path = typer.Option(Path("embcompress-demo"), "--out", help="Directory for the demo's files."),
        limit: int = typer.Option(1000, "--limit", min=20, help="Number of docstrings to embed (about 30/s on 2 CPU cores)."),
        model: Optional[str] = typer.Option(None, "--model", "-m", help="Local sentence-transformers model directory."),
        overwrite: bool = typer.Option(False, "--overwrite", help="Replace the demo directory if it exists."),
        json: bool = JsonOpt,
    ) -> None:
        """Run the main job on a built-in corpus (the standard library's docstrings): embed, write a
        vector dump, binarize, truncate, int8, and show what each keeps. No download needed."""
        from embcompress.demo import run_demo

        open_bars = []

        def stage(desc: str, total: int):
            while open_bars:
                open_bars.pop().__exit__(None, None, None)
            cm = progress_bar(desc, total)
            open_bars.append(cm)
            return cm.__enter__()

        try:
            res = run_demo(out_dir, limit=limit, model=model, overwrite=overwrite, stage=stage)
        finally:
            while open_bars:
                open_bars.pop().__exit__(None, None, None)
        if json:
            emit(res, True)
            return
        out.print(f"[bold]{res['documents']}[/bold] docstrings from the Python standard library embedded with "
                  f"{res['model']} ({res['width']} dims) in {res['embed_seconds']} s; files in {res['out_dir']}/")
        t = Table(title="What each compression keeps", title_justify="left")
        for col in ("compression", "file size", "bytes/vector", "smaller", "top-10 kept"):
            t.add_column(col, justify="left" if col == "compression" else "right")
        base = res["rows"][0]["bytes_per_vector"]
        for r in res["rows"]:
            t.add_row(f"{r['name']} ({r['file']})", human_bytes(r["file_bytes"]), str(r["bytes_per_vector"]),
                      f"{base / r['bytes_per_vector']:.0f}x", f"{100 * r['recall_at_10']:.1f}%")
        out.print(t)
        r = Table(title="Retrieval quality kept (nDCG@10: find each summary line's own docstring)", title_justify="left")
        for col in ("search", "bytes/vector", "nDCG@10", "retention"):
            r.add_column(col, justify="left" if col == "search" else "right")
        names = {"binary@asym": "binary, rerank: float query vs bits (top 100)",
                 "binary@float": "binary, rerank: float query vs float docs read from disk (top 100)"}
        for row in res["retrieval"]:
            r.add_row(names.get(row["config"], row["config"]), str(row["bytes_per_vector"]), f"{row['ndcg_at_10']:.4f}",
                      f"{100 * row['retention']:.1f}%")
        out.print(r)
        out.print("top-10 kept: share of each query's 10 nearest documents under exact float cosine search that "
                  "the compressed search also returns in its top 10 (queries: the docstrings' summary lines).")
