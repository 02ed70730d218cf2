"""The main job on a Ray cluster (``--engine ray``; extra ``embcompress[ray]``), through Ray Data.

The units of work are the local engine's: the row groups of every parquet shard. A Ray Data
pipeline maps them (``map_batches``) onto actors that each rebuild the fitted compressor once from
its saved config and arrays (no pickle), read their row group as Arrow, compress it and return an
Arrow table of codes and carried columns tagged with the unit's sequence number. The driver takes
the tables in sequence order, whatever order the workers finish in, and writes them with the local
engine's writer, shard by shard, into a temporary directory renamed at the end. Output row groups
are cut by rows from the output width, so the files are byte-identical to the local engine's.

Fitting: a compressor whose fit is statistics that combine (PCA: count, mean and centred scatter,
merged with Chan et al.'s pairwise update; int8: ranges) gets them computed per row group on the
workers and merged on the driver, a few KB to MB per row group across the network. Any other fit
(reservoir samples of the learned maps, chains) reads the same units, decoded on the cluster, and
hands them to the fit on the driver in row order and in the local engine's batches, so its state is
the local engine's exactly.

What crosses the network: the compressor's state once per actor, a few bytes per unit of work
(path, row group), the codes and carried columns of every row once (workers -> driver); the input
vectors are read by the workers from shared storage. What the driver holds: the units that
finished ahead of their turn, and the writer's current row group.
"""

from __future__ import annotations

import json
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
from .registry import get
from .stream import CompressResult, check_destination, file_metadata



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


SEQ = "__embcompress_seq"


def _units(src) -> tuple[list, list]:
    """The local engine's units of work: (sequence number, shard, path, row group) for every row
    group of every shard, in row order; and the shards."""
    sources = src.shards if hasattr(src, "shards") else [src]
    for s in sources:
        if Path(s.path).suffix.lower() == ".npy":
            raise InputError("--engine ray reads parquet; convert .npy input to parquet or use the local engine")
    units = [(i, str(s.path), g) for i, s in enumerate(sources) for g in range(s.num_row_groups)]
    return [{"seq": k, "shard": i, "path": p, "group": g} for k, (i, p, g) in enumerate(units)], sources


class _Unit:
    """A Ray Data actor that reads whole row groups (Arrow in), compresses them with the fitted
    compressor it rebuilt once from its config and arrays (no pickle), and returns Arrow tables
    tagged with their sequence number; without a compressor it returns the decoded vectors."""

    def __init__(self, config: dict | None, arrays: dict | None, column: str, carried: list, dim: int, spec: Any,
                 stats_of: dict | None = None):
        self.comp = from_config(config, arrays_from_json(arrays)) if config is not None else None
        # stats_of: {"name", "params"} of an unfitted compressor whose block statistics are returned
        self.stats_of = get(stats_of["name"]).from_params(stats_of["params"]) if stats_of else None
        self.column, self.carried, self.dim, self.spec = column, carried, dim, spec
        self.files: dict = {}

    def __call__(self, items: pa.Table) -> pa.Table:
        import pyarrow.parquet as pq

        out = []
        for item in items.to_pylist():
            pf = self.files.get(item["path"])
            if pf is None:
                pf = self.files[item["path"]] = pq.ParquetFile(item["path"], page_checksum_verification=True)
            t = pf.read_row_group(item["group"], columns=[self.column, *self.carried])
            try:
                X = column_to_numpy(t.column(self.column).combine_chunks(), self.dim, column=self.column)
                if "take" in item and item["take"] is not None:  # a uniform sample of `take` rows of the block
                    rng = np.random.default_rng([int(item["sample_seed"]), int(item["seq"])])
                    X = X[np.sort(rng.choice(len(X), size=int(item["take"]), replace=False))]
                    out.append(pa.table({self.column: pa.FixedSizeListArray.from_arrays(pa.array(X.reshape(-1)), self.dim),
                                         SEQ: pa.array([item["seq"]] * len(X), pa.int64())}))
                    continue
                if self.stats_of is not None:  # one row: the block's statistics, as exact JSON arrays
                    stats = json.dumps(arrays_to_json(self.stats_of._block_stats(X)))
                    out.append(pa.table({"stats": [stats], SEQ: pa.array([item["seq"]], pa.int64())}))
                    continue
                values = self.comp.transform(X) if self.comp is not None else X
            except InputError as exc:
                raise InputError(f"{item['path']}, row group {item['group']}: {exc}") from None
            spec = self.spec if self.comp is not None else None
            col = to_arrow(values, spec) if spec is not None else pa.FixedSizeListArray.from_arrays(
                pa.array(values.reshape(-1)), self.dim)
            cols = [t.column(c).combine_chunks() for c in self.carried] + [col, pa.array([item["seq"]] * len(X), pa.int64())]
            out.append(pa.Table.from_arrays(cols, names=[*self.carried, self.column, SEQ]))
        return pa.concat_tables(out)


