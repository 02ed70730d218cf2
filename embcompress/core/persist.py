"""Saving and loading compressors without pickle.

A saved compressor is a directory with ``config.json`` (format name and version, library version,
registry name, parameters, fitted scalars, declared output) and ``arrays.npz`` (fitted arrays,
read back with ``allow_pickle=False``, so a model from a stranger cannot run code).
"""

from __future__ import annotations

import base64
import contextvars
import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ._fs import atomic_dir, check_output_dir
from .._version import __version__
from .errors import EmbcompressError, FormatError, InputError, MissingDependency
from .registry import get, registered

if TYPE_CHECKING:  # the persisted objects are Compressors; persist sits below base and does not import it
    from .base import Compressor

FORMAT_NAME = "embcompress.compressor"
FORMAT_VERSION = 1
SUPPORTED_FORMAT_VERSIONS = (1,)
#: true while a loaded model's arrays are checked by encoding a probe (:func:`_check_arrays`): a compressor
#: may then leave out what only encoding at scale needs and keep nothing it built (RQ's beam tables: 296 MB
#: at 48 codebooks, which a server that only scores codes would otherwise hold)
PROBING = contextvars.ContextVar("embcompress_probing", default=False)


def _jsonable(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, tuple(registered())):  # a nested compressor (a chain's stage)
        return {"name": value.name, "params": _jsonable(value.get_params())}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    return value


def to_config(comp: "Compressor") -> tuple[dict[str, Any], dict[str, np.ndarray]]:
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


def describe(comp: "Compressor") -> dict[str, Any]:
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


def from_config(config: dict[str, Any], arrays: dict[str, np.ndarray], *, where: str = "") -> "Compressor":
    """Rebuild a fitted compressor from its config and arrays, checking both: parameters of the
    right kind, every array real, finite and of the shape the parameters call for, and one row
    through it. ``where`` (the model directory or file) goes into the error."""
    if not isinstance(config, dict):
        raise FormatError(f"{where or 'saved compressor'}: the config is not a JSON object")
    cls = get(config.get("name", "<missing>"))
    what = f"{where}: saved {cls.name} compressor" if where else f"saved {cls.name} compressor"
    params, fitted = config.get("params", {}), config.get("fitted", {})
    if not isinstance(params, dict) or not isinstance(fitted, dict):
        raise FormatError(f"{what} is corrupt: 'params' and 'fitted' must be JSON objects")
    try:
        comp = build(cls.name, params)
        comp._check_params()
        comp._set_state(fitted, arrays)
        check_loaded(comp)
    except MissingDependency as exc:  # the model is fine; this installation cannot run it
        raise MissingDependency(f"{where or 'the saved model'}: {exc}") from None
    except EmbcompressError as exc:
        raise FormatError(f"{what} is inconsistent: {exc}") from None
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
        raise FormatError(f"{what} is incomplete or inconsistent ({type(exc).__name__}: {exc})") from None
    return comp


def build(name: str, params: dict[str, Any]) -> "Compressor":
    """An unfitted compressor of the registered ``name`` from JSON parameters, nested compressors
    (``{"name": ..., "params": ...}``, as :func:`to_config` writes them) rebuilt too; the deep keys
    (``stages__0__dim``) that ``get_params`` adds repeat those and are skipped."""

    def value(v: Any) -> Any:
        if isinstance(v, dict) and isinstance(v.get("name"), str) and set(v) <= {"name", "params"}:
            return build(v["name"], v.get("params") or {})
        if isinstance(v, list):
            return [value(item) for item in v]
        return v

    return get(name)(**{k: value(v) for k, v in params.items() if "__" not in k})  # deep keys repeat the nested


def check_loaded(comp: "Compressor") -> None:
    """Raise InputError when fitted arrays (from a saved model) do not fit the parameters: each
    stage in turn (its input width, then its own arrays), then the whole: wrong dtype (complex,
    text), NaN or inf, or a shape other than the family's ``_state_shapes``; then one row goes
    through ``transform`` (and ``decode``) as a final check."""
    stages = comp.query_space.stages
    if len(stages) > 1:
        width = comp.n_features_in_
        for i, s in enumerate(stages):
            if s.n_features_in_ != width:
                raise InputError(f"stage {i + 1} ({s.name}) takes {s.n_features_in_} dimensions but is given {width}")
            try:
                check_loaded(s)
            except InputError as exc:
                raise InputError(f"stage {i + 1} ({s.name}): {exc}") from None
            width = s.output_spec.width
    _check_arrays(comp)


