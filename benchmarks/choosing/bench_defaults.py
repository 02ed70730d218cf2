"""Defaults that change quality, chosen across sets and models: for each default, its alternatives
scored out-of-sample (every document encoded by a model fitted on other documents) on one set
per run, and a table over every set run so far, with the mean that chooses.

    python benchmarks/choosing/bench_defaults.py run --emb bench-data/debian-ir --qrels
    ../shared/data/debian-ir/qrels.tsv.gz \\
        --name Debian --model MiniLM --queries 5000 --json benchmarks/results/defaults-debian-minilm.json
    python benchmarks/choosing/bench_defaults.py run --emb bench-data/big/minilm --qrels bench-data/big/qrels.tsv \\
        --name big-corpus --model MiniLM --fit-rows 50000 --queries 2000 --json
        benchmarks/results/defaults-big-minilm.json
    python benchmarks/choosing/bench_defaults.py table benchmarks/results/defaults-*.json [--readme
    benchmarks/README.md]

The defaults (``questions``; at ratios of the float32 size, so that models of other widths compare):
- binary's decoder (``levels``, the per-dimension means of each sign, or ``sign``, +-1), on plain
  bits, after a centred rotation, and after PCA and a rotation at 24 B;
- whether a rotation before bits or 1-bit SQ is centred (the candidates' ``rotate:center=true``);
- the power P of the reconstruction's norm in asymmetric scores (``<q, x_hat> / |x_hat|^P``; 1 is
  the cosine with the reconstruction);
- the report's grid: which variant of each family stands for it at a ratio (the grid's headline
  against the family's other variants among recommend's candidates).

The table marks the current default and the alternative with the best mean; a default that is not
the best by the mean is a finding, not changed silently. A run with ``--json`` of a file that holds
an earlier run of the same set measures only what is not in it yet (results written before binary's
default decoder became ``auto`` are read with their binary rows named ``decoder=levels``).
"""

from __future__ import annotations

import sys

import argparse
import json
import re
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: _util and the other groups' modules
from _util import write_between

from embcompress.report.candidates import candidates

RATIOS = (32, 64)  # float32 size / code size: 48 and 24 B for 384 dims


def abstract(config: str) -> str:
    """A configuration with its PCA width left out, so one row of the table holds a variant at any
    model's width: ``pca:176+rabitq:2`` -> ``pca:W+rabitq:2``."""
    return re.sub(r"pca:\d+\+", "pca:W+", config)


def questions(dim: int) -> list[tuple[str, str, dict[str, tuple[str, float]]]]:
    """(question, current default, {alternative: (config at ``dim``, norm power)}) for one model's width."""

    def decoders(prefix: str) -> dict[str, tuple[str, float]]:
        return {
            "auto": (f"{prefix}binary@asym", 1.0),
            "levels": (f"{prefix}binary:decoder=levels@asym", 1.0),
            "sign": (f"{prefix}binary:decoder=sign@asym", 1.0),
        }

    qs = [
        ("binary's decoder, plain bits (32x)", "auto", decoders("")),
        ("binary's decoder after a centred rotation (32x)", "auto", decoders("rotate:center=true+")),
        (
            "binary's decoder after PCA to half the width and a rotation (64x)",
            "auto",
            decoders(f"pca:{dim // 2}+rotate+"),
        ),
        (
            "rotation centring before bits (32x)",
            "centred",
            {"centred": ("rotate:center=true+binary@asym", 1.0), "not centred": ("rotate+binary@asym", 1.0)},
        ),
        (
            "rotation centring before 1-bit SQ (32x)",
            "centred",
            {"centred": ("rotate:center=true+sq:1", 1.0), "not centred": ("rotate+sq:1", 1.0)},
        ),
        (
            "norm power P in <q, x_hat> / |x_hat|^P, pq at 64x",
            "1",
            {p: (f"pq:{dim // 16}", float(p)) for p in ("0.5", "1", "1.5")},
        ),
        (
            "norm power P, PCA to a quarter and 2-bit SQ (64x)",
            "1",
            {p: (f"pca:{dim // 4}+sq:2", float(p)) for p in ("0.5", "1", "1.5")},
        ),
    ]
    for ratio in RATIOS:
        budget = 4 * dim // ratio
        full = candidates(dim, budget, families=("binary", "sq", "rabitq"))
        grid = candidates(dim, budget, families=("binary", "sq", "rabitq"), full=False)
        for family in dict.fromkeys(c.family for c in grid):
            variants = {abstract(v.config): (v.config, 1.0) for v in full if v.family == family}
            if len(variants) > 1:
                shown = " and ".join(abstract(c.config) for c in grid if c.family == family)
                qs.append((f"report's grid, {family} at {ratio}x", shown, variants))
    return qs


