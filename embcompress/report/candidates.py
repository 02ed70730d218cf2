"""Which code configurations fit a byte budget: the candidates that ``recommend`` evaluates and
the code families the report's grid shows at 16x, 32x, 64x and 128x. Every candidate is
searched with the codes and the fitted model alone (no original vectors).

The policy is recommend's, one :class:`BudgetPolicy` per family offered (:func:`offer`): which of
the family's configurations fit a budget, which variants another outclasses, whether the report's
grid shows the family by default, and the extra it needs."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Callable, Sequence

from .. import compressors
from ..core.registry import get, registered
from ..search.fastscan import MAX_BOOKS

RATIOS = (16, 32, 64, 128)

#: (dim, budget, full) -> (label, evaluate configuration) of a family's codes within the budget
Offered = Callable[[int, int, bool], list[tuple[str, str]]]


def _none_outclassed(configs: Sequence[str]) -> set[str]:
    return set()


@dataclass(frozen=True)
class BudgetPolicy:
    """How ``recommend`` and the report offer a family's codes for a byte budget."""

    configs: Offered  # headline first; with ``full`` false only the headline ones
    #: those of the offered configs that a sibling beat on quality on every set measured and that can
    #: only win on cost (fit time, encoding rate): left out when no cost limit is set
    outclassed: Callable[[Sequence[str]], set[str]] = _none_outclassed
    in_grid: bool = True  # shown in the report's grid by default (False: slow to fit, or outclassed)
    requires: str | None = None  # the module of the extra the family needs ("faiss")

    def installed(self) -> bool:
        if self.requires is None:
            return True
        try:
            return importlib.util.find_spec(self.requires) is not None
        except (ImportError, ValueError):
            return False


_POLICIES: dict[type, BudgetPolicy] = {}


def offer(family: type, policy: BudgetPolicy) -> None:
    """Offer a registered family's codes for byte budgets, as ``policy`` says."""
    _POLICIES[family] = policy


def pca_prefix(width: int, dim: int) -> str:
    """``"pca:W+"`` in front of a code that quantizes ``width`` of ``dim`` dimensions, else ``""``."""
    return "" if width >= dim else f"pca:{width}+"


def _binary(dim: int, budget: int, full: bool) -> list[tuple[str, str]]:
    """Sign bits of centred, randomly rotated vectors (after PCA when the budget is below ``dim``
    bits; PCA centres already), or ITQ-rotated, scored asymmetrically with the fitted 1-bit levels."""
    w = min(8 * budget, dim)
    if w < 8:
        return []
    p = pca_prefix(w, dim)
    rot = "rotate" if p else "rotate:center=true"
    out = [(f"{p}{rot}+binary, asym", f"{p}{rot}+binary@asym")]
    if full:
        out.append((f"{p}itq+binary, asym", f"{p}itq+binary@asym"))
        if not p:
            out.append(("binary, asym", "binary@asym"))
    return out


