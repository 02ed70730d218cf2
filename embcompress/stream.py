"""File-level operations: fit a compressor on a vector file, compress a file into another,
describe a file or a saved model. These stream in batches, so files far larger than memory work;
the CLI is a thin layer over them."""

from __future__ import annotations

import os
import queue
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from . import __version__
from .base import Compressor
from .errors import EmbcompressError, InputError
from .io import VectorWriter, check_output_path, open_vectors
from .persist import describe, is_model_dir, load

DEFAULT_BATCH_SIZE = None  # automatic: about 4 MiB of input values per batch
FILE_FORMAT_VERSION = 1

Progress = Callable[[int], None]  # called with the number of rows just processed


def prefetch(it: Iterator, depth: int = 2) -> Iterator:
    """Run ``it`` in a background thread, ``depth`` items ahead, so that decoding the next batch
    (pyarrow and numpy release the GIL) overlaps with compressing this one. Errors are re-raised
    in the consumer; a consumer that stops early stops the thread."""
    q: queue.Queue = queue.Queue(maxsize=depth)
    done = object()
    stop = threading.Event()

    def work() -> None:
        try:
            for item in it:
                while not stop.is_set():
                    try:
                        q.put(("item", item), timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            q.put(("done", done))
        except BaseException as exc:  # handed to the consumer
            q.put(("error", exc))

    t = threading.Thread(target=work, daemon=True)
    t.start()
    try:
        while True:
            kind, value = q.get()
            if kind == "item":
                yield value
            elif kind == "error":
                raise value
            else:
                return
    finally:
        stop.set()


def fit_file(
    comp: Compressor,
    path: str | os.PathLike,
    *,
    column: str | None = None,
    batch_size: int | None = DEFAULT_BATCH_SIZE,
    max_rows: int | None = None,
    progress: Progress | None = None,
) -> Compressor:
    """Fit ``comp`` on the vectors of a file, streaming (each learning stage reads the file once,
    up to ``max_rows`` rows)."""
    src = open_vectors(path, column=column)
    if src.num_rows == 0:
        raise InputError(f"{path} has no rows; there is nothing to fit or compress")

    def batches() -> Iterator:
        seen = 0
        for b in prefetch(src.batches(batch_size)):
            x = b.vectors
            if max_rows is not None and seen + len(x) > max_rows:
                x = x[: max_rows - seen]
            seen += len(x)
            if progress:
                progress(len(x))
            yield x
            if max_rows is not None and seen >= max_rows:
                return

    return comp.fit_batches(batches)


@dataclass
class CompressResult:
    rows: int
    input_bytes: int
    output_bytes: int
    bytes_per_vector_in: int
    bytes_per_vector_out: int
    seconds: float
    output: str

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def file_metadata(comp: Compressor, src, source_path) -> dict[str, Any]:
    """What goes into the output file's schema metadata."""
    spec = comp.output_spec
    meta = {
        "format": "embcompress.vectors",
        "format_version": FILE_FORMAT_VERSION,
        "library_version": __version__,
        "compressor": describe(comp),
        "input_width": int(comp.n_features_in_),
        "input_column": src.column,
        "source": Path(source_path).name,
        "output": spec.to_dict(),
    }
    if spec.kind == "bits":
        meta["bit_order"] = "msb-first (numpy.packbits, axis=-1)"
        meta["padding"] = f"{spec.nbytes * 8 - spec.width} zero bits at the end of each row" if spec.width % 8 else "none"
    return meta


def compress_file(
    comp: Compressor,
    src_path: str | os.PathLike,
    dst_path: str | os.PathLike,
    *,
    column: str | None = None,
    id_column: str | None = None,
    keep_columns: Sequence[str] = (),
    batch_size: int | None = DEFAULT_BATCH_SIZE,
    overwrite: bool = False,
    progress: Progress | None = None,
) -> CompressResult:
    """Stream ``src_path`` through a fitted ``comp`` into ``dst_path`` (.parquet or .npy).

    Parquet output keeps the id column (``id_column``, or a column named ``id`` if present) and
    ``keep_columns``; the embedding column keeps its name and holds the codes."""
    t0 = time.perf_counter()
    check_output_path(dst_path, overwrite=overwrite, inputs=(src_path,))
    src = open_vectors(src_path, column=column, id_column=id_column, keep_columns=keep_columns)
    if src.num_rows == 0:
        raise InputError(f"{src_path} has no rows; nothing to compress")
    comp._check_fitted()
    if src.dim != comp.n_features_in_:
        raise InputError(
            f"{src_path} column {src.column!r} has {src.dim} dimensions but the {comp.name} compressor "
            f"was fitted on {comp.n_features_in_}"
        )
    spec = comp.output_spec
    carried_schema = None
    if getattr(src, "carried_columns", None):
        carried_schema = src.schema.empty_table().select(src.carried_columns).schema.remove_metadata()
    with VectorWriter(
        dst_path, spec, column=src.column, carried_schema=carried_schema,
        metadata=file_metadata(comp, src, src_path), num_rows=src.num_rows, overwrite=overwrite,
    ) as out:
        for b in prefetch(src.batches(batch_size)):
            out.write(comp.transform(b.vectors, row_offset=b.offset), b.carried)
            if progress:
                progress(len(b.vectors))
    return CompressResult(
        rows=src.num_rows,
        input_bytes=os.path.getsize(src_path),
        output_bytes=os.path.getsize(dst_path),
        bytes_per_vector_in=src.nbytes_per_row,
        bytes_per_vector_out=spec.nbytes,
        seconds=time.perf_counter() - t0,
        output=str(dst_path),
    )


def info(path: str | os.PathLike) -> dict[str, Any]:
    """Describe a vector file (rows, width, dtype, producer) or a saved compressor directory."""
    path = Path(path)
    if path.is_dir():
        if not is_model_dir(path):
            raise InputError(f"{path} is a directory but not a saved compressor (no config.json)")
        comp = load(path)
        return {"kind": "compressor", "path": str(path), **describe(comp)}
    src = open_vectors(path, codes=None)
    result = {
        "kind": "vectors",
        "path": str(path),
        "rows": src.num_rows,
        "column": src.column,
        "id_column": src.id_column,
        "type": str(src.type),
        "width": src.dim,
        "bytes_per_vector": src.nbytes_per_row,
        "file_bytes": os.path.getsize(path),
    }
    meta = src.metadata
    if meta and meta.get("format") == "embcompress.vectors":
        result["compressor"] = meta["compressor"]["name"]
        result["compressor_params"] = meta["compressor"]["params"]
        result["fingerprint"] = meta["compressor"].get("fingerprint")
        result["input_width"] = meta.get("input_width")
        result["output"] = meta.get("output")
        result["width"] = meta.get("output", {}).get("width", src.dim)
        for key in ("bit_order", "padding"):
            if key in meta:
                result[key] = meta[key]
    elif meta and meta.get("format") == "embcompress.embeddings":
        result["model"] = meta.get("model")
        result["normalized"] = meta.get("normalized")
    else:
        result["compressor"] = None
    return result


__all__ = ["CompressResult", "DEFAULT_BATCH_SIZE", "EmbcompressError", "compress_file", "fit_file", "info", "prefetch"]
