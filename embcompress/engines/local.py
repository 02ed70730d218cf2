"""File-level operations: fit a compressor on a vector file, compress a file into another,
describe a file or a saved model. These stream in batches, so files far larger than memory work;
the CLI is a thin layer over them."""

from __future__ import annotations

import os
import time
from contextlib import ExitStack, closing, nullcontext
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import pyarrow as pa

from ..core._fs import atomic_dir, check_output_dir, is_uri, output_name, remote_output, shown_uri
from ..core._parallel import prefetch
from .._version import __version__
from ..core.base import Compressor
from ..core.checks import check_values
from ..core.errors import EmbcompressError, InputError
from ..core.fitting import StatsPass, fit_recipe
from ..io import VectorWriter, check_output_path, open_vectors
from ..io.sources import is_dataset
from ..core.persist import check_model_path, codes_file_config, save
from ..core.requests import from_keywords

DEFAULT_BATCH_SIZE = None  # automatic: about 4 MiB of input values per batch
FILE_FORMAT_VERSION = 1

Progress = Callable[[int], None]  # called with the number of rows just processed


@dataclass(frozen=True)
class CompressOptions:
    """How a file goes through a fitted compressor (:func:`compress_file`, either engine): the vectors'
    ``column``, the ``id_column`` and ``keep_columns`` carried into a parquet output, rows per batch, whether
    an existing output is replaced, a ``progress`` callback of rows, and the worker ``threads`` (None: every
    core; the bytes do not depend on it)."""

    column: str | None = None
    id_column: str | None = None
    keep_columns: Sequence[str] = ()
    batch_size: int | None = DEFAULT_BATCH_SIZE
    overwrite: bool = False
    progress: Progress | None = None
    threads: int | None = None


@dataclass(frozen=True)
class JobOptions:
    """What :func:`fit_and_compress` does beside compressing (whose options are a :class:`CompressOptions`
    without ``progress``): whether to ``fit`` first, where to save the fitted model, a ``stage(description,
    rows)`` that may return each pass's progress callback, and the ``engine`` that runs the passes (None:
    this process)."""

    fit: bool = True
    save_model: str | os.PathLike | None = None
    stage: Callable[[str, int], Progress | None] | None = None
    engine: Any = None


def fit_file(
    comp: Compressor,
    path: str | os.PathLike,
    *,
    column: str | None = None,
    batch_size: int | None = DEFAULT_BATCH_SIZE,
    max_rows: int | None = None,
    progress: Progress | None = None,
    threads: int | None = None,
) -> Compressor:
    """Fit ``comp`` on the vectors of a file, streaming (each learning stage reads the file once,
    up to ``max_rows`` rows). Row groups are decoded on ``threads`` workers (None: every core)
    and handed to the fit in file order, so the fitted state is the same for any ``threads``."""
    src = open_vectors(path, column=column)
    if src.num_rows == 0:
        raise InputError(f"{path} has no rows; there is nothing to fit or compress")

    def batches(max_rows: int | None = max_rows, progress: Progress | None = progress) -> Iterator:
        seen = 0
        for b in src.batches(batch_size, threads=threads, max_rows=max_rows):
            x = b.vectors
            if max_rows is not None and seen + len(x) > max_rows:
                x = x[: max_rows - seen]
            seen += len(x)
            if progress:
                progress(len(x))
            yield x
            if max_rows is not None and seen >= max_rows:
                return

    recipe = fit_recipe(comp, max_rows)
    if isinstance(recipe, StatsPass) and recipe.per_batch:  # statistics on the reader's workers
        return _fit_from_batch_stats(comp, src, batch_size, threads, progress, batches, recipe.limit)
    # every other recipe reads the stream in order, up to max_rows: the family takes what it needs
    # (the width, its first rows, its sample, or all of it)
    return comp.fit_batches(batches)


