"""Resident memory of serving a plan's tiers with the ids read from the files ``apply`` keeps (``TIERS/ids.offsets.npy``
+ ``ids.bytes``, serving.ids: positioned reads of the results' ids only) against the same tiers with the ids read
into memory from the codes' parquet (``open_tiers(id_column="id")``, what every server did before).

Each server runs in a fresh process (peak RSS is a process's own), the two in alternation, ``--rounds`` times;
each answers the same queries one at a time, and the two are checked to return the same rows, scores and ids.

    python benchmarks/serving/bench_ids_rss.py [--rows 10000000] [--dim 64] [--rounds 2]

The input (in ``--dir``, kept for the next run) is ``--rows`` generated unit vectors of ``--dim`` dimensions with
string ids of 13 characters (``doc-000000017``); the plan is sign bits in RAM (``dim`` / 8 bytes) with an int8
copy on disk, 100 candidates rescored, fitted on the first 20,000 rows.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: _util
from _util import alternating_runs, vm_mib  # noqa: E402

QUERIES = 200
CHUNK = 500_000


def _input(path: Path, rows: int, dim: int) -> Path:
    """``rows`` unit vectors with string ids, written in chunks (reused when there with that many rows)."""
    if path.exists() and pq.ParquetFile(path).metadata.num_rows == rows:
        return path
    rng = np.random.default_rng(0)
    schema = pa.schema([("id", pa.string()), ("embedding", pa.list_(pa.float32(), dim))])
    tmp = path.with_suffix(".tmp")
    with pq.ParquetWriter(tmp, schema) as w:
        for start in range(0, rows, CHUNK):
            n = min(CHUNK, rows - start)
            X = rng.standard_normal((n, dim), dtype=np.float32)
            X /= np.linalg.norm(X, axis=1, keepdims=True)
            ids = pa.array([f"doc-{i:09d}" for i in range(start, start + n)])
            emb = pa.FixedSizeListArray.from_arrays(pa.array(X.reshape(-1)), dim)
            w.write_table(pa.table({"id": ids, "embedding": emb}, schema=schema), row_group_size=65_536)
    tmp.rename(path)
    return path


def make(args) -> tuple[Path, Path, float]:
    """The plan and its tiers under ``--dir`` (made unless there): (plan, tiers, apply seconds or 0)."""
    import embcompress
    from embcompress.serving.plan import Plan, save_plan
    from embcompress.serving.tiers import apply_plan

    out = Path(args.dir)
    out.mkdir(parents=True, exist_ok=True)
    src = _input(out / f"docs-{args.rows}-{args.dim}.parquet", args.rows, args.dim)
    plan, tiers = out / "plan", out / f"tiers-{args.rows}-{args.dim}"
    if plan.exists() and (tiers / "tiers.json").exists():
        return plan, tiers, 0.0
    first = pq.ParquetFile(src).read_row_group(0).column("embedding").combine_chunks()
    X = np.asarray(first.flatten()).reshape(-1, args.dim)[:20_000]
    shutil.rmtree(plan, ignore_errors=True)
    shutil.rmtree(tiers, ignore_errors=True)
    save_plan(
        Plan(copy="int8", candidates=100, k=10),
        embcompress.from_spec("binary").fit(X),
        plan,
        copy_model=embcompress.Int8().fit(X),
    )
    t0 = time.perf_counter()
    apply_plan(plan, src, tiers)
    return plan, tiers, time.perf_counter() - t0


def child(args) -> None:
    """One server in this process: JSON of its memory, its open and query times and what it found."""
    from embcompress.serving.tiers import open_tiers

    t0 = time.perf_counter()
    served = open_tiers(args.tiers, args.plan, id_column="id" if args.mode == "in-memory" else None)
    opened = time.perf_counter() - t0
    after_open = vm_mib("VmRSS")
    Q = np.random.default_rng(1).standard_normal((QUERIES, args.dim)).astype(np.float32)
    served.search(Q[:1])  # the first query's one-off work (page faults of the codes) is not a query's cost
    times, rows, scores, ids = [], [], [], []
    for q in Q:
        t = time.perf_counter()
        res = served.search(q[None])
        times.append(time.perf_counter() - t)
        rows.append(res.rows[0].tolist()), scores.append(res.scores[0].tolist()), ids.append(res.ids[0].tolist())
    out = {
        "mode": args.mode,
        "ids": type(served.index.ids).__name__,
        "open_seconds": opened,
        "rss_after_open_mib": after_open,
        "rss_after_queries_mib": vm_mib("VmRSS"),
        "peak_rss_mib": vm_mib("VmHWM"),
        "codes_mib": served.index.data.nbytes / 2**20,
        "p50_ms": float(np.median(times) * 1e3),
        "p99_ms": float(np.percentile(times, 99) * 1e3),
        "rows": rows,
        "scores": scores,
        "found_ids": ids,
    }
    print(json.dumps(out))


def _summary(runs: list[dict]) -> dict:
    by = {m: [x for x in runs if x["mode"] == m] for m in ("in-memory", "on-disk")}
    med = {
        key: {m: float(np.median([x[key] for x in v])) for m, v in by.items()}
        for key in ("peak_rss_mib", "rss_after_open_mib", "rss_after_queries_mib", "open_seconds", "p50_ms", "p99_ms")
    }
    first = by["in-memory"][0]
    med["identical"] = all(x[k] == first[k] for x in runs for k in ("rows", "scores", "found_ids"))
    return med


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--dir", default="bench-data/ids-rss")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--json", default=None)
    ap.add_argument("--child", choices=["in-memory", "on-disk"], default=None, help=argparse.SUPPRESS)
    ap.add_argument("--plan", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--tiers", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        args.mode = args.child
        return child(args)
    t0 = time.perf_counter()
    plan, tiers, applied = make(args)
    ids_mib = sum(f.stat().st_size for f in tiers.glob("ids.*")) / 2**20
    print(
        f"{args.rows:,} rows of {args.dim} dims, string ids; tiers in {tiers} (made or found in "
        f"{time.perf_counter() - t0:.0f} s, apply {applied:.0f} s); the ids' files {ids_mib:,.0f} MiB",
        flush=True,
    )

    def show(mode: str, x: dict) -> None:
        print(
            f"  {mode:9} ({x['ids']}): resident {x['rss_after_open_mib']:,.0f} MiB after opening, "
            f"{x['rss_after_queries_mib']:,.0f} MiB after {QUERIES} queries, peak {x['peak_rss_mib']:,.0f} MiB; "
            f"codes {x['codes_mib']:,.0f} MiB; opened in {x['open_seconds']:.1f} s; "
            f"p50 {x['p50_ms']:.1f} ms, p99 {x['p99_ms']:.1f} ms",
            flush=True,
        )

    extra = ["--plan", str(plan), "--tiers", str(tiers), "--dim", str(args.dim)]
    runs = alternating_runs(__file__, ("in-memory", "on-disk"), args.rounds, extra, show)
    s = _summary(runs)
    rss, peak, opened = s["rss_after_queries_mib"], s["peak_rss_mib"], s["open_seconds"]
    print(
        f"resident after the queries: ids in memory {rss['in-memory']:,.0f} MiB, on disk {rss['on-disk']:,.0f} MiB "
        f"({rss['in-memory'] - rss['on-disk']:,.0f} MiB less); peak {peak['in-memory']:,.0f} -> {peak['on-disk']:,.0f} "
        f"MiB; opened in {opened['in-memory']:.1f} -> {opened['on-disk']:.1f} s; p50 {s['p50_ms']['in-memory']:.1f} -> "
        f"{s['p50_ms']['on-disk']:.1f} ms; results identical: {s['identical']}"
    )
    if args.json:
        for x in runs:
            x.pop("rows"), x.pop("scores"), x.pop("found_ids")
        doc = {"rows": args.rows, "dim": args.dim, "ids_files_mib": ids_mib, "runs": runs, **s}
        doc["date"] = time.strftime("%Y-%m-%d %H:%M")
        Path(args.json).write_text(json.dumps(doc, indent=1) + "\n")
    if not s["identical"]:
        sys.exit("the two servers found different rows, scores or ids")


if __name__ == "__main__":
    main()
