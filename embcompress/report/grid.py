"""Run a grid of compressions over a sample of the user's embeddings and measure, for each, the
task score and its retention (compressed / float), the size and the rank-preservation proxy.

Task score, by what the user has:
* queries + qrels: nDCG@10 of exact search (retention: nDCG / float nDCG);
* labels: kNN classification accuracy (k = 10, seed 004);
* nothing: label-free recall@10 of the compressed search against exact float search, with held-out
  rows of the sample as queries.
The proxy is the local Spearman rank correlation of cosine similarities (seed 003, section 6)
between the original and the compressed (decoded) vectors of a sample.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..analysis import evaluate_run, intrinsic_dimensionality, knn_accuracy, neighbour_recall, preservation, uniformity
from ..base import Compressor
from ..compressors import Binary, Int8, Pipeline
from ..errors import InputError
from ..registry import from_spec
from ..search import Index

DEFAULT_METHODS = ("truncate", "random_select", "random_projection", "pca", "geopres")
#: methods whose output is chained into binary in the grid
CHAINED = ("pca", "geopres")
K = 10


def default_widths(dim: int) -> list[int]:
    return [w for w in (dim // 2, dim // 4, dim // 8) if w >= 1]


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of the points not beaten by another with fewer-or-equal bytes and higher-or-equal
    retention (strictly better in one), sorted by bytes."""
    order = sorted(range(len(points)), key=lambda i: (points[i][0], -points[i][1]))
    front, best = [], -np.inf
    for i in order:
        if points[i][1] > best:
            front.append(i)
            best = points[i][1]
    return front


