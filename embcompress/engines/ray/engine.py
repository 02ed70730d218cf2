"""The Ray engine: the local engine's ``fit_file`` and ``compress_file`` on a cluster."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Iterator

import pyarrow as pa

from ...core.base import Compressor
from ...core.errors import InputError
from ...io.columns import column_to_numpy
from ...io.readers import Batch
from ...core.persist import arrays_to_json, to_config
from ...core.requests import from_keywords
from ..local import CompressOptions, CompressResult, open_to_compress, write_codes
from .blocks import UnitTask, in_order, units_of
from .cluster import ClusterOptions, connect
from .commit import DatasetWrite, write_dataset, write_dataset_remote
from .fit import ray_fit


class RayEngine:
    """The engine argument of :func:`~embcompress.engines.local.fit_and_compress` for Ray: the same calls
    as the local engine's ``fit_file`` and ``compress_file``. Its workers write a dataset's shards
    themselves, so it also takes an output on a pyarrow filesystem (``s3://...``)."""

    writes_remote = True

    def __init__(self, address: str | None = None, num_cpus: int | None = None, resume: bool = False):
        self.cluster = ClusterOptions(address=address, num_cpus=num_cpus, resume=resume)
        connect(address, num_cpus)  # fail now on an address that does not answer

    def fit_file(self, comp, path, *, column=None, batch_size=None, max_rows=None, progress=None, threads=None):
        return ray_fit(
            comp, path, cluster=self.cluster, column=column, max_rows=max_rows, batch_size=batch_size, progress=progress
        )

    def compress_file(self, comp, src, dst, *, options: CompressOptions | None = None, **given):
        (o,) = from_keywords("compress_file", given, CompressOptions, values=(options,))
        return ray_compress(comp, src, dst, options=o, cluster=self.cluster)


def ray_compress(
    comp: Compressor,
    src_path,
    dst_path,
    *,
    options: CompressOptions | None = None,
    cluster: ClusterOptions | None = None,
    received: dict | None = None,
    **given,
) -> CompressResult:
    """:func:`~embcompress.engines.local.compress_file` on Ray: the same output bytes. A dataset's shards
    are written by the workers (:func:`write_dataset`); a single file's row groups are
    compressed on the workers and written in order by the driver. The options are a
    :class:`~embcompress.engines.local.CompressOptions` (its ``batch_size`` and ``threads`` are the
    cluster's affair) and a :class:`~embcompress.engines.ray.cluster.ClusterOptions`, given or as their
    fields' keyword arguments. ``received``, when given, is filled with what the driver received from the
    workers (``bytes``, ``messages``) and the seconds the shard tasks took in all (``task_seconds``)."""
    o, c = from_keywords("ray_compress", given, CompressOptions, ClusterOptions, values=(options, cluster))
    t0 = time.perf_counter()
    src = open_to_compress(comp, src_path, dst_path, o, remote_ok=True)
    units_of(src)  # refuses .npy shards
    ray = connect(c.address, c.num_cpus)
    if src.shards is not None:
        from ...core._fs import remote_output

        job = DatasetWrite(ray, comp, src, o.overwrite, c.resume, c.workers, o.progress, received, started=t0)
        remote = remote_output(dst_path)
        return write_dataset(job, dst_path) if remote is None else write_dataset_remote(job, remote)
    if c.resume:
        raise InputError("--resume applies to a dataset's output (a directory of shards); this input is one file")
    batches = _file_batches(ray, comp, src, c.workers)
    return write_codes(comp, src, (src_path, dst_path), batches, replace(o, threads=None), started=t0)


def _file_batches(ray, comp: Compressor, src, workers: int | None) -> Iterator[Batch]:
    """The codes of one file's units (row groups or spans), compressed by Ray tasks (at most
    ``workers`` at once) and delivered in order; the units are planned now, the tasks start with the
    first batch asked for."""
    units = units_of(src)
    spec = comp.output_spec
    carried = list(src.carried_columns)
    config, arrays = to_config(comp)
    task = UnitTask(
        config=config, arrays=arrays_to_json(arrays), column=src.column, carried=carried, dim=src.dim, spec=spec
    )

    def batches() -> Iterator[Batch]:
        for unit, table in in_order(ray, units, task, workers):
            codes = column_to_numpy(
                table.column(src.column).combine_chunks(), spec.row_width, column=src.column, finite=False
            )
            kept = (
                pa.RecordBatch.from_arrays([table.column(c).combine_chunks() for c in carried], names=carried)
                if carried
                else None
            )
            yield Batch(codes, kept, 0, unit["shard"])

    return batches()
