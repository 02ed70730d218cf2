"""The fast scan of 4-bit codes against the float table scan of 8-bit codes and against faiss, one
query at a time over 1M rows, one thread: what a serving plan's first stage costs at each RAM budget.

Per budget B bytes a vector, four first stages of B bytes, each asked for the top ``k`` (10 and the
candidate counts plans rescore):

* ours, ``opq:2B:nbits=4``: the fast scan (``search.fastscan``: 8-bit tables in registers);
* ours, ``opq:B``: one byte per slice, float tables (``search.adc.scan_adc``), the scan plans used;
* faiss ``IndexPQFastScan`` (2B slices of 4 bits) and faiss ``IndexPQ`` (B slices of 8 bits), with
  inner products, trained on the same rows.

Both of ours go through ``Index.first_stage``, as ``search --plan`` does (the cosine with each
reconstruction: its per-row factor included). Codes are fitted on ``--fit`` rows of ``--emb``'s
corpus (or of generated correlated vectors), encoded once and tiled to ``--docs`` rows. Each search
0.2 s after the one before (faiss's OpenMP workers spin after a call), interleaved rounds, p50 of
``--queries`` queries. Also the overlap of each first stage's top 1,000 with the float top 10 on the
untiled rows (recall@10 within 1,000), so speed is read beside what it finds.

    python benchmarks/search/bench_fastscan.py --emb bench-data/debian-ir [--budgets 48,24,12,6]
        [--docs 1000000] [--json benchmarks/results/fastscan.json]
    python benchmarks/search/bench_fastscan.py --table benchmarks/results/fastscan.json [--readme
        benchmarks/search/README.md]

``--table`` prints (or writes between ``<!-- fastscan-table -->`` and its end marker) a run's table.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import faiss
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: _util and the other groups' modules
from codes.bench_codes_debian import read_all  # noqa: E402
from codes.bench_codes_speed import correlated  # noqa: E402
from _util import show_table  # noqa: E402

from embcompress import from_spec  # noqa: E402
from embcompress.search import Index  # noqa: E402
from embcompress.search.fastscan import kernel_path  # noqa: E402

SETTLE = 0.2


def load(emb: str | None, n: int) -> tuple[np.ndarray, np.ndarray]:
    if emb is None:
        X = correlated(n + 300, 384, np.random.default_rng(0))
        return X[:n], X[n:]
    D, _ = read_all(Path(emb) / "corpus.parquet")
    Q, _ = read_all(Path(emb) / "queries.parquet")
    return np.asarray(D, np.float32), np.asarray(Q[:300], np.float32)


def faiss_index(kind: str, d: int, m: int, train: np.ndarray, docs: np.ndarray, tile: int):
    ip = faiss.METRIC_INNER_PRODUCT
    index = faiss.IndexPQFastScan(d, m, 4, ip) if kind == "fastscan" else faiss.IndexPQ(d, m, 8, ip)
    index.train(train)
    index.add(docs)
    codes = faiss.vector_to_array(index.codes) if kind != "fastscan" else None
    if kind == "fastscan":  # its codes are packed in its own block layout: add the rows tile times
        for _ in range(tile - 1):
            index.add(docs)
    else:
        full = np.tile(codes.reshape(len(docs), -1), (tile, 1))
        index.reset()
        index.add_sa_codes(np.ascontiguousarray(full))
    return index


def p50(fn, queries: np.ndarray) -> float:
    times = []
    for q in queries:
        time.sleep(SETTLE / 20)
        t = time.perf_counter()
        fn(q[None])
        times.append(time.perf_counter() - t)
    return 1e3 * float(np.median(times))


NAMES = ("ours fast scan", "ours 8-bit tables", "faiss IndexPQFastScan", "faiss IndexPQ")


def table(results: dict) -> str:
    """The run's figures: per budget and first stage, p50 ms at each k and queries/s over faiss IndexPQ's."""
    ks = sorted({int(key[1:-3]) for b in results["budgets"].values() for r in b.values() for key in r if key[0] == "k"})
    head = "| RAM / vector | first stage | recall@10 in 1,000 | " + " | ".join(f"k = {k:,}" for k in ks) + " |"
    out = [head, "|---|---|---|" + "---|" * len(ks)]
    for budget, row in results["budgets"].items():
        ref = row["faiss IndexPQ"]
        for name in NAMES:
            r = row[name]
            cells = " | ".join(f"{r[f'k{k}_ms']:.2f} ms ({ref[f'k{k}_ms'] / r[f'k{k}_ms']:.1f}x)" for k in ks)
            out.append(f"| {budget} B | {name}, `{r['spec']}` | {r['recall10_at_1000']:.3f} | {cells} |")
    out.append(
        f"\nOne query at a time, p50; in brackets queries/s over faiss `IndexPQ`'s at the same RAM; "
        f"{results['rows']:,} rows x {results['dim']} (tiled), one thread, kernel {results['kernel']}; "
        f"recall@10 in 1,000 on the untiled rows; 2 cores, {results['date']}."
    )
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--emb", default=None)
    ap.add_argument("--budgets", default="48,24,12,6")
    ap.add_argument("--docs", type=int, default=1_000_000)
    ap.add_argument("--fit", type=int, default=20_000)
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--ks", default="10,1000,5000")
    ap.add_argument("--json", default=None)
    ap.add_argument("--table", default=None, help="print the table of this results JSON")
    ap.add_argument("--readme", default=None, help="with --table: write it into this README")
    args = ap.parse_args()
    if args.table:
        text = table(json.loads(Path(args.table).read_text()))
        return show_table(text, args.readme, "<!-- fastscan-table -->", "<!-- /fastscan-table -->")
    os.environ["EMBCOMPRESS_NUM_THREADS"] = "1"
    faiss.omp_set_num_threads(1)
    D, Q = load(args.emb, 200_000)
    d = D.shape[1]
    tile = -(-args.docs // len(D))
    fit = D[np.random.default_rng(0).choice(len(D), min(args.fit, len(D)), replace=False)]
    exact = np.argsort(-(Q @ D.T), axis=1)[:, :10]
    ks = [int(k) for k in args.ks.split(",")]
    print(f"{len(D):,} rows x {d} tiled {tile}x to {len(D) * tile:,}; one thread; fast-scan kernel: {kernel_path()}")
    out = {"date": time.strftime("%Y-%m-%d"), "rows": len(D) * tile, "dim": d, "kernel": kernel_path(), "budgets": {}}
    for budget in (int(b) for b in args.budgets.split(",")):
        row = {}
        for name, spec in (("ours fast scan", f"opq:{2 * budget}:nbits=4"), ("ours 8-bit tables", f"opq:{budget}")):
            comp = from_spec(spec).fit(fit)
            codes = comp.transform(D)
            found = Index(codes, compressor=comp).first_stage(Q, 1000)[1]
            recall = float(np.mean([len(set(a) & set(b)) / 10 for a, b in zip(found, exact)]))
            index = Index(np.tile(codes, (tile, 1)), compressor=comp)
            index.first_stage(Q[:2], 10)  # the fast scan's blocks and the factors made before timing
            row[name] = {"spec": spec, "recall10_at_1000": recall}
            row[name].update({f"k{k}_ms": p50(lambda q, k=k: index.first_stage(q, k), Q[: args.queries]) for k in ks})
        for name, kind, m in (("faiss IndexPQFastScan", "fastscan", 2 * budget), ("faiss IndexPQ", "pq", budget)):
            base = faiss_index(kind, d, m, fit, D, 1)
            _, found = base.search(Q, 1000)
            recall = float(np.mean([len(set(a) & set(b)) / 10 for a, b in zip(found, exact)]))
            index = faiss_index(kind, d, m, fit, D, tile)
            row[name] = {"spec": f"PQ{m}x{4 if kind == 'fastscan' else 8}", "recall10_at_1000": recall}
            row[name].update({f"k{k}_ms": p50(lambda q, k=k: index.search(q, k), Q[: args.queries]) for k in ks})
        out["budgets"][str(budget)] = row
        ref = row["faiss IndexPQ"]
        for name, r in row.items():
            times = "  ".join(
                f"k={k}: {r[f'k{k}_ms']:6.2f} ms ({ref[f'k{k}_ms'] / r[f'k{k}_ms']:4.1f}x faiss PQ)" for k in ks
            )
            print(f"{budget:3d} B  {name:22s} {r['spec']:18s} recall@10 in 1,000 {r['recall10_at_1000']:.3f}  {times}")
        if args.json:
            Path(args.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
