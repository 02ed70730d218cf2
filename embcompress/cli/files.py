"""info, embed, demo."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from embcompress.io import describe_path

from ._common import Bars, JsonOpt, OverwriteOpt, emit, guarded, human_bytes, kv_table, out, takes

app = typer.Typer()


def _serving_rows(d: dict) -> dict:
    """A plan's or its tiers' rows of ``info``."""
    if d["kind"] == "plan":
        m = d["measured"]
        rows = {
            "plan": d["plan"],
            "per vector": f"{d['ram_bytes_per_vector']} B in RAM, {d['disk_bytes_per_vector']} B on disk",
            "input width": d["input_width"],
            "fingerprint": d["fingerprint"],
        }
        if "retention" in m:
            rows["measured"] = f"retention {100 * m['retention']:.1f}%: {m.get('metric')}, {m.get('fitted')}"
        if "latency_ms" in m:
            rows["latency"] = f"{m['latency_ms']:.2f} ms a query over {m.get('total_rows', 0):,} rows"
        return rows
    files = "\n".join(f"{name}: {human_bytes(size)}" for name, size in d["files"].items())
    return {
        "rows": f"{d['rows']:,}" if isinstance(d["rows"], int) else d["rows"],
        "input width": d["input_width"],
        "copy": d["copy"],
        "ids": f"{d['ids']} ids on disk" if d["ids"] else "in first.parquet only",
        "files": files,
        "size": human_bytes(d["bytes"]),
        "plan fingerprint": d["plan_fingerprint"],
    }


def _info_rows(d: dict) -> dict:
    if d["kind"] in ("plan", "tiers"):
        return _serving_rows(d)
    if d["kind"] == "compressor":
        return {
            "compressor": d["name"],
            "params": d["params"],
            "input width": d["fitted"]["n_features_in_"],
            "output": d["output"],
            "fingerprint": d["fingerprint"],
        }
    if d["kind"] == "dataset":
        return {
            "shards": f"{d['shards']:,} ({', '.join(d['first_shards'])}{', ...' if d['shards'] > 5 else ''})",
            "rows": f"{d['rows']:,} ({d['rows_per_shard']['min']:,} to {d['rows_per_shard']['max']:,} per shard)",
            "column": f"{d['column']} ({d['type']})",
            "id column": d["id_column"],
            "width": d["width"],
            "bytes per vector": d["bytes_per_vector"],
            "size": human_bytes(d["bytes"]),
            "produced by": f"{d['compressor']} (fingerprint {d['fingerprint']})"
            if d["compressor"]
            else "unknown (float embeddings)",
        }
    rows = {
        "rows": f"{d['rows']:,}",
        "column": f"{d['column']} ({d['type']})",
        "id column": d["id_column"],
        "width": d["width"],
        "bytes per vector": d["bytes_per_vector"],
        "file size": human_bytes(d["file_bytes"]),
    }
    if d.get("compressor"):
        rows["produced by"] = f"{d['compressor']} {d['compressor_params']} (fingerprint {d['fingerprint']})"
        rows["input width"] = d["input_width"]
        if "bit_order" in d:
            rows["bit order"], rows["padding"] = d["bit_order"], d["padding"]
    elif d.get("model"):
        by = f", backend {d['backend']}" if d.get("backend") else ""
        rows["embedded with"] = f"{d['model']} (normalized: {d['normalized']}{by})"
    else:
        rows["produced by"] = "unknown (no embcompress metadata): float embeddings"
    return rows


@app.command()
@guarded
def info(
    path: Path = typer.Argument(
        ...,
        help="A vector file (.parquet/.npy), a dataset (directory or glob of shards), a saved compressor, a serving "
        "plan or a plan's tiers (directories).",
    ),
    json: bool = JsonOpt,
) -> None:
    """Say what a file, saved compressor, serving plan or plan's tiers is: rows, width, dtype, what made it."""
    from embcompress.serving.describe import describe_serving

    d = describe_serving(path) or describe_path(path)
    emit(d, json, kv_table(str(path), _info_rows(d)))


