"""binarize, truncate, fit, apply: the main job on files."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from ..compressors import Truncate
from ..core.persist import describe, load
from ..core.registry import from_spec
from embcompress.core._fs import output_name
from embcompress.core.persist import check_model_path, save
from ..engines import local as stream
from embcompress.engines.local import fit_and_compress
from embcompress.io import open_vectors
from embcompress.serving.plan import is_plan_dir
from embcompress.serving.tiers import apply_plan

from ._common import (AddressOpt, Bars, BatchOpt, ColumnOpt, EngineOpt, IdColumnOpt, JsonOpt, KeepOpt, OverwriteOpt, ResumeOpt,
                      ThreadsOpt, emit, engine_for, guarded, human_bytes, kv_table, progress_bar)

app = typer.Typer()


def _show(src: Path, res: dict, as_json: bool) -> None:
    emit(res, as_json, kv_table(f"{src.name} -> {output_name(res['output'])}", {
        "rows": f"{res['rows']:,}",
        "compressor": res["compressor_repr"],
        "bytes per vector": f"{res['bytes_per_vector_in']} -> {res['bytes_per_vector_out']} ({res['ratio']:.1f}x smaller)",
        "file size": f"{human_bytes(res['input_bytes'])} -> {human_bytes(res['output_bytes'])}",
        "time": f"{res['seconds']:.1f} s ({res['rows'] / max(res['seconds'], 1e-9):,.0f} rows/s)",
    }))


@app.command()
@guarded
def binarize(
    input: Path = typer.Argument(..., help="Parquet or .npy file of float embeddings."),
    output: str = typer.Argument(..., help="Output .parquet (fixed_size_binary codes) or .npy (uint8); for a dataset a directory, or with --engine ray a URI (s3://bucket/codes)."),
    threshold: str = typer.Option("zero", help="Bit is 1 where value > threshold: 'zero' (sign) or 'mean' (per-dimension mean, fitted in one extra pass)."),
    save_model: Optional[Path] = typer.Option(None, "--save-model", help="Also save the fitted compressor to this directory."),
    column: Optional[str] = ColumnOpt, id_column: Optional[str] = IdColumnOpt, keep: List[str] = KeepOpt,
    batch_size: Optional[int] = BatchOpt, threads: Optional[int] = ThreadsOpt, engine: str = EngineOpt,
    address: Optional[str] = AddressOpt, resume: bool = ResumeOpt, overwrite: bool = OverwriteOpt, json: bool = JsonOpt,
) -> None:
    """Sign-binarize embeddings to packed bits (32x smaller than float32), streaming."""
    with Bars() as bars:
        res = fit_and_compress(from_spec(f"binary:threshold={threshold}"), input, output, column=column,
                               id_column=id_column, keep_columns=keep, batch_size=batch_size, overwrite=overwrite,
                               save_model=save_model, stage=bars.stage, threads=threads,
                               engine=engine_for(engine, address, resume))
    _show(input, res, json)


@app.command()
@guarded
def truncate(
    input: Path = typer.Argument(..., help="Parquet or .npy file of float embeddings."),
    output: str = typer.Argument(..., help="Output .parquet or .npy; for a dataset a directory, or with --engine ray a URI (s3://bucket/codes)."),
    dim: int = typer.Option(..., "--dim", "-d", help="Keep the first DIM dimensions."),
    renormalize: bool = typer.Option(False, "--renormalize", help="Scale the kept part back to unit length."),
    column: Optional[str] = ColumnOpt, id_column: Optional[str] = IdColumnOpt, keep: List[str] = KeepOpt,
    batch_size: Optional[int] = BatchOpt, threads: Optional[int] = ThreadsOpt, engine: str = EngineOpt,
    address: Optional[str] = AddressOpt, resume: bool = ResumeOpt, overwrite: bool = OverwriteOpt, json: bool = JsonOpt,
) -> None:
    """Keep the first --dim dimensions of each embedding (Matryoshka truncation), streaming."""
    with Bars() as bars:
        res = fit_and_compress(Truncate(dim=dim, renormalize=renormalize), input, output, column=column,
                               id_column=id_column, keep_columns=keep, batch_size=batch_size, overwrite=overwrite,
                               stage=bars.stage, threads=threads,
                               engine=engine_for(engine, address, resume))
    _show(input, res, json)


@app.command()
@guarded
def fit(
    spec: str = typer.Argument(..., help="Compressor spec, e.g. pca:256, pca:0.95, random_projection:128, int8, binary:mean, pca:128+binary."),
    input: Path = typer.Argument(..., help="Parquet or .npy file of float embeddings to fit on."),
    model_dir: Path = typer.Argument(..., help="Directory to save the fitted compressor in."),
    max_rows: Optional[int] = typer.Option(None, "--max-rows", min=1, help="Fit on the first N rows only."),
    column: Optional[str] = ColumnOpt, batch_size: Optional[int] = BatchOpt, threads: Optional[int] = ThreadsOpt,
    engine: str = EngineOpt, address: Optional[str] = AddressOpt, overwrite: bool = OverwriteOpt, json: bool = JsonOpt,
) -> None:
    """Fit a compressor (or a chain) on a vector file and save it (no pickle)."""
    check_model_path(model_dir, overwrite=overwrite)
    comp = from_spec(spec)
    rows = open_vectors(input, column=column).num_rows
    with progress_bar(f"fitting {spec}", min(rows, max_rows or rows)) as advance:
        (engine_for(engine, address) or stream).fit_file(comp, input, column=column, batch_size=batch_size,
                                                         max_rows=max_rows, progress=advance, threads=threads)
    save(comp, model_dir, overwrite=overwrite)
    d = describe(comp)
    emit({**d, "model_dir": str(model_dir)}, json, kv_table(f"saved {model_dir}", {
        "compressor": repr(comp),
        "input width": comp.n_features_in_,
        "output": f"{d['output']['kind']} x {d['output']['width']}, {d['output']['nbytes']} bytes per vector, compared by {d['output']['metric']}",
        "fingerprint": d["fingerprint"],
    }))


def _apply_plan(plan_dir, input, output, column, id_column, keep, batch_size, threads, engine, overwrite,
                as_json) -> None:
    if engine != "local":
        raise typer.BadParameter("a serving plan's tiers are written by the local engine; drop --engine",
                                 param_hint="--engine")
    with Bars() as bars:
        res = apply_plan(plan_dir, input, output, column=column, id_column=id_column, keep_columns=keep,
                         batch_size=batch_size, overwrite=overwrite, threads=threads,
                         progress=bars.stage("writing the tiers", None))
    emit(res, as_json, kv_table(f"{input.name} -> {output}", {
        "plan": res["plan"], "rows": f"{res['rows']:,}",
        "in RAM (first stage)": f"{res['ram_bytes_per_vector']} B/vector, {human_bytes(res['first_bytes'])}",
        "on disk (rescoring copy)": f"{res['disk_bytes_per_vector']} B/vector, {human_bytes(res['copy_bytes'])}",
        "time": f"{res['seconds']:.1f} s"}))


@app.command()
@guarded
def apply(
    model_dir: Path = typer.Argument(..., help="A compressor saved by 'embcompress fit', or a serving plan saved by "
                                     "'recommend --ram-budget' (then OUTPUT is a directory of every tier the plan needs)."),
    input: Path = typer.Argument(..., help="Parquet or .npy file of float embeddings."),
    output: str = typer.Argument(..., help="Output .parquet or .npy; for a dataset a directory, or with --engine ray a URI (s3://bucket/codes)."),
    column: Optional[str] = ColumnOpt, id_column: Optional[str] = IdColumnOpt, keep: List[str] = KeepOpt,
    batch_size: Optional[int] = BatchOpt, threads: Optional[int] = ThreadsOpt, engine: str = EngineOpt,
    address: Optional[str] = AddressOpt, resume: bool = ResumeOpt, overwrite: bool = OverwriteOpt, json: bool = JsonOpt,
) -> None:
    """Compress a vector file with a saved compressor, streaming; or write a serving plan's tiers in one pass."""
    if is_plan_dir(model_dir):
        return _apply_plan(model_dir, input, output, column, id_column, keep, batch_size, threads, engine, overwrite, json)
    with Bars() as bars:
        res = fit_and_compress(load(model_dir), input, output, fit=False, column=column, id_column=id_column,
                               keep_columns=keep, batch_size=batch_size, overwrite=overwrite, stage=bars.stage,
                               threads=threads, engine=engine_for(engine, address, resume))
    _show(input, res, json)
