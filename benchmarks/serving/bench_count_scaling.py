"""How the candidates a plan needs grow with the corpus: a count chosen on a sample is applied to the whole file.

A code is fitted on ``--fit-rows`` documents of a set and encodes the others (out-of-sample). Nested random
corpora of the others, from ``--sizes`` documents up to all of them, are each searched with the set's queries:
for every query, where each of exact float search's top 10 in that corpus ranks in the code's first stage (as
recommend measures it on a sample: ``embcompress.report.scaling.code_ranks``). A float copy that rescores ``c``
candidates puts back exactly those of the top 10 ranked below ``c``: the printed figure is that recall at each
count, and the counts each corpus needs to reach 0.95, 0.98 and 0.99. The last lines fit ``count ~ size ** a`` between
corpora (log-log slope of the counts reaching each recall): the exponent a sample's count is scaled by.

    python benchmarks/serving/bench_count_scaling.py --emb bench-data/big/minilm --codes rq:12:beam=4,rq:6:beam=4
        [--sizes 12500,25000,50000,100000] [--queries 1000] [--json benchmarks/results/count-scaling-minilm.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from embcompress.io import read_all  # noqa: E402

import embcompress  # noqa: E402
from embcompress.report.scaling import code_ranks  # noqa: E402
from embcompress.search import Index  # noqa: E402

#: the candidate counts the recall is read at (the plan sweep's, and between)
COUNTS = (10, 20, 40, 100, 200, 500, 1000, 2000, 5000, 10000, 20000)
RECALLS = (0.95, 0.98, 0.99)
K = 10


def ranks_by_size(model, rest: np.ndarray, Q: np.ndarray, sizes: list[int]) -> list[np.ndarray]:
    """For each corpus (the first ``n`` of ``rest`` for each of ``sizes``): where each query's exact top ``K``
    ranks in the code's first stage over it (:func:`embcompress.report.scaling.code_ranks`, the measure
    recommend scales a count by), (queries, K)."""
    codes = model.transform(rest)
    out = []
    for n in sizes:
        index = Index(codes[:n], compressor=model)
        out.append(np.concatenate([code_ranks(index, rest[:n], Q[s : s + 50], K) for s in range(0, len(Q), 50)]))
    return out


def recall_at(ranks: np.ndarray) -> dict[int, float]:
    return {c: float((ranks < c).mean()) for c in COUNTS}


def needed(recalls: dict[int, float], target: float) -> float | None:
    """The count reaching ``target``, interpolated log-linearly between the counts measured (None: beyond)."""
    prev = None
    for c, r in recalls.items():
        if r >= target:
            if prev is None:
                return float(c)
            (c0, r0) = prev
            t = (target - r0) / (r - r0)
            return float(np.exp(np.log(c0) + t * (np.log(c) - np.log(c0))))
        prev = (c, r)
    return None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--emb", required=True)
    ap.add_argument("--codes", default="rq:12:beam=4")
    ap.add_argument("--sizes", default="12500,25000,50000,100000")
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--fit-rows", type=int, default=50_000)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    D, _ = read_all(Path(args.emb) / "corpus.parquet")
    Q, _ = read_all(Path(args.emb) / "queries.parquet")
    rng = np.random.default_rng(0)
    Q = Q[np.sort(rng.choice(len(Q), min(args.queries, len(Q)), replace=False))]
    order = rng.permutation(len(D))
    fit, rest = D[order[: args.fit_rows]], D[order[args.fit_rows :]]
    sizes = [int(s) for s in args.sizes.split(",") if int(s) < len(rest)] + [len(rest)]
    # nested corpora: the first n of a random order
    print(f"{args.emb}: {len(rest):,} documents the fit did not see, {len(Q):,} queries; corpora {sizes}", flush=True)
    results = {"emb": args.emb, "queries": len(Q), "fit_rows": args.fit_rows, "sizes": sizes, "codes": {}}
    for spec in args.codes.split(","):
        t0 = time.perf_counter()
        model = embcompress.from_spec(spec).fit(fit)
        ranks = ranks_by_size(model, rest, Q, sizes)
        rows = {}
        print(f"\n{spec} ({time.perf_counter() - t0:.0f} s): recall of float's top {K} among the candidates")
        print(
            "  "
            + f"{'documents':>10s} "
            + " ".join(f"{c:>7,d}" for c in COUNTS)
            + "   count for "
            + ", ".join(map(str, RECALLS))
        )
        for n, r in zip(sizes, ranks):
            rec = recall_at(r)
            need = {str(t): needed(rec, t) for t in RECALLS}
            rows[n] = {"recall": rec, "needed": need}
            cells = " ".join(f"{rec[c]:7.4f}" for c in COUNTS)
            print(f"  {n:>10,d} {cells}   " + ", ".join("-" if v is None else f"{v:,.0f}" for v in need.values()))
        slopes = {}
        for t in map(str, RECALLS):
            pts = [(n, rows[n]["needed"][t]) for n in sizes if rows[n]["needed"][t]]
            if len(pts) >= 2:
                x, y = np.log([p[0] for p in pts]), np.log([p[1] for p in pts])
                slopes[t] = float(np.polyfit(x, y, 1)[0])
        print("  count ~ documents ** a, a = " + ", ".join(f"{v:.2f} (recall {t})" for t, v in slopes.items()))
        results["codes"][spec] = {"by_size": rows, "exponent": slopes}
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
