"""The checks every entry point runs on its input: a 2-D float array of finite values within
range (:func:`check_array`, :func:`check_values`), a target width (:func:`check_dim`) and a seed
(:func:`make_rng`). Errors say what is wrong, where, and what is allowed."""

from __future__ import annotations

import os

from typing import Any

import numpy as np

from ._util import check_positive_int
from .errors import InputError

#: Float dtypes accepted as input; everything is computed in float32.
FLOAT_DTYPES = (np.float16, np.float32, np.float64)


def check_array(X: Any, *, what: str = "X", row_offset: int = 0, finite: bool = True) -> np.ndarray:
    """Return ``X`` as a C-contiguous 2-D float32 array of finite values, or raise InputError.

    The error names the first bad row (counting from ``row_offset``) and what is allowed.
    ``finite=False`` skips the NaN/inf test, for callers that test each chunk themselves.
    """
    if isinstance(X, np.ndarray):
        arr = X
    elif hasattr(X, "toarray") and hasattr(X, "nnz"):  # a scipy sparse matrix or array
        raise InputError(f"{what} is sparse; sparse input is not supported, give a dense 2-D float array")
    else:
        try:
            arr = np.asarray(X)
        except ValueError as exc:  # ragged nested lists
            raise InputError(f"{what} is not a rectangular array ({exc}); give a 2-D float array") from None
    if arr.dtype == object:
        raise InputError(f"{what} has dtype object (ragged rows or mixed types); give a 2-D float array")
    if arr.ndim != 2:
        raise InputError(
            f"{what} must be 2-D (rows x dims), got {arr.ndim}-D with shape {arr.shape}. "
            "Reshape your data with x.reshape(1, -1) for a single vector"
        )
    if arr.dtype.kind == "c":
        raise InputError(f"{what} has dtype {arr.dtype}. Complex data not supported; give real float embeddings")
    if arr.dtype.type not in FLOAT_DTYPES:
        raise InputError(f"{what} has dtype {arr.dtype}; only float16, float32 and float64 embeddings are accepted")
    if arr.shape[1] == 0:
        raise InputError(
            f"{what} has 0 feature(s) (shape=({arr.shape[0]}, 0)) while a minimum of 1 is required: "
            "embeddings need at least 1 dimension"
        )
    if finite and arr.dtype == np.float64:  # before the cast, where 1e300 is still 1e300, not inf
        check_values(arr, what=what, row_offset=row_offset)
    arr = np.ascontiguousarray(arr, dtype=np.float32)
    if finite:
        check_values(arr, what=what, row_offset=row_offset)
    return arr


#: largest magnitude accepted in an embedding: squares, norms, dot products and covariance sums
#: of such values stay far inside float32 (larger finite values, such as 1e38, would overflow to
#: inf in the first product and turn every score and component into 0 or NaN)
MAX_ABS = 1e15


def values_ok(arr: np.ndarray) -> bool:
    """True when every value is finite and at most :data:`MAX_ABS` in magnitude. One pass: the
    sum of squares is finite and at most MAX_ABS**2 exactly when that holds for the common case;
    otherwise the exact test decides."""
    flat = arr.reshape(-1)
    with np.errstate(over="ignore", invalid="ignore"):
        total = np.dot(flat, flat)
    if np.isfinite(total) and total <= MAX_ABS * MAX_ABS:
        return True
    return bool(np.isfinite(arr).all() and (arr.size == 0 or np.abs(arr).max() <= MAX_ABS))


class NonFiniteChunk(Exception):
    """Raised inside a fused transform loop; the caller reports the row (see Compressor.transform)."""


def check_values(arr: np.ndarray, *, what: str = "X", row_offset: int = 0) -> None:
    """Raise InputError naming the first row that holds NaN, +-inf or a value beyond
    +-:data:`MAX_ABS` (checked in the input's own dtype, so float64 values beyond the float32
    range are named as such, not as inf)."""
    if values_ok(arr):
        return
    with np.errstate(invalid="ignore"):
        bad = ~np.isfinite(arr) | (np.abs(arr) > MAX_ABS)
    bad_rows = np.flatnonzero(bad.any(axis=1))
    row = int(bad_rows[0])
    col = int(np.flatnonzero(bad[row])[0])
    value = arr[row, col]
    where = f"{what} row {row + row_offset}"
    tail = f"{len(bad_rows)} row(s) in this batch are affected"
    if np.isfinite(value):
        raise InputError(
            f"{where} has the value {float(value):.6g} at dimension {col}, beyond the accepted range of "
            f"+-{MAX_ABS:.0e} (embcompress computes in float32; scale the embeddings down); {tail}"
        )
    raise InputError(
        f"{where} has a non-finite value ({value} at dimension {col}); {tail}; embeddings must be finite (no NaN or "
        "inf)"
    )


def check_matrix_fits(rows: int, cols: int, what: str) -> None:
    """Refuse a (rows, cols) float64 working matrix larger than half of this machine's memory, before it is
    allocated: a fit on a file of absurd width is one clear error, not a MemoryError deep inside numpy."""
    need = 8 * int(rows) * int(cols)
    try:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, OSError, ValueError):  # not POSIX: assume a large machine
        ram = 1 << 40
    if need > ram // 2:
        raise InputError(
            f"{what} needs a {rows} x {cols} matrix ({need / 2**30:.1f} GiB), more than half of this "
            f"machine's {ram / 2**30:.0f} GiB; the input is {cols} dimensions wide, reduce it first "
            "(for example truncate or random projection) or use a family without a square state"
        )


def check_dim(name: str, value: Any, n_features: int, *, allow_equal: bool = True) -> int:
    """Validate a target width against the input width."""
    value = check_positive_int(name, value)
    top = n_features if allow_equal else n_features - 1
    if not 1 <= value <= top:
        raise InputError(
            f"{name}={value} is out of range: the input has {n_features} dimensions ({n_features} feature(s)), allowed "
            f"is 1..{top}"
        )
    return value


def make_rng(seed: Any) -> np.random.Generator:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise InputError(f"seed must be an integer, got {seed!r}")
    return np.random.default_rng(int(seed))
