"""How long ``recommend`` takes on its default 20,000-row sample, by default ("full": every
candidate fitted on all the fit rows, a code slow to fit stopped after one model when it cannot
lead) and with ``--screen`` (two rounds, the first on a quarter of the rows), and which code each
picks with what retention; ``--runs norace`` turns the race off (every code fitted twice), the
ranking the race must agree with.

    python benchmarks/choosing/bench_recommend.py --emb bench-data/debian-ir --qrels
    ../shared/data/debian-ir/qrels.tsv.gz \\
        --name Debian --budgets 48,24 [--runs screened,full] [--sample 20000] [--json
        benchmarks/results/recommend-debian.json]

Each run is ``recommend_files`` (the CLI's path: read a uniform sample, rank, fit the winner on the
whole file); printed per run: the wall time (reading and ranking, then the winner's fit), the pick
and its judged retention (out-of-sample, 2-fold), what the screen cut, the three costliest fits and
the codes stopped after one model.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from embcompress.evaluation import race
from embcompress.report.recommend import recommend_files


RUNS = ("screened", "full", "norace")


def one(emb: Path, qrels: str | None, budget: int, sample: int, run: str) -> dict:
    screen = run == "screened"
    slow = race.RACE_MIN_FIT_SECONDS
    with tempfile.TemporaryDirectory() as tmp:
        if run == "norace":  # every code fitted twice and scored out-of-sample: what the race must not change
            race.RACE_MIN_FIT_SECONDS = float("inf")
        try:
            t = time.perf_counter()
            res = recommend_files(
                emb / "corpus.parquet",
                Path(tmp) / "model",
                budget,
                sample=sample,
                queries=emb / "queries.parquet" if qrels else None,
                qrels=qrels,
                screen=screen,
            )
            wall = time.perf_counter() - t
        finally:
            race.RACE_MIN_FIT_SECONDS = slow
    w = res["winner"]
    return {
        "budget": budget,
        "run": run,
        "screen": screen,
        "wall_seconds": round(wall, 1),
        "seconds": res["seconds"],
        "pick": w["config"],
        "retention": w["retention"],
        "retention_in_sample": w["retention_in_sample"],
        "candidates": len(res["ranking"]),
        "cut": (res["screen"] or {}).get("cut", []),
        "first_round_fit_rows": (res["screen"] or {}).get("first_round_fit_rows"),
        "fit_rows": res["fit_rows"],
        "sample": res["sample"],
        "mode": res["mode"],
        "stopped": [r["config"] for r in res["ranking"] if r["stopped_early"]],
        "ranking": [
            {k: r[k] for k in ("config", "retention", "fit_seconds", "encode_rows_per_second", "screened_out")}
            for r in res["ranking"]
        ],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--emb", required=True, help="a directory with corpus.parquet and queries.parquet")
    ap.add_argument("--qrels", default=None, help="qrels (without: label-free, documents standing in for queries)")
    ap.add_argument("--name", required=True)
    ap.add_argument("--budgets", default="48,24")
    ap.add_argument("--sample", type=int, default=20_000)
    ap.add_argument(
        "--runs", default="screened,full", help="which runs per budget: screened, full, norace (comma-separated)"
    )
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    out = []
    print(f"{args.name}: recommend on a {args.sample:,}-row sample, {time.strftime('%Y-%m-%d %H:%M')}", flush=True)
    print(
        f"  {'budget':>6s} {'run':8s} {'wall s':>7s} {'rank s':>7s} {'fit s':>6s}  {'pick':34s} {'retention':>9s}  cut"
    )
    for b in [int(x) for x in args.budgets.split(",")]:
        for run in args.runs.split(","):
            if run not in RUNS:
                raise SystemExit(f"--runs takes {', '.join(RUNS)}, got {run!r}")
            r = one(Path(args.emb), args.qrels, b, args.sample, run)
            out.append(r)
            print(
                f"  {b:6d} {run:8s} {r['wall_seconds']:7.1f} {r['seconds']['read_and_rank']:7.1f} "
                f"{r['seconds']['fit_winner']:6.1f}  {r['pick']:34s} {100 * r['retention']:8.2f}%  "
                f"{', '.join(r['cut']) or '-'}",
                flush=True,
            )
            costly = sorted(r["ranking"], key=lambda x: -x["fit_seconds"])[:3]
            print(
                "         costliest fits (one model): "
                + ", ".join(f"{x['config']} {x['fit_seconds']:.1f} s" for x in costly)
                + (f"; stopped after one model: {', '.join(r['stopped'])}" if r["stopped"] else ""),
                flush=True,
            )
        if "," not in args.runs:
            continue
        s, f = out[-2], out[-1]
        print(
            f"  {b:6d} same pick: {s['pick'] == f['pick']}; retention {100 * (s['retention'] - f['retention']):+.2f} "
            f"points; wall {f['wall_seconds'] / s['wall_seconds']:.2f}x faster {s['run']} than {f['run']}",
            flush=True,
        )
    if args.json:
        Path(args.json).write_text(
            json.dumps({"set": args.name, "date": time.strftime("%Y-%m-%d"), "runs": out}, indent=1)
        )


if __name__ == "__main__":
    main()
