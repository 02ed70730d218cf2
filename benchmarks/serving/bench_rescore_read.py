"""The rescoring stage of a served plan alone: one query's candidates read from the copy on disk and scored.

Two ways, in the same process, on the same files and candidate lists:
- reference: the rows read by ``DiskCopy.get`` (in C; since 2026-12-02 with the same overlapped cold reads as the
  fused kernel), decoded to float32 vectors and scored with numpy (the cosines of
  ``search.index.float_rerank_scores``), the file read with the kernel's default readahead: what every plan did
  before the fused kernel, less its sequential cold reads;
- fused: ``DiskCopy.cosines``, the rows scored in C as they are read, never held as float32; a run that is not
  in the page cache is not waited for (``preadv2(RWF_NOWAIT)``), the kernel is asked to start reading it
  (``POSIX_FADV_WILLNEED``) and it is scored after the others, so a cold query's reads overlap; the file is
  opened without readahead (``POSIX_FADV_RANDOM``), so each cold candidate reads its own page only.

With ``--get``, two more ways read the rows alone (``DiskCopy.get``: what an int8r copy and an int8 copy without its
calibration rescore from): ``get_sequential``, one positioned read per run of neighbours, each waited for before
the next is asked (the Python reads of a build without the C extension; what the C reader did before it
overlapped cold reads too), and ``get_overlapped``, the C reader with the same two passes as the fused kernel.

With ``--mapped``, the reference is the fused kernel with positioned reads only (``map_limit=0``: a system call a
run, as before 2026-12-02), and "fused" the same kernel on a copy also memory-mapped (decision 0015): a query that
found all its rows in memory makes the next read them from the map. Its warm figures are the map's; cold, it reads
as the reference does (the map let go of with the page cache before every query).

A copy of ``--rows`` random rows (``--dim`` wide; int8 with a fitted calibration, and float16) is written
under ``--dir``; the candidates of each query are ``n`` rows drawn at random (a first stage's candidates land
anywhere in the file). Warm: the file read once before, in the page cache. Cold: the file dropped from the page
cache (``posix_fadvise(DONTNEED)``) before every query. Prints the median and 90th percentile of ``--queries``
queries per count and the reference / fused ratio of the medians.

    python benchmarks/serving/bench_rescore_read.py [--rows 1000000] [--dim 384] [--counts 500,2000,10000]
        [--queries 100] [--dir /tmp/rescore-bench] [--get | --mapped] [--json benchmarks/results/rescore-read.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import numpy as np

import embcompress
from embcompress.core._util import normalize_rows
from embcompress.search.index import float_rerank_scores
from embcompress.serving import copies
from embcompress.serving.copies import copy_codec, open_copy


class GetOnly:
    """The copy as a plain VectorStore (``get`` only): float_rerank_scores decodes the rows and scores them in
    numpy, as before the fused kernel."""

    def __init__(self, store):
        self.store, self.num_rows, self.dim = store, store.num_rows, store.dim

    def get(self, rows):
        return self.store.get(rows)


class Sequential(GetOnly):
    """``get`` through the Python reads: each run's read waited for before the next is asked."""

    def get(self, rows):
        pread, copies._pread = copies._pread, None
        try:
            return self.store.get(rows)
        finally:
            copies._pread = pread


def write_copy(path: Path, kind: str, rows: int, dim: int, int8, seed: int = 0) -> None:
    if path.is_file():
        return
    rng = np.random.default_rng(seed)
    encode = copy_codec(kind, int8)[0]
    out = np.lib.format.open_memmap(path, mode="w+", dtype={"int8": np.int8, "float16": np.float16}[kind],
                                    shape=(rows, dim))  # fmt: skip
    for s in range(0, rows, 100_000):
        out[s : s + 100_000] = encode(normalize_rows(rng.standard_normal((min(100_000, rows - s), dim), np.float32)))
    out.flush()
    del out


