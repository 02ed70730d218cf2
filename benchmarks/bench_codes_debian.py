"""Which code keeps the most retrieval quality per byte, without the original vectors: every
candidate code of embcompress at 96, 48, 24 and 12 bytes per vector (16x to 128x smaller than
float32 for MiniLM's 384 dims), and, fitted on the same vectors in the same run, faiss's OPQ+PQ
(``OPQMatrix`` + ``IndexPQ``, inner product) and ``IndexRaBitQ`` (1 and 4 bits). nDCG@10 on the
whole Debian set (33,253 documents and queries); retention = nDCG@10 / float32 nDCG@10.

    python benchmarks/embed_debian_ir.py        # once: caches the embeddings
    python benchmarks/bench_codes_debian.py [--queries N] [--budgets 96,48,24,12] [--json out.json]

By default every code is fitted on all the documents it then encodes (as for a corpus that fits
in the fit sample). ``--fit-rows N`` fits every code, ours and faiss's, on a seeded sample of N
documents only and still encodes and searches all of them: the rows outside the sample measure
how a code does on vectors it was not fitted on, as for a corpus larger than the fit sample.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from embcompress.analysis import evaluate_run
from embcompress.datasets import read_qrels
from embcompress.evaluate import QrelsTask, run_configs
from embcompress.io import read_all
from embcompress.report.candidates import candidates
from _util import DEBIAN  # noqa: E402  (the benchmarks' folder is on the path when they run)


def faiss_rows(D, Q, qids, dids, qrels, budget, float_ndcg, threads, fit_on=None):
    import faiss

    faiss.omp_set_num_threads(threads)
    d = D.shape[1]
    builds = []
    if d % budget == 0:
        def opq(m=budget):
            pq = faiss.IndexPQ(d, m, 8, faiss.METRIC_INNER_PRODUCT)
            return faiss.IndexPreTransform(faiss.OPQMatrix(d, m), pq)
        builds.append((f"faiss OPQ{budget}+PQ{budget}", opq))
    if budget == d // 8:  # 1 bit per dimension (faiss adds its factors: more bytes than the budget)
        builds.append(("faiss IndexRaBitQ 1 bit", lambda: faiss.IndexRaBitQ(d, faiss.METRIC_INNER_PRODUCT)))
    return [faiss_row(label, build(), D, Q, qids, dids, qrels, float_ndcg, fit_on) for label, build in builds]


def faiss_row(label, index, D, Q, qids, dids, qrels, float_ndcg, fit_on=None) -> dict:
    """Train a faiss index (on ``fit_on``, default the documents), fill it with the documents and
    search the queries: the row of the tables."""
    t0 = time.perf_counter()
    index.train(D if fit_on is None else fit_on)
    index.add(D)
    fit = time.perf_counter() - t0
    t1 = time.perf_counter()
    _, I = index.search(Q, 10)
    secs = time.perf_counter() - t1
    nd = evaluate_run({q: [dids[j] for j in r] for q, r in zip(qids, I)}, qrels, 10).ndcg
    size = index.sa_code_size() if hasattr(index, "sa_code_size") else index.code_size
    return {"config": label, "bytes_per_vector": int(size), "score": nd, "retention": nd / float_ndcg,
            "fit_seconds": fit, "queries_per_second": len(Q) / secs}


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--emb", default="bench-data/debian-ir")
    ap.add_argument("--data", default=str(DEBIAN))
    ap.add_argument("--qrels", default=None, help="qrels file (default: DATA/qrels.tsv.gz)")
    ap.add_argument("--name", default="Debian IR")
    ap.add_argument("--queries", type=int, default=None, help="a seeded sample of N queries (default: all)")
    ap.add_argument("--budgets", default="96,48,24,12")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--families", default=None, help="only these code families, comma-separated (e.g. rq); faiss rows only with --faiss")
    ap.add_argument("--faiss", action="store_true", help="with --families: the faiss rows as well")
    ap.add_argument("--fit-rows", type=int, default=None, help="fit on a seeded sample of N documents (default: all)")
    ap.add_argument("--norm-power", type=float, default=1.0,
                    help="score codes by <q, x_hat> / |x_hat|^P (default 1: the cosine with the reconstruction)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    D, dids, task, fit_on = load_set(args.emb, args.qrels or Path(args.data) / "qrels.tsv.gz", queries=args.queries,
                                     fit_rows=args.fit_rows)
    Q, qids, qrels = task.queries, task.query_ids, task.qrels
    ref = run_configs(D, task, ["float"], doc_ids=dids)[0]
    print(f"{args.name}, {len(D):,} documents x {D.shape[1]} dims, {len(Q):,} queries; float32 nDCG@10 {ref['score']:.4f} "
          f"({ref['queries_per_second']:,.0f} q/s); codes and fitted models only, no original vectors; fitted on "
          f"{'all documents' if fit_on is None else f'{len(fit_on):,} sampled documents'}; codes scored by "
          f"<q, x_hat> / |x_hat|^{args.norm_power:g}", flush=True)
    results = {"float": ref, "budgets": {}}
    for budget in (int(b) for b in args.budgets.split(",")):
        fams = tuple(args.families.split(",")) if args.families else None
        cands = candidates(D.shape[1], budget, families=fams)
        rows = run_configs(D, task, ["float", *(c.config for c in cands)], doc_ids=dids, fit_on=fit_on, norm_power=args.norm_power)[1:]
        if not fams or args.faiss:
            rows += faiss_rows(D, Q, qids, dids, qrels, budget, ref["score"], args.threads, fit_on)
        rows.sort(key=lambda r: -r["retention"])
        results["budgets"][budget] = rows
        print(f"\n{budget} bytes per vector ({4 * D.shape[1] / budget:.0f}x smaller)")
        print(f"  {'configuration':40s} {'bytes':>5s} {'nDCG@10':>8s} {'retention':>9s} {'fit s':>7s} {'q/s':>8s}")
        for r in rows:
            print(f"  {r['config']:40s} {r['bytes_per_vector']:5d} {r['score']:8.4f} {100 * r['retention']:8.2f}% "
                  f"{r['fit_seconds']:7.1f} {r['queries_per_second']:8.0f}", flush=True)
    if args.families:
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=2, default=float))
        return
    # RaBitQ at equal bits per dimension, ours against faiss (codes plus factors)
    rows = run_configs(D, task, ["float", "rabitq:4"], doc_ids=dids, fit_on=fit_on, norm_power=args.norm_power)[1:]
    import faiss

    rows.append(faiss_row("faiss IndexRaBitQ 4 bits", faiss.IndexRaBitQ(D.shape[1], faiss.METRIC_INNER_PRODUCT, 4),
                          D, Q, qids, dids, qrels, ref["score"], fit_on))
    results["rabitq_4_bits"] = rows
    print("\nRaBitQ, 4 bits per dimension")
    for r in rows:
        print(f"  {r['config']:40s} {r['bytes_per_vector']:5d} {r['score']:8.4f} {100 * r['retention']:8.2f}% "
              f"{r['fit_seconds']:7.1f} {r['queries_per_second']:8.0f}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2, default=float))


if __name__ == "__main__":
    main()
