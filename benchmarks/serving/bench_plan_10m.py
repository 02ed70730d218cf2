"""A serving plan at ten million rows: the 48 B + int8-on-disk plan applied to the 10M set
(``benchmarks/streaming/bench_10m.py make``), then single queries served by a fresh process.

Steps, each timed:
1. the plan: ``SPEC`` fitted on a seeded 50,000-row sample of the file, an int8 calibration on the
   same sample, ``--candidates`` rescored per query (saved with ``save_plan``);
2. ``embcompress apply PLAN 10m/vectors.parquet TIERS`` in a child process (one pass: codes and copy),
   its wall time and peak RSS;
3. ``--queries`` real queries served one at a time by a fresh process (warm, and cold: the copy
   dropped from the page cache before each query), p50 and p99, and its peak RSS (VmHWM);
4. recall@10 of the served results against exact float search over the whole file (streamed).

``--structure hnsw`` serves the first stage through an HNSW graph instead of the exact scan (bits or
floats only: ``binary`` for MiniLM's 48 B): ``apply`` then also builds the graph and writes it beside
the codes, and the server memory-maps it. Its build time, size and the process's peak RSS are
reported; a graph over ten million codes takes over an hour to build on 2 cores.

    python benchmarks/serving/bench_plan_10m.py --dir bench-data/10m --queries-from
    bench-data/debian-ir/queries.parquet \
        [--spec rotate:center=true+sq:1] [--candidates 100] [--copy int8|int8r|float16] [--structure exact|hnsw]
        [--explore 8]
        [--json benchmarks/results/plan-10m.json] [--apply-only | --reuse | --candidate-recall]

``--candidate-recall`` adds to a served run's JSON how many of the exact top 10 the first stage's candidate
list holds (no copy can add back what it lost) and, for a graph, the same for its codes scanned exactly and for
the graph exploring 2 and 4 times as many, ranked again by the codes against the float query (asymmetric).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the other groups' modules
from streaming.bench_10m import _LAUNCH  # noqa: E402  (the launcher that reports a child's peak memory)


def exact_top10(path: Path, Q: np.ndarray) -> np.ndarray:
    """Row numbers of each query's 10 nearest rows of ``path`` by cosine, streamed in batches."""
    from embcompress.io import open_vectors

    Qn = Q / np.linalg.norm(Q, axis=1, keepdims=True)
    best_s = np.full((len(Q), 10), -np.inf, dtype=np.float32)
    best_r = np.zeros((len(Q), 10), dtype=np.int64)
    src = open_vectors(path)
    for b in src.batches(262_144):
        X = b.vectors / np.linalg.norm(b.vectors, axis=1, keepdims=True)
        S = Qn @ X.T
        top = np.argpartition(-S, 10, axis=1)[:, :10]
        s = np.concatenate([best_s, np.take_along_axis(S, top, 1)], axis=1)
        r = np.concatenate([best_r, top + b.offset], axis=1)
        o = np.argsort(-s, axis=1, kind="stable")[:, :10]
        best_s, best_r = np.take_along_axis(s, o, 1), np.take_along_axis(r, o, 1)
    return best_r


def candidate_recall(d: Path, plan_dir: Path, tiers: Path, structure: str, candidates: int) -> dict:
    """How many of exact float search's top 10 the first stage's candidate list holds (what no copy can add
    back), over the saved queries; for a graph also the same codes scanned exactly: the graph's share of the
    loss against the code's. Quality only: searched on every core, not timed."""
    from embcompress.search.files import load_index
    from embcompress.serving.tiers import open_tiers

    Q = np.load(d / "q-10m.npy")
    exact = np.load(d / f"exact-top10-{len(Q)}.npy")

    def held(index, **rerank) -> float:
        rows = index.search(Q, candidates, threads=os.cpu_count(), **rerank).rows
        return float(np.mean([len(set(e) & set(r)) / 10 for e, r in zip(exact, rows)]))

    first = open_tiers(tiers, plan_dir).index
    out = {"candidates": candidates, "first_stage": held(first)}
    if structure == "hnsw":
        out["exact_scan_same_codes"] = held(load_index(tiers / "first.parquet", model=plan_dir / "first"))
        # the graph explores w times as many, ranked again by the codes against the float query (asymmetric)
        out["graph_wider_then_asymmetric"] = {
            str(w): held(first, rerank="asymmetric", candidates=w * candidates) for w in (2, 4)
        }
    print(f"exact top 10 in the first stage's {candidates} candidates: {out}", flush=True)
    return out


