"""Fitting on a Ray cluster: statistics that combine computed per row group on the workers, a
uniform sample drawn there, or every row in order; a chain stage by stage."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any, Iterator

import numpy as np

from ...core.base import Compressor
from ...core.fitting import StatsPass, Sample, Stream, WidthOnly, fit_recipe
from ...compressors.pipeline import Pipeline
from ...io import open_vectors
from ...io.readers import batch_rows
from ...core.persist import arrays_from_json, arrays_to_json, from_config, to_config
from ...core.requests import from_keywords
from .blocks import UnitTask, cluster_sample, first_units, in_order, row_batches, units_of
from .cluster import ClusterOptions, connect


def ray_fit(
    comp: Compressor,
    src_path,
    *,
    cluster: ClusterOptions | None = None,
    column: str | None = None,
    max_rows: int | None = None,
    batch_size: int | None = None,
    progress=None,
    **given,
) -> Compressor:
    """Fit on the cluster, executing the stage's recipe (:func:`embcompress.core.fitting.fit_recipe`). A
    compressor whose fit is a set of statistics that combine (PCA's count, mean and centred
    scatter; int8's ranges; rabitq's and centred rotations' mean: :class:`~embcompress.core.capabilities.BlockStats`)
    gets
    them computed per row group on the workers and merged on the driver (state equal to the local
    fit to float tolerance). One that fits on a sample of ``max_rows`` rows (itq, sq, pq, opq, rq,
    geopres, autoencoder) gets a uniform sample drawn on the cluster (equal to the local fit, up to
    float tolerance, when the data hold at most ``max_rows`` rows; another uniform sample
    otherwise). One that reads every row in order gets the row groups decoded on the cluster and
    handed to the fit in row order and in the local engine's batches (state equal to the local
    engine's). One that reads only the first rows (binary's levels, 65,536 rows, or the
    user's ``max_rows``) reads them on the driver, from the same storage, in the same batches.

    A chain is fitted stage by stage, one cluster pass per stage that learns from data: the
    workers map their rows through the stages fitted so far (shipped to them as saved state), then
    compute the next stage's statistics or draw its sample there. Only statistics and samples
    reach the driver. With ``max_rows`` (the first rows) the driver reads them for the whole chain.
    Where it runs is a :class:`~embcompress.engines.ray.cluster.ClusterOptions`, given or as its fields'
    keyword arguments."""
    (c,) = from_keywords("ray_fit", given, ClusterOptions, values=(cluster,))
    src = open_vectors(src_path, column=column)
    units = units_of(src)
    if max_rows is not None:
        units = first_units(units, max_rows)
    run = _FitPass(connect(c.address, c.num_cpus), src, units, batch_rows(batch_size, src.nbytes_per_row), c.workers)
    task = UnitTask(config=None, arrays=None, column=src.column, carried=[], dim=src.dim, spec=None)
    if not isinstance(comp, Pipeline) or max_rows is not None:
        return _fit_stage(run, comp, task, max_rows, progress)

    def fit_stage(stage: Compressor, done: list[Compressor]) -> None:
        stage_task = task
        if done:  # the workers apply the fitted stages before the next one sees the rows
            config, arrays = to_config(Pipeline.from_fitted(done))
            prefix = {"config": config, "arrays": arrays_to_json(arrays)}
            stage_task = replace(task, prefix=prefix, width=done[-1].output_spec.width)
        _fit_stage(run, stage, stage_task, None, None if done else progress)

    return comp.fit_stages(src.dim, fit_stage)


@dataclass(frozen=True)
class _FitPass:
    """What every stage's pass over the cluster shares: Ray, the input, its units (row groups), the rows
    per batch of the local engine, and at most ``workers`` tasks at once."""

    ray: Any
    src: Any
    units: list
    size: int
    workers: int | None


def _first_rows_here(src, task: UnitTask, size: int, limit: int, progress) -> Iterator[np.ndarray]:
    """The first ``limit`` rows in the local engine's batches, read by the driver itself from the
    shared storage (binary's levels read 65,536 rows; the user's max_rows) and mapped through a
    chain's fitted stages. Starting a Ray Data pipeline for them cost 15 s on a cluster started by
    `ray start` (its actors' start-up), more than the rows' decoding anywhere."""
    prefix = task.prefix
    stages = from_config(prefix["config"], arrays_from_json(prefix["arrays"])) if prefix else None
    seen = 0
    for b in src.batches(size, max_rows=limit):
        x = b.vectors[: limit - seen]
        seen += len(x)
        if stages is not None:
            x = stages.transform(x)
        if progress:
            progress(len(x))
        if len(x):
            yield x
        if seen >= limit:
            return


def _fit_stage(run: _FitPass, comp: Compressor, task: UnitTask, max_rows: int | None, progress) -> Compressor:
    """Fit one compressor (a chain's stage: its input is ``task.in_width`` wide) as its recipe says
    (:func:`~embcompress.core.fitting.fit_recipe`): statistics computed on the workers, a sample drawn
    there, every row in order through the cluster, or the first rows, read by the driver."""
    ray, src, units, size, workers = run.ray, run.src, run.units, run.size, run.workers
    recipe = fit_recipe(comp, max_rows)
    if isinstance(recipe, WidthOnly):
        return comp.fit_batches(lambda: _first_rows_here(src, task, size, 1, None))
    if isinstance(recipe, Sample):
        return comp.fit(cluster_sample(ray, units, task, recipe.rows, comp, workers, progress))
    if isinstance(recipe, StatsPass) and recipe.limit is None:

        def blocks():
            stats_task = replace(task, stats_of={"name": comp.name, "params": comp.get_params(deep=False)})
            for unit, table in in_order(ray, units, stats_task, workers):
                if progress:
                    progress(unit["rows"])
                yield arrays_from_json(json.loads(table.column("stats")[0].as_py()))

        # e.g. binary's levels: the first rows, in order, after the thresholds
        dim = task.in_width
        comp._check_params()
        comp._validate_params(dim)
        return comp.fit_from_block_stats(blocks(), dim, lambda: _first_rows_here(src, task, size, recipe.after, None))
    if isinstance(recipe, Stream):
        return comp.fit_batches(lambda: row_batches(ray, units, task, size, None, workers, progress))
    limit = recipe.limit if isinstance(recipe, StatsPass) else recipe.rows  # the first rows, in order
    return comp.fit_batches(lambda: _first_rows_here(src, task, size, limit, progress))