def _score_fn(docs: np.ndarray, *, queries, query_ids, doc_ids, qrels, labels) -> tuple[str, Callable]:
    """The task measurement: returns (name, f(index, rerank) -> score)."""
    if qrels is not None:
        def score(index: Index, rerank: str | None) -> float:
            res = index.search(queries, K, rerank=rerank, originals=docs if rerank == "float" else None)
            return evaluate_run({q: list(r) for q, r in zip(query_ids, res.ids)}, qrels, K).ndcg
        return f"nDCG@{K}", score
    if labels is not None:
        def score(index: Index, rerank: str | None) -> float:
            comp = index.compressor
            Z = docs if comp is None else comp.decode(index.data)
            return knn_accuracy(Z, labels, k=K)
        return f"kNN accuracy (k={K})", score
    n_q = min(1000, max(1, len(docs) // 10))
    q_rows, d_rows = np.arange(n_q), np.arange(n_q, len(docs))
    Q = docs[q_rows]
    reference = Index(docs[d_rows]).search(Q, K).rows

    def score(index: Index, rerank: str | None) -> float:
        sub = Index(index.data[d_rows], compressor=index.compressor)
        res = sub.search(Q, K, rerank=rerank, originals=docs[d_rows] if rerank == "float" else None)
        return neighbour_recall(reference, res.rows, K)
    return f"recall@{K} vs float (label-free)", score


def build_report(
    docs: np.ndarray,
    *,
    doc_ids: Sequence | None = None,
    queries: np.ndarray | None = None,
    query_ids: Sequence | None = None,
    qrels: Mapping[str, Mapping[str, int]] | None = None,
    labels: Sequence | None = None,
    widths: Sequence[int] | None = None,
    methods: Sequence[str] = DEFAULT_METHODS,
    chain_methods: Sequence[str] = CHAINED,
    budget: int | None = None,
    proxy_sample: int = 2000,
    geopres_params: str = "",
    progress: Callable[[str, int, int], None] | None = None,
) -> dict[str, Any]:
    """Run the grid; returns the report as a JSON-able dict (see module docstring). Each method in
    ``chain_methods`` is also followed by binary at every width."""
    docs = np.ascontiguousarray(docs, dtype=np.float32)
    n, dim = docs.shape
    if n < 50:
        raise InputError(f"a report needs at least 50 vectors, got {n}")
    widths = sorted(set(widths or default_widths(dim)), reverse=True)
    bad = [w for w in widths if not 1 <= w < dim]
    if bad:
        raise InputError(f"widths {bad} are out of range: the embeddings have {dim} dimensions, allowed is 1..{dim - 1}")
    unknown = sorted(set(methods) - set(DEFAULT_METHODS) - {"autoencoder"})
    if unknown:
        raise InputError(f"unknown report method(s) {unknown}; known: {', '.join(DEFAULT_METHODS)}, autoencoder")
    if (queries is None) != (qrels is None):
        raise InputError("task retention needs both queries and qrels (or neither)")
    if labels is not None and len(labels) != n:
        raise InputError(f"{len(labels)} labels for {n} vectors")
    doc_ids = [str(i) for i in (doc_ids if doc_ids is not None else range(n))]
    if qrels is not None:
        from ..evaluate import check_qrels

        query_ids = [str(i) for i in (query_ids if query_ids is not None else range(len(queries)))]
        if queries.shape[1] != dim:
            raise InputError(f"queries have {queries.shape[1]} dimensions but the documents have {dim}")
        check_qrels(qrels, query_ids, doc_ids)
    metric_name, score = _score_fn(docs, queries=queries, query_ids=query_ids, doc_ids=doc_ids, qrels=qrels, labels=labels)
    prox_rows = np.sort(np.random.default_rng(0).choice(n, size=min(n, proxy_sample), replace=False))
    X_prox = docs[prox_rows]

    # (label, method, width, builder) -- builders return a fitted compressor or None (float)
    plan: list[tuple[str, str, int, Callable[[], Compressor | None], str | None]] = [("float32", "float", dim, lambda: None, None)]
    fitted_cache: dict[str, Compressor] = {}

    def fitted(spec: str) -> Compressor:
        if spec not in fitted_cache:
            fitted_cache[spec] = from_spec(spec).fit(docs)
        return fitted_cache[spec]

    def chain(spec: str) -> Compressor:
        first = fitted(spec)
        return Pipeline.from_fitted([first, Binary().fit(first.transform(docs[:2]))])

    for m in methods:
        for w in widths:
            spec = f"{m}:{w}" + (f":{geopres_params}" if m == "geopres" and geopres_params else "")
            plan.append((f"{m} {w}", m, w, (lambda s=spec: fitted(s)), None))
            if m in chain_methods:
                plan.append((f"{m} {w} + binary", f"{m}+binary", w, (lambda s=spec: chain(s)), None))
    plan.append(("binary", "binary", dim, lambda: fitted("binary"), None))
    plan.append(("binary + asymmetric rerank", "binary+rerank", dim, lambda: fitted("binary"), "asymmetric"))
    plan.append(("binary + float rerank", "binary+rerank", dim, lambda: fitted("binary"), "float"))
    plan.append(("int8", "int8", dim, lambda: Int8().fit(docs), None))

    rows: list[dict[str, Any]] = []
    reference = None
    for i, (label, method, width, build, rerank) in enumerate(plan):
        if progress:
            progress(label, i, len(plan))
        t0 = time.perf_counter()
        comp = build()
        fit_s = time.perf_counter() - t0
        index = Index(docs, ids=doc_ids) if comp is None else Index(comp.transform(docs), compressor=comp, ids=doc_ids)
        t1 = time.perf_counter()
        value = score(index, rerank)
        eval_s = time.perf_counter() - t1
        if comp is None:
            reference = value
            proxy = 1.0
        else:
            proxy = preservation(X_prox, comp.decode(comp.transform(X_prox))).spearman
        spec = comp.output_spec if comp is not None else None
        rows.append({
            "config": label, "method": method, "width": width,
            "kind": spec.kind if spec else "float", "bytes_per_vector": spec.nbytes if spec else 4 * dim,
            "extra_storage": "original float vectors" if rerank == "float" else None, "rerank": rerank,
            "score": value, "retention": value / reference if reference else float("nan"),
            "rank_proxy": proxy, "fit_seconds": round(fit_s, 3), "eval_seconds": round(eval_s, 3),
        })
    if progress:
        progress("done", len(plan), len(plan))
    front = pareto_front([(r["bytes_per_vector"], r["retention"]) for r in rows if r["extra_storage"] is None])
    standalone = [r for r in rows if r["extra_storage"] is None]
    for i in front:
        standalone[i]["pareto"] = True
    best = None
    if budget is not None:
        within = [r for r in standalone if r["bytes_per_vector"] <= budget]
        best = max(within, key=lambda r: (r["retention"], -r["bytes_per_vector"]))["config"] if within else None
        for r in rows:
            r["within_budget"] = r["bytes_per_vector"] <= budget
    intr = intrinsic_dimensionality(docs)
    # The proxy describes the compressed vectors alone, so it is compared with the retention of
    # the plain compressed search: rows reranked with a float query score more than the codes hold.
    scored = [r for r in rows[1:] if r["rerank"] is None]
    proxies = [r["rank_proxy"] for r in scored]
    rets = [r["retention"] for r in scored]
    from scipy.stats import spearmanr

    corr = float(spearmanr(proxies, rets).statistic) if len(set(proxies)) > 1 and len(set(rets)) > 1 else float("nan")
    return {
        "format": "embcompress.report", "format_version": 1,
        "summary": {
            "vectors": n, "dim": dim, "metric": metric_name, "float_score": reference,
            "mode": "qrels" if qrels is not None else "labels" if labels is not None else "label-free",
            "queries": None if queries is None else len(queries), "widths": widths, "methods": list(methods),
            "intrinsic_dimensionality": intr.components, "intrinsic_threshold": intr.threshold,
            "uniformity": uniformity(docs), "proxy_retention_spearman": corr, "proxy_retention_configs": len(scored),
            "budget_bytes": budget, "best_within_budget": best,
        },
        "explained_variance": np.cumsum(intr.explained_variance_ratio).round(6).tolist(),
        "rows": rows,
    }
