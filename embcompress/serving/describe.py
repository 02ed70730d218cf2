"""What a serving plan's directory or its tiers hold, for ``embcompress info``: the plan in one line, what it
keeps in RAM and on disk per vector, what recommend measured; the tiers' rows, their files and sizes, and the
plan they belong to."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .plan import is_plan_dir, load_plan
from .tiers import TIERS_FILE, tiers_json

#: what recommend measured that ``info`` shows, in this order
SHOWN = ("retention", "metric", "fitted", "latency_ms", "batch_ms", "total_rows")


def describe_serving(path: str | os.PathLike) -> dict[str, Any] | None:
    """A plan directory (``plan.json``) or a tiers directory (``tiers.json``) described; None for anything else."""
    p = Path(path)
    if is_plan_dir(p):
        return _describe_plan(p)
    if (p / TIERS_FILE).is_file():
        return _describe_tiers(p)
    return None


def _describe_plan(path: Path) -> dict[str, Any]:
    saved = load_plan(path)
    plan, first = saved.plan, saved.first
    dim = first.n_features_in_
    copy = plan.copy_bytes(dim) if plan.stored else 0
    return {
        "kind": "plan",
        "path": str(path),
        "plan": plan.describe(first),
        "first_stage": repr(first),
        "structure": plan.structure,
        "graph": None if plan.graph is None else vars(plan.graph),
        "copy": plan.copy,
        "place": plan.place if plan.stored else None,
        "candidates": plan.candidates,
        "k": plan.k,
        "input_width": dim,
        "ram_bytes_per_vector": first.output_spec.nbytes + (copy if plan.place == "ram" else 0),
        "disk_bytes_per_vector": copy if plan.place == "disk" else 0,
        "fingerprint": saved.fingerprint,
        "measured": {key: plan.measured[key] for key in SHOWN if key in plan.measured},
    }


def _describe_tiers(path: Path) -> dict[str, Any]:
    tiers = tiers_json(path)
    files = {f.name: f.stat().st_size for f in sorted(path.iterdir()) if f.is_file()}
    ids = tiers.get("ids")
    return {
        "kind": "tiers",
        "path": str(path),
        "rows": tiers.get("rows"),
        "input_width": tiers.get("dim"),
        "copy": tiers.get("copy_kind"),
        "graph": tiers.get("graph"),
        "norms": tiers.get("norms"),
        "ids": ids["layout"] if ids else None,
        "plan_fingerprint": tiers.get("plan"),
        "files": files,
        "bytes": sum(files.values()),
    }


__all__ = ["describe_serving"]
