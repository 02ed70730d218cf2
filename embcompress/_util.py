"""Small helpers shared by every layer: argument checks, row normalization, seeded row samples
and the torch device choice. This module imports nothing from embcompress but the errors, so any module may use it."""

from __future__ import annotations

from typing import Any

import numpy as np

from .errors import InputError


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


def require(module: str, extra: str, what: str):
    """Import an optional dependency, or raise InputError naming the extra that installs it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise InputError(f"{what} needs {module.split('.')[0]}, which is not installed; "
                         f"install it with: pip install \"embcompress[{extra}]\"") from None


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
        raise InputError(f"device {device!r} is not a torch device; use 'cpu', 'cuda', 'cuda:N', 'mps' or leave it unset") from None
    if kind == "cuda" and not torch.cuda.is_available():
        raise InputError(f"device {device!r} was asked for but CUDA is not available; use 'cpu' or leave it unset")
    if kind == "mps" and not (hasattr(torch.backends, "mps") and torch.backends.mps.is_available()):
        raise InputError(f"device {device!r} was asked for but MPS is not available; use 'cpu' or leave it unset")
    return device
