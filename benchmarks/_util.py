"""Helpers shared by the benchmark scripts (not part of the library)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

_MEASURE = (
    "import resource, subprocess, sys, time, json\n"
    "t = time.perf_counter(); r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL)\n"
    "print(json.dumps({'rc': r.returncode, 'seconds': time.perf_counter() - t,\n"
    "                  'peak_rss_mb': resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))\n"
)


def cli_path() -> str:
    """The ``embcompress`` command of the running interpreter's environment (else the PATH's)."""
    import shutil

    return (
        shutil.which("embcompress", path=str(Path(sys.executable).parent))
        or shutil.which("embcompress")
        or "embcompress"
    )


def run_measured(cmd: list[str]) -> dict:
    """Run ``cmd`` in a fresh child; return its wall time and peak resident memory (MiB)."""
    out = subprocess.run([sys.executable, "-c", _MEASURE, *cmd], capture_output=True, text=True, check=True)
    res = json.loads(out.stdout.strip().splitlines()[-1])
    if res["rc"] != 0:
        raise RuntimeError(f"{cmd} failed with exit code {res['rc']}")
    return res


def vm_mib(field: str = "VmHWM") -> float:
    """This process's peak (VmHWM) or present (VmRSS) resident memory in MiB, from /proc/self/status (ru_maxrss
    would also count the parent's pages at the fork that started it); ru_maxrss where there is no /proc."""
    status = Path("/proc/self/status")
    for line in status.read_text().splitlines() if status.exists() else []:
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    if field != "VmHWM":
        raise RuntimeError(f"no {field} in /proc/self/status")
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def alternating_runs(script: str, modes: tuple[str, str], rounds: int, extra: list[str], show) -> list[dict]:
    """Run ``script --child MODE *extra`` in a fresh process for each of the two ``modes``, ``rounds`` times, the
    order swapped every round (so that neither always runs on a warmer machine); each child prints one JSON
    object, which ``show(mode, result)`` prints. Returns the results in run order."""
    runs = []
    for r in range(rounds):
        for mode in modes if r % 2 == 0 else modes[::-1]:
            cmd = [sys.executable, script, "--child", mode, *extra]
            runs.append(json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout))
            show(mode, runs[-1])
    return runs


def make_parquet(
    path: Path, rows: int, dim: int, *, seed: int = 0, chunk: int = 32768, one_group: bool = False
) -> Path:
    """Random unit-norm float32 vectors as fixed_size_list<float32>[dim] plus an int64 id column,
    written in row groups of ``chunk`` rows (``one_group``: a single row group of all the rows);
    reused if it already exists with the right shape."""
    path = Path(path)
    if path.exists():
        md = pq.ParquetFile(path).metadata
        if md.num_rows == rows and (md.num_row_groups == 1) == one_group:
            return path
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    schema = pa.schema([("id", pa.int64()), ("embedding", pa.list_(pa.float32(), dim))])
    tmp = path.with_suffix(".tmp")
    with pq.ParquetWriter(tmp, schema) as w:
        parts = []
        for start in range(0, rows, chunk):
            n = min(chunk, rows - start)
            X = rng.standard_normal((n, dim), dtype=np.float32)
            X /= np.linalg.norm(X, axis=1, keepdims=True)
            parts.append(
                pa.table(
                    {
                        "id": np.arange(start, start + n),
                        "embedding": pa.FixedSizeListArray.from_arrays(pa.array(X.reshape(-1)), dim),
                    },
                    schema=schema,
                )
            )
            if not one_group:
                w.write_table(parts.pop())
        if one_group:
            w.write_table(pa.concat_tables(parts), row_group_size=rows)
    os.replace(tmp, path)
    return path


def best_of(fn, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def debian_training_split(data_dir: str | Path, eval_queries: int = 1000, extra_docs: int = 1000, seed: int = 0):
    """The Debian set split for training: ``eval_queries`` held-out queries with their judged
    documents plus ``extra_docs`` unjudged ones (corpus, queries, qrels), and (synopsis, description)
    training pairs from every other query, with the Debian section as the source."""
    import gzip

    from embcompress.io.datasets import load_beir
    from embcompress.train import Pair

    data = load_beir(data_dir)
    rng = np.random.default_rng(seed)
    qids = sorted(q for q in data.qrels if q in data.queries)
    eval_q = set(rng.choice(qids, size=eval_queries, replace=False).tolist())
    eval_docs = {d for q in eval_q for d in data.qrels[q]}
    others = [d for d in data.corpus if d not in eval_docs]
    eval_docs |= set(rng.choice(others, size=extra_docs, replace=False).tolist())
    corpus = {d: data.corpus[d] for d in sorted(eval_docs)}
    queries = {q: data.queries[q] for q in sorted(eval_q)}
    qrels = {q: data.qrels[q] for q in eval_q}
    sections = {}
    with gzip.open(Path(data_dir) / "corpus.jsonl.gz", "rt") as fh:
        for line in fh:
            rec = json.loads(line)
            sections[rec["_id"]] = rec.get("section")
    pairs = [
        Pair(data.queries[q], data.corpus[d], source=sections.get(d))
        for q in qids
        if q not in eval_q
        for d, g in data.qrels[q].items()
        if g > 0 and d in data.corpus
    ]
    return pairs, corpus, queries, qrels


DEBIAN = Path(__file__).resolve().parents[1].parent / "shared/data/debian-ir"


def load_bench_model(model: str | None, max_seq_length: int, backend: str = "torch"):
    """A local sentence-transformers model (default: the packaged MiniLM) with its token limit set,
    where it has one (a static model reads every token); ``backend`` as ``embed --backend``."""
    from embcompress.embedding.embed import load_model

    m = load_model(model, backend=backend)
    if backend != "torch" or hasattr(m[0], "auto_model"):
        m.max_seq_length = max_seq_length
    return m


def show_table(text: str, readme: str | None, start: str, end: str) -> None:
    """A generated table: printed, or with ``readme`` written there between its markers."""
    if readme:
        write_between(readme, start, end, text)
    else:
        print(text)


def write_between(path: str | Path, start: str, end: str, text: str) -> None:
    """Replace what lies between the marker lines ``start`` and ``end`` of a text file (README's
    generated tables), through a temporary file; nothing else of the file is touched."""
    path = Path(path)
    doc = path.read_text()
    if start not in doc or end not in doc:
        raise SystemExit(f"{path} has no {start} ... {end} markers")
    head, rest = doc.split(start, 1)
    _, tail = rest.split(end, 1)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(f"{head}{start}\n{text}\n{end}{tail}")
    tmp.replace(path)


def kept_pairs(path: str | Path, make) -> list:
    """Docstring pairs (``embcompress.embedding.corpus.DocPair``) kept as jsonl.gz at ``path``: read back when
    the file is there, else made by ``make()`` and written through a temporary file, so that a
    later run (another model) embeds the same pairs."""
    import dataclasses
    import gzip

    from embcompress.embedding.corpus import DocPair

    path = Path(path)
    if path.is_file():
        with gzip.open(path, "rt", encoding="utf-8") as f:
            return [DocPair(**json.loads(line)) for line in f]
    pairs = make()
    tmp = path.with_name(f".{path.name}.tmp")
    with gzip.open(tmp, "wt", encoding="utf-8") as f:
        for p in pairs:
            f.write(json.dumps(dataclasses.asdict(p), ensure_ascii=False) + "\n")
    os.replace(tmp, path)
    return pairs
