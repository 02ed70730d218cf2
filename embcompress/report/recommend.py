"""``recommend``: the best code for a byte budget, chosen on a sample of the user's own vectors
and then fitted on all of them, ready for ``apply``."""

from __future__ import annotations

import os
import time
import warnings
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..core.errors import InputError
from ..core.requests import from_keywords
from ..evaluation.configs import parse_config, trainable
from ..evaluation.evaluate import IN_SAMPLE_QUERIES, RunOptions, run_configs
from ..evaluation.rows import ResultRow
from ..evaluation.tasks import fewer_queries, reference_for
from ..evaluation.crossfit import check_folds, fold_pool_rows
from ..io import count_rows
from ..core.persist import check_model_path, save
from ..core.registry import from_spec
from ..search.ann import TARGETS, serve_targets
from ..engines.local import fit_file
from .candidates import candidates
from .grid import queries_note, validate
from .task_files import TaskInputs, load_task_files
from .uncertainty import uncertainty


@dataclass(frozen=True)
class RankOptions:
    """How ``recommend`` ranks the candidates of a budget: with ``target`` the smallest candidate that reaches it wins
    (the best when none does); ``configs`` replaces the standard candidates.

    Each candidate is fitted and scored ``folds``-fold (:class:`~embcompress.evaluation.evaluate.CrossFit`): by
    default a model fitted on each half of the sample encodes the other half, so every scored document is new to the
    code that encoded it, as most rows of a file larger than the fit sample are; codes with many parameters (``rq``)
    score higher on the rows they were fitted on, and that in-sample figure is kept beside (``retention_in_sample``,
    on at most :data:`~embcompress.evaluation.evaluate.IN_SAMPLE_QUERIES` queries). ``folds=1`` ranks in-sample.

    Every row carries what the candidate cost: ``fit_seconds`` (one model, on ``fit_rows`` rows) and
    ``encode_rows_per_second``. Candidates slower than ``max_fit_seconds`` or ``min_encode_rate`` stay in the
    ranking, marked ``too_slow``, and cannot win. Without either limit, variants that can win only on cost are not
    ranked (``rq:M`` beside ``rq:M:beam=4``; ``BudgetPolicy.outclassed`` in :mod:`.candidates`).

    Every row carries ``retention_ci95``, a bootstrap over queries. Without judgments (the user's ``queries`` scored
    against float search as the inputs' ``reference`` says, or documents as queries) the result also names the
    candidates within one standard error of the leader (``within_uncertainty``); the leader still wins (the cheapest
    of them lost 2.5-3.4 points of judged nDCG@10 on Debian). With ``serve`` (faiss, usearch or lancedb) only codes
    that target holds can win (``serve_targets``); the others are marked ``not_servable``.

    Without a ``target``, cost limit or ``serve``, a code slow to fit whose first model scores below the leader so
    far, encoding every document (half of them its fit rows) or on the first fold alone, new to both, is stopped
    there, marked ``screened_out`` (:func:`~embcompress.evaluation.race.race_first_model`).

    With ``screen`` (not by default: on Debian at 24 B it cut the full ranking's pick) two rounds: every candidate
    fitted on :data:`SCREEN_SHARE` of the fit rows and scored on at most :data:`SCREEN_QUERIES` queries, then the
    best third (at least :data:`SCREEN_KEEP`) on all; the others keep their first-round figures, marked
    ``screened_out`` (``screen`` says what was cut)."""

    target: float | None = None
    configs: Sequence[str] | None = None
    folds: int = 2
    max_fit_seconds: float | None = None
    min_encode_rate: float | None = None
    serve: str | None = None
    screen: bool = False
    progress: Callable[[str, int, int], None] | None = None

    def check(self, budget) -> None:
        """An InputError for a budget, target, serving target or cost limit out of range."""
        if self.serve is not None and self.serve not in TARGETS:
            raise InputError(f"serve must be one of {', '.join(TARGETS)}, got {self.serve!r}")
        if isinstance(budget, bool) or not isinstance(budget, (int, np.integer)) or budget < 1:
            raise InputError(f"budget must be a positive number of bytes per vector, got {budget!r}")
        if self.target is not None and not 0 < self.target <= 1:
            raise InputError(f"target must be a retention in (0, 1], e.g. 0.98, got {self.target!r}")
        for name in ("max_fit_seconds", "min_encode_rate"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0):
                raise InputError(f"{name} must be a positive number, got {v!r}")

    @property
    def by_quality(self) -> bool:
        """No cost limit: variants that can win only on cost are not ranked."""
        return self.max_fit_seconds is None and self.min_encode_rate is None

    @property
    def race(self) -> bool:
        """Whether codes slow to fit may be stopped after their first model (no target, limit or serving target)."""
        return self.target is None and self.by_quality and self.serve is None


