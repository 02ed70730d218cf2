"""Which code keeps the most retrieval quality per byte, without the original vectors: every
candidate code of embcompress at 96, 48, 24 and 12 bytes per vector (16x to 128x smaller than
float32 for MiniLM's 384 dims), and, fitted on the same vectors in the same run, faiss's OPQ+PQ
(``OPQMatrix`` + ``IndexPQ``, inner product) and ``IndexRaBitQ`` (1 and 4 bits). nDCG@10 on the
whole Debian set (33,253 documents and queries); retention = nDCG@10 / float32 nDCG@10.

    python benchmarks/data/embed_debian_ir.py        # once: caches the embeddings
    python benchmarks/codes/bench_codes_debian.py [--queries N] [--budgets 96,48,24,12] [--configs rq:24,...] [--faiss
    opq,rq,lsq] [--json out.json]
    python benchmarks/codes/bench_codes_debian.py --emb bench-data/big/minilm --qrels bench-data/big/qrels.tsv --name
    "big corpus" \
        --fit-rows 50000 --queries 2000 --json benchmarks/results/big-minilm.json     # the users' regime

With ``--fit-rows N`` every model (ours and faiss's) is fitted on a seeded uniform sample of N
documents of its half, as users fit on a sample (``max_rows``) and encode the rest: *unseen*
is then every document encoded by a model that never saw it, *half-new* one model (fitted on N
rows) encoding the whole corpus (N of its documents seen: the users' case), and *in-sample*
each half encoded by the model whose N rows were drawn from it (N of the half's documents seen).

Every code, ours and faiss's, is measured three ways from the same fits (``--folds 2``: a model
fitted on each half of the documents): *unseen* (out-of-sample: each half encoded by the model
fitted on the other, searched as one corpus), *half-new* (the first half's model encodes every
document: fitted on half, scored on the whole corpus, half of it seen) and *in-sample* (each
half encoded by the model fitted on it). Users with a corpus larger than their fit sample live
with the first. Each row also gives the mean fit time of one model, encoding rows/s and
queries/s.
"""

from __future__ import annotations

import sys

import argparse
import json
import time
from pathlib import Path

import numpy as np

from embcompress.analysis import evaluate_run
from embcompress.io.datasets import read_qrels
from embcompress.evaluation.evaluate import run_configs
from embcompress.evaluation.tasks import QrelsTask
from embcompress.io import read_all
from embcompress.report.candidates import candidates

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: _util and the other groups' modules
from _util import DEBIAN  # noqa: E402  (the benchmarks' folder is on the path when they run)


def faiss_builders(d: int, budget: int, only: tuple[str, ...] | None = None):
    """(label, make a fresh faiss index) for the faiss codes of ``budget`` bytes that apply to ``d``
    dimensions: OPQ+PQ (when ``budget`` divides ``d``), RQ and LSQ (one byte per codebook), and
    RaBitQ with 1 bit (only at d / 8 bytes: faiss adds its factors)."""
    import faiss

    ip = faiss.METRIC_INNER_PRODUCT
    builds = []
    if d % budget == 0:

        def opq(m=budget):
            return faiss.IndexPreTransform(faiss.OPQMatrix(d, m), faiss.IndexPQ(d, m, 8, ip))

        builds.append(("opq", f"faiss OPQ{budget}+PQ{budget}", opq))
    builds.append(("rq", f"faiss RQ{budget}x8", lambda: faiss.IndexResidualQuantizer(d, budget, 8, ip)))
    builds.append(("lsq", f"faiss LSQ{budget}x8", lambda: faiss.IndexLocalSearchQuantizer(d, budget, 8, ip)))
    if budget == d // 8:
        builds.append(("rabitq", "faiss IndexRaBitQ 1 bit", lambda: faiss.IndexRaBitQ(d, ip)))
    return [(label, build) for key, label, build in builds if only is None or key in only]


