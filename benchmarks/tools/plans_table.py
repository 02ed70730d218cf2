"""The serving-plan table, generated from the JSON ``benchmarks/serving/bench_plans.py --json`` writes: per
RAM budget, the code-only pick, the best plan with an int8 copy on disk and the best with a float32
copy, each with retention (out-of-sample), candidates, the serving process's peak RSS and its
single-query latency (p50) warm and cold over the tiled rows; faiss IndexRefine (SQ8 refine) beside.

    python benchmarks/tools/plans_table.py benchmarks/results/plans-*.json                      # prints it
    python benchmarks/tools/plans_table.py benchmarks/results/plans-*.json --readme README.md   # rewrites it there
    python benchmarks/tools/plans_table.py benchmarks/results/plans-*.json --label-free [--readme FILE]

In a Markdown file the table sits between ``<!-- plans-table -->`` and ``<!-- /plans-table -->``;
with ``--label-free`` the agreement of the label-free plan pick with the judged one (the same
searches scored both ways), between ``<!-- plans-label-free-table -->`` and its end marker.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: _util
from _util import write_between  # noqa: E402

START, END = "<!-- plans-table -->", "<!-- /plans-table -->"
LF_START, LF_END = "<!-- plans-label-free-table -->", "<!-- /plans-label-free-table -->"
PICKS = ("codes only", "int8 on disk", "float32 on disk")


def _cell(p: dict) -> str:
    rising = "+" if p.get("rising") else ""  # still rising where the sweep ended (recorded since 2026-11-29)
    copy = "" if p["copy"] in ("none", "decoded") else f" + {p['copy']} x{p['candidates']}{rising}"
    s = p.get("served")
    if s is None:  # ranked; not served yet (bench_plans.py --no-serve, then --reserve)
        return f"`{p['spec']}`{copy}: **{100 * p['retention']:.2f}%**, not served yet"
    alone = p.get("served_first_stage_alone")
    ratio = "" if alone is None else f" ({s['warm']['p50_ms'] / alone['warm']['p50_ms']:.1f}x the first stage alone)"
    return (
        f"`{p['spec']}`{copy}: **{100 * p['retention']:.2f}%**, {s['peak_rss_mib']:.0f} MiB, "
        f"{s['warm']['p50_ms']:.1f} / {s['cold']['p50_ms']:.1f} ms{ratio}"
    )


def _any_rising(results: list[dict]) -> bool:
    return any(p.get("rising") for r in results for b in r["budgets"].values() for p in b["picks"].values())


def _served(res: dict) -> bool:
    """Whether any pick of a run was served (a ranking-only run, ``--no-serve`` never followed by ``--reserve``,
    belongs in the label-free table only)."""
    return any("served" in p for b in res["budgets"].values() for p in b["picks"].values())


def table(results: list[dict]) -> str:
    """The served picks of every run that served any (see :func:`_served`), with faiss beside; a column for the
    int8 residual copy where a run has one."""
    results = [r for r in results if _served(r)]
    residual = any("int8r on disk" in b["picks"] for r in results for b in r["budgets"].values())
    picks = (*PICKS[:2], "int8r on disk", *PICKS[2:]) if residual else PICKS
    head = ["RAM / vector", "set, model", *picks, "faiss IndexRefine(PQ, SQ8)", "int8 plan against faiss"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for res in results:
        for budget, b in sorted(res["budgets"].items(), key=lambda kv: -int(kv[0])):
            f = next((x for x in b.get("faiss", []) if "sq8" in x["config"]), None)
            timed = f is not None and "p50_ms" in f
            faiss = (
                "-"
                if f is None
                else (
                    f"{100 * f['retention']:.2f}%, "
                    + (f"{f['p50_ms']:.1f} ms " if timed else "not timed yet ")
                    + f"({f['ram_bytes_per_vector']} B in RAM)"
                )
            )
            ours = b["picks"].get("int8 on disk")
            versus = "-" if f is None or ours is None else f"{100 * (ours['retention'] - f['retention']):+.2f} points"
            if timed and ours is not None and "served" in ours:
                versus += f", {f['p50_ms'] / ours['served']['warm']['p50_ms']:.2f}x its queries/s on one thread"
                every = ours.get("served_all_threads")
                if every is not None and "p50_ms_all_threads" in f:
                    versus += (
                        f", {f['p50_ms_all_threads'] / every['warm']['p50_ms']:.2f}x with one query on every core "
                        f"({every['warm']['p50_ms']:.1f} ms against {f['p50_ms_all_threads']:.1f})"
                    )
                versus += " (aim: >= 0 points, >= 1.2x)"
            out.append(
                f"| {budget} B | {res['set']}, {res['model']} | "
                + " | ".join(_cell(b["picks"][k]) if k in b["picks"] else "-" for k in picks)
                + f" | {faiss} | {versus} |"
            )
    first = results[0]
    out.append("")
    out.append(
        f"Retention of nDCG@10, out-of-sample (2 folds, {first['queries']:,} queries); peak RSS of the serving "
        f"process; single-query p50 warm / cold (copy dropped from the page cache) over "
        f"{first['rows_served']:,} tiled rows, one thread; {first['machine']}; "
        + "; ".join(f"{r['set']}, {r['model']}: {r['date']}" for r in results)
        + ". faiss refines the same number "
        "of candidates in all as the int8 plan (each of the two folds' indexes half of them)."
        + (
            " A + after a count: retention still rising where the candidate sweep ended."
            if _any_rising(results)
            else ""
        )
    )
    return "\n".join(out)


def _points(gap: float) -> str:
    """A gap in points with its sign, a rounded zero shown as +0.00 rather than -0.00."""
    return f"{gap + 0.0 if round(gap, 2) != 0 else 0.0:+.2f}"


#: the reference a row leads with when the run saved it: recommend's default for plans (decision 0010)
LEAD_REFERENCE = "graded"
OTHER_ORDER = ("graded", "top1", "recall")


def _by_reference(b: dict) -> dict[str, dict]:
    """A budget's label-free comparisons keyed by reference: the one the run led with and the others it saved."""
    lf = b["label_free"]
    return {lf["reference"]: lf, **b.get("label_free_by_reference", {})}