def rank_candidates(
    docs: np.ndarray, budget: int, *, inputs: TaskInputs | None = None, options: RankOptions | None = None, **given: Any
) -> dict[str, Any]:
    """Evaluate every candidate of at most ``budget`` bytes per vector on ``docs`` (a sample) with the task the data
    allows (qrels, labels or label-free). Returns the rows ranked by retention on documents the fit did not see
    (ties: fewer bytes first) and the winner: the best, or with ``target`` the smallest candidate that reaches it
    (the best when none does).

    The keyword arguments are the fields of :class:`TaskInputs` (what scores the documents) and of
    :class:`RankOptions` (how they are ranked), or those two values."""
    inputs, opts = from_keywords("rank_candidates", given, TaskInputs, RankOptions, values=(inputs, options))
    opts.check(budget)
    setup = validate(docs, inputs)
    folds = check_folds(opts.folds, len(setup.docs))
    n_fit = fold_pool_rows(len(setup.docs), folds)
    dim = setup.docs.shape[1]
    cands = _candidates(dim, int(budget), opts.configs, inputs.labels is not None, n_fit, by_quality=opts.by_quality)
    rows, screened = _two_rounds(setup, list(cands), folds, n_fit, opts.screen, opts.progress, opts.race)
    ref, found = rows[0], rows[1:]
    ranked = _rank(found, cands, budget, opts, screened, ref.score)
    winner, tied = choose_winner([r for r in ranked if _can_win(r)], setup.task.mode == "label-free", opts.target)
    return {
        "budget_bytes": int(budget),
        "target": opts.target,
        "metric": setup.task.metric,
        "mode": setup.task.mode,
        "fitted": rows[1].fitted,
        "sample": len(setup.docs),
        "sampled_from": dict(inputs.sampled) if inputs.sampled else None,
        "fit_rows": n_fit,
        "float_score": ref.score,
        "max_fit_seconds": opts.max_fit_seconds,
        "min_encode_rate": opts.min_encode_rate,
        "serve": opts.serve,
        "ranking": ranked,
        "winner": winner,
        "target_reached": None if opts.target is None else winner["retention"] >= opts.target,
        "within_uncertainty": None if tied is None or len(tied) < 2 else [r["config"] for r in tied],
        "queries_note": queries_note(setup.task),
        "screen": screened,
    }


#: the first round of the screen fits each candidate on this share of the fit rows
SCREEN_SHARE = 0.25
#: and scores it on at most this many of the queries (a seeded sample; scoring every query of a
#: large judged sample took most of a round)
SCREEN_QUERIES = 1_000
#: the screen keeps at least this many candidates (and at least a third) for the second round
SCREEN_KEEP = 3
#: below this many first-round fit rows the screen is skipped (too few to tell codes apart)
SCREEN_MIN_ROWS = 2_000


