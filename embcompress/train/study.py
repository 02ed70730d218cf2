"""The temperature study (Dinu et al., 2025, Tables 1 and 2 in one run): train one model per loss
configuration and measure, on a held-out retrieval set, full-size nDCG@10, the intrinsic
dimensionality, and the retention under truncation to 1/4 and 1/2 of the width, binarization, and
binarization with the float-query rerank of the top 100; :func:`study_svg` plots the intrinsic
dimensionality and the retentions against tau."""

from __future__ import annotations

import json
import os
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import math

from ..core._fs import atomic_file, check_output_dir
from ..analysis import intrinsic_dimensionality
from ..io.datasets import Beir, load_beir
from ..embedding.embed import encode, load_model
from ..evaluation.evaluate import evaluate
from .data import Pair, read_pairs
from .config import LossConfig, TrainConfig
from .trainer import train


def evaluate_model(
    model, corpus: Mapping[str, str], queries: Mapping[str, str], qrels, *, batch_size: int = 64
) -> dict[str, Any]:
    """Full nDCG@10, intrinsic dimensionality and retention figures of one model."""
    doc_ids, q_ids = list(corpus), [q for q in queries if q in qrels]
    D = encode(model, [corpus[d] for d in doc_ids], batch_size=batch_size)
    Q = encode(model, [queries[q] for q in q_ids], batch_size=batch_size)
    dim = D.shape[1]
    res = evaluate(
        D,
        Q,
        doc_ids=doc_ids,
        query_ids=q_ids,
        qrels=qrels,
        configs=["float", f"truncate:{dim // 4}", f"truncate:{dim // 2}", "binary", "binary@asym"],
    )
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