def _fit_from_batch_stats(comp: Compressor, src, batch_size, threads, progress, batches, limit) -> Compressor:
    """A fit from statistics (int8's ranges, a mean, binary's level sums) of the first ``limit``
    rows (None: all), computed batch by batch on the reader's workers and merged in file order:
    the same state for any number of threads, and the same as the sequential fit (the merges add
    in the order the sequential fit does)."""
    what = f"column {src.column!r}"

    def stats(X, offset: int):
        if limit is not None:
            X = X[: max(limit - offset, 0)]
        check_values(X, what=what, row_offset=offset)  # a transform checks its input itself
        return len(X), comp._block_stats(X) if len(X) else None

    def blocks():
        for b in src.batches(batch_size, threads=threads, transform=stats, result_row_bytes=1, max_rows=limit):
            n, block = b.vectors
            if progress and n:
                progress(n)
            if block is not None:
                yield block

    # binary's mean threshold, then its levels: the first rows, in order, after the thresholds
    return comp.fit_from_block_stats(blocks(), src.dim, lambda: batches(comp.rows_after_stats, None))


def check_destination(src_path, dst_path, *, overwrite: bool, remote_ok: bool = False) -> None:
    """Fail before any work if the output cannot be written: a file for a file input, a directory
    of shards (outside the input dataset) for a dataset input. A URI (``s3://...``) names a
    directory on a pyarrow filesystem, which only an engine that writes from its workers takes
    (``remote_ok``: the Ray engine), for a dataset input."""
    if is_uri(dst_path):
        if not remote_ok:
            raise InputError(
                f"{shown_uri(dst_path)} is on a remote filesystem; the Ray engine's workers write such an "
                "output shard by shard (--engine ray); locally, write to a path"
            )
        if not is_dataset(src_path):
            raise InputError(
                f"{shown_uri(dst_path)} is on a remote filesystem, which takes a dataset's shards; "
                f"{src_path} is one file: write it to a path, or split it into shards"
            )
        remote_output(dst_path).check(overwrite=overwrite)
        return
    if not is_dataset(src_path):
        check_output_path(dst_path, overwrite=overwrite, inputs=(src_path,))
        return
    if Path(dst_path).suffix.lower() in (".parquet", ".pq", ".npy"):
        raise InputError(
            f"{src_path} is a dataset of shards; its output is a directory of shards, not {Path(dst_path).name}"
        )
    root = Path(src_path) if Path(src_path).is_dir() else None
    if root is not None and Path(dst_path).resolve().is_relative_to(root.resolve()):
        raise InputError(f"output {dst_path} is inside the input dataset {src_path}; write it elsewhere")
    check_output_dir(dst_path, overwrite=overwrite, allow_empty=True)


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
        "compressor": codes_file_config(comp),
        "input_width": int(comp.n_features_in_),
        "input_column": src.column,
        "source": Path(source_path).name,
        "output": spec.to_dict(),
    }
    if spec.kind == "bits":
        meta["bit_order"] = "msb-first (numpy.packbits, axis=-1)"
        meta["padding"] = (
            f"{spec.nbytes * 8 - spec.width} zero bits at the end of each row" if spec.width % 8 else "none"
        )
    return meta


def compress_file(
    comp: Compressor,
    src_path: str | os.PathLike,
    dst_path: str | os.PathLike,
    *,
    options: CompressOptions | None = None,
    **given: Any,
) -> CompressResult:
    """Stream ``src_path`` through a fitted ``comp`` into ``dst_path`` (.parquet or .npy), as
    :class:`CompressOptions` (given, or its fields as keyword arguments) says. Row groups are decoded and
    compressed on ``threads`` workers (None: every core) and written in file order: the output bytes do not
    depend on ``threads``.

    Parquet output keeps the id column (``id_column``, or a column named ``id`` if present) and
    ``keep_columns``; the embedding column keeps its name and holds the codes."""
    (o,) = from_keywords("compress_file", given, CompressOptions, values=(options,))
    t0 = time.perf_counter()
    src = open_to_compress(comp, src_path, dst_path, o)
    batches = src.batches(
        o.batch_size,
        threads=o.threads,
        transform=lambda X, offset: comp.transform(X, row_offset=offset),
        result_row_bytes=comp.output_spec.nbytes,
    )
    return write_codes(comp, src, (src_path, dst_path), batches, o, started=t0)


