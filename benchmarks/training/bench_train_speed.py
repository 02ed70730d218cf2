"""CPU training throughput: this machine's dense matmul FLOP/s, and the pairs/s and training FLOP/s
that `train` reaches on the Debian (synopsis, description) pairs with the packaged MiniLM, batch 32,
max_seq_length 128: the hand-written loop that `train` used before (random homogeneous batches, every
layer trained) as the reference, the same settings on SentenceTransformerTrainer, then each lever
added. All in one process, one after the other.

    python benchmarks/training/bench_train_speed.py [--steps 24] [--skip 4] [--json
    benchmarks/results/training-speed.json]
    python benchmarks/training/bench_train_speed.py --table benchmarks/results/training-speed.json [--readme FILE]

FLOPs per pair are counted from the tokens actually run through the encoder (padded batches):
forward 2 x (non-embedding parameters) per token plus the attention products (4 x T^2 x d per
sequence and layer), backward twice the forward for the layers that train (frozen layers run forward
only). "useful" counts the same on the unpadded tokens.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: _util and the other groups' modules
from training._handwritten_loop import handwritten_pairs_per_second  # noqa: E402
from _util import DEBIAN, debian_training_split, show_table  # noqa: E402

from embcompress.embedding.embed import load_model  # noqa: E402
from embcompress.train import LossConfig, TrainConfig, train  # noqa: E402
from embcompress.train.trainer import make_sampler  # noqa: E402


def matmul_flops(repeat: int = 10) -> tuple[float, str]:
    """The best sustained float32 matmul rate over square and encoder-shaped products (best of
    ``repeat`` each): FLOP/s and the shape that reached it."""
    best_rate, best_shape = 0.0, ""
    for m, k, n in ((1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096), (4096, 384, 1536), (4096, 1536, 384)):
        a, b = torch.randn(m, k), torch.randn(k, n)
        a @ b
        for _ in range(repeat):
            t = time.perf_counter()
            a @ b
            rate = 2 * m * k * n / (time.perf_counter() - t)
            if rate > best_rate:
                best_rate, best_shape = rate, f"{m}x{k} @ {k}x{n}"
    return best_rate, best_shape


def flops_per_pair(model, pairs, cfg: TrainConfig, n_batches: int = 40) -> tuple[float, float]:
    """Mean training FLOPs per pair over the sampler's batches: (as run, padded; useful, unpadded)."""
    tok = model.tokenizer
    auto = model[0].auto_model
    layers = auto.config.num_hidden_layers
    d = auto.config.hidden_size
    per_layer = sum(p.numel() for p in auto.encoder.layer[0].parameters())  # weights of one transformer layer
    trained = layers - cfg.freeze_layers
    sampler = make_sampler(pairs, cfg)  # the batches `train` runs
    run = useful = 0.0
    n = 0
    for k, batch in enumerate(sampler):
        if k == n_batches:
            break
        for col in ("anchor", "positive"):
            lens = np.array([min(len(tok(getattr(pairs[i], col))["input_ids"]), cfg.max_seq_length) for i in batch])

            def cost(T):
                fwd_layer = 2 * per_layer * T + 4 * T * T * d
                return layers * fwd_layer + trained * 2 * fwd_layer

            run += cost(lens.max()) * len(lens)
            useful += sum(cost(t) for t in lens)
        n += len(batch)
    return run / n, useful / n


START, END = "<!-- train-speed-table -->", "<!-- /train-speed-table -->"


