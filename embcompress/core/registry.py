"""Name -> compressor class registry, and the ``"pca:128+binary"`` spec language."""

from __future__ import annotations

import inspect
import json
from typing import TYPE_CHECKING, Any

from .errors import InputError

if TYPE_CHECKING:  # the registry sits below base: it maps names to classes and builds specs by name only
    from .base import Compressor

_REGISTRY: dict[str, type["Compressor"]] = {}


def register(cls: type["Compressor"]) -> type["Compressor"]:
    """Class decorator: make ``cls`` loadable under ``cls.name``."""
    if not cls.name:
        raise TypeError(f"{cls.__name__} has no name")
    if cls.name in _REGISTRY and _REGISTRY[cls.name] is not cls:
        raise TypeError(f"compressor name {cls.name!r} is registered twice")
    _REGISTRY[cls.name] = cls
    return cls


def available() -> list[str]:
    """Names of all registered compressors, sorted."""
    return sorted(_REGISTRY)


def registered() -> list[type["Compressor"]]:
    """The registered classes, in the order they were registered."""
    return list(_REGISTRY.values())


def param_names(cls: type) -> list[str]:
    """A compressor class's constructor parameters, in order."""
    return [p for p in inspect.signature(cls.__init__).parameters if p != "self"]


def get(name: str) -> type["Compressor"]:
    try:
        return _REGISTRY[name]
    except (KeyError, TypeError):
        raise InputError(f"unknown compressor {name!r}; known: {', '.join(available())}") from None


def _parse_value(text: str) -> Any:
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("none", "null"):
        return None
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    try:
        return json.loads(text)
    except ValueError:
        return text


def _parse_stage(text: str) -> "Compressor":
    """``name[:value][:key=value[,key=value...]]`` -> compressor instance."""
    parts = text.strip().split(":")
    name = parts[0].strip()
    if not name:
        raise InputError(f"empty compressor name in spec {text!r}")
    cls = get(name)
    kwargs: dict[str, Any] = {}
    for part in parts[1:]:
        for item in filter(None, (p.strip() for p in part.split(","))):
            if "=" in item:
                key, value = item.split("=", 1)
                kwargs[key.strip()] = _parse_value(value.strip())
            else:
                kwargs.update(cls.positional(_parse_value(item)))
    allowed = param_names(cls)
    unknown = sorted(set(kwargs) - set(allowed))
    if unknown:
        raise InputError(
            f"{name} does not take {', '.join(unknown)}; its parameters are: {', '.join(allowed) or 'none'}"
        )
    comp = cls(**kwargs)
    comp._check_params()
    return comp


def from_spec(spec: str) -> "Compressor":
    """Build an unfitted compressor from a spec string.

    Stages are joined with ``+``; each is ``name``, ``name:value`` (the compressor's main
    parameter, e.g. the width) and optionally ``:key=value,...``. Examples: ``binary``,
    ``truncate:256:renormalize=true``, ``pca:0.95`` (keep 95% of the variance), ``pca:128+binary``.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise InputError(f"empty compressor spec; known compressors: {', '.join(available())}")
    stages = [_parse_stage(s) for s in spec.split("+")]
    if len(stages) == 1:
        return stages[0]
    return get("pipeline")(stages=stages)
