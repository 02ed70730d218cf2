"""The serving-plan table, generated from the JSON ``benchmarks/serving/bench_plans.py --json`` writes: per
RAM budget, the code-only pick, the best plan with an int8 copy on disk and the best with a float32
copy, each with retention (out-of-sample), candidates, the serving process's peak RSS and its
single-query latency (p50) warm and cold over the tiled rows; faiss IndexRefine (SQ8 refine) beside.

    python benchmarks/tools/plans_table.py benchmarks/results/plans-*.json                      # prints it
    python benchmarks/tools/plans_table.py benchmarks/results/plans-*.json --readme README.md   # rewrites it there

In a Markdown file the table sits between ``<!-- plans-table -->`` and ``<!-- /plans-table -->``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: _util
from _util import write_between  # noqa: E402

START, END = "<!-- plans-table -->", "<!-- /plans-table -->"
PICKS = ("codes only", "int8 on disk", "float32 on disk")


def _cell(p: dict) -> str:
    s = p["served"]
    copy = "" if p["copy"] in ("none", "decoded") else f" + {p['copy']} x{p['candidates']}"
    alone = p.get("served_first_stage_alone")
    ratio = "" if alone is None else f" ({s['warm']['p50_ms'] / alone['warm']['p50_ms']:.1f}x the first stage alone)"
    return (
        f"`{p['spec']}`{copy}: **{100 * p['retention']:.1f}%**, {s['peak_rss_mib']:.0f} MiB, "
        f"{s['warm']['p50_ms']:.1f} / {s['cold']['p50_ms']:.1f} ms{ratio}"
    )


def table(results: list[dict]) -> str:
    head = ["RAM / vector", "set, model", *PICKS, "faiss IndexRefine(PQ, SQ8)", "int8 plan against faiss"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for res in results:
        for budget, b in sorted(res["budgets"].items(), key=lambda kv: -int(kv[0])):
            f = next((x for x in b.get("faiss", []) if "sq8" in x["config"]), None)
            faiss = (
                "-"
                if f is None
                else f"{100 * f['retention']:.1f}%, {f['p50_ms']:.1f} ms ({f['ram_bytes_per_vector']} B in RAM)"
            )
            ours = b["picks"].get("int8 on disk")
            versus = "-" if f is None or ours is None else (
                f"{100 * (ours['retention'] - f['retention']):+.2f} points, "
                f"{f['p50_ms'] / ours['served']['warm']['p50_ms']:.2f}x its queries/s (aim: >= 0, >= 1.2x)"
            )
            out.append(
                f"| {budget} B | {res['set']}, {res['model']} | "
                + " | ".join(_cell(b["picks"][k]) if k in b["picks"] else "-" for k in PICKS)
                + f" | {faiss} | {versus} |"
            )
    first = results[0]
    out.append("")
    out.append(
        f"Retention of nDCG@10, out-of-sample (2 folds, {first['queries']:,} queries); peak RSS of the serving "
        f"process; single-query p50 warm / cold (copy dropped from the page cache) over "
        f"{first['rows_served']:,} tiled rows, one thread; {first['machine']}, {first['date']}."
    )
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("files", nargs="+")
    ap.add_argument("--readme", default=None)
    args = ap.parse_args()
    text = table([json.loads(Path(f).read_text()) for f in args.files])
    if args.readme:
        write_between(args.readme, START, END, text)
    else:
        print(text)


if __name__ == "__main__":
    main()
