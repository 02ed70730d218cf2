"""The main job on a built-in default: embed the standard library's docstrings with the packaged
MiniLM model, write a parquet vector dump, compress it, and measure what the compressed vectors
keep. Needs no download and no data from the user."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..core._fs import check_output_dir
from ..embedding.corpus import stdlib_docstring_pairs
from ..embedding.embed import DEFAULT_MODEL, encode, load_model, write_embeddings
from ..core.errors import InputError
from ..evaluation.evaluate import run_configs
from ..evaluation.tasks import LabelFreeTask, QrelsTask
from ..core.registry import from_spec
from ..engines.local import compress_file, fit_file

DEFAULT_LIMIT = 1000
K = 10


def run_demo(
    out_dir: str | os.PathLike = "embcompress-demo",
    *,
    limit: int = DEFAULT_LIMIT,
    model: str | None = None,
    overwrite: bool = False,
    stage: Callable[[str, int], Callable[[int], None] | None] | None = None,
) -> dict[str, Any]:
    """Run the demo into ``out_dir``. ``stage(description, total)`` may return a progress
    callback for each long step. Returns sizes and neighbour recall figures."""
    if limit < 20:
        raise InputError(f"the demo needs at least 20 documents, got limit={limit}")
    out = check_output_dir(out_dir, overwrite=overwrite)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    progress = stage or (lambda desc, total: None)

    t0 = time.perf_counter()
    pairs = stdlib_docstring_pairs(limit)
    st = load_model(model)
    docs = encode(st, [p.document for p in pairs], progress=progress("embedding documents", len(pairs)))
    queries = encode(st, [p.query for p in pairs], progress=progress("embedding queries", len(pairs)))
    embed_s = time.perf_counter() - t0

    files, sizes = _write_files(out, pairs, docs, model)
    dim = docs.shape[1]
    # how many of each query's 10 nearest float neighbours the compressed search finds (label-free),
    # and nDCG@10 where each summary line's own docstring body is its one relevant document
    ids = [p.id for p in pairs]
    found = run_configs(docs, LabelFreeTask(queries, K), ["float", *(spec for _, spec, _ in files[1:])], doc_ids=ids)
    rows = [
        {
            "name": name,
            "file": fname,
            "file_bytes": sizes[spec][0],
            "bytes_per_vector": sizes[spec][1],
            "recall_at_10": r.score,
        }
        for (name, spec, fname), r in zip(files, found)
    ]
    retrieval = _retrieval(docs, queries, ids)
    return {
        "retrieval": retrieval,
        "corpus": "Python standard library docstrings (query = summary line, document = body)",
        "documents": len(pairs),
        "model": model or DEFAULT_MODEL,
        "width": dim,
        "embed_seconds": round(embed_s, 1),
        "out_dir": str(out),
        "rows": rows,
    }


def _write_files(out: Path, pairs, docs: np.ndarray, model: str | None):
    """The float vectors and the compressed files a user would keep: the files as (name, spec, file
    name), and each spec's (file bytes, bytes per vector)."""
    vectors = out / "vectors.parquet"
    ids = [p.id for p in pairs]
    write_embeddings(
        vectors,
        ids,
        docs,
        model_name=model or DEFAULT_MODEL,
        normalized=True,
        extra={"summary": [p.query for p in pairs]},
    )
    dim = docs.shape[1]
    files = [
        ("float32", None, vectors.name),
        ("binary", "binary", "binary.parquet"),
        (f"truncate {dim // 2}", f"truncate:{dim // 2}", "truncate.parquet"),
        ("int8", "int8", "int8.parquet"),
    ]
    sizes = {None: (vectors.stat().st_size, 4 * dim)}
    for _, spec, fname in files[1:]:  # the files a user would keep
        res = compress_file(fit_file(from_spec(spec), vectors), vectors, out / fname)
        sizes[spec] = (res.output_bytes, res.bytes_per_vector_out)
    return files, sizes


def _retrieval(docs: np.ndarray, queries: np.ndarray, ids: list) -> list[dict[str, Any]]:
    """nDCG@10 of the demo's configurations, each summary line's own docstring body its one relevant
    document."""
    dim = docs.shape[1]
    task = QrelsTask(queries, ids, {i: {i: 1} for i in ids}, K)
    ev = run_configs(
        docs,
        task,
        [
            "float",
            "binary",
            "binary@asym",
            "rotate:center=true+binary@asym",
            "binary@float",
            "sq:2",
            "int8",
            f"truncate:{dim // 2}",
        ],
        doc_ids=ids,
    )
    return [
        {
            "config": r.config,
            "bytes_per_vector": r.bytes_per_vector,
            "ndcg_at_10": r.metrics["ndcg@10"],
            "retention": r.retention,
        }
        for r in ev
    ]
