"""Start-up cost: ``import embcompress`` and ``embcompress --help``, each in a fresh process, best
of N, against references run the same way in the same run: an empty interpreter and importing
numpy + pyarrow (what the core cannot do without). Also lists any heavy optional package that
``import embcompress`` pulled in (there should be none).

    python benchmarks/streaming/bench_import.py [--repeat 7]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time


def best(cmd: list[str], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    py = sys.executable
    cli = shutil.which("embcompress") or "embcompress"
    rows = [
        ("python -c pass (interpreter start)", [py, "-c", "pass"]),
        ("import numpy, pyarrow (reference)", [py, "-c", "import numpy, pyarrow"]),
        ("import embcompress", [py, "-c", "import embcompress"]),
        ("embcompress --help", [cli, "--help"]),
    ]
    times = {label: best(cmd, args.repeat) for label, cmd in rows}
    ref = times["import numpy, pyarrow (reference)"]
    for label, t in times.items():
        print(f"{label:38s} {t:6.3f} s   {t / ref:5.2f}x the numpy+pyarrow import")
    heavy = subprocess.run(
        [
            py,
            "-c",
            "import sys, embcompress; print(','.join(sorted(m for m in "
            "('torch', 'sentence_transformers', 'sklearn', 'scipy', 'faiss', 'ray') if m in sys.modules)))",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    print(f"heavy packages imported by `import embcompress`: {heavy or 'none'}")


if __name__ == "__main__":
    main()
