"""The parquet writer's own cost: the streaming commands' main thread writes every output row, so
this time is not shared by the decoding workers and bounds how much a second thread can help
(``truncate`` on 2 threads was writer-bound; benchmarks/README.md, "Streaming against a two-thread
memory copy").

For each output kind (float32 vectors as ``truncate`` and ``pca`` write them, int8 codes, packed
bits), ``VectorWriter`` writes the rows in batches of about 4 MiB of input (the streaming
default); the reference is a plain ``write`` of the same bytes to a file in the same directory, in
the same process, interleaved, best of ``--repeat``.

    python benchmarks/streaming/bench_writer.py [--rows 250000] [--dim 256] [--dir /tmp] [--repeat 3]

To compare two versions of the library, run it once per checkout (``PYTHONPATH=<checkout>``),
alternating.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np

import embcompress
from embcompress import from_spec
from embcompress.core.specs import float_spec
from embcompress.io import VectorWriter


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=250_000)
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--dir", default=None, help="where the files go (default: the system's temporary directory)")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    X = rng.standard_normal((args.rows, args.dim)).astype(np.float32)
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    int8 = from_spec("int8").fit(X[:20_000])
    bits = from_spec("binary").fit(X[:20_000])
    batch = max(1, (4 << 20) // (4 * args.dim))  # rows per batch: about 4 MiB of float32 input
    # (spec, rows, rows per batch, the first batch's rows). "truncated" is what truncate of a
    # 1024-d input to DIM writes: batches of 4 MiB of the input (1,024 rows), the first 15 rows
    # short, as a stream's batches are after an input row group that is not a multiple of the batch
    wide = max(1, (4 << 20) // (4 * 1024))
    outputs = {
        "float32": (float_spec(args.dim), X, batch, batch),
        "float32 truncated": (float_spec(args.dim), X, wide, wide - 15),
        "int8": (int8.output_spec, int8.transform(X), batch, batch),
        "bits": (bits.output_spec, bits.transform(X), batch, batch),
    }
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        out, raw = Path(tmp) / "out.parquet", Path(tmp) / "raw.bin"

        def write(spec, rows, step: int, first: int) -> float:
            t = time.perf_counter()
            with VectorWriter(out, spec, overwrite=True) as w:
                w.write(rows[:first])
                for s in range(first, len(rows), step):
                    w.write(rows[s : s + step])
            return time.perf_counter() - t

        def plain(rows) -> float:
            t = time.perf_counter()
            with open(raw, "wb") as f:
                f.write(memoryview(np.ascontiguousarray(rows)).cast("B"))
            return time.perf_counter() - t

        best: dict = {}
        for _ in range(args.repeat):
            for name, (spec, rows, step, first) in outputs.items():
                best[name] = min(best.get(name, float("inf")), write(spec, rows, step, first))
                best[name, "plain"] = min(best.get((name, "plain"), float("inf")), plain(rows))
        print(
            f"{args.rows:,} rows x {args.dim} dims, batches of {batch:,} rows (truncated: {wide:,}); "
            f"{os.path.dirname(embcompress.__file__)}; "
            f"{time.strftime('%Y-%m-%d %H:%M')}; best of {args.repeat}, interleaved"
        )
        print(
            f"  {'output':17s} {'MB':>7s} {'writer s':>9s} {'plain write s':>14s} {'writer / plain':>15s} "
            f"{'writer MB/s':>12s}"
        )
        for name, (spec, rows, _, _) in outputs.items():
            mb = rows.nbytes / 1e6
            w, p = best[name], best[name, "plain"]
            print(f"  {name:17s} {mb:7.0f} {w:9.3f} {p:14.3f} {w / p:14.1f}x {mb / w:12,.0f}")


if __name__ == "__main__":
    main()
