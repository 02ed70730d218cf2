"""Which code configurations fit a byte budget: the candidates that ``recommend`` evaluates and
the code families the report's grid shows at 16x, 32x, 64x and 128x. Every candidate is
searched with the codes and the fitted model alone (no original vectors)."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

from ..compressors.rabitq import FACTOR_BYTES

RATIOS = (16, 32, 64, 128)
#: families whose compressors need an extra, and the module that extra provides
NEEDS = {"pq": "faiss", "opq": "faiss", "rq": "faiss"}


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def available_families(families) -> list[str]:
    """``families`` without those whose extra is not installed (pq and opq need faiss)."""
    return [f for f in families if f not in NEEDS or _installed(NEEDS[f])]


@dataclass(frozen=True)
class Candidate:
    label: str  # shown in tables and plots
    family: str  # binary, sq, pq, opq, rabitq
    config: str  # an evaluate configuration: SPEC or SPEC@asym


def _prefix(width: int, dim: int) -> str:
    return "" if width >= dim else f"pca:{width}+"


def _largest_divisor(d: int, at_most: int) -> int | None:
    best = [m for m in range(1, min(d, at_most) + 1) if d % m == 0]
    return best[-1] if best else None


def candidates(dim: int, budget: int, *, families: tuple[str, ...] | None = None, full: bool = True) -> list[Candidate]:
    """Code configurations of at most ``budget`` bytes per vector for ``dim``-wide embeddings.
    With ``full`` every variant (for ``recommend``); otherwise one headline configuration per
    family (for the report's grid)."""
    out: list[Candidate] = []
    bits = 8 * budget
    # 1 bit per dimension: sign bits of centred, randomly rotated vectors (after PCA when the
    # budget is below d bits; PCA centres already), or ITQ-rotated, scored asymmetrically with the
    # fitted 1-bit levels
    w = min(bits, dim)
    if w >= 8:
        p = _prefix(w, dim)
        rot = "rotate" if p else "rotate:center=true"
        out.append(Candidate(f"{p}{rot}+binary, asym", "binary", f"{p}{rot}+binary@asym"))
        if full:
            out.append(Candidate(f"{p}itq+binary, asym", "binary", f"{p}itq+binary@asym"))
            if not p:
                out.append(Candidate("binary, asym", "binary", "binary@asym"))
    # few-bit scalar codes: full width at the most bits that fit (after a centred random rotation,
    # which evens out the variance over the dimensions, and without), or PCA then 4 or 2 bits
    # (measured on MiniLM / Debian: the rotation helps at 1 bit, not at 2)
    for b in (4, 2, 1):
        if b * dim <= bits:
            specs = [f"rotate:center=true+sq:{b}", f"sq:{b}"] if b == 1 else [f"sq:{b}", f"rotate:center=true+sq:{b}"]
            out += [Candidate(sp, "sq", sp) for sp in (specs if full else specs[:1])]
            break
    for b in ((4, 2) if full else (4,)):
        w = bits // b
        if 8 <= w < dim:
            out.append(Candidate(f"pca:{w}+sq:{b}", "sq", f"pca:{w}+sq:{b}"))
    # product quantization, one byte per slice
    m = _largest_divisor(dim, budget)
    if m:
        out.append(Candidate(f"opq:{m}", "opq", f"opq:{m}"))
        if full:
            out.append(Candidate(f"pq:{m}", "pq", f"pq:{m}"))
    # residual quantization, one byte per codebook (slow to train: recommend only, or --codes rq);
    # with a beam of 4 it keeps less on the rows it was fitted on and more on new ones
    # (benchmarks/README.md): recommend's fit on part of the sample decides between them
    if full or (families is not None and "rq" in families):
        out.append(Candidate(f"rq:{budget}", "rq", f"rq:{budget}"))
        if full:
            out.append(Candidate(f"rq:{budget}:beam=4", "rq", f"rq:{budget}:beam=4"))
    # RaBitQ: codes plus its float32 factor
    for b in ((1, 2, 4) if full else (1,)):
        w = min(dim, (8 * (budget - FACTOR_BYTES) // b) // 8 * 8)
        if w >= 8:
            out.append(Candidate(f"{_prefix(w, dim)}rabitq:{b}", "rabitq", f"{_prefix(w, dim)}rabitq:{b}"))
    allowed = families if families is not None else available_families({c.family for c in out})  # defaults: installed only
    return [c for c in out if c.family in allowed]


def grid_budgets(dim: int) -> list[tuple[int, int]]:
    """(ratio, bytes per vector) of the report's code grid: float32 size / 16, 32, 64, 128."""
    return [(r, 4 * dim // r) for r in RATIOS if 4 * dim // r >= 2]