def label_free_table(results: list[dict]) -> str:
    """Per set and budget, for the best plan overall, the best with int8 on disk and the best codes: the judged
    pick and the label-free one (each query scored against float search's ranking of it, read as recommend reads
    it by default, the top 10 graded, where the run saved that), with the judged retention of each, how many plans
    the label-free winner names as near ties, and the gap had the ranking read float search the other two ways."""
    head = [
        "RAM / vector",
        "set, model",
        "plans",
        "judged pick",
        "label-free pick (judged retention)",
        "reference",
        "gap, points",
        "near ties named",
        "gap under the other references",
    ]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    gaps, leads = [], set()
    for res in results:
        for budget, b in sorted(res["budgets"].items(), key=lambda kv: -int(kv[0])):
            if "label_free" not in b:
                continue
            refs = _by_reference(b)
            lead = LEAD_REFERENCE if LEAD_REFERENCE in refs else b["label_free"]["reference"]
            leads.add(lead)
            for group in ("any", "int8 on disk", "codes only"):
                a = refs[lead].get(group)
                if a is None:
                    continue
                gaps.append(a["gap_points"])
                other = ", ".join(
                    f"{ref} {_points(refs[ref][group]['gap_points'])}"
                    for ref in OTHER_ORDER
                    if ref != lead and group in refs.get(ref, {})
                )
                out.append(
                    f"| {budget} B | {res['set']}, {res['model']} | {group} | `{a['judged_pick']}` "
                    f"{100 * a['judged']:.2f}% | `{a['label_free_pick']}` {100 * a['label_free_pick_judged']:.2f}% "
                    f"| {lead} | {_points(a['gap_points'])} | {len(a['label_free_near_ties'])} | {other or '-'} |"
                )
    if gaps:
        within = sum(g >= -0.3 for g in gaps)
        out += [
            "",
            f"{within} of {len(gaps)} label-free picks within 0.3 point of the judged pick's retention "
            f"(largest gap {_points(min(gaps))}), reading float search's ranking as the reference column says "
            f"({', '.join(sorted(leads))}; graded, recommend's default for plans, wherever the run saved it). The same "
            "searches scored judged and label-free; the last column: the gap under the other references the run "
            "saved; out-of-sample, 2 folds.",
        ]
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("files", nargs="+")
    ap.add_argument("--readme", default=None)
    ap.add_argument("--label-free", action="store_true", help="the label-free agreement table instead")
    args = ap.parse_args()
    results = [json.loads(Path(f).read_text()) for f in args.files]
    text = label_free_table(results) if args.label_free else table(results)
    if args.readme:
        start, end = (LF_START, LF_END) if args.label_free else (START, END)
        write_between(args.readme, start, end, text)
    else:
        print(text)


if __name__ == "__main__":
    main()