def faiss_row(label, build, D, Q, qids, dids, qrels, float_ndcg, fits) -> dict:
    """A faiss code measured as ours are (``fits``: the same folds and pools): one index trained per
    pool, each filled with the fold it did not see (out-of-sample) or with a fold its pool holds
    (in-sample); the folds' top 10 merged by score. Also the first model filling every document
    (half-new: fitted on half, scored on the whole corpus)."""
    from embcompress.search.topk import merge_topk

    t0 = time.perf_counter()
    models = []
    for pool in fits.pools:
        index = build()
        index.train(D[pool])
        models.append(index)
    fit = (time.perf_counter() - t0) / len(models)

    additive = hasattr(models[0], "aq")  # faiss RQ and LSQ: their search decodes every document for every query block

    def ndcg(assign) -> tuple[float, float, float]:
        rows, scores, enc, secs = [], [], 0.0, 0.0
        for part, index in assign:
            index.reset()
            t = time.perf_counter()
            if additive:  # the same codes and inner products as index.search, ranked over the decoded documents
                codes = index.sa_encode(np.ascontiguousarray(D[part]))
                enc += time.perf_counter() - t
                s, i = _top_inner(Q, index.sa_decode(codes), 10)
            else:
                index.add(D[part])
                enc += time.perf_counter() - t
                t = time.perf_counter()
                s, i = index.search(Q, 10)
                secs += time.perf_counter() - t
            rows.append(part[i])
            scores.append(s)
        _, top = merge_topk(scores, rows, 10)
        return evaluate_run({q: [dids[j] for j in r] for q, r in zip(qids, top)}, qrels, 10).ndcg, enc, secs

    k = len(models)
    out, enc, secs = ndcg([(p, models[i]) for i, p in enumerate(fits.parts)])
    nq = len(Q)
    if additive:  # faiss's own search speed, on a sample of the queries over the first fold
        index = models[0]
        index.reset()
        index.add(D[fits.parts[0]])
        nq = min(256, len(Q))
        t = time.perf_counter()
        index.search(Q[:nq], 10)
        secs = time.perf_counter() - t
    inside, _, _ = ndcg([(p, models[(i + 1) % k]) for i, p in enumerate(fits.parts)])
    half, _, _ = ndcg([(np.arange(len(D)), models[0])])
    size = models[0].sa_code_size() if hasattr(models[0], "sa_code_size") else models[0].code_size
    return {
        "config": label,
        "bytes_per_vector": int(size),
        "score": out,
        "retention": out / float_ndcg,
        "retention_in_sample": inside / float_ndcg,
        "retention_half_new": half / float_ndcg,
        "fit_seconds": fit,
        "encode_rows_per_second": len(D) / enc,
        "queries_per_second": nq / secs,
    }


def _plain(value):
    """JSON for numpy values: arrays (a row's per-query scores) are left out, scalars become floats."""
    return None if isinstance(value, np.ndarray) and value.ndim else float(value)


