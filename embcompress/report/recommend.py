"""``recommend``: the best code for a byte budget, chosen on a sample of the user's own vectors
and then fitted on all of them, ready for ``apply``."""

from __future__ import annotations

import os
import warnings
from typing import Any, Callable, Sequence

import numpy as np

from .._util import sample_rows
from ..errors import InputError
from ..evaluate import parse_config, run_configs, trainable
from ..persist import check_model_path, save
from ..registry import from_spec
from ..stream import fit_file
from .candidates import candidates
from .grid import load_task_files, validate


def rank_candidates(docs: np.ndarray, budget: int, *, doc_ids=None, queries=None, query_ids=None, qrels=None,
                    labels=None, target: float | None = None, configs: Sequence[str] | None = None,
                    unseen: float = 0.5, progress: Callable[[str, int, int], None] | None = None) -> dict[str, Any]:
    """Evaluate every candidate of at most ``budget`` bytes per vector on ``docs`` (a sample) with
    the task the data allows (qrels, labels or label-free). Returns the rows ranked by retention
    (ties: fewer bytes first) and the winner: the best, or with ``target`` the smallest candidate
    that reaches it (the best when none does).

    The candidates are fitted on a seeded share ``1 - unseen`` of the sample and then encode all
    of it, so that a share ``unseen`` of the scored documents was not seen by the fit, as most rows
    of a file larger than the fit sample are not. Codes with many parameters (``rq``) score higher
    on the rows they were fitted on than on new ones; ``unseen=0`` fits on the whole sample."""
    if isinstance(budget, bool) or not isinstance(budget, (int, np.integer)) or budget < 1:
        raise InputError(f"budget must be a positive number of bytes per vector, got {budget!r}")
    if target is not None and not 0 < target <= 1:
        raise InputError(f"target must be a retention in (0, 1], e.g. 0.98, got {target!r}")
    if isinstance(unseen, bool) or not isinstance(unseen, (int, float)) or not 0 <= unseen < 1:
        raise InputError(f"unseen must be a share in [0, 1), e.g. 0.5, got {unseen!r}")
    setup = validate(docs, doc_ids=doc_ids, queries=queries, query_ids=query_ids, qrels=qrels, labels=labels)
    dim = setup.docs.shape[1]
    n_fit = max(1, round(len(setup.docs) * (1 - unseen)))
    fit_on = setup.docs[sample_rows(len(setup.docs), n_fit, 0)] if n_fit < len(setup.docs) else None
    cands = {c.config: c.label for c in candidates(dim, int(budget))} if configs is None else {c: c for c in configs}
    if not cands:
        raise InputError(f"no code fits in {budget} bytes per vector for {dim}-dimensional embeddings; the smallest "
                         "candidates need a few bytes (e.g. 8 bits of itq+binary)")
    if labels is not None:  # kNN accuracy scores decoded vectors; the asymmetric suffix has no meaning there
        cands = {k.replace("@asym", ""): v for k, v in cands.items()}
    if configs is None:  # the standard candidates: leave out what the sample is too small to train
        too_small = [v for k, v in cands.items() if not trainable(parse_config(k).spec, n_fit)]
        cands = {k: v for k, v in cands.items() if v not in too_small}
        if too_small:
            warnings.warn(f"left out, as {n_fit} document(s) are too few to train them: {', '.join(too_small)}")
        if not cands:
            raise InputError(f"no code within {budget} bytes per vector can be trained on {n_fit} document(s)")
    rows = run_configs(setup.docs, setup.task, ["float", *cands], doc_ids=setup.doc_ids, fit_on=fit_on, progress=progress)
    ref, found = rows[0], rows[1:]
    for r in found:
        r["label"] = cands[r["config"]]
    over = [r for r in found if r["bytes_per_vector"] > budget]
    if over:  # candidates() sizes them to the budget; a mismatch is a bug, not user error
        raise AssertionError(f"candidates over budget: {[r['config'] for r in over]}")
    ranked = sorted(found, key=lambda r: (-r["retention"], r["bytes_per_vector"], r["config"]))
    winner = ranked[0]
    if target is not None:
        reaching = [r for r in ranked if r["retention"] >= target]
        if reaching:
            winner = min(reaching, key=lambda r: (r["bytes_per_vector"], -r["retention"]))
    return {"budget_bytes": int(budget), "target": target, "metric": setup.task.metric, "mode": setup.task.mode,
            "sample": len(setup.docs), "fit_rows": n_fit, "float_score": ref["score"], "ranking": ranked, "winner": winner,
            "target_reached": None if target is None else winner["retention"] >= target}


def recommend_files(input: str | os.PathLike, model_dir: str | os.PathLike, budget: int, *, target: float | None = None,
                    queries: str | os.PathLike | None = None, qrels: str | os.PathLike | None = None,
                    labels: str | None = None, sample: int = 20_000, column: str | None = None,
                    overwrite: bool = False, progress: Callable[[str, int, int], None] | None = None,
                    fit_progress: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Rank the candidates on the first ``sample`` vectors of ``input`` (with queries and qrels,
    or a label column, when given), fit the winner on the whole file (streaming) and save it to
    ``model_dir``."""
    check_model_path(model_dir, overwrite=overwrite)
    data = load_task_files(input, queries=queries, qrels=qrels, labels=labels, sample=sample, column=column)
    res = rank_candidates(data.pop("docs"), budget, **data, target=target, progress=progress)
    spec = res["winner"]["spec"]
    comp = fit_file(from_spec(spec), input, column=column, progress=fit_progress)
    save(comp, model_dir, overwrite=overwrite)
    res.update({"model_dir": str(model_dir), "spec": spec, "search": "asymmetric" if res["winner"]["rerank"] else "codes"})
    return res
