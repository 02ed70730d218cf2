"""Arrow columns of vectors: which types hold float embeddings or codes, and a column as a 2-D
numpy array with every row checked (no nulls, no ragged rows, finite values)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ..core.checks import check_values
from ..core.errors import InputError

FLOAT_TYPES = (pa.float16(), pa.float32(), pa.float64())


def _is_list(t: pa.DataType) -> bool:
    return pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)


def is_vector_type(t: pa.DataType) -> bool:
    return _is_list(t) and t.value_type in FLOAT_TYPES


def is_code_type(t: pa.DataType) -> bool:
    """Columns written by compressors: packed bits, or int8 lists."""
    return pa.types.is_fixed_size_binary(t) or (_is_list(t) and t.value_type == pa.int8())


#: numpy's dtype for the value types read or written as buffers (:func:`values_view`)
NUMPY_DTYPES = {
    pa.float16(): np.dtype(np.float16),
    pa.float32(): np.dtype(np.float32),
    pa.float64(): np.dtype(np.float64),
    pa.int8(): np.dtype(np.int8),
    pa.uint8(): np.dtype(np.uint8),
    pa.int32(): np.dtype(np.int32),
    pa.int64(): np.dtype(np.int64),
}


def values_view(values: pa.Array) -> np.ndarray:
    """A primitive arrow array without nulls as a numpy view of its buffer. Not ``to_numpy()``,
    which imports pandas when it is installed: 0.4 s of a streaming command, holding the GIL."""
    dtype = NUMPY_DTYPES.get(values.type)
    if dtype is None:
        return values.to_numpy(zero_copy_only=False)
    return np.frombuffer(values.buffers()[1], dtype=dtype, count=len(values), offset=values.offset * dtype.itemsize)


def column_to_numpy(
    arr: pa.Array, dim: int, *, offset: int = 0, column: str = "embedding", finite: bool = True
) -> np.ndarray:
    """A list / fixed_size_list / fixed_size_binary arrow array -> 2-D numpy array (float32 for
    float lists, raw dtype for codes), refusing nulls, ragged rows and (unless ``finite`` is
    False) non-finite values."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if arr.null_count:
        row = int(np.flatnonzero(arr.is_null().to_numpy(zero_copy_only=False))[0]) + offset
        raise InputError(f"column {column!r} row {row} is null; every row needs a vector")
    t = arr.type
    n = len(arr)
    if pa.types.is_fixed_size_binary(t):
        buf = arr.buffers()[1]
        data = np.frombuffer(buf, dtype=np.uint8, count=(arr.offset + n) * t.byte_width)
        return data[arr.offset * t.byte_width :].reshape(n, t.byte_width)
    if not pa.types.is_fixed_size_list(t):
        lengths = np.diff(values_view(arr.offsets))  # the slice's n + 1 offsets
        bad = np.flatnonzero(lengths != dim)
        if len(bad):
            row = int(bad[0])
            raise InputError(
                f"column {column!r} row {row + offset} has {lengths[row]} values, expected {dim} "
                f"(as in row 0); rows of different lengths cannot be compressed together"
            )
    values = arr.flatten()
    if values.null_count:
        pos = int(np.flatnonzero(values.is_null().to_numpy(zero_copy_only=False))[0])
        raise InputError(f"column {column!r} row {pos // dim + offset} has a null value at dimension {pos % dim}")
    flat = values_view(values)
    X = flat.reshape(n, dim)
    if X.dtype.kind == "f":
        if X.dtype == np.float64:  # before the cast (even for a transform): 1e300 is out of range, not inf
            check_values(X, what=f"column {column!r}", row_offset=offset)
        if X.dtype != np.float32:
            X = X.astype(np.float32)
        if finite:
            check_values(X, what=f"column {column!r}", row_offset=offset)
    return X
