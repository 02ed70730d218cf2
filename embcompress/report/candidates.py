"""Which code configurations fit a byte budget: the candidates that ``recommend`` evaluates and
the code families the report's grid shows at 16x, 32x, 64x and 128x. Every candidate is
searched with the codes and the fitted model alone (no original vectors)."""

from __future__ import annotations

from dataclasses import dataclass

from .. import compressors  # noqa: F401  (registers every family)
from ..core.capabilities import code_families, grid_families  # noqa: F401  (re-exported)
from ..core.registry import get

RATIOS = (16, 32, 64, 128)


def available_families(families) -> list[str]:
    """``families`` without those whose extra is not installed (pq, opq and rq need faiss)."""
    return [f for f in families if get(f).installed()]


@dataclass(frozen=True)
class Candidate:
    label: str  # shown in tables and plots
    family: str  # the registered name of a code family: binary, sq, pq, opq, rq, rabitq...
    config: str  # an evaluate configuration: SPEC or SPEC@asym


def candidates(dim: int, budget: int, *, families: tuple[str, ...] | None = None, full: bool = True,
               by_quality: bool = False) -> list[Candidate]:
    """Code configurations of at most ``budget`` bytes per vector for ``dim``-wide embeddings,
    as each family offers them (``budget_configs``). With ``full`` every variant (for
    ``recommend``); otherwise one headline configuration per family (for the report's grid).
    With ``by_quality`` (the pick is by quality alone) without the variants a sibling outclasses
    (``outclassed``). ``families`` None: every family whose extra is installed."""
    out = []
    for cls in code_families():
        if cls.name in families if families is not None else cls.installed():
            offered = cls.budget_configs(dim, int(budget), full=full)
            drop = cls.outclassed([c for _, c in offered]) if by_quality else set()
            out += [Candidate(label, cls.name, config) for label, config in offered if config not in drop]
    return out


def grid_budgets(dim: int) -> list[tuple[int, int]]:
    """(ratio, bytes per vector) of the report's code grid: float32 size / 16, 32, 64, 128."""
    return [(r, 4 * dim // r) for r in RATIOS if 4 * dim // r >= 2]
