"""Where recall@10 against exact float search is lost in a served plan: in the first stage (the true top 10
not among the candidates) or in the rescoring copy (an int8 copy misorders near-ties that float32 keeps).

The ten-million-row set (``benchmarks/streaming/bench_10m.py``) is every real vector with about 300 noisy
copies around it (noise 0.5, renormalized): a query's top 10 are copies of one document, a few thousandths
of cosine apart. This builds the same density at a smaller size (``--sources`` real documents x ``--copies``
copies, from the Debian vectors), fits the first stage and an int8 calibration on a 50,000-row sample, and
prints for each candidate count: the share of the exact top 10 among the candidates, and recall@10 after
rescoring from int8 (our calibrated copy, and per-row scaled variants), float16 and float32 copies.

    python benchmarks/serving/bench_rescore_ceiling.py --emb bench-data/debian-ir [--sources 1000] [--copies 300] \\
        [--specs rotate:center=true+sq:1] [--queries 200]

``--specs float`` takes the exact float top candidates (a perfect first stage): what the copy alone loses.
For a first stage of table codes one more copy is scored: ``int8r`` (``embcompress.serving.residual``), the
residual of the code in int8 with one scale a row, rescored as reconstruction + residual; an int8 copy's
bytes plus 8 a row, with steps sized to what the code left rather than to the whole vector.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

import embcompress
from embcompress.io import read_all
from embcompress.search.index import Index
from embcompress.serving import residual

NOISE = 0.5  # as bench_10m.py make's default


def dense_copies(D: np.ndarray, sources: int, copies: int, seed: int = 0) -> np.ndarray:
    """``copies`` noisy copies of each of ``sources`` documents, unit length, as bench_10m.py makes them."""
    rng = np.random.default_rng(seed)
    base = D[rng.choice(len(D), sources, replace=False)]
    rows = np.arange(sources * copies) % sources
    noise = rng.standard_normal((len(rows), D.shape[1]), dtype=np.float32) * np.float32(NOISE / np.sqrt(D.shape[1]))
    X = base[rows] + noise
    return X / np.linalg.norm(X, axis=1, keepdims=True)


def recall(found: np.ndarray, exact: np.ndarray) -> float:
    return float(np.mean([len(set(f) & set(e)) / exact.shape[1] for f, e in zip(found, exact)]))


def rescored(Q: np.ndarray, cands: np.ndarray, copy: np.ndarray, k: int = 10) -> np.ndarray:
    scores = np.einsum("qd,qcd->qc", Q, copy[cands])
    return np.take_along_axis(cands, np.argsort(-scores, axis=1)[:, :k], 1)


def per_row_int8(X: np.ndarray, center: np.ndarray | None = None) -> np.ndarray:
    """int8 with one scale per row (its largest magnitude), around ``center``: dequantized."""
    R = X if center is None else X - center
    m = np.abs(R).max(axis=1, keepdims=True)
    out = np.round(R / m * 127) * m / 127
    return (out if center is None else out + center).astype(np.float32)


def clipped_int8(X: np.ndarray, sample: np.ndarray, q: float) -> np.ndarray:
    """int8 per dimension over the sample's ``q`` to ``1 - q`` quantiles instead of its min and max (values
    outside clipped to the ends): finer steps for all but the tails. Dequantized."""
    lo, hi = np.quantile(sample, [q, 1 - q], axis=0).astype(np.float32)
    step = (hi - lo) / np.float32(255)
    u = np.clip(np.round((X - lo) / step), 0, 255)
    return (u * step + lo).astype(np.float32)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--emb", default="bench-data/debian-ir")
    ap.add_argument("--sources", type=int, default=1000)
    ap.add_argument("--copies", type=int, default=300)
    ap.add_argument("--specs", default="rotate:center=true+sq:1")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--candidates", default="100,300,1000,3000")
    args = ap.parse_args()
    D, _ = read_all(Path(args.emb) / "corpus.parquet")
    Q, _ = read_all(Path(args.emb) / "queries.parquet")
    D = D / np.linalg.norm(D, axis=1, keepdims=True)
    Q = Q[: args.queries] / np.linalg.norm(Q[: args.queries], axis=1, keepdims=True)
    X = dense_copies(D, args.sources, args.copies)
    exact = np.argsort(-(Q @ X.T), axis=1)[:, :10]
    sample = X[np.random.default_rng(1).choice(len(X), min(50_000, len(X)), replace=False)]
    int8 = embcompress.from_spec("int8").fit(sample)
    copies = {
        "int8 (calibrated ranges)": int8.decode(int8.transform(X)),
        "int8 (per-row scale)": per_row_int8(X),
        "int8 (per-row scale, centred)": per_row_int8(X, sample.mean(axis=0)),
        "int8 (clipped 0.1%)": clipped_int8(X, sample, 1e-3),
        "int8 (clipped 1%)": clipped_int8(X, sample, 1e-2),
        "float16": X.astype(np.float16).astype(np.float32),
        "float32": X,
    }
    print(
        f"{len(X):,} rows: {args.sources:,} Debian documents x {args.copies} copies (noise {NOISE}); "
        f"{len(Q)} real queries; recall@10 against exact float search"
    )
    for spec in args.specs.split(","):
        t = time.perf_counter()
        if spec == "float":  # a perfect first stage: what the copy alone loses
            index = Index(X)
        else:
            comp = embcompress.from_spec(spec).fit(sample)
            index = Index(comp.transform(X), compressor=comp)
        scored = dict(copies)
        if spec != "float" and residual.supports(comp):  # the int8r copy, as a plan stores it
            rows = residual.encode(comp, X, index.data)
            scored["int8r (the code's residual)"] = residual.ResidualCopy.of_array(rows, index).get(np.arange(len(X)))
        print(f"\n{spec} (fitted and encoded in {time.perf_counter() - t:.1f} s)")
        print(f"  {'candidates':>10} {'top 10 among them':>18}  " + "  ".join(f"{name:>30}" for name in scored))
        for c in (int(v) for v in args.candidates.split(",")):
            cands = index.search(Q, c).rows
            cells = "  ".join(f"{recall(rescored(Q, cands, copy), exact):30.4f}" for copy in scored.values())
            print(f"  {c:>10} {recall(cands, exact):18.4f}  {cells}", flush=True)


if __name__ == "__main__":
    main()
