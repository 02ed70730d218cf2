"""Small helpers shared by every layer: argument checks, row normalization, seeded row samples
and the torch device choice. This module imports nothing from embcompress but the errors, so any module may use it."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from typing import Any

import numpy as np

from .errors import InputError, MissingDependency


def check_positive_int(name: str, value: Any, *, minimum: int = 1, allow_none: bool = False) -> int | None:
    """``value`` as an int >= ``minimum``, or InputError quoting it (booleans are refused)."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        what = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        raise InputError(f"{name} must be {what}{' or None' if allow_none else ''}, got {value!r}")
    return int(value)


def normalize_rows(X: np.ndarray, *, copy: bool = True, dtype=np.float32) -> np.ndarray:
    """Rows scaled to unit L2 length, as ``dtype`` (a copy unless ``copy=False`` and ``X`` is
    already a writable array of that dtype); all-zero rows stay zero, never NaN."""
    if copy or not (isinstance(X, np.ndarray) and X.dtype == dtype and X.flags.writeable):
        X = np.array(X, dtype=dtype, copy=True)
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    np.divide(X, norms, out=X, where=norms > 0)
    return X


def sample_rows(n: int, size: int | None, seed: int) -> np.ndarray:
    """Sorted row numbers of a seeded sample of ``size`` of ``n`` rows without repetition (all
    ``n`` when ``size`` is None or not smaller)."""
    if size is None or n <= size:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, size=size, replace=False))


#: OpenMP's settings read when faiss's OpenMP runtime loads; a user's own setting is kept
_OMP_WAIT = {"OMP_WAIT_POLICY": "PASSIVE"}


def _import_faiss():
    """Import faiss with its OpenMP threads waiting passively (asleep, not spinning) between
    parallel regions, unless the user set ``OMP_WAIT_POLICY`` or ``GOMP_SPINCOUNT``. Spinning
    threads take the cores from whatever else runs: an ``rq:24`` fit on 16,000 rows took 108-113 s
    beside another job and 40-43 s with passive waits (docs/decisions/0006). faiss's wheel brings its own OpenMP
    runtime, which reads the setting once, when it
    loads; the variable is set for that import only and then restored, so programs this process
    starts, and other OpenMP runtimes, see the environment as it was."""
    import importlib

    if "faiss" in sys.modules or any(k in os.environ for k in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")):
        return importlib.import_module("faiss")
    saved = {k: os.environ.get(k) for k in _OMP_WAIT}
    os.environ.update(_OMP_WAIT)
    try:
        return importlib.import_module("faiss")
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


#: faiss's k-means assigns points with its own distance loop below ``distance_compute_blas_threshold``
#: (128,000 in faiss 1.15, compared with rows x dimensions) and with BLAS above it. For product
#: quantization's small sub-spaces the loop is about ten times slower: 256 centroids in 8 dimensions
#: took 0.34 s on 12,000 points and 0.03 s on 16,000, and an ``opq:48`` fit on 10,000 rows 84 s
#: against 19 s on 16,000 (docs/decisions/0006). Our fits use BLAS from
#: this many rows x dimensions on.
FAISS_BLAS_FROM = 20
_faiss_blas_lock = threading.Lock()
_faiss_blas_depth = [0, None]  # trainings under way, the threshold found before the first


@contextlib.contextmanager
def faiss_blas_distances(faiss):
    """faiss's distances by BLAS (:data:`FAISS_BLAS_FROM`) for the trainings inside; the process's
    previous threshold is restored when the last one ends (faiss holds it in one global)."""
    with _faiss_blas_lock:
        if _faiss_blas_depth[0] == 0:
            _faiss_blas_depth[1] = faiss.cvar.distance_compute_blas_threshold
            faiss.cvar.distance_compute_blas_threshold = FAISS_BLAS_FROM
        _faiss_blas_depth[0] += 1
    try:
        yield
    finally:
        with _faiss_blas_lock:
            _faiss_blas_depth[0] -= 1
            if _faiss_blas_depth[0] == 0:
                faiss.cvar.distance_compute_blas_threshold = _faiss_blas_depth[1]


def require(module: str, extra: str, what: str):
    """Import an optional dependency, or raise InputError naming the extra that installs it."""
    import importlib

    try:
        return _import_faiss() if module == "faiss" else importlib.import_module(module)
    except ImportError:
        raise MissingDependency(
            f"{what} needs {module.split('.')[0]}, which is not installed; "
            f'install it with: pip install "embcompress[{extra}]"'
        ) from None


def pick_device(device: str | None) -> str:
    """The torch device to use: ``None``/"auto" picks CUDA when present, else the CPU; asking for
    CUDA on a machine without it is an InputError. Imports torch (only call it where torch is needed)."""
    torch = require("torch", "learned", "choosing a torch device")

    if device in (None, "auto"):
        return "cuda" if torch.cuda.is_available() else "cpu"
    if not isinstance(device, str):
        raise InputError(f"device must be a string such as 'cpu' or 'cuda', got {device!r}")
    try:
        kind = torch.device(device).type
    except (RuntimeError, ValueError):
        raise InputError(
            f"device {device!r} is not a torch device; use 'cpu', 'cuda', 'cuda:N', 'mps' or leave it unset"
        ) from None
    if kind == "cuda" and not torch.cuda.is_available():
        raise InputError(f"device {device!r} was asked for but CUDA is not available; use 'cpu' or leave it unset")
    if kind == "mps" and not (hasattr(torch.backends, "mps") and torch.backends.mps.is_available()):
        raise InputError(f"device {device!r} was asked for but MPS is not available; use 'cpu' or leave it unset")
    return device
