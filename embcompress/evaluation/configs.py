"""Configurations: a compressor spec and the search mode it is scored with (``SPEC``, ``SPEC@asym``,
``SPEC@float``, ``SPEC@int8x4``, ...), read from their text; the standard grid of the ``evaluate`` command."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..core.errors import InputError
from ..core.registry import from_spec
from ..search import DEFAULT_MULTIPLIER

_CONFIG = re.compile(
    r"^(?:(?P<structure>hnsw)/)?(?P<spec>[^@]+?)"
    r"(?:@(?P<rerank>asym|asymmetric|float|float32|float16|f16|int8r|int8)(?:x(?P<mult>\d+))?)?$"
)
#: the rescoring copy each float-rerank word reads (``SPEC@int8x10``: the top 10k rescored from an int8 copy;
#: ``int8r``: from the int8 residual of SPEC's code, serving.residual)
_COPY_WORDS = {
    "float": "float32",
    "float32": "float32",
    "float16": "float16",
    "f16": "float16",
    "int8": "int8",
    "int8r": "int8r",
}


@dataclass(frozen=True)
class Config:
    label: str
    spec: str | None  # None: float reference
    rerank: str | None = None
    multiplier: int = DEFAULT_MULTIPLIER
    copy: str = "float32"  # with rerank "float": the copy it rescores from (float32, float16, int8 or int8r)
    structure: str = "exact"  # the first stage: the exact scan, or ("hnsw/SPEC...") an HNSW graph over the codes


FLOAT = Config("float", None)


def parse_config(text: str | Config) -> Config:
    if isinstance(text, Config):
        return text
    text = text.strip()
    if text in ("float", "float32"):
        return FLOAT
    m = _CONFIG.match(text)
    if not m:
        raise InputError(
            f"cannot read configuration {text!r}; use float, SPEC, SPEC@asym, SPEC@float, SPEC@f16, "
            "SPEC@int8, SPEC@int8r (the int8 residual of SPEC's code), each optionally with xM "
            "(e.g. binary@int8x4: the top 4k rescored from an int8 copy), "
            "and hnsw/ before SPEC to search the codes through an HNSW graph (hnsw/binary@int8x4)"
        )
    word = m.group("rerank")
    rerank = None if word is None else "asymmetric" if word.startswith("asym") else "float"
    mult = int(m.group("mult")) if m.group("mult") else DEFAULT_MULTIPLIER
    if mult < 1:
        raise InputError(f"multiplier must be at least 1 in {text!r}")
    from_spec(m.group("spec"))  # validates the spec early
    return Config(
        text, m.group("spec"), rerank, mult, _COPY_WORDS.get(word, "float32"), m.group("structure") or "exact"
    )


def trainable(spec: str | None, rows: int) -> bool:
    """Whether the compressor of ``spec`` (None: float) can be fitted on ``rows`` rows."""
    return spec is None or from_spec(spec).traits.fit.min_rows <= rows


def default_configs(dim: int, rows: int = 2) -> tuple[list[str], list[str]]:
    """The standard grid for ``dim``-wide inputs and ``rows`` documents, and what of it was left
    out because it cannot apply (a width below 1, a PCA fitted on fewer than 2 rows)."""
    grid = {
        "float": True,
        "binary": True,
        "binary@asym": True,
        "binary@float": True,
        "int8": True,
        "int8@float": True,
        f"truncate:{dim // 2}": dim // 2 >= 1,
        f"pca:{dim // 4}": dim // 4 >= 1 and rows >= 2,
        f"pca:{dim // 2}+binary": dim // 2 >= 1 and rows >= 2,
    }
    return [c for c, ok in grid.items() if ok], [c for c, ok in grid.items() if not ok]
