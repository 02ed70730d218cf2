"""Peak resident memory of loading a fast-scan index from its code file: ``load_index``, which makes the rows it
reads into the scan's blocks where they lie (``search.fastscan.rows_into_blocks``), against the same codes given
to ``Index`` by a caller that keeps its array (so the index copies them into blocks, the rows and the blocks in
memory together for a moment: what ``load_index`` did before).

Each load runs in a fresh process (peak RSS is a process's own), the two in alternation, ``--rounds`` times;
each answers the same queries, and the two are checked to return the same rows and scores.

    python benchmarks/search/bench_load_rss.py [--rows 10000000] [--spec pca:192+opq:96:nbits=4] [--rounds 2]

The codes are those of ``--spec`` fitted on 20,000 generated unit vectors of 256 dimensions, the file tiled to
``--rows`` rows (in ``--dir``, kept for the next run).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: _util
from _util import alternating_runs, vm_mib  # noqa: E402


def make_codes(args) -> tuple[Path, Path]:
    """The tiled code file and the compressor's directory under ``--dir`` (reused when there)."""
    from _util import make_parquet

    import embcompress
    from embcompress.engines.local import compress_file

    out = Path(args.dir)
    codes, model = out / f"codes-{args.rows}.parquet", out / "model"
    if codes.exists() and model.exists():
        return codes, model
    base = make_parquet(out / "base.parquet", 20_000, 256)
    comp = embcompress.from_spec(args.spec)
    X = np.asarray(pq.read_table(base).column("embedding").combine_chunks().flatten()).reshape(-1, 256)
    comp.fit(X)
    shutil.rmtree(model, ignore_errors=True)
    comp.save(model)
    compress_file(comp, base, out / "small.parquet", overwrite=True)
    small = pq.read_table(out / "small.parquet")
    reps = -(-args.rows // small.num_rows)
    tmp = codes.with_suffix(".tmp")
    with pq.ParquetWriter(tmp, small.schema) as w:
        for r in range(reps):
            part = small.slice(0, min(small.num_rows, args.rows - r * small.num_rows))
            part = part.set_column(
                part.column_names.index("id"), "id", pa.array(np.arange(part.num_rows) + r * small.num_rows)
            )
            w.write_table(part, row_group_size=65_536)
    tmp.rename(codes)
    return codes, model


def child(args) -> None:
    """One load in this process: JSON of its peak RSS, the seconds it took and the rows it finds."""
    from embcompress.core.persist import load
    from embcompress.io import read_all
    from embcompress.search import Index
    from embcompress.search.files import load_index

    t0 = time.perf_counter()
    if args.mode == "adopt":
        index = load_index(args.codes, model=args.model)
        held = None
    else:  # the caller keeps its array: the index copies the rows into blocks
        held, ids = read_all(args.codes, codes=None, arrow_ids=True)
        index = Index(held, compressor=load(args.model), ids=ids)
    seconds = time.perf_counter() - t0
    peak, resident = vm_mib("VmHWM"), vm_mib("VmRSS")
    Q = np.random.default_rng(1).standard_normal((5, 256)).astype(np.float32)
    res = index.search(Q, 10)
    out = {"mode": args.mode, "peak_rss_mib": peak, "rss_after_mib": resident, "load_seconds": seconds}
    out["codes_mib"] = index.data.nbytes / 2**20
    out["rows"], out["scores"] = res.rows.tolist(), res.scores.tolist()
    del held
    print(json.dumps(out))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--spec", default="pca:192+opq:96:nbits=4")
    ap.add_argument("--dir", default="bench-data/load-rss")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--json", default=None)
    ap.add_argument("--child", choices=["adopt", "copy"], default=None, help=argparse.SUPPRESS)
    ap.add_argument("--codes", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--model", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        args.mode = args.child
        return child(args)
    t0 = time.perf_counter()
    codes, model = make_codes(args)
    print(
        f"{args.rows:,} rows of {args.spec} in {codes} ({codes.stat().st_size / 2**20:,.0f} MiB; "
        f"made or found in {time.perf_counter() - t0:.0f} s)",
        flush=True,
    )

    def show(mode: str, x: dict) -> None:
        print(
            f"  {mode:5}: peak RSS {x['peak_rss_mib']:,.0f} MiB, {x['rss_after_mib']:,.0f} MiB after the load, "
            f"codes {x['codes_mib']:,.0f} MiB, load {x['load_seconds']:.1f} s",
            flush=True,
        )

    extra = ["--codes", str(codes), "--model", str(model)]
    runs = alternating_runs(__file__, ("copy", "adopt"), args.rounds, extra, show)
    by = {m: [x for x in runs if x["mode"] == m] for m in ("copy", "adopt")}
    same = all(x["rows"] == by["copy"][0]["rows"] and x["scores"] == by["copy"][0]["scores"] for x in runs)
    peak = {m: float(np.median([x["peak_rss_mib"] for x in v])) for m, v in by.items()}
    secs = {m: float(np.median([x["load_seconds"] for x in v])) for m, v in by.items()}
    after = {m: float(np.median([x["rss_after_mib"] for x in v])) for m, v in by.items()}
    print(
        f"peak RSS: kept array (copy into blocks) {peak['copy']:,.0f} MiB, load_index (blocks in place) "
        f"{peak['adopt']:,.0f} MiB: {peak['copy'] - peak['adopt']:,.0f} MiB less "
        f"({peak['adopt'] / peak['copy']:.2f}x); "
        f"resident after the load {after['copy']:,.0f} -> {after['adopt']:,.0f} MiB; "
        f"load {secs['copy']:.1f} -> {secs['adopt']:.1f} s; results identical: {same}"
    )
    if args.json:
        for x in runs:
            x.pop("rows"), x.pop("scores")
        doc = {
            "rows": args.rows,
            "spec": args.spec,
            "runs": runs,
            "peak_rss_mib": peak,
            "rss_after_mib": after,
            "load_seconds": secs,
            "identical": same,
            "date": time.strftime("%Y-%m-%d %H:%M"),
        }
        Path(args.json).write_text(json.dumps(doc, indent=1) + "\n")
    if not same:
        sys.exit("the two loads found different rows or scores")


if __name__ == "__main__":
    main()
