"""The temperature study (Dinu et al., 2025, Tables 1 and 2 in one run): train one model per loss
configuration and measure, on a held-out retrieval set, full-size nDCG@10, the intrinsic
dimensionality, and the retention under truncation to 1/4 and 1/2 of the width, binarization, and
binarization with the float-query rerank of the top 100."""

from __future__ import annotations

import json
import os
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from .._fs import atomic_file, check_output_dir
from ..analysis import intrinsic_dimensionality
from ..datasets import load_beir
from ..embed import encode, load_model
from ..evaluate import evaluate
from .data import Pair, read_pairs
from .trainer import LossConfig, TrainConfig, train


def evaluate_model(model, corpus: Mapping[str, str], queries: Mapping[str, str], qrels, *, batch_size: int = 64) -> dict[str, Any]:
    """Full nDCG@10, intrinsic dimensionality and retention figures of one model."""
    doc_ids, q_ids = list(corpus), [q for q in queries if q in qrels]
    D = encode(model, [corpus[d] for d in doc_ids], batch_size=batch_size)
    Q = encode(model, [queries[q] for q in q_ids], batch_size=batch_size)
    dim = D.shape[1]
    res = evaluate(D, Q, doc_ids=doc_ids, query_ids=q_ids, qrels=qrels,
                   configs=["float", f"truncate:{dim // 4}", f"truncate:{dim // 2}", "binary", "binary@asym"])
    r = {row["config"]: row for row in res["rows"]}
    return {
        "ndcg@10": r["float"]["ndcg@10"],
        "intrinsic_dim": intrinsic_dimensionality(D).components,
        f"retention_trunc_{dim // 4}": r[f"truncate:{dim // 4}"]["retention"],
        f"retention_trunc_{dim // 2}": r[f"truncate:{dim // 2}"]["retention"],
        "retention_binary": r["binary"]["retention"],
        "retention_binary_rerank": r["binary@asym"]["retention"],
        "ndcg@10_binary": r["binary"]["ndcg@10"],
    }


def temperature_study(pairs: Sequence[Pair], corpus: Mapping[str, str], queries: Mapping[str, str], qrels,
                      losses: Sequence[LossConfig], base: TrainConfig, out_dir: str | Path, *,
                      include_base: bool = True, progress: Callable[[str], None] | None = None,
                      overwrite: bool = False) -> dict[str, Any]:
    """Train one model per entry of ``losses`` (each from ``base.model``) and evaluate each."""
    out = Path(out_dir)
    rows = []
    if include_base:
        if progress:
            progress("evaluating the base model")
        rows.append({"model": "base (no training)", **evaluate_model(load_model(base.model), corpus, queries, qrels)})
    for i, loss in enumerate(losses):
        cfg = TrainConfig(**{**base.__dict__, "loss": loss})
        label = loss.label()
        if progress:
            progress(f"training {label}")
        t0 = time.perf_counter()
        summary = train(pairs, out / f"model_{i}", cfg, overwrite=overwrite)
        if progress:
            progress(f"evaluating {label}")
        model = load_model(summary["output"])
        rows.append({"model": label, **evaluate_model(model, corpus, queries, qrels),
                     "train_seconds": time.perf_counter() - t0, "pairs_per_second": summary["pairs_per_second"],
                     "first_loss": summary["first_loss"], "last_loss": summary["last_loss"], "path": summary["output"]})
    return {"rows": rows, "steps": base.steps, "batch_size": base.batch_size, "documents": len(corpus),
            "queries": sum(1 for q in queries if q in qrels)}


def count_leaks(pairs: Sequence[Pair], queries: Mapping[str, str]) -> int:
    """Evaluation queries that are also training anchors (the study is then not held out)."""
    anchors = {p.anchor for p in pairs}
    return sum(1 for q in queries.values() if q in anchors)


def study_files(data: str | os.PathLike, eval_dir: str | os.PathLike, out_dir: str | os.PathLike, *,
                losses: Sequence[LossConfig], base: TrainConfig, overwrite: bool = False,
                progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """The temperature study on files: training pairs from ``data``, a held-out BEIR set in
    ``eval_dir``; trained models and ``study.json`` go to ``out_dir``. Warns when evaluation
    queries leak into the training anchors."""
    check_output_dir(out_dir, overwrite=overwrite)
    base.validate()
    pairs = read_pairs(data)
    ev = load_beir(eval_dir)
    leaked = count_leaks(pairs, ev.queries)
    if leaked:
        warnings.warn(f"{leaked} evaluation queries also appear as training anchors; the study is not held out", stacklevel=2)
    res = temperature_study(pairs, ev.corpus, ev.queries, ev.qrels, losses, base, out_dir, overwrite=overwrite,
                            progress=progress)
    res["leaked_queries"] = leaked
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with atomic_file(out / "study.json", overwrite=True) as tmp:
        tmp.write_text(json.dumps(res, indent=2, default=str))
    return res