def timed(score, store, q: np.ndarray, cand: np.ndarray, copies_open: list, cold: bool) -> float:
    if cold:
        for c in copies_open:  # the page cache and each copy's map
            c.drop_cache()
    t = time.perf_counter()
    score(q[None], cand[None], store)
    return (time.perf_counter() - t) * 1e3


def run(kind: str, path: Path, args, int8) -> list[dict]:
    store = open_copy(path, kind, int8, rows=args.rows, dim=args.dim, map_limit=copies.MAP_LIMIT if args.mapped else 0)
    before = open_copy(path, kind, int8, rows=args.rows, dim=args.dim, map_limit=0)
    if args.mapped:  # the same kernel, reading every row with a system call
        ways = {"reference": before, "fused": store}
    else:
        os.posix_fadvise(before._fd, 0, 0, os.POSIX_FADV_NORMAL)  # the kernel's readahead, as before the change
        ways = {"reference": GetOnly(before), "fused": store}
    if args.get:
        ways |= {"get_sequential": Sequential(store), "get_overlapped": GetOnly(store)}
    rng = np.random.default_rng(1)
    out = []
    for n in args.counts:
        for cold in (False, True):
            if not cold:
                np.fromfile(path, dtype=np.uint8)  # the whole file into the page cache
            times: dict[str, list[float]] = {w: [] for w in ways}
            for _ in range(args.queries):
                q = normalize_rows(rng.standard_normal((1, args.dim), np.float32))[0]
                cand = rng.choice(args.rows, n, replace=False)
                for w, s in ways.items():  # the same query and candidates both ways, alternating first
                    times[w].append(timed(float_rerank_scores, s, q, cand, [store, before], cold))
            row = {"copy": kind, "candidates": n, "cache": "cold" if cold else "warm"}
            for w in ways:
                row[f"{w}_p50_ms"] = float(np.median(times[w]))
                row[f"{w}_p90_ms"] = float(np.percentile(times[w], 90))
            row["ratio"] = row["reference_p50_ms"] / row["fused_p50_ms"]
            if args.get:
                row["get_ratio"] = row["get_sequential_p50_ms"] / row["get_overlapped_p50_ms"]
            out.append(row)
            print(
                f"{kind:8s} {n:>7,} {row['cache']:5s}  reference {row['reference_p50_ms']:8.2f} ms "
                f"(p90 {row['reference_p90_ms']:8.2f})  fused {row['fused_p50_ms']:8.2f} ms "
                f"(p90 {row['fused_p90_ms']:8.2f})  x{row['ratio']:.1f}"
                + (
                    f"  | rows: sequential {row['get_sequential_p50_ms']:8.2f} ms, overlapped "
                    f"{row['get_overlapped_p50_ms']:8.2f} ms  x{row['get_ratio']:.1f}"
                    if args.get
                    else ""
                ),
                flush=True,
            )
    store.close()
    before.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--counts", default="500,2000,10000")
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--kinds", default="int8,float16")
    ap.add_argument("--dir", default="/tmp/rescore-bench")
    ap.add_argument("--get", action="store_true", help="also time reading the rows alone, sequential and overlapped")
    ap.add_argument(
        "--mapped", action="store_true", help="the fused kernel with a memory map against it without (decision 0015)"
    )
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    args.counts = [int(c) for c in args.counts.split(",")]
    Path(args.dir).mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(2)
    int8 = embcompress.from_spec("int8").fit(normalize_rows(rng.standard_normal((20_000, args.dim), np.float32)))
    rows = []
    for kind in args.kinds.split(","):
        path = Path(args.dir) / f"copy-{kind}-{args.rows}x{args.dim}.npy"
        write_copy(path, kind, args.rows, args.dim, int8)
        rows += run(kind, path, args, int8)
    if args.json:
        doc = {
            "date": time.strftime("%Y-%m-%d"),
            "machine": f"{os.cpu_count()} cores, {platform.machine()}",
            "rows": args.rows,
            "dim": args.dim,
            "queries": args.queries,
            "mapped": args.mapped,
            "results": rows,
        }
        Path(args.json).write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()
