"""Real-data check of the reduction methods (issue: GeoPres and the analysis suite): the packaged
all-MiniLM-L6-v2 on the Debian retrieval set. nDCG@10 retention at 192, 96 and 48 dims for each
method, the same widths followed by binary, the label-free rank proxy beside each (nDCG@10 of each
configuration's own search for 2,000 sampled documents against their float neighbours), and the
Spearman correlation between proxy and retention over all configurations. Run
benchmarks/data/embed_debian_ir.py first.

    python benchmarks/choosing/bench_report_debian.py [--emb bench-data/debian-ir] [--out bench-data/debian-report]

Another set (the proxy's correlation on data it was not designed on), e.g. the docstrings set of
benchmarks/data/embed_docstrings.py:

    python benchmarks/choosing/bench_report_debian.py --emb bench-data/docstrings --qrels
    bench-data/docstrings/qrels.tsv --out bench-data/docstrings-report
"""

from __future__ import annotations

import sys

import argparse
import time
from pathlib import Path

from embcompress.io.datasets import read_qrels
from embcompress.io import read_all
from embcompress.report import DEFAULT_METHODS, build_report, write_report

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: _util and the other groups' modules
from _util import DEBIAN  # noqa: E402  (the benchmarks' folder is on the path when they run)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--emb", default="bench-data/debian-ir")
    ap.add_argument("--data", default=str(DEBIAN))
    ap.add_argument("--qrels", default=None, help="default: DATA/qrels.tsv.gz")
    ap.add_argument("--out", default="bench-data/debian-report")
    ap.add_argument("--widths", default="192,96,48")
    args = ap.parse_args()
    D, dids = read_all(Path(args.emb) / "corpus.parquet")
    Q, qids = read_all(Path(args.emb) / "queries.parquet")
    qrels = read_qrels(args.qrels or Path(args.data) / "qrels.tsv.gz")
    t0 = time.perf_counter()
    rep = build_report(
        D,
        doc_ids=dids,
        queries=Q,
        query_ids=qids,
        qrels=qrels,
        widths=[int(w) for w in args.widths.split(",")],
        methods=DEFAULT_METHODS,
        chain_methods=DEFAULT_METHODS,
        progress=lambda label, i, n: print(f"  [{i}/{n}] {label} ({time.perf_counter() - t0:.0f} s)", flush=True),
    )
    write_report(rep, args.out, overwrite=True)
    s = rep["summary"]
    print(
        f"\n{args.emb}, {s['vectors']:,} documents x {s['dim']} dims, {s['queries']:,} queries; float32 nDCG@10 "
        f"{s['float_score']:.4f}; "
        f"intrinsic dimensionality (95%) {s['intrinsic_dimensionality']}; uniformity {s['uniformity']:.4f}"
    )
    rows = {r["config"]: r for r in rep["rows"]}
    widths = s["widths"]
    print(
        f"{'method':18s}"
        + "".join(f"{f'{w} dims':>22s}" for w in widths)
        + "".join(f"{f'{w} + binary':>22s}" for w in widths)
    )
    print(f"{'':18s}" + "".join(f"{'retention  proxy':>22s}" for _ in range(2 * len(widths))))
    for m in s["methods"]:
        cells = []
        for suffix in ("", " + binary"):
            for w in widths:
                r = rows.get(f"{m} {w}{suffix}")
                cells.append(f"{100 * r['retention']:>13.1f}%  {r['rank_proxy']:.3f}" if r else f"{'-':>22s}")
        print(f"{m:18s}" + "".join(f"{c:>22s}" for c in cells))
    for name in ("binary", "binary + asymmetric rerank", "binary + float rerank", "int8"):
        r = rows[name]
        print(
            f"{name:30s} {r['bytes_per_vector']:4d} B  retention {100 * r['retention']:5.1f}%  proxy "
            f"{r['rank_proxy']:.3f}"
        )
    print("code families (codes and model only):")
    for r in rep["rows"]:
        if r["method"].startswith("codes: "):
            print(
                f"  {r['config']:42s} {r['bytes_per_vector']:4d} B  retention {100 * r['retention']:5.1f}%  proxy "
                f"{r['rank_proxy']:.3f}"
            )
    scored = rep["rows"][1:]
    from embcompress.analysis import spearman

    fam = {}
    for r in scored:
        fam.setdefault("codes" if r["method"].startswith("codes") else "reductions and bits", []).append(r)
    print(
        f"\nSpearman correlation of rank proxy and nDCG@10 retention over {s['proxy_retention_configs']} "
        f"configurations (each row's own search, reranks included): {s['proxy_retention_spearman']:.3f} (target 0.95)"
    )
    for k, rs in fam.items():
        print(f"  within {k} ({len(rs)}): {spearman([r['rank_proxy'] for r in rs], [r['retention'] for r in rs]):.3f}")
    print(f"report: {Path(args.out) / 'report.html'}  ({time.perf_counter() - t0:.0f} s in all)")


if __name__ == "__main__":
    main()