def ray_fit_rows(ray, src, units, sources, kwargs, size: int, rows: int) -> list[np.ndarray]:
    """The first ``rows`` rows, decoded on the cluster, in the local engine's batches."""
    sizes = [sources[u["shard"]]._pf.metadata.row_group(u["group"]).num_rows for u in units]
    starts = np.concatenate([[0], np.cumsum(sizes)])
    needed = [u for u, st in zip(units, starts) if st < rows]
    out, seen = [], 0
    for _, table in _in_order(ray, needed, kwargs, None):
        X = column_to_numpy(table.column(src.column).combine_chunks(), src.dim, column=src.column)
        for start in range(0, len(X), size):
            part = X[start : start + size][: rows - seen]
            seen += len(part)
            if len(part):
                out.append(part)
    return out


def _cluster_sample(ray, units: list, sources: list, kwargs: dict, m: int, comp, workers, progress) -> np.ndarray:
    """A uniform sample of ``m`` rows (all rows when there are fewer) drawn on the cluster: the
    driver splits ``m`` among the row groups by a multivariate hypergeometric draw over their row
    counts (from the metadata, nothing read), and each worker sends that many rows of its row
    group, chosen uniformly. Only the sample crosses the network."""
    sizes = np.array([sources[u["shard"]]._pf.metadata.row_group(u["group"]).num_rows for u in units], dtype=np.int64)
    seed = int(getattr(comp, "seed", 0) or 0)
    takes = sizes if sizes.sum() <= m else np.random.default_rng(seed).multivariate_hypergeometric(sizes, m)
    todo = [{**u, "take": int(t), "sample_seed": seed} for u, t in zip(units, takes) if t > 0]
    parts = []
    for unit, table in _in_order(ray, [{**u, "seq": k} for k, u in enumerate(todo)], kwargs, workers):
        parts.append(column_to_numpy(table.column(kwargs["column"]).combine_chunks(), kwargs["dim"], column=kwargs["column"]))
        if progress:
            progress(len(parts[-1]))
    return np.concatenate(parts) if parts else np.empty((0, kwargs["dim"]), np.float32)


def _in_order(ray, units: list, actor_kwargs: dict, workers: int | None):
    """(unit, table) for every unit, in sequence order, whatever order the cluster finishes them in."""
    ds = ray.data.from_items(units, override_num_blocks=len(units)).map_batches(
        _Unit, fn_constructor_kwargs=actor_kwargs, batch_size=1, batch_format="pyarrow", num_cpus=1,
        # an actor per core but one, which the read of the items needs: with every core held by an actor it never runs
        concurrency=(1, workers or max(1, int(ray.cluster_resources().get("CPU", 2)) - 1)))
    waiting: dict[int, pa.Table] = {}
    nxt = 0
    for block in ds.iter_batches(batch_format="pyarrow", batch_size=None):
        seqs = block.column(SEQ).to_numpy()
        for k in np.unique(seqs):
            waiting[int(k)] = block.filter(pc.equal(block.column(SEQ), k)) if len(np.unique(seqs)) > 1 else block
        while nxt in waiting:
            yield units[nxt], waiting.pop(nxt)
            nxt += 1
    if nxt != len(units):
        raise InputError(f"the Ray cluster returned {nxt} of {len(units)} row groups; nothing was written")


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
    units, sources = _units(src)
    ray = connect(address, num_cpus)
    rels = [Path(r) for r in src.rels] if hasattr(src, "rels") else None
    spec = comp.output_spec
    carried = list(src.carried_columns)
    carried_schema = src.schema.empty_table().select(carried).schema.remove_metadata() if carried else None
    config, arrays = to_config(comp)
    kwargs = {"config": config, "arrays": arrays_to_json(arrays), "column": src.column, "carried": carried,
              "dim": src.dim, "spec": spec}

    def writer(i: int, root: Path | None) -> VectorWriter:
        target = (root / rels[i]) if rels is not None else Path(dst_path)
        target.parent.mkdir(parents=True, exist_ok=True)
        return VectorWriter(target, spec, column=src.column, carried_schema=carried_schema,
                            metadata=file_metadata(comp, sources[i], sources[i].path), num_rows=sources[i].num_rows,
                            overwrite=overwrite)

    with (atomic_dir(dst_path, overwrite=overwrite) if rels is not None else _nothing()) as root, ExitStack() as stack:
        current = -1
        out = None
        for unit, table in _in_order(ray, units, kwargs, workers):
            while current < unit["shard"]:  # the next shard (and any empty ones before it): a file each
                stack.close()
                current += 1
                out = stack.enter_context(writer(current, root))
            codes = table.column(src.column).combine_chunks()
            rows = column_to_numpy(codes, spec.row_width, column=src.column, finite=False)
            kept = pa.RecordBatch.from_arrays([table.column(c).combine_chunks() for c in carried], names=carried) if carried else None
            out.write(rows, kept)
            if progress:
                progress(len(rows))
        while current < len(sources) - 1:
            stack.close()
            current += 1
            out = stack.enter_context(writer(current, root))
        stack.close()
    out_paths = [Path(dst_path)] if rels is None else [Path(dst_path) / r for r in rels]
    return CompressResult(rows=src.num_rows, input_bytes=sum(os.path.getsize(s.path) for s in sources),
                          output_bytes=sum(os.path.getsize(p) for p in out_paths), bytes_per_vector_in=src.nbytes_per_row,
                          bytes_per_vector_out=spec.nbytes, seconds=time.perf_counter() - t0, output=str(dst_path))


