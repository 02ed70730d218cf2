"""Whole vector files and seeded uniform samples of them, in memory."""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from ..core._util import sample_rows
from ..core.requests import from_keywords
from ..core.errors import FormatError
from .sources import open_vectors


def _carried_rows(col: pa.Array, take, path, name: str, offset: int) -> pa.Array:
    """The first ``take`` values of a carried column (or the values at the row numbers ``take``),
    as Arrow values checked in full: text that is not UTF-8 is refused here, by column and rows."""
    out = col.slice(0, take) if isinstance(take, int) else col.take(pa.array(take))
    try:
        out.validate(full=True)
    except pa.ArrowInvalid as exc:
        last = offset + (take if isinstance(take, int) else len(col)) - 1
        raise FormatError(
            f"column {name!r} of {path} holds bytes that are not UTF-8 text in rows {offset}..{last} "
            f"({exc}); the file is corrupt or was written with another encoding"
        ) from None
    return out


@dataclass(frozen=True)
class ReadOptions:
    """What a whole read or a sample takes of a vector file: the vectors' ``column`` (None: the one
    there is), the ``id_column``, a ``label_column`` read beside them, ``codes`` (False: float vectors
    only; True: codes only; None: either), the decoding ``threads`` (None: every core) and whether the ids
    come back as one Arrow column (``arrow_ids``)."""

    column: str | None = None
    id_column: str | None = None
    label_column: str | None = None
    codes: bool | None = False
    threads: int | None = None
    arrow_ids: bool = False


def read_all(
    path: str | os.PathLike,
    *,
    column: str | None = None,
    id_column: str | None = None,
    codes: bool | None = False,
    threads: int | None = None,
    arrow_ids: bool = False,
) -> tuple[np.ndarray, list | pa.ChunkedArray | None]:
    """Load a whole vector file: (vectors or codes, ids or None). For files that fit in memory;
    streaming code uses :func:`open_vectors`. ``arrow_ids`` returns the ids as one Arrow column
    instead of a list: 10 million short string ids take about 120 MB so, against about 0.7 GB as
    Python strings, which is what a search index over a large file holds them as."""
    read = ReadOptions(column=column, id_column=id_column, codes=codes, threads=threads, arrow_ids=arrow_ids)
    X, ids, _ = read_sample(path, options=read)
    return X, ids


def read_sample(
    path: str | os.PathLike, *, limit: int | None = None, seed: int = 0, options: ReadOptions | None = None, **given
) -> tuple[np.ndarray, list | pa.ChunkedArray | None, list | None]:
    """A seeded uniform sample of ``limit`` rows of a vector file, drawn across all of it (every
    row group and shard) and returned in file order; every row when ``limit`` is None or not
    smaller than the file. (vectors, ids or None, labels or None). ``label_column`` names a column
    read beside the vectors (an error names the columns there are when it is missing). The file is
    streamed once; only the sampled rows are kept. :func:`count_rows` says how many rows the
    sample was drawn from. ``arrow_ids``: the ids as an Arrow column (see :func:`read_all`). What is read
    is a :class:`ReadOptions`, given or as its fields' keyword arguments."""
    (o,) = from_keywords("read_sample", given, ReadOptions, values=(options,))
    column, id_column, label_column, codes = o.column, o.id_column, o.label_column, o.codes
    threads, arrow_ids = o.threads, o.arrow_ids
    src = open_vectors(
        path, column=column, id_column=id_column, codes=codes, keep_columns=[label_column] if label_column else ()
    )
    wanted = None if limit is None or src.num_rows <= limit else sample_rows(src.num_rows, limit, seed)
    # the rows go straight into one array of the announced size: gathering the batches and then
    # concatenating them held the data twice (465 MiB more at the peak of a 10M-row search of bits)
    expected = src.num_rows if wanted is None else len(wanted)
    out, filled, extra = None, 0, []  # rows beyond the announced count, if a file holds more
    ids, labels = [], []
    for b in src.batches(threads=threads):
        if wanted is None:
            take = len(b.vectors)
            rows = np.asarray(b.vectors)
        else:
            lo, hi = np.searchsorted(wanted, [b.offset, b.offset + len(b.vectors)])
            if lo == hi:
                continue
            take = wanted[lo:hi] - b.offset
            rows = np.asarray(b.vectors)[take]
        if out is None:
            out = np.empty((expected, *rows.shape[1:]), dtype=rows.dtype)
        if not extra and filled + len(rows) <= len(out):
            out[filled : filled + len(rows)] = rows
            filled += len(rows)
        else:
            extra.append(np.array(rows))
        _carry(b, take, src, label_column, arrow_ids, ids, labels)
    if out is None:
        arr = np.empty((0, src.dim), dtype=np.float32)
    elif extra:
        arr = np.concatenate([out[:filled], *extra])
    else:
        arr = out if filled == len(out) else out[:filled].copy()  # fewer rows than announced
    if src.id_column and arrow_ids:
        ids = pa.chunked_array(ids, type=ids[0].type if ids else pa.string())
    return arr, (ids if src.id_column else None), (labels if label_column else None)


def _carry(b, take, src, label_column: str | None, arrow_ids: bool, ids: list, labels: list) -> None:
    """Append the ids and labels of batch ``b``'s rows ``take`` to ``ids`` and ``labels``."""
    if b.carried is None:
        return

    def rows_of(name: str):
        return _carried_rows(b.carried.column(name), take, src.path, name, b.offset)

    if src.id_column and arrow_ids:
        ids.append(rows_of(src.id_column))
    elif src.id_column:
        ids.extend(rows_of(src.id_column).to_pylist())
    if label_column:
        labels.extend(rows_of(label_column).to_pylist())


def count_rows(path: str | os.PathLike, *, column: str | None = None) -> int:
    """How many rows a vector file or dataset holds (from its metadata; nothing is decoded)."""
    return int(open_vectors(path, column=column).num_rows)
