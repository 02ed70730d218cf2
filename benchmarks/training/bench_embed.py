"""How fast ``embed`` is with each backend, and what the faster ones change.

Speed: the demo's texts (the standard library's docstrings, the first ``--texts`` of them, on any
machine) encoded in-process by the packaged MiniLM with ``torch`` (the reference), ``onnx`` and
``onnx-int8``, interleaved, best of ``--repeat``; texts/s and the ratio to torch in the same run.
Process start is printed apart: ``embcompress embed`` on 20 texts, per backend (best of 3).
Fidelity: the mean and lowest cosine of each backend's embedding to torch's on the same texts.

    python benchmarks/training/bench_embed.py [--texts 1000] [--repeat 3] [--batch-size 64]

Retention (the task, not the vectors): embed Debian with a backend, then compare the codes'
nDCG@10 retention on both sets of vectors (2-fold, out-of-sample):

    python benchmarks/data/embed_debian_ir.py --backend onnx-int8 --out bench-data/debian-ir/onnx-int8
    python benchmarks/training/bench_embed.py --retention bench-data/debian-ir bench-data/debian-ir/onnx-int8 \\
        --qrels ../shared/data/debian-ir/qrels.tsv.gz
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

BACKENDS = ("torch", "onnx", "onnx-int8")
CONFIGS = (
    "binary@asym",
    "rotate:center=true+binary@asym",
    "rotate:center=true+sq:1",
    "pca:192+rotate+binary@asym",
    "pca:96+sq:2",
    "pq:48",
    "int8",
)


def speed(n: int, repeat: int, batch: int, threads: int | None) -> None:
    from embcompress.embedding.corpus import stdlib_docstring_pairs
    from embcompress.embedding.embed import encode, load_model

    texts = [p.document for p in stdlib_docstring_pairs(n)]
    print(
        f"{len(texts):,} texts (the demo's docstrings, mean {np.mean([len(t) for t in texts]):.0f} characters), "
        f"batch {batch}, {os.cpu_count()} cores, best of {repeat}, interleaved"
    )
    t0 = time.perf_counter()
    models = {b: load_model(None, backend=b) for b in BACKENDS}
    print(f"models loaded (and exported where not cached) in {time.perf_counter() - t0:.1f} s")
    if threads:
        import torch

        torch.set_num_threads(threads)
    for b in BACKENDS:
        encode(models[b], texts[:64], batch_size=batch)  # warm-up: first-call allocations
    best = {b: float("inf") for b in BACKENDS}
    vecs = {}
    for _ in range(repeat):
        for b in BACKENDS:
            t = time.perf_counter()
            vecs[b] = encode(models[b], texts, batch_size=batch)
            best[b] = min(best[b], time.perf_counter() - t)
    print(f"{'backend':10s} {'seconds':>8s} {'texts/s':>8s} {'vs torch':>8s} {'mean cos':>9s} {'min cos':>8s}")
    for b in BACKENDS:
        cos = (vecs[b] * vecs["torch"]).sum(axis=1)
        print(
            f"{b:10s} {best[b]:8.2f} {len(texts) / best[b]:8.0f} {best['torch'] / best[b]:7.2f}x {cos.mean():9.5f} "
            f"{cos.min():8.4f}"
        )
    start(batch)


def start(batch: int) -> None:
    """``embcompress embed`` of 20 texts per backend, best of 3: mostly process start and model load."""
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp, "t.txt")
        src.write_text("\n".join(f"text number {i} about compression" for i in range(20)) + "\n")
        exe = [sys.executable, "-m", "embcompress.cli.main"]
        line = []
        for b in BACKENDS:
            times = []
            for i in range(3):
                out = Path(tmp, f"{b}-{i}.parquet")
                t = time.perf_counter()
                subprocess.run(
                    [*exe, "embed", str(src), str(out), "--backend", b, "-b", str(batch)],
                    check=True,
                    stdout=subprocess.DEVNULL,
                )
                times.append(time.perf_counter() - t)
            line.append(f"{b} {min(times):.2f} s")
        print("process start + model load (embed of 20 texts, a CLI process): " + ", ".join(line))


def retention(a: str, b: str, qrels: str, queries: int | None) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: _util and the other groups' modules
    from codes.bench_codes_debian import load_set

    from embcompress.evaluation.evaluate import run_configs

    out = {}
    for emb in (a, b):
        D, dids, task, _ = load_set(emb, qrels, queries=queries)
        rows = run_configs(D, task, ["float", *CONFIGS], doc_ids=dids)
        out[emb] = {r["config"]: r for r in rows}
        print(
            f"{emb}: {len(D):,} documents, {len(task.queries):,} queries, "
            f"float nDCG@10 {out[emb]['float']['score']:.4f}",
            flush=True,
        )
    print(f"{'configuration':34s} {'retention A':>11s} {'retention B':>11s} {'B - A':>7s}   (out-of-sample, 2-fold)")
    for c in CONFIGS:
        ra, rb = out[a][c]["retention"], out[b][c]["retention"]
        print(f"{c:34s} {100 * ra:10.2f}% {100 * rb:10.2f}% {100 * (rb - ra):+7.2f}")
    fa, fb = out[a]["float"]["score"], out[b]["float"]["score"]
    print(f"{'float nDCG@10':34s} {fa:11.4f} {fb:11.4f} {fb - fa:+7.4f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--texts", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=64, help="embed's default: 64")
    ap.add_argument("--threads", type=int, default=None, help="torch's threads (default: its own choice)")
    ap.add_argument("--retention", nargs=2, metavar=("EMB_A", "EMB_B"), default=None)
    ap.add_argument("--qrels", default=None)
    ap.add_argument("--queries", type=int, default=None)
    args = ap.parse_args()
    if args.retention:
        retention(*args.retention, args.qrels, args.queries)
    else:
        speed(args.texts, args.repeat, args.batch_size, args.threads)


if __name__ == "__main__":
    main()
