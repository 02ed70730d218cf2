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

from .analysis import neighbour_recall
from .corpus import stdlib_docstring_pairs
from .errors import InputError, OutputExistsError
from .io import read_all
from .registry import from_spec
from .search import float_search, hamming_search
from .stream import compress_file, fit_file

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
    from .embed import DEFAULT_MODEL, encode, load_model, write_embeddings

    if limit < 20:
        raise InputError(f"the demo needs at least 20 documents, got limit={limit}")
    out = Path(out_dir)
    if out.exists() and any(out.iterdir()):
        if not overwrite:
            raise OutputExistsError(f"{out} already exists and is not empty; pass --overwrite or another --out")
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    progress = stage or (lambda desc, total: None)

    t0 = time.perf_counter()
    pairs = stdlib_docstring_pairs(limit)
    st = load_model(model)
    docs = encode(st, [p.document for p in pairs], progress=progress("embedding documents", len(pairs)))
    queries = encode(st, [p.query for p in pairs], progress=progress("embedding queries", len(pairs)))
    embed_s = time.perf_counter() - t0

    vectors = out / "vectors.parquet"
    write_embeddings(vectors, [p.id for p in pairs], docs, model_name=model or DEFAULT_MODEL, normalized=True,
                     extra={"summary": [p.query for p in pairs]})
    dim = docs.shape[1]
    _, exact = float_search(queries, docs, K)

    rows = [{"name": "float32", "file": vectors.name, "file_bytes": vectors.stat().st_size,
             "bytes_per_vector": 4 * dim, "recall_at_10": 1.0}]
    for label, spec, fname in (
        ("binary", "binary", "binary.parquet"),
        (f"truncate {dim // 2}", f"truncate:{dim // 2}", "truncate.parquet"),
        ("int8", "int8", "int8.parquet"),
    ):
        comp = fit_file(from_spec(spec), vectors)
        res = compress_file(comp, vectors, out / fname)
        codes, _ = read_all(out / fname, codes=None)
        q = comp.transform(queries)
        if comp.output_spec.kind == "bits":
            _, found = hamming_search(q, codes, K)
        else:
            _, found = float_search(comp.decode(q), comp.decode(codes), K)
        rows.append({"name": label, "file": fname, "file_bytes": res.output_bytes,
                     "bytes_per_vector": res.bytes_per_vector_out,
                     "recall_at_10": neighbour_recall(exact, found, K)})
    # each summary line's own docstring body is its relevant document: real retrieval judgements
    from .evaluate import evaluate

    ids = [p.id for p in pairs]
    qrels = {i: {i: 1} for i in ids}
    ev = evaluate(docs, queries, doc_ids=ids, query_ids=ids, qrels=qrels, k=K,
                  configs=["float", "binary", "binary@asym", "binary@float", "int8", f"truncate:{dim // 2}"])
    retrieval = [{"config": r["config"], "bytes_per_vector": r["bytes_per_vector"], "ndcg_at_10": r["ndcg@10"],
                  "retention": r["retention"]} for r in ev["rows"]]
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
