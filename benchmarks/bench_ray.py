"""Local engine against --engine ray on this machine: a dataset of parquet shards binarized both
ways in one process (same output bytes), with rows/s and the ratio.

    python benchmarks/bench_ray.py [--shards 4] [--rows 200000] [--dim 1024] [--dir bench-data]

On one machine Ray cannot beat the local engine (both use every core; Ray adds task scheduling,
actor start-up and moving every block through its object store to the driver): the figure shows
what the cluster path costs, and that it works end to end, before it is pointed at a cluster.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import make_parquet  # noqa: E402

from embcompress import Binary  # noqa: E402
from embcompress.engine_ray import RayEngine, connect  # noqa: E402
from embcompress.stream import compress_file, fit_file  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--rows", type=int, default=200_000, help="rows per shard")
    ap.add_argument("--dim", type=int, default=1024)
    ap.add_argument("--dir", default="bench-data")
    args = ap.parse_args()
    root = Path(args.dir) / f"dataset_{args.shards}x{args.rows}x{args.dim}"
    for i in range(args.shards):
        make_parquet(root / f"part-{i:03d}.parquet", args.rows, args.dim, seed=100 + i)
    gb = sum(p.stat().st_size for p in root.glob("*.parquet")) / 1e9
    rows = args.shards * args.rows
    comp = fit_file(Binary(decoder="sign"), root, max_rows=1024)
    out_local, out_ray = Path(args.dir) / "ray_bench_local", Path(args.dir) / "ray_bench_ray"
    for p in (out_local, out_ray):
        shutil.rmtree(p, ignore_errors=True)
    compress_file(comp, root, out_local)  # warm the page cache
    shutil.rmtree(out_local)
    t = time.perf_counter()
    compress_file(comp, root, out_local)
    t_local = time.perf_counter() - t
    t = time.perf_counter()
    connect()
    t_start = time.perf_counter() - t
    engine = RayEngine()
    t = time.perf_counter()
    engine.compress_file(comp, root, out_ray)
    t_ray = time.perf_counter() - t
    same = all((out_local / p.name).read_bytes() == p.read_bytes() for p in out_ray.glob("*.parquet"))
    print(f"dataset: {root} ({args.shards} shards, {rows:,} x {args.dim} float32, {gb:.2f} GB)")
    print(f"local engine (every core)    : {t_local:6.2f} s  {rows / t_local:10,.0f} rows/s  {gb / t_local:5.2f} GB/s")
    print(f"ray engine (local Ray)       : {t_ray:6.2f} s  {rows / t_ray:10,.0f} rows/s  {gb / t_ray:5.2f} GB/s"
          f"  (+ {t_start:.1f} s to start Ray)")
    print(f"ray / local time             : {t_ray / t_local:6.2f}x;  output bytes identical: {same}")
    for p in (out_local, out_ray):
        shutil.rmtree(p, ignore_errors=True)


if __name__ == "__main__":
    main()