@dataclass(frozen=True)
class EmbedRequest:
    """The options of ``embed``."""

    texts: Path = typer.Argument(..., help="Texts: .txt (one per line), .jsonl[.gz] or .parquet with a text field.")
    output: Path = typer.Argument(..., help="Output parquet vector dump (id, embedding).")
    model: Optional[str] = typer.Option(
        None, "--model", "-m", help="Local sentence-transformers model directory (default: packaged all-MiniLM-L6-v2)."
    )
    text_field: Optional[str] = typer.Option(None, "--text-field", help="Field/column holding the text.")
    id_field: Optional[str] = typer.Option(None, "--id-field", help="Field/column holding the id.")
    batch_size: int = typer.Option(64, "--batch-size", "-b", min=1, help="Texts per model batch.")
    normalize: bool = typer.Option(True, "--normalize/--no-normalize", help="Unit-length embeddings.")
    device: Optional[str] = typer.Option(
        None, "--device", help="torch device, e.g. cpu or cuda (default: best available)."
    )
    backend: str = typer.Option(
        "torch",
        "--backend",
        help="torch (default); onnx: ONNX Runtime on the CPU, same embeddings; "
        "onnx-int8: int8 weights, faster, mean cosine ~0.99 to torch's. Exported once from the local weights and "
        "cached.",
    )
    overwrite: bool = OverwriteOpt
    json: bool = JsonOpt


@app.command()
@guarded
@takes(EmbedRequest)
def embed(req: EmbedRequest) -> None:
    """Embed texts with a sentence-transformers model into a parquet vector dump (offline)."""
    from embcompress.embedding.embed import embed_file

    with Bars() as bars:
        res = embed_file(
            req.texts,
            req.output,
            model=req.model,
            text_field=req.text_field,
            id_field=req.id_field,
            batch_size=req.batch_size,
            normalize=req.normalize,
            overwrite=req.overwrite,
            device=req.device,
            backend=req.backend,
            stage=bars.stage,
        )
    emit(
        res,
        req.json,
        kv_table(
            f"wrote {req.output}",
            {"rows": f"{res['rows']:,}", "width": res["width"], "model": res["model"], "backend": res["backend"]},
        ),
    )


def _demo_tables(res: dict) -> tuple[Table, Table]:
    t = Table(title="What each compression keeps", title_justify="left")
    for col in ("compression", "file size", "bytes/vector", "smaller", "top-10 kept"):
        t.add_column(col, justify="left" if col == "compression" else "right")
    base = res["rows"][0]["bytes_per_vector"]
    for r in res["rows"]:
        t.add_row(
            f"{r['name']} ({r['file']})",
            human_bytes(r["file_bytes"]),
            str(r["bytes_per_vector"]),
            f"{base / r['bytes_per_vector']:.0f}x",
            f"{100 * r['recall_at_10']:.1f}%",
        )
    r = Table(title="Retrieval quality kept (nDCG@10: find each summary line's own docstring)", title_justify="left")
    for col in ("search", "bytes/vector", "nDCG@10", "retention"):
        r.add_column(col, justify="left" if col == "search" else "right")
    names = {
        "binary@asym": "binary, rerank: float query vs decoded bits (top 100)",
        "rotate:center=true+binary@asym": "centred random rotation + binary, rerank vs decoded bits",
        "sq:2": "2-bit scalar codes (scanned without the floats)",
        "binary@float": "binary, rerank: float query vs float docs read from disk (top 100)",
    }
    for row in res["retrieval"]:
        r.add_row(
            names.get(row["config"], row["config"]),
            str(row["bytes_per_vector"]),
            f"{row['ndcg_at_10']:.4f}",
            f"{100 * row['retention']:.1f}%",
        )
    return t, r


@app.command()
@guarded
def demo(
    out_dir: Path = typer.Option(Path("embcompress-demo"), "--out", help="Directory for the demo's files."),
    limit: int = typer.Option(
        1000, "--limit", min=20, help="Number of docstrings to embed (about 30/s on 2 CPU cores)."
    ),
    model: Optional[str] = typer.Option(None, "--model", "-m", help="Local sentence-transformers model directory."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace the demo directory if it exists."),
    json: bool = JsonOpt,
) -> None:
    """Run the main job on a built-in corpus (the standard library's docstrings): embed, write a
    vector dump, binarize, truncate, int8, and show what each keeps. No download needed."""
    from embcompress.report.demo import run_demo

    with Bars() as bars:
        res = run_demo(out_dir, limit=limit, model=model, overwrite=overwrite, stage=bars.stage)
    if json:
        emit(res, True)
        return
    out.print(
        f"[bold]{res['documents']}[/bold] docstrings from the Python standard library embedded with "
        f"{res['model']} ({res['width']} dims) in {res['embed_seconds']} s; files in {res['out_dir']}/"
    )
    for table in _demo_tables(res):
        out.print(table)
    out.print(
        "top-10 kept: share of each query's 10 nearest documents under exact float cosine search that "
        "the compressed search also returns in its top 10 (queries: the docstrings' summary lines). Both "
        "tables score each code on documents its fit did not see (two folds: each half encoded by the "
        "code fitted on the other half)."
    )
