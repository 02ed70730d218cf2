"""How the power of the reconstruction's norm in the asymmetric score changes retrieval: codes
are scored by ``<q, x_hat> / |x_hat|^P`` (``Index(norm_power=P)``; P = 1, the default, is the
cosine with the reconstruction). For each code, fitted once, nDCG@10 retention and the label-free
rank proxy at every P, through the library's own search (lookup-table scans).

    python benchmarks/codes/bench_norm_power.py [--emb bench-data/debian-ir] [--qrels FILE] [--fit-rows N]
        [--powers 0.5,0.75,1,1.25,1.5,2] [--queries N] SPEC [SPEC ...]

e.g. ``python benchmarks/codes/bench_norm_power.py rq:24 pq:24 sq:1 pca:96+sq:2``, and on the docstrings
of an environment's packages (``benchmarks/data/embed_docstrings.py --root ...``):
``--emb bench-data/docstrings-site --qrels bench-data/docstrings-site/qrels.tsv``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import argparse
import time

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: _util and the other groups' modules
from codes.bench_codes_debian import load_set  # the same documents, query sample and fit sample as the codes benchmark
from embcompress.core._util import sample_rows
from embcompress.evaluation.crossfit import CrossFit
from embcompress.evaluation.configs import parse_config  # noqa: E402
from embcompress.evaluation.evaluate import RankProxy, evaluate_config
from _util import DEBIAN  # noqa: E402  (the benchmarks' folder is on the path when they run)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("specs", nargs="+")
    ap.add_argument("--emb", default="bench-data/debian-ir")
    ap.add_argument("--qrels", default=str(DEBIAN / "qrels.tsv.gz"))
    ap.add_argument("--powers", default="0.5,0.75,1,1.25,1.5,2")
    ap.add_argument("--fit-rows", type=int, default=None, help="fit on a seeded sample of N documents (default: all)")
    ap.add_argument("--queries", type=int, default=None, help="a seeded sample of N queries (default: all)")
    args = ap.parse_args()
    D, dids, task, fit_on = load_set(args.emb, args.qrels, queries=args.queries, fit_rows=args.fit_rows)
    dids = [str(i) for i in dids]
    fits = CrossFit(D, 1, fit_on=fit_on)  # one model per spec: on every document, or on the sample
    proxy = RankProxy(D, sample_rows(len(D), 2000, 0))
    powers = [float(p) for p in args.powers.split(",")]
    ref = evaluate_config(D, parse_config("float"), task, doc_ids=dids, fits=fits)["score"]
    print(
        f"{args.emb}: {len(D):,} documents, {len(task.queries):,} queries, float nDCG@10 {ref:.4f}; codes fitted on "
        f"{'all documents' if fit_on is None else f'{len(fit_on):,} sampled documents'}",
        flush=True,
    )
    print(f"  {'configuration':22s} {'':9s} " + " ".join(f"{'P=' + format(p, 'g'):>8s}" for p in powers))
    for spec in args.specs:
        cfg = parse_config(spec)
        t0 = time.perf_counter()
        fits.caches[0].fit(cfg.spec)
        fit_s = time.perf_counter() - t0
        rows = [evaluate_config(D, cfg, task, doc_ids=dids, fits=fits, proxy=proxy, norm_power=p) for p in powers]
        ret = [r["score"] / ref for r in rows]
        best = powers[int(np.argmax(ret))]
        best_proxy = powers[int(np.argmax([r["rank_proxy"] for r in rows]))]
        print(
            f"  {spec:22s} retention "
            + " ".join(f"{100 * v:7.2f}%" for v in ret)
            + f"   best P {best:g} (fit {fit_s:.0f} s)"
        )
        print(
            f"  {'':22s} proxy     " + " ".join(f"{r['rank_proxy']:8.4f}" for r in rows) + f"   best P {best_proxy:g}",
            flush=True,
        )


if __name__ == "__main__":
    main()