def open_to_compress(comp: Compressor, src_path, dst_path, options: CompressOptions, *, remote_ok: bool = False):
    """The input of a compression, opened after every check that can fail before any work: the
    output can be written, the input has rows, ``comp`` is fitted on inputs of its width."""
    o = options
    check_destination(src_path, dst_path, overwrite=o.overwrite, remote_ok=remote_ok)
    src = open_vectors(src_path, column=o.column, id_column=o.id_column, keep_columns=o.keep_columns)
    if src.num_rows == 0:
        raise InputError(f"{src_path} has no rows; nothing to compress")
    comp._check_fitted()
    if src.dim != comp.n_features_in_:
        raise InputError(
            f"{src_path} column {src.column!r} has {src.dim} dimensions but the {comp.name} compressor "
            f"was fitted on {comp.n_features_in_}"
        )
    return src


def write_codes(
    comp: Compressor, src, paths: tuple, batches: Iterator, options: CompressOptions, *, started: float | None = None
) -> CompressResult:
    """Write the compressed ``batches`` of ``src`` (Batch objects in row order, each tagged with its
    shard) from ``paths`` (the input's, the output's) to the output: one file, or for a dataset a directory
    of shards with the input's relative names (a file for every shard, empty ones too), put in place at the
    end. Any engine's batches go through here, so every engine writes the same bytes. Of ``options``, it
    reads ``overwrite``, ``progress`` and ``threads``: the codes' pages are compressed on that many threads
    (None: every core); the bytes do not depend on it."""
    src_path, dst_path = paths
    overwrite, progress, threads = options.overwrite, options.progress, options.threads
    t0 = time.perf_counter() if started is None else started
    shards = src.shards
    sources = [src] if shards is None else shards
    targets = [Path(dst_path)] if shards is None else [Path(dst_path) / r for r in src.rels]
    # closing: an error stops the workers now, not when the traceback that holds this frame is freed
    with (
        closing(batches),
        atomic_dir(dst_path, overwrite=overwrite) if shards is not None else nullcontext(None) as root,
        _ShardWriters(
            comp, src, targets if shards is None else [root / r for r in src.rels], overwrite, threads
        ) as out,
    ):
        out.advance(0)  # before the first batch: a full disk (npy space is reserved) fails before any work
        for b in batches:
            out.advance(b.shard).write(b.vectors, b.carried)
            if progress:
                progress(len(b.vectors))
        out.advance(len(sources) - 1)  # shards with no rows at the end get their (empty) files too
        out.close()
    return CompressResult(
        rows=src.num_rows,
        input_bytes=sum(os.path.getsize(s.path) for s in sources),
        output_bytes=sum(os.path.getsize(p) for p in targets),
        bytes_per_vector_in=src.nbytes_per_row,
        bytes_per_vector_out=comp.output_spec.nbytes,
        seconds=time.perf_counter() - t0,
        output=str(dst_path),
    )


class _ShardWriters(ExitStack):
    """The writers of a compression's outputs, one shard after the other: :meth:`advance` closes the
    current one and opens every shard's writer up to the one asked for."""

    def __init__(self, comp: Compressor, src, targets: list[Path], overwrite: bool, threads: int | None):
        super().__init__()
        self.comp, self.src, self.targets, self.overwrite, self.threads = comp, src, targets, overwrite, threads
        self.sources = [src] if src.shards is None else src.shards
        self.opened: list[VectorWriter] = []
        # (the schema's fields by name, not through empty_table(): that imports pandas, 0.4 s)
        carried = src.carried_columns
        self.carried_schema = pa.schema([src.schema.field(c) for c in carried]) if carried else None

    def advance(self, shard: int) -> VectorWriter:
        """The writer of ``shard``, after closing the current one and writing every shard before it."""
        while len(self.opened) <= shard:
            self.close()
            i = len(self.opened)
            source, target = self.sources[i], self.targets[i]
            target.parent.mkdir(parents=True, exist_ok=True)
            writer = VectorWriter(
                target,
                self.comp.output_spec,
                column=self.src.column,
                carried_schema=self.carried_schema,
                metadata=file_metadata(self.comp, source, source.path),
                num_rows=source.num_rows,
                overwrite=self.overwrite,
                threads=self.threads,
            )
            self.opened.append(self.enter_context(writer))
        return self.opened[shard]


