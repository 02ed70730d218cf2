"""The ten-million-row table, generated from the JSON ``benchmarks/streaming/bench_10m.py run --json`` writes:
the latest run of each step (files ordered by date, then by name), with its wall time, rows/s and peak
RSS, and each recall figure beside the search it measured.

    python benchmarks/tools/ten_million_table.py benchmarks/results/10m-*.json                       # prints it
    python benchmarks/tools/ten_million_table.py benchmarks/results/10m-*.json --readme FILE         # rewrites it there

In a Markdown file the table sits between ``<!-- 10m-table -->`` and ``<!-- /10m-table -->``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: _util
from _util import write_between  # noqa: E402

START, END = "<!-- 10m-table -->", "<!-- /10m-table -->"


def _order(path: Path, run: dict) -> tuple:
    n = re.search(r"(\d+)\D*$", path.stem)
    return run["date"], int(n.group(1)) if n else 0, path.name


#: the order the table shows the steps in: the first pattern a step's name matches
ORDER = (
    r"binarize \(one",
    r"binarize \(dataset",
    "recommend",
    "apply",
    "search 1000 queries, 48 B",
    r"search 1000 queries, bits \(exact\)",
    "export bits -> faiss$",
    "export bits -> faiss HNSW",
    "exported HNSW graph|recall@10, ef",
    "export bits -> usearch",
    "HNSW M=16|hnsw recall@10$",
)


def _place(name: str) -> tuple:
    cat = next((i for i, pat in enumerate(ORDER) if re.search(pat, name)), len(ORDER))
    ef = re.search(r"ef (\d+)", name)
    return cat, int(ef.group(1)) if ef else 0, "recall" in name


def latest_steps(paths: list[Path]) -> list[tuple[dict, str]]:
    """(step, date) of the latest run of each step, in the table's order (:data:`ORDER`)."""
    runs = sorted(((p, json.loads(p.read_text())) for p in paths), key=lambda pr: _order(*pr))
    last: dict[str, tuple[dict, str]] = {}
    for _, run in runs:
        for step in run["steps"]:
            if step.get("rc", 0) == 0 and "first run" not in step["step"]:
                last.pop(step["step"], None)  # a later run moves the step to where it now stands
                last[step["step"]] = (step, run["date"])
    return sorted(last.values(), key=lambda sd: _place(sd[0]["step"]))


def table(paths: list[Path]) -> str:
    out = ["| step | wall | rows/s | peak RSS | date |", "|---|---|---|---|---|"]
    for step, date in latest_steps(paths):
        if "value" in step:  # a recall figure of the search above it
            ties = f" ({step['with_ties']:.3f} counting ties)" if step.get("with_ties") is not None else ""
            out.append(f"| {step['step']} | **{step['value']:.3f}**{ties} | | | {date} |")
            continue
        rate = "" if not step.get("rows_per_second") else f"{step['rows_per_second']:,.0f}"
        out.append(
            f"| {step['step']} | {step['wall_seconds']:,.1f} s | {rate} | {step['peak_rss_mib']:,} MiB | {date} |"
        )
    out += [
        "",
        "Each step in its own process through the CLI, as a user runs it; 10,000,000 vectors of 384 "
        "dimensions (15 GB of float32); 2 cores, no GPU. Recall@10 is against the exact search of the same codes.",
    ]
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("files", nargs="+")
    ap.add_argument("--readme", default=None)
    args = ap.parse_args()
    text = table([Path(f) for f in args.files])
    if args.readme:
        write_between(args.readme, START, END, text)
    else:
        print(text)


if __name__ == "__main__":
    main()
