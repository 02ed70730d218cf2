"""The main job on a Ray cluster (``--engine ray``; extra ``embcompress[ray]``), through Ray Data.

Compressing: ``ray.data.read_parquet`` reads the shards (or the one file) as Arrow blocks on the
cluster; ``map_batches`` with an actor class compresses them (each actor rebuilds the fitted
compressor once from its saved config and arrays, no pickle, and keeps it); the compressed Arrow
blocks come back in order (``preserve_order``) and the driver writes them with the same writer as
the local engine, shard by shard, into a temporary directory renamed at the end. Output row groups
are cut by rows from the output width, so the files are byte-identical to the local engine's.

Fitting: the blocks are read and decoded on the cluster and handed to the fit on the driver in row
order, so the fitted state is the local engine's exactly (the statistics themselves, a covariance
or a reservoir sample, are computed on the driver; see the README for what that costs).

What crosses the network: the compressor's state once per actor, the codes and carried columns of
every row once (workers -> driver). What the driver holds: a few blocks of codes in flight and the
writer's current row group.
"""

from __future__ import annotations

import os
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ._fs import atomic_dir
from ._util import require
from .base import Compressor
from .errors import InputError
from .io import VectorWriter, open_vectors
from .io.readers import _batch_size, column_to_numpy
from .io.writers import to_arrow
from .persist import arrays_from_json, arrays_to_json, from_config, to_config
from .stream import CompressResult, check_destination, file_metadata

SHARD = "__embcompress_shard"
ROW = "__embcompress_row"