def link_tiers(d: Path, plan_dir: Path, tiers: Path, copy: str) -> None:
    """The plan and tiers of an HNSW first stage with a ``copy`` other than int8, from files already written:
    the int8 graph plan's fitted first stage, codes and graph, and the ``copy`` of the exact plan's tiers (the
    same ten million vectors), hard-linked, with the tiers' description naming the new plan. What apply would
    write, without building the graph again (over an hour on 2 cores)."""
    import shutil

    from embcompress.core.persist import load
    from embcompress.search.ann import Hnsw
    from embcompress.serving.plan import Plan, fingerprint, save_plan

    src_plan, src_tiers, src_copy = d / "plan-48-int8-hnsw", d / "tiers-48-int8-hnsw", d / f"tiers-48-{copy}-exact"
    doc = json.loads((src_plan / "plan.json").read_text())
    first = load(src_plan / "first")
    plan = Plan(structure="hnsw", graph=Hnsw(**doc["graph"]), copy=copy, candidates=doc["candidates"], k=doc["k"])
    save_plan(plan, first, plan_dir, overwrite=True)
    shutil.rmtree(tiers, ignore_errors=True)
    tiers.mkdir()
    for name in ("first.parquet", "graph.faiss", "graph.faiss.embcompress.json", "graph.faiss.ids.parquet"):
        os.link(src_tiers / name, tiers / name)
    os.link(src_copy / "copy.npy", tiers / "copy.npy")
    desc = json.loads((src_tiers / "tiers.json").read_text())
    desc.update(plan=fingerprint(plan, first, None), copy_kind=copy)
    (tiers / "tiers.json").write_text(json.dumps(desc, indent=2))


def launched(cmd: list[str]) -> tuple[float, dict]:
    """Wall seconds and the launcher's usage (peak RSS in KiB) of ``cmd`` in a child process."""
    import tempfile

    with tempfile.NamedTemporaryFile("r", suffix=".json") as usage:
        t = time.perf_counter()
        r = subprocess.run([sys.executable, "-c", _LAUNCH, usage.name, *cmd], capture_output=True, text=True)
        wall = time.perf_counter() - t
        if r.returncode:
            raise RuntimeError(r.stderr[-3000:])
        return wall, {**json.loads(Path(usage.name).read_text()), "stdout": r.stdout}


