"""CPU training benchmark on the Debian set: fine-tune the packaged all-MiniLM-L6-v2 on (synopsis,
description) pairs for a few hundred steps and compare before and after on held-out queries; then
a CPU-sized temperature study. Evaluation queries (and only they) are removed from training.

    python benchmarks/bench_train_debian.py [--steps 200] [--study-steps 60] [--eval-queries 1000]
"""

from __future__ import annotations

import argparse
import gzip
import json
import time
from pathlib import Path

import numpy as np

from embcompress.datasets import load_beir
from embcompress.embed import load_model
from embcompress.train import LossConfig, Pair, TrainConfig, train
from embcompress.train.study import evaluate_model, temperature_study


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=str(Path(__file__).resolve().parents[1].parent / "shared/data/debian-ir"))
    ap.add_argument("--out", default="bench-data/debian-train")
    ap.add_argument("--eval-queries", type=int, default=1000)
    ap.add_argument("--extra-docs", type=int, default=1000, help="unjudged documents added to the evaluation corpus")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--study-steps", type=int, default=60)
    ap.add_argument("--study-taus", default="0.02,0.05,0.1,0.3")
    args = ap.parse_args()
    data = load_beir(args.data)
    rng = np.random.default_rng(0)
    qids = sorted(q for q in data.qrels if q in data.queries)
    eval_q = set(rng.choice(qids, size=args.eval_queries, replace=False).tolist())
    eval_docs = {d for q in eval_q for d in data.qrels[q]}
    others = [d for d in data.corpus if d not in eval_docs]
    eval_docs |= set(rng.choice(others, size=args.extra_docs, replace=False).tolist())
    corpus = {d: data.corpus[d] for d in sorted(eval_docs)}
    queries = {q: data.queries[q] for q in sorted(eval_q)}
    qrels = {q: data.qrels[q] for q in eval_q}
    sections = {}
    with gzip.open(Path(args.data) / "corpus.jsonl.gz", "rt") as fh:
        for line in fh:
            rec = json.loads(line)
            sections[rec["_id"]] = rec.get("section")
    pairs = [Pair(data.queries[q], data.corpus[d], source=sections.get(d)) for q in qids if q not in eval_q
             for d, g in data.qrels[q].items() if g > 0 and d in data.corpus]
    held = set(queries.values())
    leaked = sum(1 for p in pairs if p.anchor in held)  # same synopsis text on two packages
    print(f"train pairs: {len(pairs):,} (homogeneous batches by Debian section; {leaked} share a synopsis text with a "
          f"held-out query); held out: {len(queries):,} queries, {len(corpus):,} documents")
    out = Path(args.out)

    t0 = time.perf_counter()
    before = evaluate_model(load_model(None), corpus, queries, qrels)
    print(f"before: {json.dumps({k: round(v, 4) for k, v in before.items()})} ({time.perf_counter() - t0:.0f} s)", flush=True)
    cfg = TrainConfig(loss=LossConfig("infonce", tau=0.05), steps=args.steps, batch_size=args.batch_size)
    res = train(pairs, out / "infonce_0.05", cfg, overwrite=True)
    after = evaluate_model(load_model(res["output"]), corpus, queries, qrels)
    print(f"trained InfoNCE tau=0.05, {args.steps} steps x {args.batch_size}: loss {res['first_loss']:.3f} -> "
          f"{res['last_loss']:.3f}, {res['pairs_per_second']:.1f} pairs/s, {res['seconds']:.0f} s")
    print(f"after:  {json.dumps({k: round(v, 4) for k, v in after.items()})}", flush=True)

    if args.study_steps:
        losses = [LossConfig("infonce", tau=float(t)) for t in args.study_taus.split(",")] + [LossConfig("tempagg")]
        study = temperature_study(pairs, corpus, queries, qrels, losses,
                                  TrainConfig(steps=args.study_steps, batch_size=args.batch_size), out / "study",
                                  include_base=False, overwrite=True, progress=lambda m: print("  " + m, flush=True))
        (out / "study.json").write_text(json.dumps(study, indent=2, default=str))
        keys = [k for k in study["rows"][0] if k.startswith(("ndcg", "intrinsic", "retention"))]
        print(f"\ntemperature study (CPU-sized: {args.study_steps} steps x {args.batch_size})")
        print(f"{'model':26s}" + "".join(f"{k:>26s}" for k in keys) + f"{'pairs/s':>9s}")
        for r in study["rows"]:
            print(f"{r['model']:26s}" + "".join(f"{r[k]:26.4f}" for k in keys) + f"{r['pairs_per_second']:9.1f}")


if __name__ == "__main__":
    main()