def table(run: dict) -> str:
    """Per configuration: pairs/s, against the hand-written loop, and the FLOP/s it reaches."""
    out = [
        "| configuration | pairs/s | against the loop | GFLOP per pair | training GFLOP/s | of the matmul peak |",
        "|---|---|---|---|---|---|",
    ]
    for r in run["rows"]:
        out.append(
            f"| {r['configuration']} | {r['pairs_per_second']:.1f} | {r['ratio']:.2f}x | {r['gflop_per_pair']:.2f} | "
            f"{r['train_gflops']:.1f} | {100 * r['of_peak']:.0f}% |"
        )
    out += [
        "",
        f"Debian (synopsis, description) pairs, the packaged MiniLM, batch 32, max_seq_length 128, InfoNCE at "
        f"tau 0.05; {run['steps']} steps, the first {run['skip']} left out; dense float32 matmul peak "
        f"{run['peak_gflops']:.1f} GFLOP/s; {run['threads']} torch threads, {run['machine']}, no GPU; {run['date']}.",
    ]
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=str(DEBIAN))
    ap.add_argument("--steps", type=int, default=24)
    ap.add_argument("--skip", type=int, default=4, help="first steps left out of the timing (warm-up)")
    ap.add_argument("--out", default="bench-data/train-speed")
    ap.add_argument("--json", default=None)
    ap.add_argument("--table", default=None, help="a run's JSON: print its table (or write it into --readme)")
    ap.add_argument("--readme", default=None)
    args = ap.parse_args()
    if args.table:
        return show_table(table(json.loads(Path(args.table).read_text())), args.readme, START, END)
    pairs, *_ = debian_training_split(args.data)
    peak, shape = matmul_flops()
    print(f"{len(pairs):,} Debian training pairs; {torch.get_num_threads()} torch threads")
    print(f"dense float32 matmul, best sustained: {peak / 1e9:.1f} GFLOP/s ({shape})")
    run = {
        "steps": args.steps,
        "skip": args.skip,
        "peak_gflops": peak / 1e9,
        "threads": torch.get_num_threads(),
        "machine": f"{os.cpu_count()} cores",
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "rows": [],
    }

    def record(name: str, pps: float, fpp: float) -> None:
        run["rows"].append(
            {
                "configuration": name,
                "pairs_per_second": pps,
                "ratio": pps / first,
                "gflop_per_pair": fpp / 1e9,
                "train_gflops": pps * fpp / 1e9,
                "of_peak": pps * fpp / peak,
            }
        )
        if args.json:
            Path(args.json).write_text(json.dumps(run, indent=1))

    base = dict(
        steps=args.steps, batch_size=32, max_seq_length=128, loss=LossConfig("infonce", tau=0.05), small_sources="mix"
    )
    configs = [
        ("SentenceTransformerTrainer, same settings", TrainConfig(**base)),
        ("+ length-grouped batches", TrainConfig(**base, group_by_length=True)),
        ("+ length-grouped, lower 3 layers frozen", TrainConfig(**base, group_by_length=True, freeze_layers=3)),
        ("+ length-grouped, lower 4 layers frozen", TrainConfig(**base, group_by_length=True, freeze_layers=4)),
    ]
    model = load_model(None, device="cpu")
    model.max_seq_length = 128
    fpp_old, useful_old = flops_per_pair(model, pairs, TrainConfig(**base))
    old = handwritten_pairs_per_second(model, pairs, steps=args.steps, skip=args.skip)
    print(
        f"\n{'configuration':48s} {'pairs/s':>8s} {'vs before':>9s} {'GFLOP/pair':>10s} {'train GFLOP/s':>13s} "
        f"{'of peak':>7s} {'useful GFLOP/s':>14s}"
    )
    first = old
    print(
        f"{'before: the hand-written loop (embcompress 7154c61)':48s} {old:8.1f} {1:8.2f}x {fpp_old / 1e9:10.2f} "
        f"{old * fpp_old / 1e9:13.1f} {old * fpp_old / peak:6.0%} {old * useful_old / 1e9:14.1f}",
        flush=True,
    )
    record("the hand-written loop `train` used before (7154c61)", old, fpp_old)
    for name, cfg in configs:
        model = load_model(None, device="cpu")
        model.max_seq_length = cfg.max_seq_length
        fpp, useful = flops_per_pair(model, pairs, cfg)
        res = train(pairs, Path(args.out) / "run", cfg, overwrite=True, model=model)
        hist = json.loads((Path(args.out) / "run" / "train_summary.json").read_text())["history"]
        t0 = hist[args.skip - 1]["seconds"]
        t1 = hist[-1]["seconds"]
        pps = (len(hist) - args.skip) * cfg.batch_size / (t1 - t0)
        print(
            f"{name:48s} {pps:8.1f} {pps / first:8.2f}x {fpp / 1e9:10.2f} {pps * fpp / 1e9:13.1f} "
            f"{pps * fpp / peak:6.0%} {pps * useful / 1e9:14.1f}",
            flush=True,
        )
        record(name, pps, fpp)
        del res
    print("\n(the issue's 8.5 pairs/s was the hand-written loop in an earlier session's run, benchmarks/README.md)")


if __name__ == "__main__":
    main()
