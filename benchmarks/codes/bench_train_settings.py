"""Shorter codebook trainings, chosen across sets and models: faiss's residual quantizer (``rq``)
trains each codebook by k-means at ``RQ.progressive_steps`` growing widths, each for
``RQ.kmeans_iterations`` iterations (``RQ.beam_kmeans_iterations`` with a beam), and ``opq``
alternates codebook training and rotation updates ``OPQ.rotation_iterations`` times on at most
``OPQ.rotation_max_rows`` of the fit rows. Both are most of what
``recommend`` spends (benchmarks/README.md, "Where the time goes"). For each setting, the codes'
nDCG@10 retention out-of-sample (2-fold; every document encoded by a model fitted on the other
half) and the fit's seconds, one set per run, and a table over every set run so far.

    python benchmarks/codes/bench_train_settings.py run --emb bench-data/debian-ir --qrels
    ../shared/data/debian-ir/qrels.tsv.gz \\
        --name Debian --model MiniLM --fit-rows 10000 --queries 2000 --json
        benchmarks/results/train-settings-debian-minilm.json
    python benchmarks/codes/bench_train_settings.py table benchmarks/results/train-settings-*.json

``--only ATTRIBUTE`` measures one of them (``--only beam_kmeans_iterations``: ``rq:M:beam=4`` alone).
``--only min_steps``: GeoPres' shortest training (steps at batch 2,048 on a CPU), at a half and a
quarter of the dimensions, with the spec's ``min_steps``; ``--only batch_size``: its batch on a CPU
(each step costs about the square of it; the steps stay at least ``min_steps``).

The codes are at 64x the float32 size (24 B for 384 dimensions, 16 B for 256) unless ``--ratio``.
A fresh cross-fit per setting: the fitted-model cache is keyed by the spec, which a class setting
does not change.
"""

from __future__ import annotations

import sys

import argparse
import json
import time
from pathlib import Path

import numpy as np

#: (family, class attribute, values; the first is the default the setting was first measured against:
#: faiss's own, for the ones since changed)
SETTINGS = (
    ("rq", "progressive_steps", (10, 3)),
    ("rq", "kmeans_iterations", (10, 5, 3)),
    ("rq", "beam_kmeans_iterations", (10, 5, 3)),
    ("opq", "rotation_iterations", (50, 20, 10)),
    ("rq", "beam_kmeans_max_points_per_centroid", (256, 64)),
    ("opq", "rotation_max_rows", (65_536, 10_000, 5_000)),
)
#: (family, spec parameter, values; the first is today's default): settings given in the spec,
#: measured at two widths (a half and a quarter of the dimensions, as the report's grid has them)
SPEC_SETTINGS = (("geopres", "min_steps", (300, 150)), ("geopres", "batch_size", (2048, 1024, 512)))


