"""Request objects for functions with many options: a frozen dataclass holds the options of a call, and
the function takes it, or builds it from keyword arguments, so that ``f(x, folds=1)`` and
``f(x, options=Options(folds=1))`` are the same call (:func:`from_keywords`)."""

from __future__ import annotations

from dataclasses import fields
from typing import Any, Mapping, TypeVar

T = TypeVar("T")


def from_keywords(where: str, given: Mapping[str, Any], *classes: type, values: tuple = ()) -> tuple:
    """One instance of each dataclass of ``classes``, built from the keyword arguments ``given`` that
    name its fields (each name belongs to one class), or the instance passed in ``values`` at its place
    (then no keyword may name that class's fields). A name no class has is a TypeError that lists the
    ones ``where`` takes, as Python's own error for an unexpected keyword would."""
    values = values or (None,) * len(classes)
    names = [{f.name for f in fields(cls)} for cls in classes]
    unknown = sorted(set(given) - set().union(*names))
    if unknown:
        allowed = ", ".join(sorted(set().union(*names)))
        raise TypeError(f"{where}() got unexpected keyword argument(s) {', '.join(unknown)}; it takes: {allowed}")
    out = []
    for cls, own, value in zip(classes, names, values):
        mine = {k: v for k, v in given.items() if k in own}
        if value is not None and mine:
            raise TypeError(f"{where}() got both {cls.__name__} and its fields {', '.join(sorted(mine))}")
        out.append(value if value is not None else cls(**mine))
    return tuple(out)