def ray_fit(comp: Compressor, src_path, *, address: str | None = None, num_cpus: int | None = None,
            column: str | None = None, max_rows: int | None = None, batch_size: int | None = None,
            progress=None, workers: int | None = None) -> Compressor:
    """Fit on the cluster. A compressor whose fit is a set of statistics that combine (PCA's count,
    mean and centred scatter; int8's ranges: :attr:`~embcompress.base.Compressor.combines_blocks`)
    gets them computed per row group on the workers and merged on the driver (state equal to the
    local fit to float tolerance). One that fits on a sample of ``max_rows`` rows (itq, sq, pq, opq,
    rq, geopres, autoencoder) gets a uniform sample drawn on the cluster (equal to the local fit,
    up to float tolerance, when the data hold at most ``max_rows`` rows; another uniform sample
    otherwise). Any other (binary, rabitq, chains) gets the row groups decoded on the cluster and
    handed to the fit in row order and in the local engine's batches (state equal to the local
    engine's)."""
    src = open_vectors(src_path, column=column)
    units, sources = _units(src)
    if max_rows is not None:  # only the row groups that hold the first max_rows rows
        sizes = [sources[u["shard"]]._pf.metadata.row_group(u["group"]).num_rows for u in units]
        starts = np.concatenate([[0], np.cumsum(sizes)])
        units = [u for u, st in zip(units, starts) if st < max_rows]
    ray = connect(address, num_cpus)
    size = _batch_size(batch_size, src.nbytes_per_row)
    kwargs = {"config": None, "arrays": None, "column": src.column, "carried": [], "dim": src.dim, "spec": None}
    sample_rows = getattr(comp, "max_rows", None)
    if max_rows is None and not comp.combines_blocks and isinstance(sample_rows, int) and sample_rows > 0 \
            and comp.name != "pipeline":
        return comp.fit(_cluster_sample(ray, units, sources, kwargs, int(sample_rows), comp, workers, progress))
    if comp.combines_blocks and max_rows is None:
        comp._check_params()
        comp._validate_params(src.dim)
        merged = None
        for unit, table in _in_order(ray, units, {**kwargs, "stats_of": {"name": comp.name, "params": comp.get_params(deep=False)}},
                                     workers):
            stats = arrays_from_json(json.loads(table.column("stats")[0].as_py()))
            merged = stats if merged is None else comp._merge_stats(merged, stats)
            if progress:
                progress(sources[unit["shard"]]._pf.metadata.row_group(unit["group"]).num_rows)
        comp.fit_from_stats(merged, src.dim)
        if comp.rows_after_stats:  # e.g. binary's levels: the first rows, in order, after the thresholds
            first = ray_fit_rows(ray, src, units, sources, kwargs, size, comp.rows_after_stats)
            comp._after_stats(lambda: iter(first))
        return comp

    def batches():
        seen = 0
        for _, table in _in_order(ray, units, kwargs, workers):
            X = column_to_numpy(table.column(src.column).combine_chunks(), src.dim, column=src.column)
            for start in range(0, len(X), size):  # the local engine's batches within a row group
                part = X[start : start + size]
                if max_rows is not None:
                    part = part[: max_rows - seen]
                seen += len(part)
                if progress:
                    progress(len(part))
                if len(part):
                    yield part
                if max_rows is not None and seen >= max_rows:
                    return

    return comp.fit_batches(batches)


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False
