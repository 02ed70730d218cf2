"""How a compressor is fitted, as data: :func:`fit_recipe` looks at a stage once and says which rows
its fit needs and in what form. The engines only execute a recipe: the local engine
(:func:`embcompress.engines.local.fit_file`) and the Ray engine (:mod:`embcompress.engines.ray.fit`) each map
every recipe onto their own readers and workers, and neither decides one.

=============  ===================================================================================
recipe           what the fit reads
=============  ===================================================================================
WidthOnly      nothing but the input width (one peek at the first batch)
StatsPass      statistics of blocks of rows that merge by addition (a mean, int8's ranges, PCA's
               scatter), of the first ``limit`` rows (None: all), then the first ``after`` rows in
               order (binary's levels)
Sample         a uniform sample of ``rows`` rows
FirstRows      the first ``rows`` rows, in order
Stream         every row, in order
=============  ===================================================================================

A chain is fitted stage by stage (:meth:`~embcompress.compressors.Pipeline.fit_stages`), each
stage by its own recipe over the rows the stages before it map; ``max_rows`` (the user's cap on the
rows a fit reads, from the start) makes every recipe read the first rows only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union


@dataclass(frozen=True)
class WidthOnly:
    pass


@dataclass(frozen=True)
class StatsPass:
    limit: int | None  # the statistics of the first `limit` rows (None: every row)
    after: int | None  # then the first `after` rows in order (None: none)
    per_batch: bool  # cheap enough to compute per read batch (else per row group or per stream)


@dataclass(frozen=True)
class Sample:
    rows: int


@dataclass(frozen=True)
class FirstRows:
    rows: int


@dataclass(frozen=True)
class Stream:
    pass


Recipe = Union[WidthOnly, StatsPass, Sample, FirstRows, Stream]


def fit_recipe(comp, max_rows: int | None = None) -> Recipe:
    """The recipe of one compressor (a chain's stage, or a chain as a whole with ``max_rows``), from
    its :attr:`~embcompress.core.base.Compressor.traits` alone (their ``fit``). ``max_rows``: the user's cap, the
    first rows only."""
    tags = comp.traits.fit
    if not tags.learns:
        return WidthOnly()
    if tags.block_stats:
        limit = min((n for n in (max_rows, tags.first_rows) if n is not None), default=None)
        return StatsPass(limit, comp.rows_after_stats, tags.stats_per_batch)
    if max_rows is not None:
        return FirstRows(int(max_rows))
    if tags.sample is not None:
        return Sample(int(tags.sample))
    return FirstRows(int(tags.first_rows)) if tags.first_rows is not None else Stream()