def connect(address: str | None = None, num_cpus: int | None = None):
    """Ray, started locally (``address`` None) or connected to a running cluster; an address
    that does not answer is an InputError."""
    ray = require("ray", "ray", "--engine ray")
    if ray.is_initialized():
        return ray
    if address and address != "auto":
        _probe(address)
    try:
        quiet = {"log_to_driver": False, "include_dashboard": False, "logging_level": "ERROR"}
        if address:
            ray.init(address=address, **quiet)
        else:
            ray.init(num_cpus=num_cpus, **quiet)
    except (ConnectionError, TimeoutError, RuntimeError, ValueError) as exc:
        raise InputError(f"cannot connect to a Ray cluster at {address!r}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
    ctx = ray.data.DataContext.get_current()
    ctx.execution_options.preserve_order = True
    ctx.enable_progress_bars = False
    return ray


def _probe(address: str, timeout: float = 5.0) -> None:
    """Fail in seconds, not minutes, when nothing answers at ``address`` (``host:port`` or
    ``ray://host:port``)."""
    import socket

    hostport = address.split("://", 1)[-1].rstrip("/")
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise InputError(f"Ray address {address!r} is not host:port or ray://host:port")
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as exc:
        raise InputError(f"cannot connect to a Ray cluster at {address!r}: nothing answers there "
                         f"({exc.strerror or exc}); start one with `ray start --head` or leave --address out") from None


class RayEngine:
    """The engine argument of :func:`~embcompress.stream.fit_and_compress` for Ray: the same calls
    as the local engine's ``fit_file`` and ``compress_file``."""

    def __init__(self, address: str | None = None, num_cpus: int | None = None):
        self.address, self.num_cpus = address, num_cpus
        connect(address, num_cpus)  # fail now on an address that does not answer

    def fit_file(self, comp, path, *, column=None, batch_size=None, max_rows=None, progress=None, threads=None):
        return ray_fit(comp, path, address=self.address, num_cpus=self.num_cpus, column=column, max_rows=max_rows,
                       batch_size=batch_size, progress=progress)

    def compress_file(self, comp, src, dst, *, column=None, id_column=None, keep_columns=(), batch_size=None,
                      overwrite=False, progress=None, threads=None):
        return ray_compress(comp, src, dst, address=self.address, num_cpus=self.num_cpus, column=column,
                            id_column=id_column, keep_columns=keep_columns, overwrite=overwrite, progress=progress)


def _dataset(ray, src, column: str, carried: Sequence[str], shards: list[Path]):
    if any(Path(p).suffix.lower() == ".npy" for p in shards):
        raise InputError("--engine ray reads parquet; convert .npy input to parquet or use the local engine")
    paths = [str(p) for p in shards]
    ds = ray.data.read_parquet(paths, include_paths=True, shuffle=None).select_columns([column, *carried, "path"])
    index = {p: i for i, p in enumerate(paths)}

    def tag(batch: pa.Table) -> pa.Table:
        shard = [index[p] for p in batch.column("path").to_pylist()]
        return batch.drop_columns(["path"]).append_column(SHARD, pa.array(shard, type=pa.int32()))

    return ds.map_batches(tag, batch_format="pyarrow")


class _Compress:
    """A Ray Data actor: the fitted compressor, rebuilt once from its config and arrays."""

    def __init__(self, config: dict, arrays: dict, column: str, dim: int, spec: Any):
        self.comp = from_config(config, arrays_from_json(arrays))
        self.column, self.dim, self.spec = column, dim, spec

    def __call__(self, batch: pa.Table) -> pa.Table:
        col = batch.column(self.column)
        X = column_to_numpy(col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col, self.dim, column=self.column)
        codes = self.comp.transform(X)
        i = batch.schema.get_field_index(self.column)
        return batch.set_column(i, self.column, to_arrow(codes, self.spec))


def ray_compress(comp: Compressor, src_path, dst_path, *, address: str | None = None, num_cpus: int | None = None,
                 column: str | None = None, id_column: str | None = None, keep_columns: Sequence[str] = (),
                 overwrite: bool = False, workers: int | None = None, progress=None) -> CompressResult:
    """:func:`~embcompress.stream.compress_file` on Ray Data: the same output bytes."""
    t0 = time.perf_counter()
    check_destination(src_path, dst_path, overwrite=overwrite)
    src = open_vectors(src_path, column=column, id_column=id_column, keep_columns=keep_columns)
    comp._check_fitted()
    if src.dim != comp.n_features_in_:
        raise InputError(f"{src_path} has {src.dim} dimensions but the compressor was fitted on {comp.n_features_in_}")
    ray = connect(address, num_cpus)
    sources = src.shards if hasattr(src, "shards") else [src]
    shards = [s.path for s in sources]
    rels = [Path(r) for r in src.rels] if hasattr(src, "rels") else None
    spec = comp.output_spec
    carried = list(src.carried_columns)
    carried_schema = src.schema.empty_table().select(carried).schema.remove_metadata() if carried else None
    config, arrays = to_config(comp)
    ds = _dataset(ray, src, src.column, carried, shards).map_batches(
        _Compress, fn_constructor_kwargs={"config": config, "arrays": arrays_to_json(arrays), "column": src.column,
                                          "dim": src.dim, "spec": spec},
        batch_format="pyarrow", num_cpus=1,
        # an actor per core but one, which the read tasks need: with every core held by an actor they never run
        concurrency=(1, workers or max(1, int(ray.cluster_resources().get("CPU", 2)) - 1)))

    def writer(i: int, root: Path | None) -> VectorWriter:
        target = (root / rels[i]) if rels is not None else Path(dst_path)
        target.parent.mkdir(parents=True, exist_ok=True)
        return VectorWriter(target, spec, column=src.column, carried_schema=carried_schema,
                            metadata=file_metadata(comp, sources[i], sources[i].path), num_rows=sources[i].num_rows,
                            overwrite=overwrite)

    with (atomic_dir(dst_path, overwrite=overwrite) if rels is not None else _nothing()) as root, ExitStack() as stack:
        current, out = -1, None
        for batch in ds.iter_batches(batch_format="pyarrow", batch_size=None):
            shard_ids = batch.column(SHARD).to_numpy()
            for s in np.unique(shard_ids):  # blocks come in order; a block may end one shard and start the next
                sel = batch.filter(pc.equal(batch.column(SHARD), s)) if len(np.unique(shard_ids)) > 1 else batch
                while current < s:
                    stack.close()
                    current += 1
                    out = stack.enter_context(writer(current, root))
                codes = sel.column(src.column).combine_chunks()
                n = len(codes)
                rows = np.frombuffer(codes.buffers()[1], dtype=np.uint8, count=(codes.offset + n) * spec.nbytes)[
                    codes.offset * spec.nbytes:].reshape(n, spec.nbytes) if spec.packed else \
                    column_to_numpy(codes, spec.row_width, column=src.column, finite=False)
                kept = pa.RecordBatch.from_arrays([sel.column(c).combine_chunks() for c in carried], names=carried) if carried else None
                out.write(rows if spec.kind != "int8" else rows.astype(np.int8), kept)
                if progress:
                    progress(n)
        while current < len(sources) - 1:
            stack.close()
            current += 1
            out = stack.enter_context(writer(current, root))
        stack.close()
    out_paths = [Path(dst_path)] if rels is None else [Path(dst_path) / r for r in rels]
    return CompressResult(rows=src.num_rows, input_bytes=sum(os.path.getsize(p) for p in shards),
                          output_bytes=sum(os.path.getsize(p) for p in out_paths), bytes_per_vector_in=src.nbytes_per_row,
                          bytes_per_vector_out=spec.nbytes, seconds=time.perf_counter() - t0, output=str(dst_path))


def ray_fit(comp: Compressor, src_path, *, address: str | None = None, num_cpus: int | None = None,
            column: str | None = None, max_rows: int | None = None, batch_size: int | None = None,
            progress=None) -> Compressor:
    """Fit on blocks decoded on the cluster and handed to the fit in row order: the state equals
    the local engine's."""
    src = open_vectors(src_path, column=column)
    ray = connect(address, num_cpus)
    shards = [s.path for s in src.shards] if hasattr(src, "shards") else [src.path]
    ds = _dataset(ray, src, src.column, [], shards)

    sources = src.shards if hasattr(src, "shards") else [src]
    size = _batch_size(batch_size, src.nbytes_per_row)
    cuts = [n for s in sources for g in range(s.num_row_groups)  # the local engine's batches, row group by row group
            for n in _split(s._pf.metadata.row_group(g).num_rows, size)]

    def blocks():
        for batch in ds.iter_batches(batch_format="pyarrow", batch_size=None):
            col = batch.column(src.column)
            yield column_to_numpy(col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col, src.dim,
                                  column=src.column)

    def batches():
        seen = 0
        for X in _rechunk(blocks(), cuts):
            if max_rows is not None:
                X = X[: max_rows - seen]
            seen += len(X)
            if progress:
                progress(len(X))
            if len(X):
                yield X
            if max_rows is not None and seen >= max_rows:
                return

    return comp.fit_batches(batches)


def _split(rows: int, size: int) -> list[int]:
    return [min(size, rows - s) for s in range(0, rows, size)]


def _rechunk(arrays, sizes: list[int]):
    """The rows of ``arrays`` (in order) cut into pieces of ``sizes`` rows."""
    pending: list[np.ndarray] = []
    have = 0
    it = iter(sizes)
    want = next(it, None)
    for a in arrays:
        pending.append(a)
        have += len(a)
        while want is not None and have >= want:
            buf = np.concatenate(pending) if len(pending) > 1 else pending[0]
            yield buf[:want]
            rest = buf[want:]
            pending, have = ([rest] if len(rest) else []), len(rest)
            want = next(it, None)


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False
