"""How sure a ranking of codes is: a bootstrap over the queries of each code's retention, and
whether the leader's lead over a code is significant. ``recommend`` names the candidates within
the leader's uncertainty; the report does the same for the best code of each ratio."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np


#: resamples of the queries for a figure's uncertainty
BOOTSTRAP = 500
#: a candidate ties with the leader when this percentile of the bootstrapped lead over it is <= 0
#: (16: one standard error, one-sided); ties are named beside the winner, not acted on
TIE_PERCENTILE = 16.0


def uncertainty(
    rows: Sequence[Mapping[str, Any]],
    per: Mapping[str, np.ndarray | None],
    ref_score: float,
    leader: str,
    *,
    seed: int = 0,
    tie_percentile: float = TIE_PERCENTILE,
) -> dict[str, dict[str, Any]]:
    """Per row's config, its ``retention_ci95`` (a bootstrap over queries: the 2.5th and 97.5th
    percentiles of its retention when the queries are drawn again with replacement) and
    ``within_uncertainty``: whether the ``leader``'s lead over it is not significant (the
    ``tie_percentile`` of the paired difference, on the same resampled queries, reaches 0). Rows
    whose task has no per-query figures (kNN accuracy), or whose figures are of other queries than
    the leader's (screened out), get None for both. The caller puts them in the rows it builds."""
    none = {"retention_ci95": None, "within_uncertainty": None}
    lead = per.get(leader)
    if lead is None or not ref_score:
        return {r["config"]: dict(none) for r in rows}
    valid = ~np.isnan(lead)
    draws = np.random.default_rng(seed).integers(0, int(valid.sum()), (BOOTSTRAP, int(valid.sum())))
    lead_means = lead[valid][draws].mean(axis=1)
    out = {}
    for r in rows:
        mine = per.get(r["config"])
        if mine is None or len(mine) != len(lead):
            out[r["config"]] = dict(none)
            continue
        means = mine[valid][draws].mean(axis=1)
        lo, hi = np.percentile(means / ref_score, [2.5, 97.5])
        tied = r["config"] == leader or np.percentile(lead_means - means, tie_percentile) <= 0
        out[r["config"]] = {"retention_ci95": [float(lo), float(hi)], "within_uncertainty": bool(tied)}
    return out