__all__ = [
    "CompressOptions",
    "CompressResult",
    "DEFAULT_BATCH_SIZE",
    "EmbcompressError",
    "compress_file",
    "fit_and_compress",
    "fit_file",
    "JobOptions",
    "prefetch",
]


def fit_and_compress(
    comp: Compressor,
    src_path: str | os.PathLike,
    dst_path: str | os.PathLike,
    *,
    options: CompressOptions | None = None,
    job: JobOptions | None = None,
    **given: Any,
) -> dict[str, Any]:
    """The main job: fit ``comp`` on ``src_path`` (when ``fit``; a compressor that learns nothing
    from data only peeks at the first rows), stream the file through it into ``dst_path``, and
    save the fitted compressor to ``save_model`` if given. Every output is checked before any
    work starts. ``stage(description, rows)`` may return a progress callback for each pass.
    ``engine`` runs the passes: None for this process (``threads`` workers), or an object with
    ``fit_file`` and ``compress_file`` such as :class:`embcompress.engines.ray.RayEngine`.
    The options are a :class:`CompressOptions` and a :class:`JobOptions`, given or as their fields'
    keyword arguments. Returns the sizes, the ratio and the time."""
    o, j = from_keywords("fit_and_compress", given, CompressOptions, JobOptions, values=(options, job))
    if o.progress is not None:
        raise TypeError("fit_and_compress() reports progress through stage(description, rows), not progress")
    column, batch_size, threads, overwrite, save_model = o.column, o.batch_size, o.threads, o.overwrite, j.save_model
    run = j.engine or _LOCAL
    check_destination(src_path, dst_path, overwrite=overwrite, remote_ok=run.writes_remote)
    if save_model is not None:
        check_model_path(save_model, overwrite=overwrite)
    rows = open_vectors(src_path, column=column).num_rows
    stage = j.stage or (lambda description, total: None)
    tags = comp.traits.fit
    if j.fit and tags.learns:
        run.fit_file(
            comp,
            src_path,
            column=column,
            batch_size=batch_size,
            max_rows=tags.first_rows,
            progress=stage(f"fitting {comp.name}", min(rows, tags.first_rows or rows)),
            threads=threads,
        )
    elif j.fit:  # only the width is needed: a small first batch
        fit_file(comp, src_path, column=column, batch_size=min(batch_size or 1024, 1024), max_rows=1024, threads=1)
    res = run.compress_file(
        comp, src_path, dst_path, options=replace(o, progress=stage(f"writing {output_name(dst_path)}", rows))
    )
    if save_model is not None:
        save(comp, save_model, overwrite=overwrite)
    return _job_result(comp, res)


def _job_result(comp: Compressor, res: CompressResult) -> dict[str, Any]:
    """What :func:`fit_and_compress` returns: the sizes and time, the compressor and the ratio."""
    return {
        **res.to_dict(),
        "compressor": comp.name,
        "compressor_repr": repr(comp),
        "output_spec": comp.output_spec.to_dict(),
        "ratio": res.bytes_per_vector_in / res.bytes_per_vector_out,
    }


class _LocalEngine:
    writes_remote = False  # a remote output (s3://...) is the Ray engine's: its workers write the shards
    fit_file = staticmethod(fit_file)
    compress_file = staticmethod(compress_file)


_LOCAL = _LocalEngine()
