"""Streaming against the memory's own scaling: how much of a two-thread memory copy's speed-up
the streaming commands and the reader get from a second thread.

On one file of float32 vectors (default 250,000 x 1024, about 1 GB, written by pyarrow and read
from the page cache), timed in rounds, one measurement of each kind per round, best of
``--repeat``:

* a plain memory copy of the same number of bytes (numpy, two halves on two threads, or one
  thread), the reference scaling;
* the file's bytes read from the page cache into warm buffers (``os.preadv``, no decoding): the
  least any reader of the file does, so the best scaling a reader can reach here;
* embcompress's reader alone (decode only) on 1 and 2 threads, in-process;
* ``binarize``, ``truncate --dim 256`` and ``apply`` of a fitted ``int8`` as CLI processes with
  ``--threads 1`` and ``--threads 2``; a process that only starts (``embcompress --version``) is
  timed apart, and its time taken off the commands' before their scaling is computed. Each
  command is also timed on a one-row file of the same schema ("command start": its imports,
  typer's argument parsing, the set-up and a one-row output), and the scaling printed again with
  that taken off instead.

For each, "of copy" is (its 2-thread speed-up - 1) / (the copy's - 1): 1.0 scales as the copy
does (the issue asks at least 0.9).

    python benchmarks/streaming/bench_copy_limit.py [--rows 250000] [--dim 1024] [--dir bench-data] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: _util and the other groups' modules
from _util import cli_path, make_parquet, run_measured  # noqa: E402

from embcompress import Int8  # noqa: E402
from embcompress.io import open_vectors  # noqa: E402
from embcompress.core.persist import save  # noqa: E402
from embcompress.engines.local import fit_file  # noqa: E402


def copy(src: np.ndarray, dst: np.ndarray, threads: int) -> None:
    """dst[:] = src on ``threads`` threads (numpy releases the GIL for the copy)."""
    bounds = np.linspace(0, len(src), threads + 1).astype(int)

    def part(i: int) -> None:
        np.copyto(dst[bounds[i] : bounds[i + 1]], src[bounds[i] : bounds[i + 1]])

    workers = [threading.Thread(target=part, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()


def page_cache_read(path: Path, threads: int, chunk: int = 4 << 20) -> None:
    """The file's bytes read from the page cache (``os.preadv`` of 4 MiB into one warm buffer per
    thread, the file cut in ``threads`` parts): what any reader of the file must at least do, and
    so the scaling it can at best reach."""
    size = path.stat().st_size
    bounds = [size * i // threads // chunk * chunk for i in range(threads)] + [size]

    def part(i: int) -> None:
        buf = np.ones(chunk, dtype=np.uint8)  # pages touched: no fault while reading
        fd = os.open(path, os.O_RDONLY)
        try:
            for at in range(bounds[i], bounds[i + 1], chunk):
                os.preadv(fd, [memoryview(buf)[: min(chunk, bounds[i + 1] - at)]], at)
        finally:
            os.close(fd)

    workers = [threading.Thread(target=part, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=250_000)
    ap.add_argument("--dim", type=int, default=1024)
    ap.add_argument("--dir", default="bench-data")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    d = Path(args.dir)
    path = make_parquet(d / f"vec_{args.rows}x{args.dim}.parquet", args.rows, args.dim)
    exe = cli_path()
    out = d / "copy_limit_out.parquet"
    model = d / "copy_limit_int8.npz"
    save(fit_file(Int8(), path, max_rows=20_000), model, overwrite=True)
    nbytes = args.rows * args.dim * 4
    src = np.ones(nbytes // 4, dtype=np.float32)
    dst = np.empty_like(src)
    copy(src, dst, 2)  # touch the pages once

    def reader(threads: int) -> None:
        for _ in open_vectors(path).batches(threads=threads):
            pass

    def timed(fn) -> float:
        t = time.perf_counter()
        fn()
        return time.perf_counter() - t

    one_row = make_parquet(d / f"vec_1x{args.dim}.parquet", 1, args.dim, one_group=True)
    commands = {
        "binarize": lambda t, f=path: [exe, "binarize", str(f), str(out), "--overwrite", "--threads", str(t)],
        "truncate": lambda t, f=path: [
            exe,
            "truncate",
            str(f),
            str(out),
            "--dim",
            "256",
            "--overwrite",
            "--threads",
            str(t),
        ],
        "apply int8": lambda t, f=path: [
            exe,
            "apply",
            str(model),
            str(f),
            str(out),
            "--overwrite",
            "--threads",
            str(t),
        ],
    }
    reader(2)  # the page cache holds the file from here on
    best: dict = {}

    def keep(key, seconds: float) -> None:
        best[key] = min(best.get(key, float("inf")), seconds)

    for _ in range(args.repeat):
        for t in (1, 2):
            for _ in range(3):  # back to back: the first after a CLI process runs colder
                keep(("copy", t), timed(lambda: copy(src, dst, t)))
            keep(("pread", t), timed(lambda: page_cache_read(path, t)))
            keep(("reader", t), timed(lambda: reader(t)))
            for name, cmd in commands.items():
                # each run writes a new file, as a user's does: replacing the last run's output
                # freed its pages inside the timed process (0.2 s of truncate's 1-thread time)
                out.unlink(missing_ok=True)
                os.sync()  # the kernel's write-back of earlier outputs (up to 0.5 GB a round) not during a timing
                keep((name, t), run_measured(cmd(t))["seconds"])
                out.unlink(missing_ok=True)
                os.sync()
                keep((name, "start", t), run_measured(cmd(t, one_row))["seconds"])
        keep(("start", 0), run_measured([exe, "--version"])["seconds"])
    out.unlink(missing_ok=True)
    start = best["start", 0]
    size_gb = path.stat().st_size / 1e9
    print(
        f"{path.name}: {args.rows:,} x {args.dim} float32, {size_gb:.2f} GB; {time.strftime('%Y-%m-%d %H:%M')}; "
        f"best of {args.repeat} interleaved rounds; process start (embcompress --version) {start:.2f} s, taken off the "
        "commands"
    )
    copy_gain = best["copy", 1] / best["copy", 2]
    print(
        f"  {'':24s} {'1 thread s':>10s} {'2 threads s':>11s} {'speed-up':>9s} {'of copy':>8s}   "
        f"{'command start s':>15s} {'speed-up':>9s} {'of copy':>8s} (less command start)"
    )

    def scaling(one: float, two: float) -> tuple[float, float]:
        gain = one / two
        return gain, (gain - 1) / (copy_gain - 1) if copy_gain > 1 else float("nan")

    for key in ("copy", "pread", "reader", *commands):
        one, two = best[key, 1], best[key, 2]
        rest = ""
        if key in commands:
            # the same command on a one-row file: its imports, argument parsing and set-up, on
            # top of the interpreter's start (typer's parsing alone is about 0.3 s)
            s1, s2 = best[key, "start", 1], best[key, "start", 2]
            g, sh = scaling(one - s1, two - s2)
            rest = f"   {s1:7.2f} {s2:7.2f} {g:8.2f}x {sh:8.2f}"
            one, two = one - start, two - start
        gain, share = scaling(one, two)
        label = {
            "copy": f"memory copy ({nbytes / 1e9:.2f} GB)",
            "pread": "page cache read (pread)",
            "reader": "reader alone (decode)",
        }.get(key, key)
        print(f"  {label:24s} {one:10.2f} {two:11.2f} {gain:8.2f}x {share:8.2f}{rest}")


if __name__ == "__main__":
    main()
