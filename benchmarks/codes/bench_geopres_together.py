"""GeoPres at several widths fitted one after another (each alone) against fitted together
(``embcompress.compressors.fit_together``: the same batches, each batch's distance matrix once for
all), on the same rows of a file, alternated, best of ``--repeat``; and whether every model is
the same bit for bit. The report fits its three GeoPres widths this way on each fold.

    python benchmarks/codes/bench_geopres_together.py --emb bench-data/big60k/minilm/corpus.parquet [--rows 25000]
    [--widths 192,96,48] [--repeat 2]
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--emb", required=True, help="a parquet file of embeddings")
    ap.add_argument(
        "--rows", type=int, default=25_000, help="rows fitted on (the report's fold at its 50,000-row sample)"
    )
    ap.add_argument("--widths", default="192,96,48")
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()

    from embcompress import from_spec
    from embcompress.compressors import fit_together
    from embcompress.io import read_sample

    X = read_sample(args.emb, limit=args.rows)[0]
    specs = [f"geopres:{w}" for w in args.widths.split(",")]
    print(
        f"GeoPres {', '.join(specs)} on {len(X):,} x {X.shape[1]} rows of {args.emb}; best of {args.repeat}, "
        f"{time.strftime('%Y-%m-%d %H:%M')}"
    )
    best = {"alone": float("inf"), "together": float("inf")}
    models = {}
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        models["alone"] = [from_spec(s).fit(X) for s in specs]
        best["alone"] = min(best["alone"], time.perf_counter() - t0)
        t0 = time.perf_counter()
        models["together"] = [from_spec(s) for s in specs]
        fit_together(models["together"], X)
        best["together"] = min(best["together"], time.perf_counter() - t0)
    same = all(
        np.array_equal(a.components_, b.components_) and a.best_step_ == b.best_step_
        for a, b in zip(models["alone"], models["together"])
    )
    steps = ", ".join(f"{s}: {m.history_[-1]['step']} steps" for s, m in zip(specs, models["alone"]))
    print(f"  alone     {best['alone']:8.1f} s   ({steps})")
    print(
        f"  together  {best['together']:8.1f} s   {best['alone'] / best['together']:.2f}x   same models bit for bit: "
        f"{same}"
    )


if __name__ == "__main__":
    main()