def configs(dim: int, ratio: int, only: str | None = None) -> list[tuple[str, str, str, int]]:
    """(config, class name, attribute, value) for every code and setting measured (with ``only``,
    for that attribute's settings alone)."""
    b = 4 * dim // ratio
    out = []
    for family, attr, values in SETTINGS:
        if only and attr != only:
            continue
        if family == "opq":
            specs = [f"opq:{b}"]
        else:  # the beam's iterations apply to rq:M:beam=4 alone, the plain ones to rq:M alone
            specs = {
                "beam_kmeans_iterations": [f"rq:{b}:beam=4"],
                "beam_kmeans_max_points_per_centroid": [f"rq:{b}:beam=4"],
                "kmeans_iterations": [f"rq:{b}"],
            }.get(attr, [f"rq:{b}:beam=4", f"rq:{b}"])
        out += [(spec, family.upper(), attr, v) for spec in specs for v in values]
    for family, param, values in SPEC_SETTINGS:
        if only and param != only:
            continue
        out += [(f"{family}:{w}", None, param, v) for w in (dim // 2, dim // 4) for v in values]
    return out


def run(args) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: _util and the other groups' modules
    from codes.bench_codes_debian import HEADER, load_set, our_rows, print_row

    import embcompress.compressors as comps
    from embcompress.evaluation.evaluate import run_configs
    from embcompress.evaluation.crossfit import CrossFit

    D, dids, task, _ = load_set(args.emb, args.qrels, queries=args.queries)
    ref = run_configs(D, task, ["float"], doc_ids=dids)[0]
    fit_rows = CrossFit(D, 2, fit_rows=args.fit_rows).fit_rows
    print(
        f"{args.name} ({args.model}), {len(D):,} documents x {D.shape[1]}, {len(task.queries):,} queries; float32 "
        f"nDCG@10 "
        f"{ref['score']:.4f}; each model fitted on {fit_rows:,} rows; {time.strftime('%Y-%m-%d %H:%M')}\n{HEADER}",
        flush=True,
    )
    out = {
        "set": args.name,
        "model": args.model,
        "documents": len(D),
        "queries": len(task.queries),
        "dim": int(D.shape[1]),
        "fit_rows": fit_rows,
        "ratio": args.ratio,
        "seed": args.seed or 0,
        "float": ref["score"],
        "date": time.strftime("%Y-%m-%d"),
        "rows": [],
    }
    if args.json and Path(args.json).is_file():  # resume
        out["rows"] = json.loads(Path(args.json).read_text())["rows"]
    done = {(r["config"], r["setting"]) for r in out["rows"]}
    wanted = None if args.values is None else {v.strip() for v in args.values.split(",")}
    for spec, cls_name, attr, value in configs(D.shape[1], args.ratio, args.only):
        if args.seed is not None:
            spec = f"{spec}:seed={args.seed}"
        setting = f"{attr}={value}"
        if wanted is not None and str(value) not in wanted:
            continue
        if (spec, setting) in done:
            continue
        if cls_name is None:  # a parameter of the spec
            r = our_rows(
                D, dids, task, ["float", f"{spec}:{attr}={value}"], CrossFit(D, 2, fit_rows=args.fit_rows), 1.0
            )[0]
        else:
            cls = getattr(comps, cls_name)
            before = getattr(cls, attr)
            setattr(cls, attr, value)
            try:
                r = our_rows(D, dids, task, ["float", spec], CrossFit(D, 2, fit_rows=args.fit_rows), 1.0)[0]
            finally:
                setattr(cls, attr, before)
        print_row({**r, "config": f"{spec} {setting}"})
        out["rows"].append(
            {
                "config": spec,
                "setting": setting,
                **{
                    k: r[k]
                    for k in (
                        "bytes_per_vector",
                        "retention",
                        "retention_in_sample",
                        "retention_half_new",
                        "fit_seconds",
                        "encode_rows_per_second",
                    )
                },
            }
        )
        if args.json:
            Path(args.json).parent.mkdir(parents=True, exist_ok=True)
            Path(args.json).write_text(json.dumps(out, indent=1, default=float))


def code_of(config: str) -> str:
    """A row of the table: the family, with the beam when it has one (``rq:24:beam=4`` -> ``rq:beam=4``),
    and the width of a spec setting's family (``geopres:192``)."""
    if any(config.startswith(f + ":") for f, _, _ in SPEC_SETTINGS):
        return ":".join(config.split(":")[:2])
    return config.split(":")[0] + (":beam=4" if "beam=4" in config else "")


def table(paths: list[str]) -> None:
    """One column per set and model; files of one set and model with other seeds (``--seed``) are
    averaged into its column (their count in the header), each setting over the seeds it has."""
    groups: dict[str, list[dict]] = {}
    for p in paths:
        res = json.loads(Path(p).read_text())
        ratio = res.get("ratio") or (4 * res["dim"] // res["rows"][0]["bytes_per_vector"] if res["rows"] else 0)
        groups.setdefault(f"{res['set']}/{res['model']} {ratio}x", []).append(res)
    heads = [name if len(g) == 1 else f"{name} x{len(g)}" for name, g in groups.items()]
    print(
        f"{'code':16s} {'setting':26s} "
        + " ".join(f"{s[-22:]:>22s}" for s in heads)
        + f" {'mean':>7s} {'fit s (mean)':>12s}"
    )
    keys = list(
        dict.fromkeys((code_of(r["config"]), r["setting"]) for g in groups.values() for res in g for r in res["rows"])
    )
    for code, setting in keys:
        cells, fits = [], []
        for g in groups.values():
            hits = [r for res in g for r in res["rows"] if r["setting"] == setting and code_of(r["config"]) == code]
            cells.append(f"{100 * np.mean([r['retention'] for r in hits]):21.2f}%" if hits else f"{'-':>22s}")
            fits += [r["fit_seconds"] for r in hits]
        vals = [float(c.strip().rstrip("%")) for c in cells if c.strip() != "-"]
        mean = f"{np.mean(vals):6.2f}%" if len(vals) == len(groups) else f"{'-':>7s}"
        print(f"{code:16s} {setting:26s} " + " ".join(cells) + f" {mean} {np.mean(fits):12.1f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="what", required=True)
    r = sub.add_parser("run")
    r.add_argument("--emb", required=True, help="folder with corpus.parquet and queries.parquet")
    r.add_argument("--qrels", required=True)
    r.add_argument("--name", required=True)
    r.add_argument("--model", required=True)
    r.add_argument("--queries", type=int, default=None)
    r.add_argument("--fit-rows", type=int, default=None)
    r.add_argument("--ratio", type=int, default=64)
    r.add_argument("--json", default=None)
    r.add_argument("--only", default=None, help="one setting's attribute (e.g. kmeans_iterations)")
    r.add_argument("--values", default=None, help="with --only, these of its values alone (comma-separated)")
    r.add_argument(
        "--seed",
        type=int,
        default=None,
        help="the codes' seed (spec parameter seed=K; default: the spec's own, 0): a setting's gain measured "
        "again with other samples and initial codebooks",
    )
    t = sub.add_parser("table")
    t.add_argument("results", nargs="+")
    args = ap.parse_args()
    run(args) if args.what == "run" else table(args.results)


if __name__ == "__main__":
    main()
