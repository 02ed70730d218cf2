"""Where vectors come from: one .parquet or .npy file, or a dataset of them (a directory, Hive partitions
included, or a glob of shards) read as one. :func:`open_vectors` opens either."""

from __future__ import annotations

import glob as globlib
import os
import re
from pathlib import Path
from typing import Sequence

from ..core.errors import InputError
from .npy import NpyVectors
from .readers import ParquetVectors, Streamed, Transform, file_format

SHARD_SUFFIXES = (".parquet", ".pq", ".npy")


def is_dataset(path: str | os.PathLike) -> bool:
    """A directory that is not a saved compressor, or a glob pattern."""
    p = Path(path)
    if p.is_dir():
        return not (p / "config.json").is_file()
    return not p.exists() and bool(re.search(r"[*?\[]", str(path)))


def find_shards(path: str | os.PathLike) -> tuple[Path, list[str]]:
    """(root, relative paths of the shards, sorted). Hidden files and directories (temporary
    outputs, ``_SUCCESS``-style markers) are skipped."""
    text = str(path)
    if Path(text).is_dir():
        root = Path(text)
        _not_a_serving_dir(root)
        files = [f for f in root.rglob("*") if f.is_file() and f.suffix.lower() in SHARD_SUFFIXES]
        what = f"directory {root}"
    else:
        matches = sorted(globlib.glob(text, recursive=True))
        files = [Path(f) for f in matches if Path(f).is_file() and Path(f).suffix.lower() in SHARD_SUFFIXES]
        root = Path(os.path.commonpath([str(f.parent) for f in files])) if files else Path(text).parent
        what = f"pattern {text!r}"
    rels = sorted(
        str(f.relative_to(root))
        for f in files
        if not any(part.startswith((".", "_")) for part in f.relative_to(root).parts)
    )
    if not rels:
        raise InputError(
            f"{what} holds no .parquet or .npy files"
            if "directory" in what
            else f"{what} matches no .parquet or .npy files"
        )
    return root, rels


def _not_a_serving_dir(root: Path) -> None:
    """Refuse a serving plan's directory or its tiers (embcompress.serving: plan.json, tiers.json) as a dataset,
    saying what it is and how to use it (its files would otherwise read as mixed shards)."""
    if (root / "tiers.json").is_file():
        raise InputError(
            f"{root} is a serving plan's tiers (tiers.json), not a set of vector files: search it with embcompress "
            f"search {root} QUERIES OUT --plan PLAN_DIR, or read its codes from {root / 'first.parquet'}"
        )
    if (root / "plan.json").is_file():
        raise InputError(
            f"{root} is a serving plan (plan.json), not a set of vector files: write its tiers with embcompress "
            f"apply {root} IN OUT"
        )


class DatasetVectors(Streamed):
    """Several vector files read as one: the interface of :class:`~embcompress.io.ParquetVectors`
    (rows, width, columns, batches), plus ``shards`` and ``rels`` (relative paths)."""

    def __init__(
        self, path: str | os.PathLike, *, column=None, id_column=None, keep_columns: Sequence[str] = (), codes=False
    ):
        self.path = Path(str(path))
        self.root, self.rels = find_shards(path)
        formats = {file_format(r) for r in self.rels}
        if len(formats) > 1:
            raise InputError(f"{path} mixes .parquet and .npy shards; a dataset is one or the other")
        self.shards = []
        for rel in self.rels:
            self.shards.append(
                open_file(self.root / rel, column=column, id_column=id_column, keep_columns=keep_columns, codes=codes)
            )
            self._check_alike(self.shards[0], self.shards[-1], rel)
        first = self.shards[0]
        self.column, self.id_column, self.type, self.dim = first.column, first.id_column, first.type, first.dim
        self.carried_columns = list(first.carried_columns)
        self.schema = first.schema
        self.metadata = first.metadata
        self.nbytes_per_row = first.nbytes_per_row
        self.num_rows = sum(s.num_rows for s in self.shards)
        self.starts = [0]
        for s in self.shards:
            self.starts.append(self.starts[-1] + s.num_rows)

    def _check_alike(self, first, shard, rel: str) -> None:
        if shard is first:
            return
        for name, a, b in (
            ("embedding column", first.column, shard.column),
            ("type", str(first.type), str(shard.type)),
            ("width", first.dim, shard.dim),
            ("id column", first.id_column, shard.id_column),
            ("kept columns", first.carried_columns, shard.carried_columns),
        ):
            if a != b:
                raise InputError(
                    f"shard {self.root / rel} has {name} {b!r} but {self.root / self.rels[0]} has {a!r}; "
                    "every shard of a dataset needs the same columns"
                )
        fa = (first.metadata or {}).get("compressor", {}).get("fingerprint")
        fb = (shard.metadata or {}).get("compressor", {}).get("fingerprint")
        if fa != fb:
            raise InputError(
                f"shard {self.root / rel} holds codes of compressor fingerprint {fb} but "
                f"{self.root / self.rels[0]} of {fa}; codes of different compressors cannot be mixed"
            )

    @property
    def num_row_groups(self) -> int:
        return sum(s.num_row_groups for s in self.shards)

    def units(
        self,
        batch_size: int | None = None,
        *,
        max_rows: int | None = None,
        transform: Transform | None = None,
        result_row_bytes: int | None = None,
    ) -> tuple[list, int]:
        """Every shard's units in order, batches tagged with their shard, one row numbering across
        shards: the row groups of all shards are the units of the parallel reader."""
        units, unit_bytes = [], 0
        for i, shard in enumerate(self.shards):
            if max_rows is not None and self.starts[i] >= max_rows:
                break
            u, b = shard.units(
                batch_size,
                max_rows=None if max_rows is None else max_rows - self.starts[i],
                transform=transform,
                result_row_bytes=result_row_bytes,
                base=self.starts[i],
                shard=i,
            )
            units += u
            unit_bytes = max(unit_bytes, b)
        return units, unit_bytes


def open_vectors(
    path: str | os.PathLike,
    *,
    column: str | None = None,
    id_column: str | None = None,
    keep_columns: Sequence[str] = (),
    codes: bool | None = False,
) -> Streamed:
    """Open a vector file for streaming. ``codes=True`` reads compressed code columns (packed
    bits or int8) instead of float embeddings; ``codes=None`` accepts either."""
    if is_dataset(path):
        return DatasetVectors(path, column=column, id_column=id_column, keep_columns=keep_columns, codes=codes)
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path} does not exist")
    if path.is_dir():
        raise InputError(
            f"{path} is a saved compressor, not vectors; expected a .parquet or .npy file or a dataset directory"
        )
    return open_file(path, column=column, id_column=id_column, keep_columns=keep_columns, codes=codes)


def open_file(path: Path, *, column=None, id_column=None, keep_columns: Sequence[str] = (), codes=False) -> Streamed:
    """One .parquet or .npy file (a dataset's shard, or a file given by name)."""
    if file_format(path) == "npy":
        if column or id_column or keep_columns:
            raise InputError(f"{path} is .npy: it has no named columns (drop --column/--id-column/--keep)")
        return NpyVectors(path, codes=codes)
    return ParquetVectors(path, column=column, id_column=id_column, keep_columns=keep_columns, codes=codes)
