"""The temperature study on the Debian set, CPU-sized: one model per InfoNCE temperature plus
TempAgg, fine-tuned from the packaged all-MiniLM-L6-v2 on (synopsis, description) pairs with
homogeneous batches by Debian section, evaluated on 1,000 held-out queries (their judged documents
plus 1,000 others): full nDCG@10, intrinsic dimensionality, retention at 1/4 width, binary, binary +
rerank. Writes study.json and study.svg (the plot) to --out. Meant to run in the background:

    python benchmarks/training/bench_train_debian.py --out bench-data/debian-study

The default configuration fits the study in under an hour on 2 CPU cores: the top 2 of 6 layers
train (the lower 4 and the embeddings frozen), length-grouped batches of 64, 250 steps at lr 1e-4.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: _util and the other groups' modules
from _util import DEBIAN, debian_training_split  # noqa: E402

from embcompress.train import LossConfig, TrainConfig  # noqa: E402
from embcompress.io.datasets import Beir  # noqa: E402
from embcompress.train.study import count_leaks, study_svg, temperature_study  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=str(DEBIAN))
    ap.add_argument("--out", default="bench-data/debian-study")
    ap.add_argument("--eval-queries", type=int, default=1000)
    ap.add_argument("--extra-docs", type=int, default=1000, help="unjudged documents added to the evaluation corpus")
    ap.add_argument("--taus", default="0.02,0.05,0.1,0.3")
    ap.add_argument("--steps", type=int, default=250)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--freeze-layers", type=int, default=4)
    ap.add_argument("--no-group-by-length", action="store_true")
    args = ap.parse_args()
    t_start = time.perf_counter()
    pairs, corpus, queries, qrels = debian_training_split(args.data, args.eval_queries, args.extra_docs)
    print(
        f"train pairs: {len(pairs):,} (homogeneous batches by Debian section, small sections pooled); "
        f"{count_leaks(pairs, queries)} training anchors equal a held-out query; held out: {len(queries):,} queries, "
        f"{len(corpus):,} documents",
        flush=True,
    )
    base = TrainConfig(
        steps=args.steps,
        batch_size=args.batch_size,
        lr=args.lr,
        freeze_layers=args.freeze_layers,
        group_by_length=not args.no_group_by_length,
        small_sources="mix",
        max_seq_length=128,
    )
    losses = [LossConfig("infonce", tau=float(t)) for t in args.taus.split(",")] + [LossConfig("tempagg")]
    out = Path(args.out)
    res = temperature_study(
        pairs,
        Beir(corpus=corpus, queries=queries, qrels=qrels),
        losses,
        base,
        out,
        include_base=True,
        overwrite=True,
        progress=lambda m: print(f"  [{time.perf_counter() - t_start:5.0f} s] {m}", flush=True),
    )
    res["config"] = {k: v for k, v in vars(args).items()}
    res["wall_seconds"] = time.perf_counter() - t_start
    (out / "study.json").write_text(json.dumps(res, indent=2, default=str))
    (out / "study.svg").write_text(study_svg(res))
    keys = [k for k in res["rows"][-1] if k.startswith(("ndcg", "intrinsic", "retention"))]
    print(
        f"\ntemperature study: {args.steps} steps x batch {args.batch_size}, lr {args.lr:g}, lower "
        f"{args.freeze_layers} "
        f"layers frozen, {'length-grouped' if not args.no_group_by_length else 'random'} homogeneous batches; "
        f"wall time {res['wall_seconds'] / 60:.1f} min"
    )
    print(
        f"{'model':26s}"
        + "".join(f"{k.replace('retention_', 'kept ').replace('_', ' '):>20s}" for k in keys)
        + f"{'pairs/s':>9s}"
    )
    for r in res["rows"]:
        print(
            f"{r['model']:26s}"
            + "".join(f"{r[k]:20.0f}" if k == "intrinsic_dim" else f"{r[k]:20.4f}" for k in keys)
            + (f"{r['pairs_per_second']:9.1f}" if "pairs_per_second" in r else f"{'':9s}")
        )
    print(f"\nwrote {out / 'study.json'} and {out / 'study.svg'}")


if __name__ == "__main__":
    main()
