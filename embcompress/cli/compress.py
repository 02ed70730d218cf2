"""binarize, truncate, fit, apply: the main job on files."""

from __future__ import annotations

from dataclasses import dataclass
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

from ._common import (
    AddressOpt,
    Bars,
    BatchOpt,
    ColumnOpt,
    EngineOpt,
    IdColumnOpt,
    JsonOpt,
    KeepOpt,
    OverwriteOpt,
    ResumeOpt,
    ThreadsOpt,
    emit,
    engine_for,
    guarded,
    human_bytes,
    kv_table,
    progress_bar,
    takes,
)

app = typer.Typer()


def _compress(comp, req, *, fit: bool = True, save_model: Path | None = None) -> None:
    """The file commands' one job (binarize, truncate, apply): ``comp`` fitted (when ``fit``) and streamed from
    ``req.input`` into ``req.output`` with the request's columns, batch, threads and engine; then the summary."""
    with Bars() as bars:
        res = fit_and_compress(
            comp,
            req.input,
            req.output,
            fit=fit,
            column=req.column,
            id_column=req.id_column,
            keep_columns=req.keep,
            batch_size=req.batch_size,
            overwrite=req.overwrite,
            save_model=save_model,
            stage=bars.stage,
            threads=req.threads,
            engine=engine_for(req.engine, req.address, req.resume),
        )
    emit(
        res,
        req.json,
        kv_table(
            f"{req.input.name} -> {output_name(res['output'])}",
            {
                "rows": f"{res['rows']:,}",
                "compressor": res["compressor_repr"],
                "bytes per vector": f"{res['bytes_per_vector_in']} -> {res['bytes_per_vector_out']} "
                f"({res['ratio']:.1f}x smaller)",
                "file size": f"{human_bytes(res['input_bytes'])} -> {human_bytes(res['output_bytes'])}",
                "time": f"{res['seconds']:.1f} s ({res['rows'] / max(res['seconds'], 1e-9):,.0f} rows/s)",
            },
        ),
    )


@dataclass(frozen=True)
class BinarizeRequest:
    """The options of ``binarize``."""

    input: Path = typer.Argument(..., help="Parquet or .npy file of float embeddings.")
    output: str = typer.Argument(
        ...,
        help="Output .parquet (fixed_size_binary codes) or .npy (uint8); for a dataset a directory, or with --engine "
        "ray a URI (s3://bucket/codes).",
    )
    threshold: str = typer.Option(
        "zero",
        help="Bit is 1 where value > threshold: 'zero' (sign) or 'mean' (per-dimension mean, fitted in one extra "
        "pass).",
    )
    save_model: Optional[Path] = typer.Option(
        None, "--save-model", help="Also save the fitted compressor to this directory."
    )
    column: Optional[str] = ColumnOpt
    id_column: Optional[str] = IdColumnOpt
    keep: List[str] = KeepOpt
    batch_size: Optional[int] = BatchOpt
    threads: Optional[int] = ThreadsOpt
    engine: str = EngineOpt
    address: Optional[str] = AddressOpt
    resume: bool = ResumeOpt
    overwrite: bool = OverwriteOpt
    json: bool = JsonOpt


@app.command()
@guarded
@takes(BinarizeRequest)
def binarize(req: BinarizeRequest) -> None:
    """Sign-binarize embeddings to packed bits (32x smaller than float32), streaming."""
    _compress(from_spec(f"binary:threshold={req.threshold}"), req, save_model=req.save_model)


@dataclass(frozen=True)
class TruncateRequest:
    """The options of ``truncate``."""

    input: Path = typer.Argument(..., help="Parquet or .npy file of float embeddings.")
    output: str = typer.Argument(
        ..., help="Output .parquet or .npy; for a dataset a directory, or with --engine ray a URI (s3://bucket/codes)."
    )
    dim: int = typer.Option(..., "--dim", "-d", help="Keep the first DIM dimensions.")
    renormalize: bool = typer.Option(False, "--renormalize", help="Scale the kept part back to unit length.")
    column: Optional[str] = ColumnOpt
    id_column: Optional[str] = IdColumnOpt
    keep: List[str] = KeepOpt
    batch_size: Optional[int] = BatchOpt
    threads: Optional[int] = ThreadsOpt
    engine: str = EngineOpt
    address: Optional[str] = AddressOpt
    resume: bool = ResumeOpt
    overwrite: bool = OverwriteOpt
    json: bool = JsonOpt


@app.command()
@guarded
@takes(TruncateRequest)
def truncate(req: TruncateRequest) -> None:
    """Keep the first --dim dimensions of each embedding (Matryoshka truncation), streaming."""
    _compress(Truncate(dim=req.dim, renormalize=req.renormalize), req)


