"""Streaming binarization of a parquet file larger than you'd like to load.

Prints, for a >= 4 GB file of float32 embeddings: the time pyarrow alone needs to read the
embedding column (with its defaults, and with the buffered reader settings embcompress uses), the
wall time and peak RSS of `embcompress binarize` (a real CLI process) and of the library call
in-process, their ratios, and the peak RSS on a file half the size (peak RSS should not grow). Half, not
less: the writer gathers up to 64 MiB of codes per row group, so a file whose whole output is smaller
than that (under ~520k rows of 1024 bits) shows a lower peak for that reason alone.

    python benchmarks/bench_stream.py [--rows 1100000] [--dim 1024] [--dir bench-data]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import best_of, make_parquet, run_measured  # noqa: E402

from embcompress import Binary  # noqa: E402
from embcompress.io.readers import READ_BUFFER_BYTES, auto_batch_size  # noqa: E402
from embcompress.stream import compress_file, fit_file  # noqa: E402


def pyarrow_read(path: Path, tuned: bool) -> None:
    if tuned:
        pf = pq.ParquetFile(path, pre_buffer=False, buffer_size=READ_BUFFER_BYTES)
        it = pf.iter_batches(batch_size=auto_batch_size(4 * pf.schema_arrow.field("embedding").type.list_size), columns=["embedding"])
    else:
        it = pq.ParquetFile(path).iter_batches(columns=["embedding"])
    for _ in it:
        pass


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_100_000)
    ap.add_argument("--dim", type=int, default=1024)
    ap.add_argument("--dir", default="bench-data")
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    d = Path(args.dir)
    big = make_parquet(d / f"vec_{args.rows}x{args.dim}.parquet", args.rows, args.dim)
    small = make_parquet(d / f"vec_{args.rows // 2}x{args.dim}.parquet", args.rows // 2, args.dim, seed=1)
    size_gb = big.stat().st_size / 1e9
    print(f"file: {big} ({args.rows:,} x {args.dim} float32, {size_gb:.2f} GB on disk)")
    exe = shutil.which("embcompress", path=str(Path(sys.executable).parent)) or shutil.which("embcompress") or "embcompress"
    out = d / "codes.parquet"

    pyarrow_read(big, True)  # warm the page cache so every run reads from memory alike
    t_default = best_of(lambda: pyarrow_read(big, False), args.repeat)
    t_tuned = best_of(lambda: pyarrow_read(big, True), args.repeat)
    cli = [run_measured([exe, "binarize", str(big), str(out), "--overwrite"]) for _ in range(args.repeat)]
    cli_best = min(cli, key=lambda r: r["seconds"])
    comp = fit_file(Binary(), big)
    t_lib = best_of(lambda: compress_file(comp, big, out, overwrite=True), args.repeat)
    small_run = run_measured([exe, "binarize", str(small), str(out), "--overwrite"])
    os.remove(out)

    print(f"pyarrow read of the column, defaults          : {t_default:7.2f} s  ({size_gb / t_default:.2f} GB/s)")
    print(f"pyarrow read of the column, buffered (ours)    : {t_tuned:7.2f} s  ({size_gb / t_tuned:.2f} GB/s)")
    print(f"embcompress binarize (CLI process)             : {cli_best['seconds']:7.2f} s  peak RSS {cli_best['peak_rss_mb']:.0f} MiB")
    print(f"compress_file(Binary) in-process               : {t_lib:7.2f} s")
    print(f"ratio CLI / pyarrow defaults                   : {cli_best['seconds'] / t_default:7.2f}x  (target <= 1.2)")
    print(f"ratio CLI / pyarrow buffered                   : {cli_best['seconds'] / t_tuned:7.2f}x")
    print(f"ratio in-process / pyarrow buffered            : {t_lib / t_tuned:7.2f}x")
    print(f"peak RSS, file half the size ({small.stat().st_size / 1e9:.2f} GB)       : {small_run['peak_rss_mb']:.0f} MiB "
          f"(vs {cli_best['peak_rss_mb']:.0f} MiB on the big file; target < 1024 MiB, not growing)")


if __name__ == "__main__":
    main()
