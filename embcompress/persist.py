"""Saving and loading compressors without pickle.

A saved compressor is a directory with ``config.json`` (format name and version, library version,
registry name, parameters, fitted scalars, declared output) and ``arrays.npz`` (fitted arrays,
read back with ``allow_pickle=False``, so a model from a stranger cannot run code).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from . import __version__
from .base import Compressor
from .errors import FormatError, InputError, OutputExistsError
from .registry import get

FORMAT_NAME = "embcompress.compressor"
FORMAT_VERSION = 1
SUPPORTED_FORMAT_VERSIONS = (1,)


def _jsonable(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Compressor):
        return {"name": value.name, "params": _jsonable(value.get_params())}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    return value


def to_config(comp: Compressor) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The JSON-able description of a compressor, and its fitted arrays."""
    comp._check_fitted()
    scalars, arrays = comp._get_state()
    config = {
        "name": comp.name,
        "params": _jsonable(comp.get_params()),
        "fitted": _jsonable(scalars),
        "output": comp.output_spec.to_dict(),
    }
    return config, arrays


def describe(comp: Compressor) -> dict[str, Any]:
    """Config plus a fingerprint of the fitted state: two files whose compressors have different
    fingerprints hold codes that must not be compared with each other."""
    config, arrays = to_config(comp)
    h = hashlib.sha256(json.dumps(config, sort_keys=True).encode())
    for key in sorted(arrays):
        arr = np.ascontiguousarray(arrays[key])
        h.update(key.encode())
        h.update(str(arr.dtype).encode())
        h.update(str(arr.shape).encode())
        h.update(arr.tobytes())
    return {**config, "fingerprint": h.hexdigest()[:16]}


def from_config(config: dict[str, Any], arrays: dict[str, np.ndarray]) -> Compressor:
    cls = get(config.get("name", "<missing>"))
    try:
        comp = cls.from_params(config.get("params", {}))
        comp._set_state(config.get("fitted", {}), arrays)
    except (KeyError, TypeError) as exc:
        raise FormatError(f"saved {cls.name} compressor is incomplete or inconsistent: {exc}") from None
    return comp


def check_model_path(path: str | os.PathLike, *, overwrite: bool = False) -> Path:
    """Fail early if a compressor cannot be saved at ``path``."""
    path = Path(path)
    if path.exists() and not overwrite:
        raise OutputExistsError(f"{path} already exists; pass overwrite=True (CLI: --overwrite) to replace it")
    if path.exists() and not path.is_dir():
        raise InputError(f"{path} is a file; a compressor is saved as a directory")
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not os.access(parent, os.W_OK):
        raise InputError(f"cannot save to {path}: {parent} is not writable")
    return path


def save(comp: Compressor, path: str | os.PathLike, *, overwrite: bool = False) -> Path:
    """Write ``comp`` to the directory ``path`` (created; written to a temporary name first)."""
    path = check_model_path(path, overwrite=overwrite)
    config, arrays = to_config(comp)
    doc = {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "library_version": __version__,
        **config,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.tmp-", dir=path.parent))
    try:
        (tmp / "config.json").write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
        np.savez(tmp / "arrays.npz", **{k: np.asarray(v) for k, v in arrays.items()})
        if path.exists():
            shutil.rmtree(path) if path.is_dir() else path.unlink()
        os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return path


def is_model_dir(path: str | os.PathLike) -> bool:
    return (Path(path) / "config.json").is_file()


def load(path: str | os.PathLike) -> Compressor:
    """Load a compressor saved with :func:`save`."""
    path = Path(path)
    cfg_file = path / "config.json"
    if not cfg_file.is_file():
        raise FormatError(f"{path} is not a saved compressor (no config.json in it)")
    try:
        doc = json.loads(cfg_file.read_text())
    except (OSError, ValueError) as exc:
        raise FormatError(f"{cfg_file} is not valid JSON: {exc}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT_NAME:
        raise FormatError(f"{cfg_file} is not an embcompress compressor config (format field is {doc.get('format') if isinstance(doc, dict) else None!r})")
    version = doc.get("format_version")
    if version not in SUPPORTED_FORMAT_VERSIONS:
        raise FormatError(
            f"{path} has format version {version!r}; this embcompress ({__version__}) reads versions "
            f"{', '.join(map(str, SUPPORTED_FORMAT_VERSIONS))}"
        )
    arrays: dict[str, np.ndarray] = {}
    npz_file = path / "arrays.npz"
    if npz_file.exists():
        try:
            with np.load(npz_file, allow_pickle=False) as npz:
                arrays = {k: npz[k] for k in npz.files}
        except (OSError, ValueError) as exc:
            raise FormatError(f"{npz_file} cannot be read without pickle or is corrupt: {exc}") from None
    return from_config(doc, arrays)