def _check_arrays(comp: "Compressor") -> None:
    d = comp.n_features_in_
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1:
        raise InputError(f"n_features_in_ must be a positive integer, got {d!r}")
    comp._check_params()
    comp._validate_params(int(d))
    shapes = comp._state_shapes()
    for name in comp._state_arrays:
        arr = comp.__dict__.get(name)
        if arr is None:
            raise InputError(f"fitted array {name!r} is missing")
        a = np.asarray(arr)
        if a.dtype.kind not in "biuf":
            raise InputError(f"fitted array {name!r} has dtype {a.dtype}; expected real numbers")
        if a.dtype.kind == "f" and not np.isfinite(a).all():
            raise InputError(f"fitted array {name!r} holds NaN or inf")
        want = shapes.get(name)
        if want is not None and (a.ndim != len(want) or any(w is not None and w != g for w, g in zip(want, a.shape))):
            shown = "(" + ", ".join("any" if w is None else str(w) for w in want) + ")"
            raise InputError(
                f"fitted array {name!r} has shape {a.shape}; expected {shown} for {comp!r} on {d} input dimensions"
            )
    probe = np.linspace(-1, 1, 2 * d, dtype=np.float32).reshape(2, d)
    probing = PROBING.set(True)
    try:
        out = comp.transform(probe)
        if out.shape != (2, comp.output_spec.row_width):
            raise InputError(
                f"it produces rows of {out.shape[1]} values, but its output is declared as {comp.output_spec.row_width}"
            )
        comp.decode(out)  # every compressor decodes (the identity for float outputs)
    except InputError:
        raise
    except Exception as exc:  # a state that does not fit together fails in numpy or faiss
        raise InputError(f"its fitted arrays do not fit together ({type(exc).__name__}: {exc})") from None
    finally:
        PROBING.reset(probing)


def arrays_to_json(arrays: dict[str, np.ndarray]) -> dict[str, dict[str, Any]]:
    """Fitted arrays as JSON (dtype, shape, base64 of the little-endian bytes): exact, no pickle."""
    out = {}
    for key, arr in arrays.items():
        a = np.ascontiguousarray(arr)
        a = a.astype(a.dtype.newbyteorder("<"), copy=False)
        out[key] = {"dtype": a.dtype.str, "shape": list(a.shape), "base64": base64.b64encode(a.tobytes()).decode()}
    return out


def arrays_from_json(doc: dict[str, Any]) -> dict[str, np.ndarray]:
    """Inverse of :func:`arrays_to_json`; refuses object dtypes."""
    out = {}
    try:
        for key, item in doc.items():
            dt = np.dtype(item["dtype"])
            if dt.hasobject:
                raise FormatError(f"array {key!r} has an object dtype, which is never loaded")
            out[key] = np.frombuffer(base64.b64decode(item["base64"]), dtype=dt).reshape(item["shape"]).copy()
    except (KeyError, TypeError, ValueError) as exc:
        raise FormatError(f"embedded compressor state is corrupt: {exc}") from None
    return out


def codes_file_config(comp: "Compressor") -> dict[str, Any]:
    """What a code file records of the compressor that made it: :func:`describe`, plus the fitted
    arrays when the compressor keeps only per-dimension state (sign bits and their decoding
    levels, int8 ranges, truncation), so that search can rebuild it from the file alone."""
    doc = describe(comp)
    if all(s.traits.state_in_file for s in comp.query_space.stages):
        doc["arrays"] = arrays_to_json(comp._get_state()[1])
    return doc


def check_model_path(path: str | os.PathLike, *, overwrite: bool = False) -> Path:
    """Fail early if a compressor cannot be saved at ``path``."""
    return check_output_dir(path, overwrite=overwrite)


def save(comp: "Compressor", path: str | os.PathLike, *, overwrite: bool = False) -> Path:
    """Write ``comp`` to the directory ``path`` (written to a temporary name first, then renamed)."""
    config, arrays = to_config(comp)
    doc = {"format": FORMAT_NAME, "format_version": FORMAT_VERSION, "library_version": __version__, **config}
    with atomic_dir(path, overwrite=overwrite) as tmp:
        (tmp / "config.json").write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
        np.savez(tmp / "arrays.npz", **{k: np.asarray(v) for k, v in arrays.items()})
    return Path(path)


def is_model_dir(path: str | os.PathLike) -> bool:
    return (Path(path) / "config.json").is_file()


def load(path: str | os.PathLike) -> "Compressor":
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
        raise FormatError(
            f"{cfg_file} is not an embcompress compressor config (format field is "
            f"{doc.get('format') if isinstance(doc, dict) else None!r})"
        )
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
        except Exception as exc:  # a cut or forged zip raises zipfile, EOF, OS and value errors
            raise FormatError(
                f"{npz_file} is corrupt or cannot be read without pickle ({type(exc).__name__}: {exc})"
            ) from None
    return from_config(doc, arrays, where=str(path))