def measurements(dim: int) -> list[tuple[str, float]]:
    """Every (config, norm power) some question needs at ``dim``, once each, in a stable order."""
    seen: dict[tuple[str, float], None] = {}
    for _, _, alts in questions(dim):
        for pair in alts.values():
            seen.setdefault(pair, None)
    return list(seen)


def as_measured(result: dict) -> dict:
    """A result with its binary configurations named by the decoder they ran with: results
    written before ``decoder="auto"`` became binary's default (no ``binary_default`` in them) ran
    ``...binary@asym`` with the levels, so those rows are read as ``...binary:decoder=levels@asym``."""
    if result.get("binary_default", "levels") != "levels":
        return result
    rows = [{**r, "config": re.sub(r"binary(@|$)", r"binary:decoder=levels\1", r["config"])} for r in result["rows"]]
    return {
        **result,
        "rows": rows,
        "binary_default": "auto",
        "note": "binary rows measured when levels was the default decoder, named so",
    }


def run(args) -> None:
    from codes.bench_codes_debian import HEADER, load_set, our_rows, print_row

    from embcompress.compressors import Binary
    from embcompress.evaluation.evaluate import run_configs
    from embcompress.evaluation.crossfit import CrossFit

    D, dids, task, _ = load_set(args.emb, args.qrels, queries=args.queries)
    ref = run_configs(D, task, ["float"], doc_ids=dids)[0]
    fits = CrossFit(D, 2, fit_rows=args.fit_rows)
    print(
        f"{args.name} ({args.model}), {len(D):,} documents x {D.shape[1]}, {len(task.queries):,} queries; float32 "
        f"nDCG@10 {ref['score']:.4f}; retention of nDCG@10 {fits.protocol}, each model fitted on "
        f"{fits.fit_rows:,} rows\n{HEADER}",
        flush=True,
    )
    out = {
        "set": args.name,
        "model": args.model,
        "documents": len(D),
        "queries": len(task.queries),
        "dim": int(D.shape[1]),
        "fit_rows": fits.fit_rows,
        "float": ref["score"],
        "protocol": fits.protocol,
        "date": time.strftime("%Y-%m-%d"),
        "binary_default": Binary().decoder,
        "rows": [],
    }
    if args.json and Path(args.json).is_file():  # resume: what an earlier run of the same set measured is kept
        before = as_measured(json.loads(Path(args.json).read_text()))
        if (before["set"], before["model"], before["documents"], before["queries"]) != (
            out["set"],
            out["model"],
            out["documents"],
            out["queries"],
        ):
            raise SystemExit(f"{args.json} holds another set or sample; give another --json")
        dates = before["date"] if out["date"] in before["date"] else f"{before['date']}, {out['date']}"
        out = {**before, "binary_default": out["binary_default"], "date": dates}
    done = {(r["config"], float(r["norm_power"])) for r in out["rows"]}
    t0 = time.perf_counter()
    for config, power in [m for m in measurements(D.shape[1]) if m not in done]:
        r = our_rows(D, dids, task, ["float", config], fits, power)[0]
        r["norm_power"] = power
        print_row(r)
        out["rows"].append(
            {
                k: r[k]
                for k in (
                    "config",
                    "norm_power",
                    "bytes_per_vector",
                    "retention",
                    "retention_in_sample",
                    "retention_half_new",
                    "fit_seconds",
                    "encode_rows_per_second",
                )
            }
        )
        if args.json:  # after every row, so a stopped run keeps what it measured
            Path(args.json).parent.mkdir(parents=True, exist_ok=True)
            Path(args.json).write_text(json.dumps(out, indent=1, default=float))
    print(f"{len(out['rows'])} rows in {(time.perf_counter() - t0) / 60:.1f} min", flush=True)


