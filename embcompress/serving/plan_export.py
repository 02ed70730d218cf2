"""A serving plan exported: what each serving library can hold of the tiers ``apply PLAN IN TIERS`` wrote (the first
stage as its index, the rescoring copy beside it, the plan in the description), and one line on what it cannot."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any, Callable

from ..core._fs import atomic_file
from ..io import check_output_path
from .export import export, sidecar_paths, write_ids
from .plan import load_plan
from .tiers import COPY_FILE, FIRST_FILE, check_tiers

#: what each target does with a plan's rescoring copy, in one line
PLAN_NOTES = {
    "faiss": "faiss holds the first stage; the rescoring copy is OUT.rescore.npy beside it: take candidates rows "
    "from the index and rescore them with those rows (faiss's IndexRefine needs both in memory, the plan "
    "reads them from disk)",
    "usearch": "usearch holds the first stage as an HNSW graph; it has no rescoring stage: the copy is "
    "OUT.rescore.npy beside it, rescore the candidates in your server",
    "lancedb": "LanceDB holds the first stage; its refine_factor rescores from the table's own vectors, so the "
    "plan's rescoring copy is not carried",
}


def _plan_description(plan, plan_dir, rescore: Path) -> dict[str, Any]:
    """The plan as an exported index's description holds it: its fields, the rescoring file beside the index
    and how its rows become vectors."""
    decode = None
    if plan.copy == "int8":
        decode = f"embcompress.load('{Path(plan_dir) / 'copy'}').decode(rows)"
    elif plan.copy == "int8r":
        decode = (
            "the first stage's reconstruction of the row's code plus its d int8 values times the float32 scale in "
            "bytes d..d+4; the cosine divides by the float32 norm in bytes d+4..d+8 (embcompress.serving.residual)"
        )
    elif plan.stored:
        decode = "the rows as they are"
    return {**plan.to_json(), "rescore_file": rescore.name if plan.stored else None, "rescore_decode": decode}


def _codes_ids(codes: Path):
    """The ids column of the tiers' codes (None without one), read alone."""
    import pyarrow.parquet as pq

    from ..io import open_vectors

    column = open_vectors(codes, codes=None).id_column
    return None if column is None else pq.read_table(codes, columns=[column]).column(0)


def _copied_graph(graph: Path, out: Path, overwrite: bool) -> dict[str, Any]:
    """The faiss HNSW graph ``apply`` wrote among a plan's tiers (with its description), copied to ``out``, and
    beside it its description and the ids (from the tiers' codes, which keep them once; tiers written before
    that have a copy beside the graph): what :func:`export` returns for it."""
    sources, targets = [graph, *sidecar_paths(graph)], [out, *sidecar_paths(out)]
    pairs = [(a, b) for a, b in zip(sources, targets) if a.is_file()]
    ids = None if sources[1].is_file() else _codes_ids(graph.parent / FIRST_FILE)
    for b in [b for _, b in pairs] + ([targets[1]] if ids is not None else []):
        check_output_path(b, overwrite=overwrite)
    written: list[Path] = []
    try:
        for a, b in pairs:
            with atomic_file(b, overwrite=overwrite) as tmp:
                shutil.copyfile(a, tmp)
            written.append(b)
        if ids is not None:
            write_ids(targets[1], ids, overwrite)
            written.append(targets[1])
    except BaseException:
        for b in written:
            b.unlink(missing_ok=True)
        raise
    desc = json.loads(targets[2].read_text())
    keys = ("target", "structure", "graph", "rows", "kind")
    return {"output": str(out), **{k: desc[k] for k in keys}, "files": [str(b) for b in written]}


def export_plan(
    tiers_dir: str | os.PathLike,
    plan_dir: str | os.PathLike,
    out: str | os.PathLike,
    *,
    to: str,
    overwrite: bool = False,
    table: str = "vectors",
    stage: Callable[[str, int], Callable[[int], None] | None] | None = None,
) -> dict[str, Any]:
    """Export what ``to`` can hold of the plan in ``plan_dir`` served from ``tiers_dir`` (written by
    ``apply PLAN IN TIERS``): the first stage as its index, and for faiss and usearch the rescoring
    copy beside it (``OUT.rescore.npy``) with the plan in the description. ``note`` says in one line
    what the target does not hold."""
    saved = load_plan(plan_dir)
    tiers = check_tiers(
        tiers_dir, saved
    )  # the tiers belong to the plan, and its copy is whole (export reads the codes)
    plan = saved.plan
    rescore = Path(str(out) + ".rescore.npy")
    if plan.stored and to != "lancedb":
        check_output_path(rescore, overwrite=overwrite)
    graph = tiers.get("graph") if to == "faiss" else None  # apply built the faiss graph: it is copied, not rebuilt
    res = (
        _copied_graph(Path(tiers_dir) / graph, Path(out), overwrite)
        if graph
        else export(
            Path(tiers_dir) / FIRST_FILE,
            out,
            to=to,
            model=Path(plan_dir) / "first",
            table=table,
            structure="hnsw" if plan.graphed and to == "faiss" else "flat",
            overwrite=overwrite,
            hnsw=plan.graph if to == "usearch" or (to == "faiss" and plan.graphed) else None,
            stage=stage,
        )
    )
    if to == "lancedb":
        return {**res, "note": PLAN_NOTES[to] if plan.stored else None}
    description = Path(str(out) + ".embcompress.json")
    doc = json.loads(description.read_text())
    doc["plan"] = _plan_description(plan, plan_dir, rescore)
    try:
        if plan.stored:
            with atomic_file(rescore, overwrite=overwrite) as tmp:
                shutil.copyfile(Path(tiers_dir) / COPY_FILE, tmp)
        with atomic_file(description, overwrite=True) as tmp:
            tmp.write_text(json.dumps(doc, indent=2, sort_keys=True, default=str) + "\n")
    except BaseException:
        for p in [Path(f) for f in res["files"]] + ([rescore] if plan.stored else []):
            p.unlink(missing_ok=True)
        raise
    files = res["files"] + ([str(rescore)] if plan.stored else [])
    return {**res, "files": files, "note": PLAN_NOTES[to] if plan.rescored else None}


__all__ = ["PLAN_NOTES", "export_plan"]
