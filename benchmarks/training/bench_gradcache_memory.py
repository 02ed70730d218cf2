"""Peak memory of one training step (forward + backward of the loss) against the batch size, with
and without gradient caching: packaged MiniLM, every layer trainable, max_seq_length 128, Debian
(synopsis, description) pairs, InfoNCE tau 0.05. Each configuration runs in a fresh process; the
peak resident memory of that process is reported, less that of the same process after loading the
model and the texts (the baseline).

    python benchmarks/training/bench_gradcache_memory.py [--batches 64,256,1024,4096] [--mini 64]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: _util and the other groups' modules
from _util import DEBIAN, debian_training_split  # noqa: E402


def one_step(batch: int, mini: int | None) -> dict:
    import torch

    from embcompress.embedding.embed import load_model
    from embcompress.train import GradCacheLoss, InfoNCELoss

    pairs, *_ = debian_training_split(DEBIAN)
    model = load_model(None, device="cpu")
    model.max_seq_length = 128
    model.train()
    prep = getattr(model, "preprocess", None) or model.tokenize
    chosen = pairs[:batch]
    feats = [prep([p.anchor for p in chosen]), prep([p.positive for p in chosen])]
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    loss = InfoNCELoss(model, 0.05)
    if mini:
        loss = GradCacheLoss(loss, mini_batch_size=mini)
    t = time.perf_counter()
    value = loss(feats, None)
    value.backward()
    seconds = time.perf_counter() - t
    grad_norm = float(torch.sqrt(sum((p.grad.double() ** 2).sum() for p in model.parameters() if p.grad is not None)))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {
        "batch": batch,
        "mini": mini,
        "loss": float(value.detach()),
        "grad_norm": grad_norm,
        "seconds": seconds,
        "baseline_mb": base,
        "peak_mb": peak,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", default="64,256,1024,4096")
    ap.add_argument("--mini", type=int, default=64)
    ap.add_argument("--uncached-up-to", type=int, default=256, help="largest batch also run without caching")
    ap.add_argument("--child", default=None)
    args = ap.parse_args()
    if args.child:
        b, m = args.child.split(",")
        print(json.dumps(one_step(int(b), int(m) or None)))
        return
    print(f"{'batch':>6s} {'caching':>10s} {'step s':>8s} {'peak MiB':>9s} {'above baseline':>15s} {'loss':>8s}")
    for b in (int(x) for x in args.batches.split(",")):
        for m in ([0] if b <= args.uncached_up_to else []) + [args.mini]:
            r = subprocess.run([sys.executable, __file__, "--child", f"{b},{m}"], capture_output=True, text=True)
            if r.returncode:
                print(f"{b:6d} {('mini ' + str(m)) if m else 'none':>10s}  failed: {r.stderr.strip().splitlines()[-1]}")
                continue
            res = json.loads(r.stdout.strip().splitlines()[-1])
            print(
                f"{b:6d} {('mini ' + str(m)) if m else 'none':>10s} {res['seconds']:8.1f} {res['peak_mb']:9.0f} "
                f"{res['peak_mb'] - res['baseline_mb']:15.0f} {res['loss']:8.4f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
