"""How many candidates a serving plan rescores (decision 0009): each (code, copy) pair is measured at a sweep of
counts, and the rule picks the smallest that reaches the target, or the last before the gain falls within its
uncertainty; a sweep still rising at its end goes on, unless another keeps clearly more at the same count."""

from __future__ import annotations

import functools

import numpy as np

from ..evaluation.configs import parse_config
from ..evaluation.race import paired_difference
from ..evaluation.rows import ResultRow
from ..serving import residual

#: candidates rescored per query, as multiples of k (k = 10: 20 to 500)
MULTIPLIERS = (2, 4, 10, 20, 50)
#: where a sweep is still rising at its end (or short of the target), it goes on with these, one at a time
#: (k = 10: 1,000, 2,000, 5,000 and 10,000), while they stay below the documents measured (decision 0009)
FURTHER_MULTIPLIERS = (100, 200, 500, 1000)
#: the candidate count stops rising where the next step gains less than this many standard errors
GAIN_Z = 2.0


def paired_se(a: np.ndarray, b: np.ndarray, float_score: float) -> float:
    """Standard error of the mean per-query difference ``b - a``, in retention, over the queries both
    score (0 when it cannot be told: under 2 such queries, or no float score)."""
    n, _, se = paired_difference(b, a)
    return 0.0 if n < 2 or float_score <= 0 else se / float_score


def choose_count(sweep: list[ResultRow], float_score: float, target: float | None) -> ResultRow:
    """The row of ``sweep`` (one (code, copy) pair's rows, fewest candidates first) to serve: the first
    that reaches ``target``, or the last before the gain falls within its uncertainty."""
    if target is not None:
        for r in sweep:
            if r.retention >= target:
                return r
    for a, b in zip(sweep, sweep[1:]):
        if b.retention - a.retention <= GAIN_Z * paired_se(a.per_query, b.per_query, float_score):
            return a
    return sweep[-1]


def still_rising(sweep: list[ResultRow], float_score: float, target: float | None) -> bool:
    """Whether ``sweep`` (fewest candidates first) stops at its last count without a reason to: its last step
    still gains more than its uncertainty (:func:`choose_count` keeps the last row) and no count reaches
    ``target``."""
    if target is not None and any(r.retention >= target for r in sweep):
        return False
    return len(sweep) > 1 and choose_count(sweep, float_score, None) is sweep[-1]


def first_stage(cfg: str) -> str:
    """The first stage a configuration searches, as configurations write it: ``SPEC``, or ``hnsw/SPEC`` for the
    codes searched through an HNSW graph."""
    c = parse_config(cfg)
    return c.spec if c.structure == "exact" else f"{c.structure}/{c.spec}"


@functools.lru_cache(maxsize=None)
def copy_applies(stage: str, copy: str) -> bool:
    """Whether ``copy`` can rescore a first stage ``stage`` (:func:`first_stage`): every copy but an int8
    residual one, which needs an exact scan of codes scored by lookup tables (serving.residual)."""
    return copy != residual.KIND or ("/" not in stage and residual.supports(stage))


def sweep_of(by_config: dict[str, ResultRow], stage: str, copy: str) -> list[ResultRow]:
    """The rows measured of (``stage``, ``copy``), fewest candidates first; ``stage``: see :func:`first_stage`."""
    found = (by_config.get(f"{stage}@{copy}x{m}") for m in (*MULTIPLIERS, *FURTHER_MULTIPLIERS))
    return [r for r in found if r is not None]


def behind(sweep: list[ResultRow], others: list[list[ResultRow]], float_score: float) -> bool:
    """Whether another sweep of ``others`` keeps more than ``sweep`` at ``sweep``'s last count (or, where that
    sweep ended sooner, at its own last) by more than :data:`GAIN_Z` standard errors of the paired difference."""
    last = sweep[-1]
    for other in others:
        row = next((r for r in reversed(other) if r.candidates <= last.candidates), None)  # none: empty
        if row is not None and row.retention - last.retention > GAIN_Z * paired_se(
            last.per_query, row.per_query, float_score
        ):
            return True
    return False


def further(cands: dict[str, str], copies: tuple[str, ...], target: float | None, limit: int, graph_bytes: int = 0):
    """run_configs' ``extend``: the next count of every (code, copy) sweep that is still rising at its end, while
    its candidates (k times the multiplier) stay below ``limit`` documents, unless it cannot be the pick: another
    sweep of the same copy (with a target, one in no more RAM: ``graph_bytes`` more for a graph's first stage)
    keeps more at the same count by more than its uncertainty (:func:`behind`)."""

    def extend(rows: list[ResultRow]) -> list[str]:
        by_config = {r.config: r for r in rows[1:]}
        float_score = rows[0].score

        def ram(cfg: str) -> int:
            return by_config[cfg].bytes_per_vector + (graph_bytes if parse_config(cfg).structure == "hnsw" else 0)

        sweeps = {(cfg, copy): sweep_of(by_config, first_stage(cfg), copy) for cfg in cands for copy in copies}
        more = []
        for cfg in cands:
            fits = [c for c in cands if c != cfg and (target is None or ram(c) <= ram(cfg))]  # who could win instead
            for copy in copies:
                sweep = sweeps[cfg, copy]
                if not sweep or not still_rising(sweep, float_score, target):
                    continue
                if behind(sweep, [sweeps[c, copy] for c in fits], float_score):
                    continue
                last = parse_config(sweep[-1].config).multiplier
                nxt = next((m for m in FURTHER_MULTIPLIERS if m > last), None)
                if nxt is not None and sweep[-1].candidates // last * nxt < limit:
                    more.append(f"{first_stage(cfg)}@{copy}x{nxt}")
        return more

    return extend


def sweep_configs(cands: dict[str, str], copies: list[str]) -> list[str]:
    """Each first stage of ``cands`` at every count of the sweep with each copy, most candidates first (one scan
    of the codes then answers the rest: ``run_configs``' ``reuse_first_stage``), then alone, as
    ``recommend --budget`` searches it."""
    out = []
    for cfg in cands:
        stage = first_stage(cfg)
        out += [f"{stage}@{copy}x{m}" for m in reversed(MULTIPLIERS) for copy in copies if copy_applies(stage, copy)]
        out.append(cfg)
    return out