def _two_rounds(setup, cands: list[str], folds: int, n_fit: int, screen: bool, progress, race: bool):
    """(float's row and every candidate's row, what the screen did or None): one round on all fit
    rows, or with ``screen`` a first round on a share of them and a second, on all, for the best
    third. Candidates the first round's rows are too few to train go straight to the second. With
    ``race`` the round on all rows stops slow codes after one model when they cannot lead."""
    small = int(n_fit * SCREEN_SHARE)
    quick = [c for c in cands if trainable(parse_config(c).spec, small)]
    keep = max(SCREEN_KEEP, -(-len(cands) // 3))
    # the round on all fit rows: every query, out-of-sample, the in-sample figure on a sample of the queries
    full = RunOptions(
        doc_ids=setup.doc_ids, folds=folds, progress=progress, per_query=True, race=race, in_sample=IN_SAMPLE_QUERIES
    )
    if not screen or small < SCREEN_MIN_ROWS or len(quick) <= keep:
        return run_configs(setup.docs, setup.task, ["float", *cands], options=full), None
    task = fewer_queries(setup.task, SCREEN_QUERIES)
    first_round = replace(full, fit_rows=small, race=False, in_sample=False)
    first = run_configs(setup.docs, task, ["float", *quick], options=first_round)[1:]
    first.sort(key=lambda r: (-r.retention, r.bytes_per_vector, r.config))
    n_cut = min(len(first), len(cands) - keep)
    # the cut keep their first-round rows; their per-query figures are of other queries than the second
    # round's, so no paired bootstrap with its leader
    cut = [replace(r, per_query=None) for r in first[len(first) - n_cut :]]
    second = [c for c in cands if c not in {r.config for r in cut}]
    rows = run_configs(setup.docs, setup.task, ["float", *second], options=full)
    return rows + cut, {
        "first_round_fit_rows": small,
        "first_round_queries": None if task.queries is None else len(task.queries),
        "first_round": [r.config for r in first],
        "kept": second,
        "cut": [r.config for r in cut],
    }


def _stopped_note(r: ResultRow) -> str:
    """Why run_configs' race stopped a code after its first model (evaluation.race.race_first_model)."""
    race = r.race
    if race["test"] == "first fold":
        return (
            f"stopped after one of its models: on the documents that model had not seen, "
            f"{100 * -race['difference']:.2f} "
            f"points of the score below the leader then over {race['queries']:,} queries (standard error "
            f"{100 * race['standard_error']:.2f})"
        )
    return (
        f"stopped after one of its models ({100 * r.retention:.1f}% with half the documents in its fit, below the "
        "leader then)"
    )


def _rank(
    found: list[ResultRow],
    cands: Mapping[str, str],
    budget: int,
    opts: RankOptions,
    screened: Mapping[str, Any] | None,
    ref_score: float,
) -> list[dict[str, Any]]:
    """recommend's ranking: each result row with its label and marks (too slow, not servable, screened
    out or stopped early) and its uncertainty against the leader among those that may win, ranked by
    retention (ties: fewer bytes first); an InputError when none may win."""
    over = [r.config for r in found if r.bytes_per_vector > budget]
    if over:  # candidates() sizes them to the budget; a mismatch is a bug, not user error
        raise AssertionError(f"candidates over budget: {over}")
    cut = {
        c: f"cut after the first round ({100 * r.retention:.1f}% fitted on {screened['first_round_fit_rows']:,} rows)"
        for r in found
        if screened and (c := r.config) in screened["cut"]
    }
    marked = []
    for r in found:
        label = cands[r.config]
        serves = list(serve_targets(from_spec(r.spec), r.kind))
        marked.append(
            {
                **r.to_dict(),
                "label": label,
                "too_slow": _too_slow(r, opts.max_fit_seconds, opts.min_encode_rate),
                "serves": serves,
                "not_servable": None
                if opts.serve is None or opts.serve in serves
                else f"{opts.serve} cannot hold {label} codes",
                "screened_out": cut.get(r.config) or (_stopped_note(r) if r.stopped_early else None),
            }
        )
    ranked = sorted(
        marked, key=lambda r: (r["screened_out"] is not None, -r["retention"], r["bytes_per_vector"], r["config"])
    )
    eligible = [r for r in ranked if _can_win(r)]
    if not eligible:
        raise InputError(
            f"no candidate within {budget} bytes per vector is fast "
            f"enough{' and servable by ' + opts.serve if opts.serve else ''}: "
            + "; ".join(f"{r['label']}: {r['too_slow'] or r['not_servable']}" for r in ranked)
            + ". Allow more (--max-fit-seconds, --min-encode-rate), another --serve or a larger budget"
        )
    per = {r.config: r.per_query for r in found}
    notes = uncertainty(ranked, per, ref_score, eligible[0]["config"])
    return [{**r, **notes[r["config"]]} for r in ranked]


def _can_win(row: Mapping[str, Any]) -> bool:
    """Whether a ranked row may win: not too slow, servable where asked, not cut by the screen."""
    return row["too_slow"] is None and row["not_servable"] is None and row["screened_out"] is None


def _candidates(
    dim: int, budget: int, configs: Sequence[str] | None, labels: bool, n_fit: int, *, by_quality: bool
) -> dict[str, str]:
    """config -> label of the candidates to rank: the given ``configs``, or the standard ones
    within ``budget`` that ``n_fit`` rows can train; ``by_quality`` (no cost limit): without those
    a sibling variant outclasses (``rq:M`` beside ``rq:M:beam=4``), which could only win on cost."""
    cands = (
        {c.config: c.label for c in candidates(dim, budget, by_quality=by_quality)}
        if configs is None
        else {c: c for c in configs}
    )
    if not cands:
        raise InputError(
            f"no code fits in {budget} bytes per vector for {dim}-dimensional embeddings; the smallest "
            "candidates need a few bytes (e.g. 8 bits of itq+binary)"
        )
    if labels:  # kNN accuracy scores decoded vectors; the asymmetric suffix has no meaning there
        cands = {k.replace("@asym", ""): v for k, v in cands.items()}
    if configs is None:  # the standard candidates: leave out what the sample is too small to train
        too_small = [v for k, v in cands.items() if not trainable(parse_config(k).spec, n_fit)]
        cands = {k: v for k, v in cands.items() if v not in too_small}
        if too_small:
            warnings.warn(f"left out, as {n_fit} document(s) are too few to train them: {', '.join(too_small)}")
        if not cands:
            raise InputError(f"no code within {budget} bytes per vector can be trained on {n_fit} document(s)")
    return cands


def _too_slow(row: ResultRow, max_fit_seconds: float | None, min_encode_rate: float | None) -> str | None:
    slow = []
    if max_fit_seconds is not None and row.fit_seconds > max_fit_seconds:
        slow.append(f"fit {row.fit_seconds:.1f} s > {max_fit_seconds:g} s")
    if min_encode_rate is not None and row.encode_rows_per_second < min_encode_rate:
        slow.append(f"encodes {row.encode_rows_per_second:,.0f} rows/s < {min_encode_rate:,.0f}")
    return "; ".join(slow) or None


def choose_winner(eligible: list[dict[str, Any]], label_free: bool, target: float | None):
    """(the winner, the candidates tied with the leader or None): the best, or with ``target`` the
    smallest candidate that reaches it; without judgments the candidates the leader does not
    significantly beat are returned beside it."""
    winner, tied = eligible[0], None
    if label_free:  # named, not acted on: taking the cheapest of them cost 2.5-3.4 judged points on Debian
        tied = [r for r in eligible if r["within_uncertainty"]]
    if target is not None:
        reaching = [r for r in eligible if r["retention"] >= target]
        if reaching:
            winner = min(reaching, key=lambda r: (r["bytes_per_vector"], -r["retention"]))
    return winner, tied


@dataclass(frozen=True)
class TaskFiles:
    """What a ranking reads beside the documents' file: float ``queries`` (a file) and their ``qrels``, or
    the name of a ``labels`` column; the ``sample`` of documents ranked on (a seeded uniform sample; default
    20,000) and the vectors' ``column``; how queries without judgments are scored against float search
    (``reference``: top1, graded or recall)."""

    queries: str | os.PathLike | None = None
    qrels: str | os.PathLike | None = None
    labels: str | None = None
    sample: int | None = None
    column: str | None = None
    reference: str | None = None  # None: the ranking's default (reference_for)


def recommend_files(
    input: str | os.PathLike,
    model_dir: str | os.PathLike,
    budget: int,
    *,
    overwrite: bool = False,
    fit_progress: Callable[[int], None] | None = None,
    **given: Any,
) -> dict[str, Any]:
    """Rank the candidates on a sample of ``input`` (scored as :class:`TaskFiles` says: queries and qrels, or a
    label column, when given), fit the winner on the whole file (streaming) and save it to ``model_dir``. The
    keyword arguments are the fields of :class:`TaskFiles` and of :class:`RankOptions`."""
    files, opts = from_keywords("recommend_files", given, TaskFiles, RankOptions)
    check_model_path(model_dir, overwrite=overwrite)
    opts.check(budget)  # before the sample is read
    data = load_task_files(
        input, **_keywords(files, ("queries", "qrels", "labels", "sample", "column")), default_sample=20_000
    )
    t0 = time.perf_counter()
    docs = data.pop("docs")
    inputs = TaskInputs(**data, reference=reference_for(files.reference))
    res = rank_candidates(docs, budget, inputs=inputs, options=opts)
    t1 = time.perf_counter()
    spec = res["winner"]["spec"]
    comp = fit_file(from_spec(spec), input, column=files.column, progress=fit_progress)
    save(comp, model_dir, overwrite=overwrite)
    res.update(
        {
            "model_dir": str(model_dir),
            "spec": spec,
            "search": "asymmetric" if res["winner"]["rerank"] else "codes",
            "seconds": {"read_and_rank": round(t1 - t0, 2), "fit_winner": round(time.perf_counter() - t1, 2)},
            "apply_estimate": apply_estimate(res, count_rows(input, column=files.column)),
        }
    )
    return res


def _keywords(value: Any, names: Sequence[str]) -> dict[str, Any]:
    return {n: getattr(value, n) for n in names}


#: a candidate is named as the faster choice when it keeps this many points less at most ...
FASTER_WITHIN_POINTS = 1.0
#: ... and encodes at least this many times as fast as the winner
FASTER_FACTOR = 3.0


def apply_estimate(res: Mapping[str, Any], rows: int) -> dict[str, Any]:
    """What applying the winner to the whole input costs at the encoding rate measured in the
    ranking (this machine, its threads): ``rows``, ``seconds``, and the ``faster`` eligible
    candidate, if one keeps at most :data:`FASTER_WITHIN_POINTS` points less and encodes at least
    :data:`FASTER_FACTOR` times as fast (the fastest such), with its retention and seconds; None
    otherwise. At 10 million rows the 48 B pick (``rq:48:beam=4``) took an hour to apply."""
    w = res["winner"]
    ok = [
        r
        for r in res["ranking"]
        if r["config"] != w["config"]
        and _can_win(r)
        and r["retention"] >= w["retention"] - FASTER_WITHIN_POINTS / 100
        and r["encode_rows_per_second"] >= FASTER_FACTOR * w["encode_rows_per_second"]
    ]
    fast = max(ok, key=lambda r: r["encode_rows_per_second"], default=None)
    return {
        "rows": int(rows),
        "seconds": rows / w["encode_rows_per_second"],
        "faster": None
        if fast is None
        else {
            "config": fast["config"],
            "label": fast["label"],
            "retention": fast["retention"],
            "seconds": rows / fast["encode_rows_per_second"],
        },
    }
