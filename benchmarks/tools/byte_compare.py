"""Outputs of every streaming and search command, hashed: run it before and after a change that
must not change behaviour, and compare the two listings (``diff``).

    python benchmarks/tools/byte_compare.py --vectors V.parquet --queries Q.parquet --out DIR > before.txt

Without --vectors it writes a seeded 20,000 x 384 clustered set (with a string id column) and
256 queries under DIR. Each command runs with one and with two threads; the listing names the
command, the thread count and the SHA-256 of each output file (a saved model: of each of its
files). Uses the installed ``embcompress`` command, so run it in the environment under test.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

FITS = [
    "pca:128+binary",
    "int8",
    "sq:2",
    "pq:16",
    "rabitq:2",
    "rotate:center=true+binary",
    "pca:96+rabitq:1",
    "truncate:64",
]


def synthetic(out: Path, n: int = 20000, d: int = 384, seed: int = 0) -> tuple[Path, Path]:
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((64, d)).astype(np.float32)
    X = centers[rng.integers(0, 64, n + 256)] + 0.6 * rng.standard_normal((n + 256, d)).astype(np.float32)
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    paths = []
    for name, part in (("vectors", X[:n]), ("queries", X[n:])):
        t = pa.table(
            {
                "id": [f"{name}-{i}" for i in range(len(part))],
                "embedding": pa.FixedSizeListArray.from_arrays(pa.array(part.reshape(-1)), d),
            }
        )
        pq.write_table(t, out / f"{name}.parquet", row_group_size=5000)
        paths.append(out / f"{name}.parquet")
    return paths[0], paths[1]


def digest(path: Path) -> str:
    if path.is_dir():
        return " ".join(f"{p.relative_to(path)}={digest(p)}" for p in sorted(path.rglob("*")) if p.is_file())
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def run(out: Path, label: str, args: list[str], result: Path) -> None:
    if result.exists():
        shutil.rmtree(result) if result.is_dir() else result.unlink()
    subprocess.run(["embcompress", *args], check=True, stdout=subprocess.DEVNULL)
    print(f"{label:60s} {digest(result)}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vectors")
    ap.add_argument("--queries")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    V, Q = (Path(args.vectors), Path(args.queries)) if args.vectors else synthetic(out)
    for t in ("1", "2"):
        run(
            out,
            f"binarize threads={t}",
            ["binarize", str(V), str(out / "bin.parquet"), "--threads", t],
            out / "bin.parquet",
        )
        run(
            out,
            f"truncate 64 threads={t}",
            ["truncate", str(V), str(out / "tr.parquet"), "--dim", "64", "--threads", t],
            out / "tr.parquet",
        )
        for spec in FITS:
            model = out / f"m-{spec.replace(':', '_').replace('+', '-')}"
            if t == "1":
                run(out, f"fit {spec}", ["fit", spec, str(V), str(model)], model)
            codes = out / "codes.parquet"
            run(out, f"apply {spec} threads={t}", ["apply", str(model), str(V), str(codes), "--threads", t], codes)
            res = out / "res.parquet"
            run(
                out,
                f"search {spec} threads={t}",
                ["search", str(codes), str(Q), str(res), "--model", str(model), "--k", "10"],
                res,
            )
            if spec in ("pca:128+binary", "rotate:center=true+binary", "sq:2"):
                run(
                    out,
                    f"search {spec} rerank threads={t}",
                    [
                        "search",
                        str(codes),
                        str(Q),
                        str(res),
                        "--model",
                        str(model),
                        "--k",
                        "10",
                        "--rerank",
                        "float",
                        "--originals",
                        str(V),
                    ],
                    res,
                )


if __name__ == "__main__":
    main()
