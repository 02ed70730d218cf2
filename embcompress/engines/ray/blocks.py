"""The Ray Data path: row groups decoded (and compressed, or reduced to statistics or a sample)
by actors on the cluster, returned as Arrow tables tagged with their sequence number and put back
in row order on the driver."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...core.errors import InputError
from ...io import pages
from ...io.columns import column_to_numpy
from ...io.readers import read_group
from ...io.writers import to_arrow
from ...core.persist import arrays_from_json, arrays_to_json, from_config
from ...core.persist import build


SEQ = "__embcompress_seq"


@dataclass(frozen=True)
class UnitTask:
    """What a :class:`_Unit` actor does with each row group: compress it with the saved compressor
    (``config``, ``arrays``; None: return the decoded vectors), carrying the ``carried`` columns; or return
    its statistics for the unfitted compressor ``stats_of`` (``{"name", "params"}``); the vectors of
    ``column`` are ``dim`` wide, and ``spec`` is the codes' output. ``prefix`` (saved stages) maps the rows
    first, to ``width`` dimensions."""

    config: dict | None
    arrays: dict | None
    column: str
    carried: list
    dim: int
    spec: Any
    stats_of: dict | None = None
    prefix: dict | None = None
    width: int | None = None

    @property
    def in_width(self) -> int:
        """The width of the rows the task's compressor (or statistics) sees: after the prefix, if any."""
        return self.width or self.dim


def units_of(src) -> list[dict]:
    """The local engine's units of work, in row order: sequence number, shard, path, row group and
    its row count (from the metadata) for every row group of every shard."""
    sources = src.shards if src.shards is not None else [src]
    for s in sources:
        if Path(s.path).suffix.lower() == ".npy":
            raise InputError("--engine ray reads parquet; convert .npy input to parquet or use the local engine")
    units = [
        (i, str(s.path), g, int(n)) for i, s in enumerate(sources) for g, n in enumerate(np.diff(s.group_starts()))
    ]
    return [{"seq": k, "shard": i, "path": p, "group": g, "rows": n} for k, (i, p, g, n) in enumerate(units)]


def first_units(units: list[dict], rows: int) -> list[dict]:
    """The units that hold the first ``rows`` rows."""
    starts = np.concatenate([[0], np.cumsum([u["rows"] for u in units])])
    return [u for u, st in zip(units, starts) if st < rows]


class _Unit:
    """A Ray Data actor that reads whole row groups (Arrow in), compresses them with the fitted
    compressor it rebuilt once from its config and arrays (no pickle), and returns Arrow tables
    tagged with their sequence number; without a compressor it returns the decoded vectors."""

    def __init__(self, task: UnitTask):
        config, arrays, stats_of, prefix = task.config, task.arrays, task.stats_of, task.prefix
        self.comp = from_config(config, arrays_from_json(arrays)) if config is not None else None
        # prefix: the fitted stages of a chain that map the rows before a later stage's fit sees them
        self.prefix = from_config(prefix["config"], arrays_from_json(prefix["arrays"])) if prefix else None
        # stats_of: {"name", "params"} of an unfitted compressor whose block statistics are returned
        self.stats_of = build(stats_of["name"], stats_of["params"]) if stats_of else None
        self.column, self.carried, self.dim, self.spec = task.column, task.carried, task.dim, task.spec
        self.files: dict = {}
        self.direct: dict = {}  # path -> where io.pages decodes the column (None: pyarrow)

    def __call__(self, items: pa.Table) -> pa.Table:
        import pyarrow.parquet as pq

        out = []
        for item in items.to_pylist():
            pf = self.files.get(item["path"])
            if pf is None:
                pf = self.files[item["path"]] = pq.ParquetFile(item["path"], page_checksum_verification=True)
            if item["path"] not in self.direct:
                self.direct[item["path"]] = pages.find_column(pf, self.column)
            t = pf.read_row_group(item["group"], columns=self.carried)
            try:
                X = read_group(
                    pf, item["path"], item["group"], column=self.column, dim=self.dim, direct=self.direct[item["path"]]
                )
                if item.get("take") is not None:  # a uniform sample of `take` rows of the block (no compressor)
                    rng = np.random.default_rng([int(item["sample_seed"]), int(item["seq"])])
                    X = X[np.sort(rng.choice(len(X), size=int(item["take"]), replace=False))]
                if self.prefix is not None:
                    X = self.prefix.transform(X)
                if self.stats_of is not None:  # one row: the block's statistics, as exact JSON arrays
                    stats = json.dumps(arrays_to_json(self.stats_of._block_stats(X)))
                    out.append(pa.table({"stats": [stats], SEQ: pa.array([item["seq"]], pa.int64())}))
                    continue
                values = self.comp.transform(X) if self.comp is not None else X
            except InputError as exc:
                raise InputError(f"{item['path']}, row group {item['group']}: {exc}") from None
            spec = self.spec if self.comp is not None else None
            col = (
                to_arrow(values, spec)
                if spec is not None
                else pa.FixedSizeListArray.from_arrays(pa.array(values.reshape(-1)), values.shape[1])
            )
            cols = [t.column(c).combine_chunks() for c in self.carried] + [
                col,
                pa.array([item["seq"]] * len(X), pa.int64()),
            ]
            out.append(pa.Table.from_arrays(cols, names=[*self.carried, self.column, SEQ]))
        return pa.concat_tables(out)


