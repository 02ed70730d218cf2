"""Streaming compression of a parquet file larger than you'd like to load, on one worker and on
every core.

Prints, for a >= 4 GB file of float32 embeddings, in one run: the time pyarrow alone needs to read
the embedding column with one reader (its defaults, and the buffered settings embcompress uses,
which is the reference of the ratios); embcompress's own reader alone (the direct page decoder,
no compression) and `compress_file(Binary)` in-process, each with 1 worker thread and with one per
core; `embcompress binarize --threads 1` and `--threads N` as real CLI processes, with
their peak RSS on the file and on a file half its size (peak RSS must not grow with the file); and
the streamed int8 fit (the statistics path) with 1 and N threads; a file of one row group; and
`embcompress apply` with int8, whose list<int8> output goes through pyarrow's nested writer. Half, not less: the writer
gathers up to 64 MiB of codes per row group, so a file whose whole output is smaller than that
(under ~520k rows of 1024 bits) shows a lower peak for that reason alone.

    python benchmarks/streaming/bench_stream.py [--rows 1100000] [--dim 1024] [--dir bench-data] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: _util and the other groups' modules
from _util import best_of, cli_path, make_parquet, run_measured  # noqa: E402

from embcompress import Binary, Int8  # noqa: E402
from embcompress.core._parallel import reader_threads  # noqa: E402
from embcompress.io import open_vectors  # noqa: E402
from embcompress.core.persist import save  # noqa: E402
from embcompress.io.readers import READ_BUFFER_BYTES, auto_batch_size  # noqa: E402
from embcompress.engines.local import compress_file, fit_file  # noqa: E402


def pyarrow_read(path: Path, tuned: bool) -> None:
    if tuned:
        pf = pq.ParquetFile(path, pre_buffer=False, buffer_size=READ_BUFFER_BYTES)
        it = pf.iter_batches(
            batch_size=auto_batch_size(4 * pf.schema_arrow.field("embedding").type.list_size), columns=["embedding"]
        )
    else:
        it = pq.ParquetFile(path).iter_batches(columns=["embedding"])
    for _ in it:
        pass


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_100_000)
    ap.add_argument("--dim", type=int, default=1024)
    ap.add_argument("--dir", default="bench-data")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    d = Path(args.dir)
    big = make_parquet(d / f"vec_{args.rows}x{args.dim}.parquet", args.rows, args.dim)
    small = make_parquet(d / f"vec_{args.rows // 2}x{args.dim}.parquet", args.rows // 2, args.dim, seed=1)
    size_gb = big.stat().st_size / 1e9
    n = reader_threads()
    groups = pq.ParquetFile(big).num_row_groups
    print(
        f"file: {big} ({args.rows:,} x {args.dim} float32, {size_gb:.2f} GB on disk, {groups} row groups); "
        f"{n} cores; best of {args.repeat}"
    )
    exe = cli_path()
    out = d / "codes.parquet"

    def timed(fn) -> float:
        t = time.perf_counter()
        fn()
        return time.perf_counter() - t

    def decode_only(threads: int) -> None:
        for _ in open_vectors(big).batches(threads=threads):
            pass

    pyarrow_read(big, True)  # warm the page cache so every run reads from memory alike
    comp = fit_file(Binary(), big, max_rows=1024)
    # the runs are interleaved, one round after the other, so that a slower or faster spell of this
    # shared VM falls on the reference and on embcompress alike; each figure is the best of its runs
    jobs = {
        "default": lambda: timed(lambda: pyarrow_read(big, False)),
        "ref": lambda: timed(lambda: pyarrow_read(big, True)),
        **{("decode", t): (lambda t=t: timed(lambda: decode_only(t))) for t in (1, n)},
        **{
            ("lib", t): (lambda t=t: timed(lambda: compress_file(comp, big, out, overwrite=True, threads=t)))
            for t in (1, n)
        },
        **{
            ("cli", t): (
                lambda t=t: run_measured([exe, "binarize", str(big), str(out), "--overwrite", "--threads", str(t)])
            )
            for t in (1, n)
        },
    }
    results: dict = {k: [] for k in jobs}
    for _ in range(args.repeat):
        for k, job in jobs.items():
            results[k].append(job())
    best = {k: min(v, key=lambda r: r["seconds"] if isinstance(r, dict) else r) for k, v in results.items()}
    t_default, t_ref = best["default"], best["ref"]
    t_lib = {t: best[("lib", t)] for t in (1, n)}
    t_decode = {t: best[("decode", t)] for t in (1, n)}
    runs = {t: best[("cli", t)] for t in (1, n)}
    halves = {
        t: run_measured([exe, "binarize", str(small), str(out), "--overwrite", "--threads", str(t)]) for t in (1, n)
    }
    t_fit = {t: best_of(lambda: fit_file(Int8(), big, threads=t), args.repeat) for t in (1, n)}
    # one row group of 137,500 rows (0.56 GB of values): the direct decoder splits it into spans
    one = make_parquet(
        d / f"vec_{args.rows // 8}x{args.dim}_one_group.parquet", args.rows // 8, args.dim, seed=2, one_group=True
    )
    one_gb = one.stat().st_size / 1e9
    pyarrow_read(one, True)
    t_one_ref = best_of(lambda: pyarrow_read(one, True), args.repeat)
    t_one = {t: best_of(lambda: compress_file(comp, one, out, overwrite=True, threads=t), args.repeat) for t in (1, n)}
    # a list-typed output (int8 codes, as wide as the input in values): pyarrow's nested writer sets the pace
    model = d / "int8_model"
    save(fit_file(Int8(), big, max_rows=65536), model, overwrite=True)
    t_int8 = {
        t: run_measured([exe, "apply", str(model), str(big), str(out), "--overwrite", "--threads", str(t)])
        for t in (1, n)
    }
    int8_out = out.stat().st_size / 1e9
    os.remove(out)

    def line(label: str, seconds: float, extra: str = "") -> None:
        print(f"{label:<52}: {seconds:6.2f} s  {size_gb / seconds:5.2f} GB/s  {t_ref / seconds:5.2f}x{extra}")

    print(f"{'':<52}  {'time':>8}  {'input':>10}  {'vs ref':>6}")
    line("pyarrow, one reader, defaults", t_default)
    line("pyarrow, one reader, buffered (reference)", t_ref)
    for t in (1, n):
        line(f"embcompress reader (decode only), {t} thread(s)", t_decode[t])
    for t in (1, n):
        line(f"compress_file(Binary), {t} thread(s), in-process", t_lib[t])
    for t in (1, n):
        line(
            f"embcompress binarize --threads {t} (CLI process)",
            runs[t]["seconds"],
            f"  peak RSS {runs[t]['peak_rss_mb']:.0f} MiB",
        )
    for t in (1, n):
        line(f"fit_file(Int8) statistics, {t} thread(s)", t_fit[t])
    print(f"speed-up of {n} threads over 1, in-process       : {t_lib[1] / t_lib[n]:.2f}x")
    print(
        f"all cores against pyarrow's one buffered reader    : {t_ref / t_lib[n]:.2f}x in-process, "
        f"{t_ref / runs[n]['seconds']:.2f}x CLI (target >= 1.8x on 2 cores)"
    )
    print(
        f"reference read, slowest / fastest of its {args.repeat} runs  : "
        f"{max(results['ref']):.2f} / {min(results['ref']):.2f} s"
    )
    print(
        f"one row group of {args.rows // 8:,} rows ({one_gb:.2f} GB): pyarrow's buffered read {t_one_ref:.2f} s; "
        + ", ".join(
            f"compress_file(Binary) {t} thread(s) {t_one[t]:.2f} s ({t_one_ref / t_one[t]:.2f}x)" for t in (1, n)
        )
    )
    print(
        f"embcompress apply (int8, {int8_out:.2f} GB of list<int8> written), one run each: "
        + ", ".join(
            f"{t} thread(s) {t_int8[t]['seconds']:.2f} s ({size_gb / t_int8[t]['seconds']:.2f} GB/s of input)"
            for t in (1, n)
        )
    )
    print(
        f"peak RSS on the half-size file ({small.stat().st_size / 1e9:.2f} GB)        : "
        + ", ".join(
            f"{t} thread(s) {halves[t]['peak_rss_mb']:.0f} MiB (vs {runs[t]['peak_rss_mb']:.0f} on the big file)"
            for t in (1, n)
        )
    )


if __name__ == "__main__":
    main()