def main() -> None:
    import embcompress
    from embcompress.io import read_all, read_sample
    from embcompress.search.ann import Hnsw
    from embcompress.serving.plan import Plan, save_plan

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--dir", default="bench-data/10m")
    ap.add_argument("--queries-from", default="bench-data/debian-ir/queries.parquet")
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--spec", default="rotate:center=true+sq:1")
    ap.add_argument("--candidates", type=int, default=100)
    ap.add_argument("--copy", default="int8", choices=("int8", "int8r", "float16", "float32"))
    ap.add_argument("--structure", default="exact", choices=("exact", "hnsw"))
    ap.add_argument("--json", default=None)
    ap.add_argument(
        "--explore",
        type=int,
        default=1,
        help="with --structure hnsw: the graph explores this many times the candidates, ranked by the codes",
    )
    ap.add_argument("--reuse", action="store_true", help="keep the plan's models and tiers; only set --candidates")
    ap.add_argument("--modes", default="warm,cold")
    ap.add_argument("--note", default=None, help="how the run was made, saved with it (e.g. what ran beside it)")
    ap.add_argument(
        "--apply-only",
        action="store_true",
        help="stop after apply (a graph's long build may run beside other work); serve later with --reuse",
    )
    ap.add_argument(
        "--link-tiers",
        action="store_true",
        help="with --structure hnsw --reuse: make this copy's plan and tiers from the int8 graph plan's first stage "
        "and graph and the exact plan's copy of the same kind (hard links; the same model, graph and vectors)",
    )
    ap.add_argument(
        "--candidate-recall",
        action="store_true",
        help="only add to --json how many of the exact top 10 the first stage's candidates hold (quality, untimed)",
    )
    args = ap.parse_args()
    d = Path(args.dir)
    src = d / "vectors.parquet"
    tag = "" if (args.copy, args.structure) == ("int8", "exact") else f"-{args.copy}-{args.structure}"
    plan_dir, tiers = d / f"plan-48{tag}", d / f"tiers-48{tag}"
    from embcompress.io import open_vectors

    if args.candidate_recall:
        done = json.loads(Path(args.json).read_text())
        done["candidate_recall"] = candidate_recall(d, plan_dir, tiers, args.structure, done["candidates"])
        Path(args.json).write_text(json.dumps(done, indent=1))
        return
    out = {
        "set": (open_vectors(src).metadata or {}).get("model", str(src)),  # what bench_10m.py make built it from
        "spec": args.spec,
        "structure": args.structure,
        "copy": args.copy,
        "candidates": args.candidates,
        **({"explore": args.explore} if args.structure == "hnsw" else {}),
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{os.cpu_count()} cores",
        **({"note": args.note} if args.note else {}),
    }
    if args.link_tiers:
        link_tiers(d, plan_dir, tiers, args.copy)
    if args.reuse and (tiers / "tiers.json").exists():  # the same models and tiers, another candidate count
        doc = json.loads((plan_dir / "plan.json").read_text())
        graph = {**doc["graph"], "explore": args.explore} if doc.get("graph") else None
        doc.update(candidates=args.candidates, graph=graph)
        (plan_dir / "plan.json").write_text(json.dumps(doc, indent=2))
        prev = json.loads(Path(args.json).read_text()) if args.json and Path(args.json).exists() else {}
        rows = json.loads((tiers / "tiers.json").read_text())["rows"]
        graph_file = tiers / "graph.faiss"
        graph_bytes = graph_file.stat().st_size if graph_file.exists() else 0
        out["apply"] = prev.get("apply") or {"rows": rows, "linked": bool(args.link_tiers), "graph_bytes": graph_bytes}
        res = {"rows": out["apply"]["rows"] if out["apply"] else None}
    else:
        t = time.perf_counter()
        sample, _, _ = read_sample(src, limit=50_000, seed=0)
        first = embcompress.from_spec(args.spec).fit(sample)
        graph = Hnsw(explore=args.explore) if args.structure == "hnsw" else None
        save_plan(
            Plan(structure=args.structure, graph=graph, copy=args.copy, candidates=args.candidates, k=10),
            first,
            plan_dir,
            copy_model=embcompress.Int8().fit(sample) if args.copy == "int8" else None,
            overwrite=True,
        )
        out["plan_seconds"] = time.perf_counter() - t
        wall, use = launched(
            [
                sys.executable,
                "-m",
                "embcompress.cli",
                "apply",
                str(plan_dir),
                str(src),
                str(tiers),
                "--overwrite",
                "--json",
            ]
        )
        res = json.loads(use["stdout"])
        out["apply"] = {
            "seconds": wall,
            "rows": res["rows"],
            "rows_per_second": res["rows"] / wall,
            "peak_rss_mib": use["maxrss_kib"] / 1024,
            "first_bytes": res["first_bytes"],
            "copy_bytes": res["copy_bytes"],
            "graph_bytes": res.get("graph_bytes", 0),
            "graph_seconds": res.get("graph_seconds", 0.0),
        }
        print(
            f"apply: {res['rows']:,} rows in {wall:.0f} s ({res['rows'] / wall:,.0f} rows/s), peak RSS "
            f"{use['maxrss_kib'] / 1024:.0f} MiB; codes {res['first_bytes'] / 2**20:.0f} MiB, copy "
            f"{res['copy_bytes'] / 2**30:.2f} GiB"
            + (
                f"; graph {res['graph_bytes'] / 2**20:.0f} MiB, built in {res['graph_seconds']:.0f} s"
                if res.get("graph_bytes")
                else ""
            ),
            flush=True,
        )
    if args.apply_only:
        if args.json:
            Path(args.json).write_text(json.dumps(out, indent=1))
        return
    Q, _ = read_all(args.queries_from)
    Q = Q[np.sort(np.random.default_rng(0).choice(len(Q), args.queries, replace=False))]
    qfile = d / "q-10m.npy"
    np.save(qfile, Q)
    serve = str(Path(__file__).with_name("bench_plans.py"))
    served = {}
    for mode in args.modes.split(","):
        wall, use = launched(
            [
                sys.executable,
                serve,
                "serve",
                str(tiers),
                str(plan_dir),
                str(qfile),
                "--n",
                str(args.queries),
                "--mode",
                mode,
                "--rows-out",
                str(d / "served-rows.npy"),
            ]
        )
        served[mode] = json.loads(use["stdout"].strip().splitlines()[-1])
        s = served[mode][mode]
        print(
            f"serve {mode}: p50 {s['p50_ms']:.1f} ms, p99 {s['p99_ms']:.1f} ms, peak RSS "
            f"{served[mode]['peak_rss_mib']:.0f} MiB (codes {served[mode]['first_stage_mib']:.0f} MiB)",
            flush=True,
        )
    out["serve"] = served
    t = time.perf_counter()
    cache = d / f"exact-top10-{args.queries}.npy"  # the exact answers do not change with the plan
    if cache.exists():
        exact = np.load(cache)
    else:
        exact = exact_top10(src, Q)
        np.save(cache, exact)
    got = np.load(d / "served-rows.npy")
    recall = float(np.mean([len(set(a) & set(b)) / 10 for a, b in zip(got, exact)]))
    out["recall_at_10"] = recall
    out["exact_seconds"] = time.perf_counter() - t
    print(
        f"recall@10 against exact float search over {out['apply']['rows']:,} rows, {args.candidates} candidates: "
        f"{recall:.4f}",
        flush=True,
    )
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