def _sq(dim: int, budget: int, full: bool) -> list[tuple[str, str]]:
    """Full width at the most bits that fit (after a centred random rotation, which evens out the
    variance over the dimensions, and without), or PCA then 4 or 2 bits; the report's grid shows PCA
    with 2 bits (4 where 2 would keep every dimension), which kept more than 4 at 32x and 64x on
    every set and model measured (docs/decisions/0004)."""
    bits, out = 8 * budget, []
    for b in (4, 2, 1):
        if b * dim <= bits:
            specs = [f"rotate:center=true+sq:{b}", f"sq:{b}"] if b == 1 else [f"sq:{b}", f"rotate:center=true+sq:{b}"]
            out += [(sp, sp) for sp in (specs if full else specs[:1])]
            break
    pca = [(f"pca:{bits // b}+sq:{b}",) * 2 for b in (2, 4) if 8 <= bits // b < dim]
    return out + (pca[::-1] if full else pca[:1])


def _slices(name: str, fast: bool = False) -> Offered:
    def configs(dim: int, budget: int, full: bool) -> list[tuple[str, str]]:
        """One byte per slice, as many slices as fit and divide ``dim``; with ``fast`` and ``full`` also
        half a byte per slice (16 centroids each), which search scans with 8-bit tables in registers
        (``search.fastscan``): several times faster per row, so a serving plan can rescore more
        candidates in the same time. The half-byte code fills the budget: ``2 x budget`` slices (at
        most MAX_BOOKS), after PCA to the widest multiple of that count where it does not divide
        ``dim`` (256 dimensions at 48 B: PCA to 192, 96 slices of 2, not 64 slices in 32 B)."""
        m = max((m for m in range(1, min(dim, budget) + 1) if dim % m == 0), default=None)
        out = [] if m is None else [(f"{name}:{m}", f"{name}:{m}")]
        half = min(2 * budget, MAX_BOOKS, dim - dim % 2)
        if fast and full and half >= 2 and half > (m or 0):
            width = dim - dim % half
            p = pca_prefix(width, dim)
            out.append((f"{p}{name}:{half}, 4-bit", f"{p}{name}:{half}:nbits=4"))
        return out

    return configs


def _rabitq(dim: int, budget: int, full: bool) -> list[tuple[str, str]]:
    """1, 2 or 4 bits per dimension plus the float32 factor, after PCA to the width that fits."""
    out = []
    for b in (1, 2, 4) if full else (1,):
        w = min(dim, (8 * (budget - compressors.rabitq.FACTOR_BYTES) // b) // 8 * 8)
        if w >= 8:
            config = f"{pca_prefix(w, dim)}rabitq:{b}"
            out.append((config, config))
    return out


def _rq(dim: int, budget: int, full: bool) -> list[tuple[str, str]]:
    """One byte per codebook; with a beam of 4 it keeps less on the rows it was fitted on and more on
    new ones (docs/reference/results.md): recommend's cross-fit decides between them."""
    out = [(f"rq:{budget}", f"rq:{budget}")]
    return out + [(f"rq:{budget}:beam=4", f"rq:{budget}:beam=4")] if full else out


def _rq_outclassed(configs: Sequence[str]) -> set[str]:
    """``rq:M`` beside ``rq:M:beam=4``: the beam kept 0.39-4.16 points more on new documents on each
    of 5 sets (2 models; docs/decisions/0005); without a beam it only fits and encodes faster."""
    return {c.removesuffix(":beam=4") for c in configs if c.endswith(":beam=4")} & set(configs)


offer(compressors.Binary, BudgetPolicy(_binary))
offer(compressors.SQ, BudgetPolicy(_sq))
offer(compressors.PQ, BudgetPolicy(_slices("pq"), in_grid=False, requires="faiss"))  # the grid shows opq: it keeps more
offer(compressors.OPQ, BudgetPolicy(_slices("opq", fast=True), requires="faiss"))
offer(compressors.RaBitQ, BudgetPolicy(_rabitq))
offer(compressors.RQ, BudgetPolicy(_rq, _rq_outclassed, in_grid=False, requires="faiss"))  # slow to fit: --codes rq


def code_families() -> list[type]:
    """The registered families offered for a byte budget, in the order they are registered."""
    return [cls for cls in registered() if cls in _POLICIES]


def grid_families() -> tuple[str, ...]:
    """The families the report's grid shows by default (quick to fit)."""
    return tuple(cls.name for cls in code_families() if _POLICIES[cls].in_grid)


def available_families(families) -> list[str]:
    """``families`` without those whose extra is not installed (pq, opq and rq need faiss)."""
    return [f for f in families if _POLICIES[get(f)].installed()]


@dataclass(frozen=True)
class Candidate:
    label: str  # shown in tables and plots
    family: str  # the registered name of a code family: binary, sq, pq, opq, rq, rabitq...
    config: str  # an evaluate configuration: SPEC or SPEC@asym


def candidates(
    dim: int, budget: int, *, families: tuple[str, ...] | None = None, full: bool = True, by_quality: bool = False
) -> list[Candidate]:
    """Code configurations of at most ``budget`` bytes per vector for ``dim``-wide embeddings, as
    each family's policy offers them. With ``full`` every variant (for ``recommend``); otherwise one
    headline configuration per family (for the report's grid). With ``by_quality`` (the pick is by
    quality alone) without the variants a sibling outclasses. ``families`` None: every family whose
    extra is installed."""
    out = []
    for cls in code_families():
        policy = _POLICIES[cls]
        if cls.name in families if families is not None else policy.installed():
            offered = policy.configs(dim, int(budget), full)
            drop = policy.outclassed([c for _, c in offered]) if by_quality else set()
            out += [Candidate(label, cls.name, config) for label, config in offered if config not in drop]
    return out


def grid_budgets(dim: int) -> list[tuple[int, int]]:
    """(ratio, bytes per vector) of the report's code grid: float32 size / 16, 32, 64, 128."""
    return [(r, 4 * dim // r) for r in RATIOS if 4 * dim // r >= 2]
