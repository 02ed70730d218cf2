"""The main job on a Ray cluster (``--engine ray``; extra ``embcompress[ray]``).

A dataset (a directory or glob of parquet shards) is compressed by one Ray task per input shard.
Each task rebuilds the fitted compressor from its config and arrays (no pickle; put in the object
store once), compresses its shard with the local engine and writes the output shard itself, under
a temporary name, into a staging directory beside the output on shared storage. The driver
receives each shard's row count and size, never codes; it writes a manifest (shards, rows, bytes,
the compressor's fingerprint) and commits by renaming the staging directory once every shard
succeeded. The shards are byte-identical to the local engine's. A failure leaves nothing; with
``resume`` the finished shards stay staged and a rerun skips them (:func:`write_dataset`).

A single file is one shard: its row groups are compressed on the workers through Ray Data
(``map_batches`` onto actors), returned as Arrow tables tagged with their sequence number, and
written in order by the driver with the local engine's writer (the same bytes).

Fitting (see :func:`ray_fit`): statistics that combine are computed per row group on the workers
and merged on the driver (PCA, int8, RaBitQ, the binary mean threshold); learned maps receive a
uniform sample drawn on the cluster; a chain is fitted stage by stage the same ways. A fit that
reads the first rows in order (binary's levels, ``max_rows``) reads them on the driver itself, in
the local engine's batches, so its state is the local engine's exactly.
"""

from .blocks import SEQ
from .cluster import connect
from .commit import MANIFEST
from .engine import RayEngine, ray_compress
from .fit import ray_fit

__all__ = ["MANIFEST", "SEQ", "RayEngine", "connect", "ray_compress", "ray_fit"]