@dataclass(frozen=True)
class FitRequest:
    """The options of ``fit``."""

    spec: str = typer.Argument(
        ..., help="Compressor spec, e.g. pca:256, pca:0.95, random_projection:128, int8, binary:mean, pca:128+binary."
    )
    input: Path = typer.Argument(..., help="Parquet or .npy file of float embeddings to fit on.")
    model_dir: Path = typer.Argument(..., help="Directory to save the fitted compressor in.")
    max_rows: Optional[int] = typer.Option(None, "--max-rows", min=1, help="Fit on the first N rows only.")
    column: Optional[str] = ColumnOpt
    batch_size: Optional[int] = BatchOpt
    threads: Optional[int] = ThreadsOpt
    engine: str = EngineOpt
    address: Optional[str] = AddressOpt
    overwrite: bool = OverwriteOpt
    json: bool = JsonOpt


@app.command()
@guarded
@takes(FitRequest)
def fit(req: FitRequest) -> None:
    """Fit a compressor (or a chain) on a vector file and save it (no pickle)."""
    check_model_path(req.model_dir, overwrite=req.overwrite)
    comp = from_spec(req.spec)
    rows = open_vectors(req.input, column=req.column).num_rows
    with progress_bar(f"fitting {req.spec}", min(rows, req.max_rows or rows)) as advance:
        (engine_for(req.engine, req.address) or stream).fit_file(
            comp,
            req.input,
            column=req.column,
            batch_size=req.batch_size,
            max_rows=req.max_rows,
            progress=advance,
            threads=req.threads,
        )
    save(comp, req.model_dir, overwrite=req.overwrite)
    d = describe(comp)
    emit(
        {**d, "model_dir": str(req.model_dir)},
        req.json,
        kv_table(
            f"saved {req.model_dir}",
            {
                "compressor": repr(comp),
                "input width": comp.n_features_in_,
                "output": f"{d['output']['kind']} x {d['output']['width']}, {d['output']['nbytes']} bytes per vector, "
                f"compared by {d['output']['metric']}",
                "fingerprint": d["fingerprint"],
            },
        ),
    )


def _apply_plan(req: ApplyRequest) -> None:
    if req.engine != "local":
        raise typer.BadParameter(
            "a serving plan's tiers are written by the local engine; drop --engine", param_hint="--engine"
        )
    with Bars() as bars:
        res = apply_plan(
            req.model_dir,
            req.input,
            req.output,
            column=req.column,
            id_column=req.id_column,
            keep_columns=req.keep,
            batch_size=req.batch_size,
            overwrite=req.overwrite,
            threads=req.threads,
            progress=bars.stage("writing the tiers", None),
        )
    emit(
        res,
        req.json,
        kv_table(
            f"{req.input.name} -> {req.output}",
            {
                "plan": res["plan"],
                "rows": f"{res['rows']:,}",
                "in RAM (first stage)": f"{res['ram_bytes_per_vector']} B/vector, {human_bytes(res['first_bytes'])}",
                "on disk (rescoring "
                "copy)": f"{res['disk_bytes_per_vector']} B/vector, {human_bytes(res['copy_bytes'])}",
                **(
                    {
                        "HNSW graph (mapped by search)": f"{res['graph_bytes'] / max(res['rows'], 1):.0f} B/vector, "
                        f"{human_bytes(res['graph_bytes'])}, built in {res['graph_seconds']:.1f} s"
                    }
                    if res["graph_bytes"]
                    else {}
                ),
                "time": f"{res['seconds']:.1f} s",
            },
        ),
    )


@dataclass(frozen=True)
class ApplyRequest:
    """The options of ``apply``."""

    model_dir: Path = typer.Argument(
        ...,
        help="A compressor saved by 'embcompress fit', or a serving plan saved by "
        "'recommend --ram-budget' (then OUTPUT is a directory of every tier the plan needs).",
    )
    input: Path = typer.Argument(..., help="Parquet or .npy file of float embeddings.")
    output: str = typer.Argument(
        ..., help="Output .parquet or .npy; for a dataset a directory, or with --engine ray a URI (s3://bucket/codes)."
    )
    column: Optional[str] = ColumnOpt
    id_column: Optional[str] = IdColumnOpt
    keep: List[str] = KeepOpt
    batch_size: Optional[int] = BatchOpt
    threads: Optional[int] = ThreadsOpt
    engine: str = EngineOpt
    address: Optional[str] = AddressOpt
    resume: bool = ResumeOpt
    overwrite: bool = OverwriteOpt
    json: bool = JsonOpt


@app.command()
@guarded
@takes(ApplyRequest)
def apply(req: ApplyRequest) -> None:
    """Compress a vector file with a saved compressor, streaming; or write a serving plan's tiers in one pass."""
    if is_plan_dir(req.model_dir):
        return _apply_plan(req)
    _compress(load(req.model_dir), req, fit=False)