def temperature_study(
    pairs: Sequence[Pair],
    evaluation: Beir,
    losses: Sequence[LossConfig],
    base: TrainConfig,
    out_dir: str | Path,
    *,
    include_base: bool = True,
    progress: Callable[[str], None] | None = None,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Train one model per entry of ``losses`` (each from ``base.model``) and evaluate each on the held-out
    ``evaluation`` set (its corpus, queries and qrels)."""
    corpus, queries, qrels = evaluation.corpus, evaluation.queries, evaluation.qrels
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
        rows.append(
            {
                "model": label,
                **evaluate_model(model, corpus, queries, qrels),
                "train_seconds": time.perf_counter() - t0,
                "pairs_per_second": summary["pairs_per_second"],
                "first_loss": summary["first_loss"],
                "last_loss": summary["last_loss"],
                "path": summary["output"],
            }
        )
    return {
        "rows": rows,
        "steps": base.steps,
        "batch_size": base.batch_size,
        "documents": len(corpus),
        "queries": sum(1 for q in queries if q in qrels),
    }


def count_leaks(pairs: Sequence[Pair], queries: Mapping[str, str]) -> int:
    """Evaluation queries that are also training anchors (the study is then not held out)."""
    anchors = {p.anchor for p in pairs}
    return sum(1 for q in queries.values() if q in anchors)


def study_files(
    data: str | os.PathLike,
    eval_dir: str | os.PathLike,
    out_dir: str | os.PathLike,
    *,
    losses: Sequence[LossConfig],
    base: TrainConfig,
    overwrite: bool = False,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """The temperature study on files: training pairs from ``data``, a held-out BEIR set in
    ``eval_dir``; trained models and ``study.json`` go to ``out_dir``. Warns when evaluation
    queries leak into the training anchors."""
    check_output_dir(out_dir, overwrite=overwrite)
    base.validate()
    pairs = read_pairs(data)
    ev = load_beir(eval_dir)
    leaked = count_leaks(pairs, ev.queries)
    if leaked:
        warnings.warn(
            f"{leaked} evaluation queries also appear as training anchors; the study is not held out", stacklevel=2
        )
    res = temperature_study(pairs, ev, losses, base, out_dir, overwrite=overwrite, progress=progress)
    res["leaked_queries"] = leaked
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with atomic_file(out / "study.json", overwrite=True) as tmp:
        tmp.write_text(json.dumps(res, indent=2, default=str))
    with atomic_file(out / "study.svg", overwrite=True) as tmp:
        tmp.write_text(study_svg(res))
    return res


def _tau_of(label: str) -> float | None:
    return float(label.split("tau=")[1].split()[0]) if label.startswith("InfoNCE tau=") else None


def _series(keys, taus, others, dash: dict, x, y, span: tuple[float, float]) -> list[str]:
    """SVG of each key's InfoNCE points joined by a line, and a horizontal line per other model
    across ``span`` (x from, x to)."""
    out = []
    for k, color, _ in keys:
        pts = [(x(t), y(r[k])) for t, r in taus if r.get(k) is not None]
        if pts:
            out.append(
                f'<polyline fill="none" stroke="{color}" stroke-width="2" points="'
                + " ".join(f"{a:.1f},{b:.1f}" for a, b in pts)
                + '"/>'
            )
            out.extend(f'<circle cx="{a:.1f}" cy="{b:.1f}" r="3" fill="{color}"/>' for a, b in pts)
        for r in others:
            if r.get(k) is not None:
                out.append(
                    f'<line x1="{span[0]}" x2="{span[1]}" y1="{y(r[k]):.1f}" y2="{y(r[k]):.1f}" stroke="{color}" '
                    f'stroke-dasharray="{dash[r["model"]]}" opacity="0.8"><title>{r["model"]}</title></line>'
                )
    return out


def _key_legend(keys, left: float, at: float) -> list[str]:
    """SVG of a legend line per key (its colour and label) from ``left``, at height ``at``."""
    out, lx = [], left
    for _, color, label in keys:
        out.append(
            f'<line x1="{lx}" x2="{lx + 16}" y1="{at}" y2="{at}" stroke="{color}" stroke-width="2"/>'
            f'<text x="{lx + 20}" y="{at + 4}" fill="{color}">{label}</text>'
        )
        lx += 30 + 6 * len(label)
    return out


def _panels(rows: list[Mapping[str, Any]]) -> list[tuple[str, str, list[tuple[str, str, str]]]]:
    """The study plot's panels: (kind, title, the (key, colour, label) of each series)."""
    widths = sorted(int(k.rsplit("_", 1)[1]) for k in rows[-1] if k.startswith("retention_trunc_"))
    truncated = [(f"retention_trunc_{widths[0]}", "#1f77b4", f"1/4 width ({widths[0]} dims)")] if widths else []
    return [
        ("ndcg@10", "full nDCG@10", [("ndcg@10", "#333", "nDCG@10")]),
        ("intrinsic_dim", "intrinsic dimensionality (PCA, 95% variance)", [("intrinsic_dim", "#333", "ID")]),
        (
            "retention",
            "nDCG@10 retention",
            [
                *truncated,
                ("retention_binary", "#d62728", "binary"),
                ("retention_binary_rerank", "#2ca02c", "binary + rerank"),
            ],
        ),
    ]


def study_svg(res: Mapping[str, Any]) -> str:
    """Three panels against tau (log scale): full nDCG@10, the intrinsic dimensionality, and the
    retention under truncation to 1/4 width, binarization and binarization + rerank. InfoNCE models
    are points joined by lines; the base model (dotted) and TempAgg-like rows (dashed) are
    horizontal lines."""
    rows = list(res["rows"])
    panels = _panels(rows)
    taus = [(t, r) for r in rows if (t := _tau_of(r["model"])) is not None]
    others = [r for r in rows if _tau_of(r["model"]) is None]
    dash = {r["model"]: ("1 3" if r["model"].startswith("base") else "6 3") for r in others}
    W, H, left, right, top, bottom = 380, 300, 56, 16, 30, 44
    lo, hi = (math.log10(min(t for t, _ in taus)), math.log10(max(t for t, _ in taus))) if taus else (-2, 0)
    if hi - lo < 1e-9:
        lo, hi = lo - 0.5, hi + 0.5

    def x(t: float) -> float:
        return left + (math.log10(t) - lo) / (hi - lo) * (W - left - right)

    legend = "; ".join(f"{'dotted' if dash[r['model']] == '1 3' else 'dashed'}: {r['model']}" for r in others)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{3 * W}" height="{H + 60}" font-family="sans-serif" '
        'font-size="11">',
        '<rect width="100%" height="100%" fill="white"/>',
        f'<text x="8" y="16" font-size="13">temperature study: {res.get("steps", "?")} steps x batch '
        f"{res.get('batch_size', '?')}, "
        f"{res.get('queries', '?')} held-out queries. Lines: InfoNCE at each tau; {legend}</text>",
    ]
    for panel, (name, title, keys) in enumerate(panels):
        ox = panel * W
        vals = [r[k] for r in rows for k, _, _ in keys if r.get(k) is not None]
        vmin, vmax = min(vals), max(vals)
        pad = (vmax - vmin) * 0.1 or abs(vmax) * 0.01 or 1.0
        vmin, vmax = vmin - pad, vmax + pad

        def y(v: float) -> float:
            return top + 20 + (vmax - v) / (vmax - vmin) * (H - top - bottom)

        parts.append(f'<g transform="translate({ox},0)"><text x="{left}" y="{top + 10}" font-size="12">{title}</text>')
        parts.append(
            f'<line x1="{left}" y1="{H - bottom + 20}" x2="{W - right}" y2="{H - bottom + 20}" stroke="#999"/>'
        )
        parts.append(f'<line x1="{left}" y1="{top + 20}" x2="{left}" y2="{H - bottom + 20}" stroke="#999"/>')
        for frac in (0, 0.5, 1):
            v = vmin + pad + frac * (vmax - vmin - 2 * pad)
            label = f"{v:.0f}" if name == "intrinsic_dim" else f"{v:.3f}" if name == "ndcg@10" else f"{100 * v:.1f}%"
            parts.append(f'<text x="{left - 4}" y="{y(v) + 4:.1f}" text-anchor="end">{label}</text>')
        for t, _ in taus:
            parts.append(f'<text x="{x(t):.1f}" y="{H - bottom + 34}" text-anchor="middle">{t:g}</text>')
        parts.append(f'<text x="{(left + W - right) / 2}" y="{H + 12}" text-anchor="middle">tau (log scale)</text>')
        parts += _series(keys, taus, others, dash, x, y, (left, W - right))
        if len(keys) > 1:
            parts += _key_legend(keys, left, H + 36)
        parts.append("</g>")
    parts.append("</svg>")
    return "\n".join(parts)
