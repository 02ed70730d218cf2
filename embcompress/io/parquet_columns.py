"""Which columns of a parquet file a reader takes: the vectors (named, or the one column of the right
type), the ids and the other columns carried to the output, each checked against the schema with an
error that names the columns there are; and the vectors' width."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from ..core.errors import FormatError, InputError, first_line
from .columns import is_code_type, is_vector_type

DEFAULT_COLUMN_NAMES = ("embedding", "embeddings", "vector", "vectors", "emb")
DEFAULT_ID_NAMES = ("id", "_id", "doc_id", "corpus_id", "query_id")


def _accepted(codes: bool | None) -> tuple[Callable[[pa.DataType], bool], str]:
    """(the test of a column type, what it accepts in words) for float vectors, codes or either (None)."""
    if codes is None:
        return (lambda t: is_vector_type(t) or is_code_type(t)), "float vectors or compressed codes"
    if codes:
        return is_code_type, "a packed-bit (fixed_size_binary) or int8 list column"
    return is_vector_type, "a list or fixed_size_list of float16/float32/float64"


def pick_column(path: Path, schema: pa.Schema, column: str | None, codes: bool | None) -> tuple[str, pa.DataType]:
    """(name, type) of the vector column: ``column``, or the only column of the accepted type (else
    one of :data:`DEFAULT_COLUMN_NAMES` among several)."""
    accept, wanted = _accepted(codes)
    names = schema.names
    if column is None:
        column = _guess_column(path, schema, accept, wanted)
    elif column not in names:
        raise InputError(f"{path} has no column {column!r}; its columns are: {', '.join(names)}")
    t = schema.field(column).type
    if not accept(t):
        hint = ""
        if not codes and is_code_type(t):
            hint = " (this file holds compressed codes, not float embeddings)"
        raise InputError(f"column {column!r} in {path} has type {t}; expected {wanted}{hint}")
    return column, t


def _guess_column(path: Path, schema: pa.Schema, accept, wanted: str) -> str:
    candidates = [f.name for f in schema if accept(f.type)]
    if len(candidates) == 1:
        return candidates[0]
    if not candidates:
        cols = ", ".join(f"{f.name} ({f.type})" for f in schema)
        raise InputError(f"{path} has no column of {wanted}; its columns are: {cols}")
    for name in DEFAULT_COLUMN_NAMES:
        if name in candidates:
            return name
    raise InputError(f"{path} has several embedding columns ({', '.join(candidates)}); pick one with --column")


def pick_carried(
    path: Path, names: Sequence[str], column: str, id_column: str | bool | None, keep_columns: Sequence[str]
) -> tuple[str | None, list[str]]:
    """(the id column or None, the columns carried beside the vectors: the ids first, then ``keep_columns``).
    Without ``id_column``, the first of :data:`DEFAULT_ID_NAMES` there is; ``False``: none (ids kept elsewhere)."""
    if id_column is False:
        id_column = None
    elif id_column is None:
        id_column = next((n for n in DEFAULT_ID_NAMES if n in names and n != column), None)
    elif id_column not in names:
        raise InputError(f"{path} has no id column {id_column!r}; its columns are: {', '.join(names)}")
    if id_column is not None and id_column == column:
        raise InputError(
            f"the id column cannot be the embedding column {column!r} of {path}; "
            f"pick another with --id-column (columns: {', '.join(names)})"
        )
    if column in keep_columns:
        raise InputError(
            f"--keep {column!r} names the embedding column of {path}, which becomes the codes; keep other columns only"
        )
    missing = [c for c in keep_columns if c not in names]
    if missing:
        raise InputError(
            f"{path} has no column(s) {', '.join(map(repr, missing))}; its columns are: {', '.join(names)}"
        )
    carried = [id_column] if id_column else []
    carried += [c for c in keep_columns if c not in carried and c != column]
    return id_column, carried


def vector_width(pf: pq.ParquetFile, path: Path, column: str, t: pa.DataType) -> int:
    """The width of the vectors (bytes of a packed code): from the type, or from the first row of a
    variable-length list column; an error for width 0 when the file has rows."""
    dim = _first_width(pf, path, column, t)
    if dim == 0 and pf.metadata.num_rows:
        raise InputError(f"{path}: column {column!r} holds vectors of width 0; embeddings need at least 1 dimension")
    return dim


def _first_width(pf: pq.ParquetFile, path: Path, column: str, t: pa.DataType) -> int:
    if pa.types.is_fixed_size_binary(t):
        return t.byte_width
    if pa.types.is_fixed_size_list(t):
        return t.list_size
    if pf.metadata.num_rows == 0:
        return 0
    try:
        first = next(pf.iter_batches(batch_size=1, columns=[column]))
    except (pa.ArrowException, OSError, StopIteration) as exc:
        raise FormatError(f"{path} is corrupt or truncated in row group 0 near row 0: {first_line(exc)}") from None
    value = first.column(0)[0]
    if not value.is_valid:
        raise InputError(f"column {column!r} row 0 is null; every row needs a vector")
    return len(value)
