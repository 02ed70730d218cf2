"""Serving plans on a judged set: what ``recommend --ram-budget`` picks at each RAM budget, and what it
costs to serve over a million rows.

For each RAM budget (bytes per vector of the first stage's codes):

* every plan is ranked as ``recommend --ram-budget`` ranks it (:func:`embcompress.report.plans.rank_plans`):
  nDCG@10 retention out-of-sample (two folds; every document encoded by a model fitted on the other
  half, on at most ``--fit-rows`` of its rows), on ``--queries`` judged queries;
* three picks: the code-only pick, the best plan with an int8 copy on disk, the best with a float32 copy;
* each pick is written by ``apply`` (the real tiers of the set), tiled to ``--rows`` rows (the scans
  do not care that rows repeat: codes, ids and the copy's rows are repeated in order), and served by
  a fresh process (``serve``): ``--serve-queries`` single queries, warm (the copy's pages cached) and
  cold (the copy dropped from the page cache with ``posix_fadvise(DONTNEED)`` before each query),
  p50 and p99, and the process's peak resident memory;
* beside them, faiss ``IndexRefine`` over an ``IndexPQ`` of the same RAM bytes with an SQ8 refine
  (int8, in RAM) and a flat refine (float32, in RAM), ``k_factor`` = our int8 pick's candidates / 10:
  retention under the same folds, and single-query time over the same tiled rows.

    python benchmarks/serving/bench_plans.py --emb bench-data/debian-ir [--budgets 48,24,12,6] [--queries 2000]
        [--rows 1000000] [--json benchmarks/results/plans-debian-minilm.json]
    python benchmarks/serving/bench_plans.py serve TIERS PLAN QUERIES.npy [--n 1000]   # one pick, in its own process
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: _util and the other groups' modules
from _util import DEBIAN, vm_mib  # noqa: E402
from codes.bench_codes_debian import faiss_row, load_set  # noqa: E402
from choosing.bench_label_free import BothTask  # noqa: E402

from embcompress.evaluation.crossfit import CrossFit, fold_pool_rows  # noqa: E402
from embcompress.evaluation.tasks import PLAN_REFERENCE, REFERENCES  # noqa: E402
from embcompress.evaluation.evaluate import run_configs  # noqa: E402
from embcompress.report.plans import COPY_KINDS, PlanGrid, measure_grid, near_ties, rank_plans  # noqa: E402


def serve(args) -> None:
    """One pick served by this process: open, warm and cold single queries, peak RSS; JSON on stdout."""
    from embcompress.serving.tiers import COPY_FILE, open_tiers

    t0 = time.perf_counter()
    served = open_tiers(args.tiers, args.plan, threads=args.threads)
    opened = time.perf_counter() - t0
    Q = np.load(args.queries)[: args.n]
    copy = Path(args.tiers) / COPY_FILE
    out = {"open_seconds": opened, "rows": served.index.num_docs}
    found = []
    for mode in ("warm", "cold") if args.mode == "both" else (args.mode,):
        times = []
        if mode == "warm" and copy.exists():  # warm: the copy in the page cache, whatever ran before (a cold pass)
            _read_through(copy)
        served.search(Q[:1], threads=args.threads)  # the scan's first call
        for q in Q:
            if mode == "cold" and copy.exists():
                served.drop_cache()  # the page cache and this process's map of the copy
            t = time.perf_counter()
            res = served.search(q[None], threads=args.threads)
            times.append(time.perf_counter() - t)
            found.append(res.rows[0])
        out[mode] = {"p50_ms": 1e3 * float(np.percentile(times, 50)), "p99_ms": 1e3 * float(np.percentile(times, 99))}
    if args.rows_out:
        np.save(args.rows_out, np.array(found[: len(Q)]))
    out["peak_rss_mib"] = vm_mib()
    out["first_stage_mib"] = served.index.data.nbytes / 2**20
    print(json.dumps(out))


def _read_through(path: Path, chunk: int = 64 << 20) -> None:
    """Read a file once, into a reused buffer (page cache, not this process's memory): a pick served again after
    its cold pass found its copy dropped, and its "warm" p50 read partly from disk (6 B, 2,000 candidates: 4.2 ms
    against 3.4)."""
    buf = bytearray(chunk)
    with open(path, "rb", buffering=0) as f:
        while f.readinto(buf):
            pass


def tile_tiers(src: Path, dst: Path, rows: int) -> None:
    """``src``'s tiers repeated in order to ``rows`` rows (ids made unique), under ``dst``."""
    dst.mkdir(parents=True, exist_ok=True)
    table = pq.read_table(src / "first.parquet")
    n = table.num_rows
    reps = -(-rows // n)
    parts = []
    for r in range(reps):
        t = table if r * n + n <= rows else table.slice(0, rows - r * n)
        if "id" in t.column_names:
            t = t.set_column(
                t.column_names.index("id"), "id", pa.array([f"{i}#{r}" for i in t.column("id").to_pylist()])
            )
        parts.append(t)
    pq.write_table(pa.concat_tables(parts).replace_schema_metadata(table.schema.metadata), dst / "first.parquet")
    tiers = json.loads((src / "tiers.json").read_text())
    if tiers["copy"]:
        copy = np.load(src / "copy.npy", mmap_mode="r")
        out = np.lib.format.open_memmap(dst / "copy.npy", mode="w+", dtype=copy.dtype, shape=(rows, copy.shape[1]))
        for r in range(reps):
            m = min(n, rows - r * n)
            out[r * n : r * n + m] = copy[:m]
        out.flush()
        del out
    (dst / "tiers.json").write_text(json.dumps({**tiers, "rows": rows}))


def measure_pick(
    pick: dict, k: int, docs_path: Path, scratch: Path, rows: int, queries_npy: Path, n: int, threads: int = 1
) -> dict:
    """Fit the pick's first stage (and int8 calibration) on the set, write its tiers with ``apply``, tile them
    to ``rows`` and serve them from a fresh process, each query on ``threads`` threads."""
    import embcompress
    from embcompress.engines.local import fit_file
    from embcompress.serving.plan import Plan, save_plan
    from embcompress.serving.tiers import apply_plan

    tag = f"{pick['spec']}-{pick['copy']}".replace(":", "_").replace("+", "_").replace("=", "_")
    plan_dir, tiers, tiled = scratch / f"plan-{tag}", scratch / f"tiers-{tag}", scratch / f"tiled-{tag}"
    first = fit_file(embcompress.from_spec(pick["spec"]), docs_path)
    copy_model = fit_file(embcompress.Int8(), docs_path) if pick["copy"] == "int8" else None
    cands = pick["candidates"] if pick["copy"] != "none" else k
    save_plan(Plan(copy=pick["copy"], candidates=cands, k=k), first, plan_dir, copy_model=copy_model, overwrite=True)
    if not (tiled / "tiers.json").is_file():  # the same pick served again (other threads): its tiers are kept
        apply_plan(plan_dir, docs_path, tiers, overwrite=True)
        tile_tiers(tiers, tiled, rows)
    r = subprocess.run(
        [
            sys.executable,
            __file__,
            "serve",
            str(tiled),
            str(plan_dir),
            str(queries_npy),
            "--n",
            str(n),
            "--threads",
            str(threads),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "EMBCOMPRESS_NUM_THREADS": str(threads)},
    )
    if r.returncode:
        raise RuntimeError(r.stderr)
    return json.loads(r.stdout.strip().splitlines()[-1])


def pq_slices(d: int, budget: int) -> int:
    """faiss's IndexPQ slices of one byte within ``budget`` bytes: the most that divide ``d`` (faiss needs
    equal slices; 48 B of 256 dimensions is PQ32)."""
    return max(m for m in range(1, min(d, budget) + 1) if d % m == 0)


def refine_index(d: int, budget: int, refine: str, k_factor: float):
    """faiss IndexRefine over an IndexPQ of (at most) ``budget`` one-byte slices, refined by SQ8 (``refine``
    "sq8") or flat float32 vectors, at ``k_factor``; untrained, inner product."""
    import faiss

    ip = faiss.METRIC_INNER_PRODUCT
    ref = faiss.IndexScalarQuantizer(d, faiss.ScalarQuantizer.QT_8bit, ip) if refine == "sq8" else faiss.IndexFlatIP(d)
    index = faiss.IndexRefine(faiss.IndexPQ(d, pq_slices(d, budget), 8, ip), ref)
    index.k_factor = float(k_factor)
    return index


def faiss_refine(
    D, dids, task, fits, float_score, budget: int, k_factor: int, refine: str, rows: int, n: int, timed: bool = True
) -> dict:
    """faiss IndexRefine(IndexPQ(budget bytes), refine) at ``k_factor``: retention under the same folds and
    single-query time over ``rows`` tiled rows (the refine copy in RAM, as faiss holds it).

    The folds are searched one by one (each by the index trained on the other's pool) and their top 10
    merged, so each fold's index refines ``k_factor / folds`` times k candidates: the same number in all
    as our plan takes from the whole corpus. (Until 2026-11-28 each fold refined ``k_factor`` times k,
    twice our count with two folds; the results of that day before this change are marked so.)"""
    d = D.shape[1]
    per_fold = k_factor / len(fits.pools)
    m = pq_slices(d, budget)

    def build():
        return refine_index(d, budget, refine, per_fold)

    Dn = D / np.linalg.norm(D, axis=1, keepdims=True)  # faiss scores inner products: cosine on unit rows
    Qn = task.queries / np.linalg.norm(task.queries, axis=1, keepdims=True)
    row = faiss_row(
        f"faiss IndexRefine(PQ{m}, {refine}) x{k_factor}",
        build,
        Dn.astype(np.float32),
        Qn.astype(np.float32),
        task.query_ids,
        dids,
        task.qrels,
        float_score,
        fits,
    )
    row.update(k_factor_per_fold=per_fold, ram_bytes_per_vector=m + (d if refine == "sq8" else 4 * d))
    if timed:  # one index over every row, refining the whole count (without: --reserve times it)
        row.update(faiss_latency(D, budget, k_factor, refine, rows, n, task.queries))
    return row


def faiss_again(args) -> None:
    """faiss's retentions of a results JSON measured again, at the same candidate count in all as ours
    (see :func:`faiss_refine`); the single-query times and everything else are kept."""
    results = json.loads(Path(args.json).read_text())
    D, dids, task, _ = load_set(args.emb, args.qrels, queries=results["queries"])
    fits = CrossFit(D, 2, fit_rows=args.fit_rows)
    float_score = results["float_ndcg"]
    for budget, b in results["budgets"].items():
        if budget not in set(args.budgets.split(",")):
            continue
        for f in b.get("faiss", []):
            k_factor = int(f["config"].split(" x")[-1])
            refine = "sq8" if "sq8" in f["config"] else "flat"
            new = faiss_refine(D, dids, task, fits, float_score, int(budget), k_factor, refine, 0, 0, timed=False)
            print(
                f"  {budget:>3} B {f['config']:49s} {100 * f['retention']:6.2f}% -> {100 * new['retention']:6.2f}%",
                flush=True,
            )
            f.update({k: v for k, v in new.items() if k not in ("p50_ms", "p99_ms")})
        results["faiss_again"] = time.strftime("%Y-%m-%d %H:%M")
        Path(args.json).write_text(json.dumps(results, indent=1, default=float))


def reserve(args) -> None:
    """Measure the serving figures again for every pick of a results JSON, on a quiet machine: each pick
    fitted, applied, tiled and served by a fresh process as in the main run; faiss's single-query times
    again. Retentions are not touched (they do not depend on the machine's load)."""
    import faiss

    results = json.loads(Path(args.json).read_text())
    today = time.strftime("%Y-%m-%d")
    if today not in results["date"]:  # ranked one day, served another: the table's note names both
        results["date"] = f"{results['date']}, {today}"
    D, dids, task, _ = load_set(args.emb, args.qrels, queries=results["queries"])
    with tempfile.TemporaryDirectory(prefix="bench-plans-", dir=Path(args.emb)) as scratch:
        np.save(Path(scratch) / "q.npy", task.queries[: args.serve_queries])
        wanted = set(args.budgets.split(","))
        for budget, b in results["budgets"].items():
            if budget not in wanted:
                continue
            for name, p in b["picks"].items():
                p["served"] = measure_pick(
                    p,
                    10,
                    Path(args.emb) / "corpus.parquet",
                    Path(scratch),
                    results["rows_served"],
                    Path(scratch) / "q.npy",
                    args.serve_queries,
                )
                if name == "int8 on disk" and (os.cpu_count() or 1) > 1:  # one query on every core, against faiss's
                    p["served_all_threads"] = measure_pick(
                        p,
                        10,
                        Path(args.emb) / "corpus.parquet",
                        Path(scratch),
                        results["rows_served"],
                        Path(scratch) / "q.npy",
                        args.serve_queries,
                        threads=os.cpu_count(),
                    )
                if p["copy"] in COPY_KINDS:  # the same first stage alone, for the latency ratio
                    p["served_first_stage_alone"] = measure_pick(
                        {**p, "copy": "none"},
                        10,
                        Path(args.emb) / "corpus.parquet",
                        Path(scratch),
                        results["rows_served"],
                        Path(scratch) / "q.npy",
                        args.serve_queries,
                    )
                s = p["served"]
                print(
                    f"  {budget:>3} B {name:16s} warm p50 {s['warm']['p50_ms']:7.2f} ms p99 {s['warm']['p99_ms']:7.2f} "
                    f" cold p50 {s['cold']['p50_ms']:7.2f} ms  peak RSS {s['peak_rss_mib']:.0f} MiB",
                    flush=True,
                )
            for f in b.get("faiss", []):
                for threads, suffix in ((1, ""), (os.cpu_count() or 1, "_all_threads")):
                    t = faiss_latency(
                        D,
                        int(budget),
                        int(f["config"].split(" x")[-1]),
                        "sq8" if "sq8" in f["config"] else "flat",
                        results["rows_served"],
                        args.serve_queries,
                        task.queries,
                        threads=threads,
                    )
                    f.update({f"{key}{suffix}": v for key, v in t.items()})
                print(f"  {budget:>3} B {f['config']:49s} p50 {f['p50_ms']:7.2f} ms p99 {f['p99_ms']:7.2f}", flush=True)
            results["remeasured"] = time.strftime("%Y-%m-%d %H:%M")
            Path(args.json).write_text(json.dumps(results, indent=1, default=float))
    faiss.omp_set_num_threads(os.cpu_count())


def faiss_latency(D, budget: int, k_factor: int, refine: str, rows: int, n: int, Q, threads: int = 1) -> dict:
    """faiss IndexRefine's single-query time over ``rows`` tiled rows, trained on half of ``D``, on ``threads``
    OpenMP threads."""
    import faiss

    Dn = (D / np.linalg.norm(D, axis=1, keepdims=True)).astype(np.float32)
    index = refine_index(D.shape[1], budget, refine, k_factor)
    index.train(Dn[: len(Dn) // 2])
    index.add(np.tile(Dn, (-(-rows // len(D)), 1))[:rows])
    faiss.omp_set_num_threads(threads)
    Qn = (Q / np.linalg.norm(Q, axis=1, keepdims=True)).astype(np.float32)
    times = []
    for q in Qn[:n]:
        t = time.perf_counter()
        index.search(q[None], 10)
        times.append(time.perf_counter() - t)
    return {"p50_ms": 1e3 * float(np.percentile(times, 50)), "p99_ms": 1e3 * float(np.percentile(times, 99))}


#: the label-free reading compared with the judged one: recommend's default reference for plans (decision 0010)
LABEL_FREE_REFERENCE = PLAN_REFERENCE


def label_free_agreement(grid: PlanGrid, task: BothTask, ref: str = LABEL_FREE_REFERENCE) -> dict:
    """The plans picked from the judged ranking and from the label-free one (the same searches, each
    query scored against float search's ranking of it as ``ref`` reads it), per copy and overall, with
    the judged retention of each pick: how much a user without judgments gives up. The label-free
    winner's near ties (plans within its uncertainty, named by recommend) are listed with it."""
    from dataclasses import replace

    free_rows = [replace(r, score=r.metrics[f"free_{ref}"], per_query=task.side[r.config][ref]) for r in grid.rows]
    free_rows = [r.with_retention(free_rows[0].score) for r in free_rows]
    free_grid = PlanGrid(tuple(free_rows), grid.cands, grid.copies, grid.dim)
    judged_plans, free_plans = grid.plans(None), free_grid.plans(None)
    judged_of = {r.config: r.retention for r in grid.rows}
    per_free = {r.config: r.per_query for r in free_rows[1:]}
    out = {"reference": ref}
    groups = {
        "codes only": lambda p: p.copy not in COPY_KINDS,
        **{f"{c} on disk": (lambda c: lambda p: p.copy == c)(c) for c in grid.copies},
        "any": lambda p: True,
    }
    for name, keep in groups.items():
        j = max((p for p in judged_plans if keep(p)), key=lambda p: p.retention)
        f = max((p for p in free_plans if keep(p)), key=lambda p: p.retention)
        ties = near_ties(f, [p for p in free_plans if keep(p)], per_free, free_rows[0].score)
        out[name] = {
            "judged_pick": j.config,
            "judged": j.retention,
            "label_free_pick": f.config,
            "label_free_pick_judged": judged_of[f.config],
            "label_free_retention": f.retention,
            "gap_points": 100 * (judged_of[f.config] - j.retention),
            "label_free_near_ties": [t.config for t in ties],
            "near_ties_judged": {t.config: judged_of[t.config] for t in ties},
        }
    return out


def other_references(grid: PlanGrid, task: BothTask) -> dict:
    """:func:`label_free_agreement` under each label-free reference recommend does not use by default, from the
    same searches: whether another reading of float search's ranking (its top 10 graded, or recall of it) would
    pick plans closer to the judged ones (a candidate count, say, that top1 stops raising too early)."""
    out = {ref: label_free_agreement(grid, task, ref) for ref in REFERENCES if ref != LABEL_FREE_REFERENCE}
    for ref, a in out.items():
        gaps = ", ".join(f"{name} {a[name]['gap_points']:+.2f}" for name in a if name != "reference")
        print(f"    reference {ref}: {gaps}", flush=True)
    return out


def _print_agreement(budget: int, agreement: dict) -> None:
    for name, a in agreement.items():
        if name != "reference":
            print(
                f"  {budget:3d} B label-free {name:16s} judged pick {a['judged_pick']} {100 * a['judged']:.2f}%, "
                f"label-free pick {a['label_free_pick']} {100 * a['label_free_pick_judged']:.2f}% judged "
                f"({a['gap_points']:+.2f} points; {len(a['label_free_near_ties'])} near ties)",
                flush=True,
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--emb", default="bench-data/debian-ir")
    ap.add_argument("--qrels", default=str(DEBIAN / "qrels.tsv.gz"))
    ap.add_argument("--name", default="Debian IR")
    ap.add_argument("--model", default="MiniLM")
    ap.add_argument("--budgets", default="48,24,12,6")
    ap.add_argument(
        "--codes",
        default=None,
        help="only these first stages (comma-separated configurations, e.g. rq:12:beam=4): one code's candidate "
        "sweep, not a ranking; write it to its own --json",
    )
    ap.add_argument("--queries", type=int, default=2000)
    ap.add_argument("--fit-rows", type=int, default=50_000)
    ap.add_argument("--rows", type=int, default=1_000_000, help="rows the picks are tiled to and served over")
    ap.add_argument("--serve-queries", type=int, default=300)
    ap.add_argument("--json", default=None)
    ap.add_argument("--reserve", action="store_true", help="only measure the serving figures of --json's picks again")
    ap.add_argument(
        "--faiss-again",
        action="store_true",
        help="only measure faiss's retention again for --json's budgets (its single-query times are kept)",
    )
    ap.add_argument(
        "--label-free-only",
        action="store_true",
        help="only rank again and add the label-free comparison to --json's budgets (what else they hold is kept)",
    )
    ap.add_argument(
        "--no-serve",
        action="store_true",
        help="rank and compare with the label-free ranking only; "
        "measure the serving figures later, on a quiet machine, with --reserve",
    )
    args = ap.parse_args()
    codes = None if args.codes is None else {c: c for c in args.codes.split(",")}
    # stopped by SIGTERM (a chain of runs that moves on), the scratch directories are removed as on Ctrl-C
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if args.reserve:
        return reserve(args)
    if args.faiss_again:
        return faiss_again(args)
    D, dids, judged_task, _ = load_set(args.emb, args.qrels, queries=args.queries)
    task = BothTask(judged_task.queries, judged_task.query_ids, judged_task.qrels)
    docs_path = Path(args.emb) / "corpus.parquet"
    fits = CrossFit(D, 2, fit_rows=args.fit_rows)
    float_score = run_configs(D, task, ["float"], doc_ids=dids)[0]["score"]
    setup = SimpleNamespace(docs=D, doc_ids=dids, task=task)
    results = {
        "set": args.name,
        "model": args.model,
        "documents": len(D),
        "queries": len(task.queries),
        "dim": int(D.shape[1]),
        "fit_rows": fold_pool_rows(len(D), 2),
        "float_ndcg": float_score,
        "rows_served": args.rows,
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{os.cpu_count()} cores",
        "budgets": {},
    }
    if args.json and Path(args.json).is_file():  # another budget of the same set and sample joins the earlier ones
        before = json.loads(Path(args.json).read_text())
        same = ("set", "model", "documents", "queries", "fit_rows", "rows_served")
        if any(before.get(k) != results[k] for k in same):
            raise SystemExit(f"{args.json} holds another set or sample ({', '.join(same)}); give another --json")
        dates = before["date"] if results["date"] in before["date"] else f"{before['date']}, {results['date']}"
        results = {**before, "date": dates, "budgets": dict(before["budgets"])}
    print(
        f"{args.name} ({args.model}): {len(D):,} documents x {D.shape[1]}, {len(task.queries):,} queries, float "
        f"nDCG@10 {float_score:.4f}; retention out-of-sample (2 folds); served over {args.rows:,} tiled rows",
        flush=True,
    )
    if args.label_free_only:
        for budget in args.budgets.split(","):
            if budget not in results["budgets"]:
                raise SystemExit(f"{args.json} has no {budget} B budget to add the label-free comparison to")
            t0 = time.perf_counter()
            grid = measure_grid(setup, int(budget), folds=2, cands=codes)
            results["budgets"][budget]["label_free"] = agreement = label_free_agreement(grid, task)
            _print_agreement(int(budget), agreement)
            results["budgets"][budget]["label_free_by_reference"] = other_references(grid, task)
            print(f"  [{time.perf_counter() - t0:.0f} s]", flush=True)
            Path(args.json).write_text(json.dumps(results, indent=1, default=float))
        return
    with tempfile.TemporaryDirectory(prefix="bench-plans-", dir=Path(args.emb)) as scratch:
        np.save(Path(scratch) / "q.npy", task.queries[: args.serve_queries])
        for budget in (int(b) for b in args.budgets.split(",")):
            t0 = time.perf_counter()
            grid = measure_grid(setup, budget, folds=2, cands=codes)
            res = rank_plans(setup, budget, total_rows=args.rows, folds=2, grid=grid)
            agreement = label_free_agreement(grid, task)
            _print_agreement(budget, agreement)
            by_reference = other_references(grid, task)
            ranking = res["ranking"]
            picks = {
                "codes only": res["code_only"],
                "int8 on disk": max((p for p in ranking if p["copy"] == "int8"), key=lambda p: p["retention"]),
                "float32 on disk": max((p for p in ranking if p["copy"] == "float32"), key=lambda p: p["retention"]),
            }
            residuals = [p for p in ranking if p["copy"] == "int8r"]  # the int8 residual of a table code
            if residuals:
                picks["int8r on disk"] = max(residuals, key=lambda p: p["retention"])
            out = {
                "rank_seconds": time.perf_counter() - t0,
                "ranking": ranking,
                "picks": {},
                "label_free": agreement,
                "label_free_by_reference": by_reference,
            }
            for name, p in picks.items():
                if args.no_serve:
                    out["picks"][name] = p
                    print(
                        f"  {budget:3d} B {name:16s} {p['label']:32s} {p['copy']:8s} x{p['candidates']:4d} "
                        f"{100 * p['retention']:6.2f}%",
                        flush=True,
                    )
                    continue
                served = measure_pick(
                    p, 10, docs_path, Path(scratch), args.rows, Path(scratch) / "q.npy", args.serve_queries
                )
                out["picks"][name] = {**p, "served": served}
                print(
                    f"  {budget:3d} B {name:16s} {p['label']:32s} {p['copy']:8s} x{p['candidates']:4d} "
                    f"{100 * p['retention']:6.2f}%  warm p50 {served['warm']['p50_ms']:7.2f} ms p99 "
                    f"{served['warm']['p99_ms']:7.2f}  cold p50 {served['cold']['p50_ms']:7.2f} ms  peak RSS "
                    f"{served['peak_rss_mib']:7.0f} MiB (codes {served['first_stage_mib']:.0f} MiB)",
                    flush=True,
                )
            results["budgets"][str(budget)] = out
            if args.json:  # the ranking kept before faiss's figures are added
                Path(args.json).parent.mkdir(parents=True, exist_ok=True)
                Path(args.json).write_text(json.dumps(results, indent=1, default=float))
            k_factor = max(1, picks["int8 on disk"]["candidates"] // 10)
            out["faiss"] = [
                faiss_refine(
                    D,
                    dids,
                    judged_task,
                    fits,
                    float_score,
                    budget,
                    k_factor,
                    refine,
                    args.rows,
                    args.serve_queries,
                    timed=not args.no_serve,
                )
                for refine in ("sq8", "flat")
            ]
            for f in out["faiss"]:
                timing = "" if args.no_serve else f"p50 {f['p50_ms']:7.2f} ms p99 {f['p99_ms']:7.2f} "
                print(
                    f"  {budget:3d} B {f['config']:49s} {100 * f['retention']:6.2f}%  {timing}"
                    f"(RAM {f['ram_bytes_per_vector']} B/vector)",
                    flush=True,
                )
            results["budgets"][str(budget)] = out
            if args.json:
                Path(args.json).parent.mkdir(parents=True, exist_ok=True)
                Path(args.json).write_text(json.dumps(results, indent=1, default=float))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "serve":
        sp = argparse.ArgumentParser()
        sp.add_argument("cmd")
        sp.add_argument("tiers")
        sp.add_argument("plan")
        sp.add_argument("queries")
        sp.add_argument("--n", type=int, default=300)
        sp.add_argument("--threads", type=int, default=1)
        sp.add_argument("--mode", choices=("warm", "cold", "both"), default="both")
        sp.add_argument("--rows-out", default=None, help="save the first mode's result rows (.npy)")
        serve(sp.parse_args())
    else:
        main()