START, END = "<!-- defaults-table -->", "<!-- /defaults-table -->"


def table(results: list[dict]) -> str:
    """One table: per question, its alternatives' unseen retention on each set and model, and the mean
    over them (only when every set has the figure), the current default and the best mean marked."""
    cols = [f"{r['set']}, {r['model']}" for r in results]
    results = [as_measured(r) for r in results]
    lookup = [{(x["config"], float(x["norm_power"])): x["retention"] for x in r["rows"]} for r in results]
    per_set = [{q: alts for q, _, alts in questions(r["dim"])} for r in results]
    lines = ["| default | alternative | " + " | ".join(cols) + " | mean |", "|---|---|" + "---|" * (len(cols) + 1)]
    for question, default, alts in questions(384):
        vals = {
            alt: [m.get(qs[question][alt]) if alt in qs.get(question, {}) else None for m, qs in zip(lookup, per_set)]
            for alt in alts
        }
        means = {alt: sum(v) / len(v) if v and None not in v else None for alt, v in vals.items()}
        best = max(
            (a for a in means if means[a] is not None),  # a tie goes to the default
            key=lambda a: (round(means[a], 4), a in default.split(" and ")),
            default=None,
        )
        for k, alt in enumerate(alts):
            mark = (" (default)" if alt in default.split(" and ") else "") + (" **best**" if alt == best else "")
            cells = ["–" if v is None else f"{100 * v:.2f}" for v in vals[alt]]
            mean = "–" if means[alt] is None else f"{100 * means[alt]:.2f}"
            lines.append(f"| {question if k == 0 else ''} | `{alt}`{mark} | " + " | ".join(cells) + f" | {mean} |")
    sets = "; ".join(
        f"{r['set']} ({r['model']}, {r['dim']} dims): {r['documents']:,} documents, {r['queries']:,} "
        f"queries, each model fitted on {r['fit_rows']:,} rows, {r['date']}"
        for r in results
    )
    return (
        f"Retention of nDCG@10 in %, out-of-sample (every document encoded by a model fitted on other "
        f"documents). Sets: {sets}.\n\n" + "\n".join(lines)
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="measure every question's alternatives on one set")
    r.add_argument("--emb", required=True, help="folder with corpus.parquet and queries.parquet")
    r.add_argument("--qrels", required=True)
    r.add_argument("--name", required=True)
    r.add_argument("--model", required=True)
    r.add_argument("--queries", type=int, default=None, help="a seeded sample of N queries (default: all)")
    r.add_argument(
        "--fit-rows", type=int, default=None, help="fit on a seeded sample of N rows of each half (default: the half)"
    )
    r.add_argument("--json", default=None)
    t = sub.add_parser("table", help="the table over the sets measured")
    t.add_argument("results", nargs="+")
    t.add_argument("--readme", default=None, help="rewrite the table between the markers in this file")
    args = ap.parse_args()
    if args.cmd == "run":
        run(args)
        return
    text = table([json.loads(Path(p).read_text()) for p in args.results])
    if args.readme:
        write_between(args.readme, START, END, text)
        print(f"{args.readme}: defaults table of {len(args.results)} set(s) written")
    else:
        print(text)


if __name__ == "__main__":
    main()
