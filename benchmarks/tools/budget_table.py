"""README's "which code for which budget" table, generated from the JSON that
``bench_codes_debian.py --json`` writes (one file per set and model): per budget and set, the code
with the best retention on documents its fit did not see, with its in-sample figure, fit seconds
and encoding rows/s, and faiss's best beside it.

    python benchmarks/tools/budget_table.py benchmarks/results/*.json            # prints the table
    python benchmarks/tools/budget_table.py benchmarks/results/*.json --readme README.md   # rewrites it there

In README.md the table sits between the lines ``<!-- budget-table -->`` and
``<!-- /budget-table -->``; nothing else of the file is touched.
"""

from __future__ import annotations

import sys

import argparse
import json
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: _util and the other groups' modules
from _util import write_between

START, END = "<!-- budget-table -->", "<!-- /budget-table -->"


def _is_faiss(row: dict) -> bool:
    return str(row["config"]).startswith("faiss ")


def rows_of(result: dict) -> list[list[str]]:
    """Table rows of one benchmark result, budgets from the largest down."""
    out = []
    fit = f"{result['fit_rows']:,}"
    for budget in sorted(result["budgets"], key=int, reverse=True):
        rows = sorted(result["budgets"][budget], key=lambda r: -r["retention"])
        ours = [r for r in rows if not _is_faiss(r)]
        theirs = [r for r in rows if _is_faiss(r)]
        if not ours:
            continue
        best = ours[0]
        ratio = 4 * result["dim"] / int(budget)
        faiss = (
            f"{theirs[0]['config'][6:]} {100 * theirs[0]['retention']:.1f}% "
            f"({100 * (best['retention'] - theirs[0]['retention']):+.1f})"
            if theirs
            else "not measured"
        )
        out.append(
            [
                f"{budget} B ({ratio:.0f}x)",
                result["set"],
                result["model"],
                f"{100 * best['retention']:.1f}%",
                f"`{best['config']}`",
                f"{100 * best['retention_in_sample']:.1f}%",
                f"{best['fit_seconds']:.1f}",
                f"{best['encode_rows_per_second']:,.0f}",
                faiss,
                f"{result['documents']:,} / {fit} / {result['queries']:,}, {result.get('date', '?')}",
            ]
        )
    return out


def table(results: list[dict]) -> str:
    head = [
        "budget",
        "set",
        "model",
        "unseen retention",
        "best code",
        "in-sample",
        "fit s",
        "encode rows/s",
        "faiss's best, unseen (ours ahead by)",
        "documents / fit rows / queries, date",
    ]
    rows = [r for res in results for r in rows_of(res)]
    rows.sort(key=lambda r: (-int(r[0].split()[0]), r[1], r[2]))
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", nargs="+", help="JSON files written by bench_codes_debian.py --json")
    ap.add_argument("--readme", default=None, help="rewrite the table between the markers in this file")
    args = ap.parse_args()
    text = table([json.loads(Path(p).read_text()) for p in args.results])
    if args.readme is None:
        print(text)
        return
    write_between(args.readme, START, END, text)
    print(f"{args.readme}: table of {len(args.results)} result(s) written")


if __name__ == "__main__":
    main()