def row_batches(ray, units, task: UnitTask, size: int, limit: int | None, workers, progress) -> Iterator[np.ndarray]:
    """The rows of ``units`` (up to ``limit``), decoded on the cluster, in row order and in the
    local engine's batches (``size`` rows within each row group)."""
    seen = 0
    for _, table in in_order(ray, units, task, workers):
        X = column_to_numpy(table.column(task.column).combine_chunks(), task.in_width, column=task.column)
        for start in range(0, len(X), size):
            part = X[start : start + size]
            if limit is not None:
                part = part[: limit - seen]
            seen += len(part)
            if progress:
                progress(len(part))
            if len(part):
                yield part
            if limit is not None and seen >= limit:
                return


def cluster_sample(ray, units: list, task: UnitTask, m: int, comp, workers, progress) -> np.ndarray:
    """A uniform sample of ``m`` rows (all rows when there are fewer) drawn on the cluster: the
    driver splits ``m`` among the row groups by a multivariate hypergeometric draw over their row
    counts (from the metadata, nothing read), and each worker sends that many rows of its row
    group, chosen uniformly. Only the sample crosses the network."""
    sizes = np.array([u["rows"] for u in units], dtype=np.int64)
    seed = int(comp.get_params(deep=False).get("seed") or 0)
    takes = sizes if sizes.sum() <= m else np.random.default_rng(seed).multivariate_hypergeometric(sizes, m)
    todo = [{**u, "take": int(t), "sample_seed": seed} for u, t in zip(units, takes) if t > 0]
    parts = []
    for unit, table in in_order(ray, [{**u, "seq": k} for k, u in enumerate(todo)], task, workers):
        parts.append(column_to_numpy(table.column(task.column).combine_chunks(), task.in_width, column=task.column))
        if progress:
            progress(len(parts[-1]))
    return np.concatenate(parts) if parts else np.empty((0, task.in_width), np.float32)


def in_order(ray, units: list, task: UnitTask, workers: int | None):
    """(unit, table) for every unit, in sequence order, whatever order the cluster finishes them in."""
    ds = ray.data.from_items(units, override_num_blocks=len(units)).map_batches(
        _Unit,
        fn_constructor_kwargs={"task": task},
        batch_size=1,
        batch_format="pyarrow",
        num_cpus=1,
        # an actor per core but one, which the read of the items needs: with every core held by an actor it never runs
        concurrency=(1, workers or max(1, int(ray.cluster_resources().get("CPU", 2)) - 1)),
    )
    waiting: dict[int, pa.Table] = {}
    nxt = 0
    for block in ds.iter_batches(batch_format="pyarrow", batch_size=None):
        seqs = np.unique(block.column(SEQ).to_numpy())
        for k in seqs:
            waiting[int(k)] = block.filter(pc.equal(block.column(SEQ), k)) if len(seqs) > 1 else block
        while nxt in waiting:
            yield units[nxt], waiting.pop(nxt)
            nxt += 1
    if nxt != len(units):
        raise InputError(f"the Ray cluster returned {nxt} of {len(units)} row groups; nothing was written")
