"""Compare float search with compressed search on the user's own embeddings.

A *configuration* names a compressor spec and a search mode: ``float`` (exact float search, the
reference), ``SPEC`` (search the compressed codes), ``SPEC@asym`` / ``SPEC@float`` (binary or
int8 first stage, then rerank with the float query against the +-1 bits or against the original
float vectors), optionally with a candidate multiplier: ``binary@floatx4`` reranks the top 4k.
The default multiplier is 10: for k = 10 that is the seed paper's top 100 candidates.

With relevance judgements (qrels) each configuration gets nDCG@k, recall@k and MRR@k and its
retention (compressed nDCG / float nDCG); without them, the label-free score is recall@k of the
compressed search against exact float search (the float reference scores 1.0 by definition).
"""

from __future__ import annotations

import re
import time
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from .analysis import evaluate_run, neighbour_recall, retention
from .errors import InputError
from .registry import from_spec
from .search import DEFAULT_MULTIPLIER, Index, VectorStore

_CONFIG = re.compile(r"^(?P<spec>[^@]+?)(?:@(?P<rerank>asym|asymmetric|float)(?:x(?P<mult>\d+))?)?$")


@dataclass(frozen=True)
class Config:
    label: str
    spec: str | None  # None: float reference
    rerank: str | None = None
    multiplier: int = DEFAULT_MULTIPLIER


def parse_config(text: str) -> Config:
    text = text.strip()
    if text in ("float", "float32"):
        return Config("float", None)
    m = _CONFIG.match(text)
    if not m:
        raise InputError(f"cannot read configuration {text!r}; use float, SPEC, SPEC@asym, SPEC@float or SPEC@floatxM (e.g. binary@floatx4)")
    rerank = {"asym": "asymmetric", "asymmetric": "asymmetric", "float": "float", None: None}[m.group("rerank")]
    mult = int(m.group("mult")) if m.group("mult") else DEFAULT_MULTIPLIER
    if mult < 1:
        raise InputError(f"multiplier must be at least 1 in {text!r}")
    from_spec(m.group("spec"))  # validates the spec early
    return Config(text, m.group("spec"), rerank, mult)


def default_configs(dim: int) -> list[str]:
    return ["float", "binary", "binary@asym", "binary@float", "int8", "int8@float", f"truncate:{dim // 2}",
            f"pca:{dim // 4}", f"pca:{dim // 2}+binary"]


def check_qrels(qrels: Mapping[str, Mapping[str, int]], query_ids: Sequence, doc_ids: Sequence) -> dict[str, int]:
    """Count judgements that name unknown queries or documents (warned about, then ignored)."""
    qset, dset = set(map(str, query_ids)), set(map(str, doc_ids))
    unknown_q = sum(1 for q in qrels if q not in qset)
    unknown_d = sum(1 for q, docs in qrels.items() if q in qset for d in docs if d not in dset)
    matched = sum(1 for q in qrels if q in qset)
    if matched == 0:
        raise InputError(f"none of the {len(qrels)} queries in the qrels is among the {len(qset)} query ids; check that ids match (e.g. {next(iter(qrels))!r} vs {next(iter(qset))!r})")
    if unknown_q or unknown_d:
        warnings.warn(f"qrels: {unknown_q} judged queries are not in the query file and {unknown_d} judged documents "
                      "are not in the corpus; they are ignored (unknown documents count as never retrieved)", stacklevel=2)
    return {"qrels_queries": len(qrels), "qrels_unknown_queries": unknown_q, "qrels_unknown_docs": unknown_d,
            "evaluated_queries": matched}


def evaluate(
    docs: np.ndarray,
    queries: np.ndarray,
    *,
    doc_ids: Sequence | None = None,
    query_ids: Sequence | None = None,
    qrels: Mapping[str, Mapping[str, int]] | None = None,
    configs: Sequence[str | Config] | None = None,
    k: int = 10,
    originals: VectorStore | np.ndarray | None = None,
    fit_sample: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Evaluate each configuration; returns ``{"rows": [...], "summary": {...}}``.

    Compressors are fitted on ``docs`` (or their first ``fit_sample`` rows). Float reranks read
    ``originals`` (default: ``docs`` themselves)."""
    dim = docs.shape[1]
    if queries.shape[1] != dim:
        raise InputError(f"queries have {queries.shape[1]} dimensions but documents have {dim}")
    doc_ids = [str(i) for i in range(len(docs))] if doc_ids is None else [str(i) for i in doc_ids]
    query_ids = [str(i) for i in range(len(queries))] if query_ids is None else [str(i) for i in query_ids]
    cfgs = [c if isinstance(c, Config) else parse_config(c) for c in (configs or default_configs(dim))]
    if not any(c.spec is None for c in cfgs):
        cfgs.insert(0, Config("float", None))
    summary: dict[str, Any] = {"documents": len(docs), "queries": len(queries), "dim": dim, "k": k,
                               "mode": "qrels" if qrels else "label-free (recall@k against exact float search)"}
    if qrels:
        summary.update(check_qrels(qrels, query_ids, doc_ids))
    originals = docs if originals is None else originals
    rows: list[dict[str, Any]] = []
    reference: dict[str, Any] = {}
    for cfg in sorted(cfgs, key=lambda c: c.spec is not None):  # float first: it is the reference
        if progress:
            progress(cfg.label)
        t_fit = time.perf_counter()
        if cfg.spec is None:
            index = Index(docs, ids=doc_ids)
        else:
            comp = from_spec(cfg.spec).fit(docs[:fit_sample] if fit_sample else docs)
            index = Index(comp.transform(docs), compressor=comp, ids=doc_ids)
        fit_s = time.perf_counter() - t_fit
        res = index.search(queries, k, rerank=cfg.rerank, multiplier=cfg.multiplier,
                           originals=originals if cfg.rerank == "float" else None)
        row: dict[str, Any] = {"config": cfg.label, "bytes_per_vector": index.nbytes_per_vector,
                               "compression": 4 * dim / index.nbytes_per_vector,
                               "search_seconds": res.seconds, "queries_per_second": len(queries) / res.seconds,
                               "fit_seconds": fit_s, "candidates": res.info["candidates"]}
        if qrels:
            run = {q: list(r) for q, r in zip(query_ids, res.ids)}
            scores = evaluate_run(run, qrels, k)
            row.update({f"ndcg@{k}": scores.ndcg, f"recall@{k}": scores.recall, f"mrr@{k}": scores.mrr})
            if cfg.spec is None:
                reference = row
            row["retention"] = retention(scores.ndcg, reference[f"ndcg@{k}"])
        else:
            if cfg.spec is None:
                reference["rows"] = res.rows
            row[f"recall@{k}_vs_float"] = neighbour_recall(reference["rows"], res.rows, k)
            row["retention"] = row[f"recall@{k}_vs_float"]
        rows.append(row)
    return {"summary": summary, "rows": rows}
