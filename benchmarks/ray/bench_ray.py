"""--engine ray on a multi-node Ray cluster on this machine, against the local engine in the same
run: rows/s with 1, 2 and 3 worker nodes (one CPU each; ``ray.cluster_utils.Cluster``, a head that
only schedules plus the nodes, each its own raylet and worker processes), for an encode-bound code
(``rq:24``) and for sign bits (``binarize``, read- and write-bound). Every run's output is checked
byte for byte against the local engine's.

    python benchmarks/ray/bench_ray.py [--shards 12] [--rows 60000] [--dim 384] [--codes rq:24,binary] [--nodes 1,2,3]
        [--json benchmarks/results/ray.json]
    python benchmarks/ray/bench_ray.py --table benchmarks/results/ray.json [--readme benchmarks/ray/README.md]

Printed per run: wall seconds, rows/s, the ratio to the local engine (every core of this machine,
2 here), the bytes the driver received from the workers against the output's bytes, and the Ray
overhead per unit of work (a shard): the worker time not spent inside the shard task, per task,
``(wall x workers - sum of task seconds) / shards``. With 3 one-CPU nodes on 2 cores, the third
node only shares the cores of the first two.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: _util and the other groups' modules
from _util import make_parquet, show_table  # noqa: E402

from embcompress import from_spec  # noqa: E402
from embcompress.engines.ray import ray_compress  # noqa: E402
from embcompress.engines.local import compress_file, fit_file  # noqa: E402


def _identical(a: Path, b: Path) -> bool:
    rels = sorted(p.relative_to(a) for p in a.rglob("*.parquet"))
    return bool(rels) and all((a / r).read_bytes() == (b / r).read_bytes() for r in rels)


START, END = "<!-- ray-table -->", "<!-- /ray-table -->"


def table(run: dict) -> str:
    """Per code: the local engine's rows/s and each cluster size's, with its ratio to the local engine."""
    out = [
        "| code | engine | wall | rows/s | against local | overhead per shard | output identical |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in run["rows"]:
        if r["nodes"] == 0:
            engine, ratio, overhead, same = "local (every core)", "1.00x", "", ""
        else:
            engine, ratio = f"ray, {r['nodes']} node(s)", f"{r['ratio']:.2f}x"
            overhead, same = f"{r['overhead']:.2f} s", str(r["identical"])
        out.append(
            f"| `{r['code']}` | {engine} | {r['wall_seconds']:.1f} s | {r['rows_per_second']:,.0f} | {ratio} "
            f"| {overhead} | {same} |"
        )
    out += [
        "",
        f"{run['shards']} shards x {run['rows_per_shard']:,} rows x {run['dim']} float32; worker nodes of one CPU "
        f"each on this machine ({run['machine']}), a head that only schedules; {run['date']}.",
    ]
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shards", type=int, default=12)
    # 60,000 rows: a shard of rq:24 takes 5-6 s on one core; a real dump's shards hold 10^5-10^6 rows.
    # With 20,000 (2 s a shard) Ray's per-task costs weigh more: 2 nodes ran at 0.74x, against 0.87x.
    ap.add_argument("--rows", type=int, default=60_000, help="rows per shard")
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--codes", default="rq:24,binary")
    ap.add_argument("--nodes", default="1,2,3")
    ap.add_argument("--dir", default="bench-data")
    ap.add_argument("--json", default=None)
    ap.add_argument("--table", default=None, help="a run's JSON: print its table (or write it into --readme)")
    ap.add_argument("--readme", default=None)
    args = ap.parse_args()
    if args.table:
        return show_table(table(json.loads(Path(args.table).read_text())), args.readme, START, END)
    run = {
        "shards": args.shards,
        "rows_per_shard": args.rows,
        "dim": args.dim,
        "machine": f"{os.cpu_count()} cores",
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "rows": [],
    }
    import ray
    from ray.cluster_utils import Cluster

    root = Path(args.dir) / f"ray_dataset_{args.shards}x{args.rows}x{args.dim}"
    for i in range(args.shards):
        make_parquet(root / f"part-{i:03d}.parquet", args.rows, args.dim, seed=100 + i)
    gb = sum(p.stat().st_size for p in root.glob("*.parquet")) / 1e9
    rows = args.shards * args.rows
    print(f"dataset: {root} ({args.shards} shards, {rows:,} x {args.dim} float32, {gb:.2f} GB); this machine: 2 cores")
    out = Path(args.dir) / "ray_bench_out"
    for spec in args.codes.split(","):
        comp = fit_file(from_spec(spec if spec != "rq:24" else "rq:24:max_rows=5000"), root, max_rows=5000)
        local = out / "local"
        shutil.rmtree(out, ignore_errors=True)
        compress_file(comp, root, local)  # warm the page cache
        shutil.rmtree(local)
        t = time.perf_counter()
        compress_file(comp, root, local)
        t_local = time.perf_counter() - t
        print(f"\n{spec}: local engine (2 threads)     {t_local:7.2f} s {rows / t_local:10,.0f} rows/s")
        run["rows"].append({"code": spec, "nodes": 0, "wall_seconds": t_local, "rows_per_second": rows / t_local})
        for n in (int(x) for x in args.nodes.split(",")):
            cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
            for _ in range(n):
                cluster.add_node(num_cpus=1)
            cluster.wait_for_nodes()
            ray.init(address=cluster.address, log_to_driver=False, logging_level="ERROR")
            try:
                got: dict = {}
                dst = out / f"ray{n}"
                t = time.perf_counter()
                ray_compress(comp, root, dst, received=got)
                wall = time.perf_counter() - t
                size = sum(p.stat().st_size for p in dst.rglob("*.parquet"))
                overhead = (wall * n - got["task_seconds"]) / args.shards
                print(
                    f"{spec}: ray, {n} worker node(s)       {wall:7.2f} s {rows / wall:10,.0f} rows/s  "
                    f"{t_local / wall:5.2f}x local;  driver received {got['bytes']:,} B for {size:,} B of output "
                    f"({100 * got['bytes'] / size:.4f}%);  overhead {overhead:5.2f} s per shard;  "
                    f"identical: {_identical(local, dst)}",
                    flush=True,
                )
                run["rows"].append(
                    {
                        "code": spec,
                        "nodes": n,
                        "wall_seconds": wall,
                        "rows_per_second": rows / wall,
                        "ratio": t_local / wall,
                        "overhead": overhead,
                        "identical": _identical(local, dst),
                        "driver_bytes": got["bytes"],
                        "output_bytes": size,
                    }
                )
                if args.json:
                    Path(args.json).write_text(json.dumps(run, indent=1))
            finally:
                ray.shutdown()
                cluster.shutdown()
    shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
