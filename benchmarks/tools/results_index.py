"""The results index: every benchmark folder, its question and its results files, from the folders'
READMEs (the line starting with ``>`` is the question; ``- results: `FILES` `` lines name the JSON).

    python benchmarks/tools/results_index.py                         # prints it
    python benchmarks/tools/results_index.py --readme benchmarks/README.md   # rewrites it there
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: _util
from _util import write_between  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
START, END = "<!-- results-index -->", "<!-- /results-index -->"


def index(*, links: bool = True) -> str:
    """The table; ``links`` to the folders' READMEs (beside them in benchmarks/; the docs site, which does
    not hold them, names the folders only)."""
    out = ["| folder | question | results |", "|---|---|---|"]
    for d in sorted(p for p in ROOT.iterdir() if (p / "README.md").is_file()):
        lines = (d / "README.md").read_text().splitlines()
        question = next((ln.lstrip("> ").strip() for ln in lines if ln.startswith(">")), "")
        files = [ln.split("`")[1] for ln in lines if ln.startswith("- results: `")]
        folder = f"[`{d.name}/`]({d.name}/README.md)" if links else f"`benchmarks/{d.name}`"
        out.append(f"| {folder} | {question} | {', '.join(f'`{f}`' for f in files) or '-'} |")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--readme", default=None)
    args = ap.parse_args()
    if args.readme:
        write_between(args.readme, START, END, index())
    else:
        print(index())


if __name__ == "__main__":
    main()