def _top_inner(Q: np.ndarray, X: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The k largest inner products of each query with the rows of X, best first: (scores, rows)."""
    S_all, I_all = [], []
    for s in range(0, len(Q), 4096):
        S = Q[s : s + 4096] @ X.T
        idx = np.argpartition(-S, k, axis=1)[:, :k]
        sc = np.take_along_axis(S, idx, 1)
        o = np.argsort(-sc, axis=1, kind="stable")
        S_all.append(np.take_along_axis(sc, o, 1))
        I_all.append(np.take_along_axis(idx, o, 1))
    return np.concatenate(S_all), np.concatenate(I_all)


def load_set(emb, qrels_path, *, queries: int | None = None, fit_rows: int | None = None):
    """The documents (and ids), the queries (a seeded sample of ``queries`` of them when given),
    the qrels task at nDCG@10, and the seeded sample of ``fit_rows`` documents the codes are fitted
    on (None: all of them): the rule every code benchmark shares, so that their figures compare."""
    emb = Path(emb)
    D, dids = read_all(emb / "corpus.parquet")
    Q, qids = read_all(emb / "queries.parquet")
    if queries:
        sel = np.sort(np.random.default_rng(0).choice(len(Q), queries, replace=False))
        Q, qids = Q[sel], [qids[i] for i in sel]
    task = QrelsTask(Q, qids, read_qrels(qrels_path), 10)
    fit_on = None
    if fit_rows:
        fit_on = D[np.sort(np.random.default_rng(1).choice(len(D), min(fit_rows, len(D)), replace=False))]
    return D, dids, task, fit_on


def our_rows(D, dids, task, configs, fits, norm_power):
    """Our codes on the benchmark's folds: out-of-sample and in-sample (evaluate_config), and the
    first fold's model encoding every document (half-new: fitted on half, scored on the whole)."""
    from embcompress.evaluation.configs import parse_config
    from embcompress.evaluation.evaluate import evaluate_config
    from embcompress.search import ArrayStore, Index

    rows = []
    ref = None
    for text in configs:
        cfg = parse_config(text)
        r = evaluate_config(
            D, cfg, task, doc_ids=dids, fits=fits, originals=ArrayStore(D), norm_power=norm_power
        ).to_dict()
        if cfg.spec is None:
            ref = r["score"]
            continue
        cache = fits.caches[0]
        half = Index(cache.encode(cfg.spec, D), compressor=cache.fit(cfg.spec), ids=dids, norm_power=norm_power)
        r["retention"] = r["score"] / ref
        r["retention_in_sample"] = r["score_in_sample"] / ref
        r["retention_half_new"] = task.measure(half, cfg, ArrayStore(D)).score / ref
        rows.append(r)
    return rows


HEADER = (
    f"  {'configuration':34s} {'bytes':>5s} {'unseen':>7s} {'half-new':>8s} {'in-smpl':>7s} {'fit s':>7s} "
    f"{'enc rows/s':>10s} {'q/s':>7s}"
)


def print_row(r) -> None:
    print(
        f"  {r['config']:34s} {r['bytes_per_vector']:5d} {100 * r['retention']:6.2f}% "
        f"{100 * r['retention_half_new']:7.2f}% "
        f"{100 * r['retention_in_sample']:6.2f}% {r['fit_seconds']:7.1f} {r['encode_rows_per_second']:10,.0f} "
        f"{r['queries_per_second']:7,.0f}",
        flush=True,
    )


def main() -> None:
    from embcompress.evaluation.crossfit import CrossFit

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--emb", default="bench-data/debian-ir")
    ap.add_argument("--data", default=str(DEBIAN))
    ap.add_argument("--qrels", default=None, help="qrels file (default: DATA/qrels.tsv.gz)")
    ap.add_argument("--name", default="Debian IR")
    ap.add_argument("--queries", type=int, default=None, help="a seeded sample of N queries (default: all)")
    ap.add_argument("--budgets", default="96,48,24,12")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument(
        "--configs",
        default=None,
        help="only these configurations, comma-separated (default: recommend's candidates; 'none': faiss's rows only)",
    )
    ap.add_argument(
        "--faiss", default="opq,rq,lsq,rabitq", help="faiss rows: any of opq, rq, lsq, rabitq ('none': none)"
    )
    ap.add_argument("--folds", type=int, default=2)
    ap.add_argument(
        "--fit-rows", type=int, default=None, help="fit every model on a seeded uniform sample of N rows of its pool"
    )
    ap.add_argument("--model", default="MiniLM", help="the embedding model's name, for the JSON and the README table")
    ap.add_argument(
        "--norm-power",
        type=float,
        default=1.0,
        help="score codes by <q, x_hat> / |x_hat|^P (default 1: the cosine with the reconstruction)",
    )
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    D, dids, task, _ = load_set(args.emb, args.qrels or Path(args.data) / "qrels.tsv.gz", queries=args.queries)
    Q, qids, qrels = task.queries, task.query_ids, task.qrels
    ref = run_configs(D, task, ["float"], doc_ids=dids)[0]
    fits = CrossFit(D, args.folds, fit_rows=args.fit_rows)
    print(
        f"{args.name}, {len(D):,} documents x {D.shape[1]} dims, {len(Q):,} queries; float32 nDCG@10 "
        f"{ref['score']:.4f} "
        f"({ref['queries_per_second']:,.0f} q/s); codes and fitted models only, no original vectors; retention of "
        f"nDCG@10 {fits.protocol}: 'unseen', every document encoded by a model fitted on the other "
        f"{'half' if args.folds == 2 else 'folds'} ({fits.fit_rows:,} rows); 'half-new', one model fitted on "
        f"{len(fits.pools[0]):,} documents encodes all of them; 'in-smpl', each document encoded by "
        + (
            "a model fitted on it"
            if args.fit_rows is None
            else f"the model whose {fits.fit_rows:,}-row sample was drawn from its half (that many of the half's "
            "documents seen)"
        )
        + f"; codes scored by <q, x_hat> / |x_hat|^{args.norm_power:g}",
        flush=True,
    )
    import faiss

    faiss.omp_set_num_threads(args.threads)
    only = None if args.faiss == "all" else tuple(x for x in args.faiss.split(",") if x != "none")
    results = {
        "set": args.name,
        "model": args.model,
        "documents": len(D),
        "queries": len(Q),
        "dim": int(D.shape[1]),
        "fit_rows": fits.fit_rows,
        "float": ref,
        "protocol": fits.protocol,
        "date": time.strftime("%Y-%m-%d"),
        "budgets": {},
    }
    for budget in (int(b) for b in args.budgets.split(",")):
        configs = args.configs.split(",") if args.configs else [c.config for c in candidates(D.shape[1], budget)]
        configs = [c for c in configs if c != "none"]  # --configs none: faiss's rows only
        print(f"\n{budget} bytes per vector ({4 * D.shape[1] / budget:.0f}x smaller)\n{HEADER}", flush=True)
        rows = []
        for c in configs:
            rows += our_rows(D, dids, task, ["float", c], fits, args.norm_power)
            print_row(rows[-1])
        for label, build in faiss_builders(D.shape[1], budget, only):
            rows.append(faiss_row(label, build, D, Q, qids, dids, qrels, ref["score"], fits))
            print_row(rows[-1])
        rows.sort(key=lambda r: -r["retention"])
        results["budgets"][budget] = rows
        best = ", ".join(f"{r['config']} {100 * r['retention']:.2f}%" for r in rows[:4])
        print(f"  ranked by 'unseen': {best}", flush=True)
        if args.json:  # after every budget, so a stopped run keeps what it measured
            Path(args.json).parent.mkdir(parents=True, exist_ok=True)
            Path(args.json).write_text(json.dumps(results, indent=2, default=_plain))


if __name__ == "__main__":
    main()
