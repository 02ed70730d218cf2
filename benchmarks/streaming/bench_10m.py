"""The main job at users' scale: ten million 384-d float32 vectors (about 15 GB), as one file and as
a sharded dataset, through the CLI as a user runs it, each step in its own process with its wall
time, rows/s and peak RSS.

The vectors are built from real ones: row i is the source's vector ``i mod n`` (``--source``: the
big corpus's MiniLM vectors by default, or Debian's) plus Gaussian noise of norm ``--noise``
(relative to the unit vector), renormalized, so every real vector has ``rows / n`` noisy copies
around it (cosine about 1 / sqrt(1 + noise^2) to it) and the neighbourhoods of the real corpus
survive. Queries: the source's own (real) queries (``--query-source``).

    python benchmarks/streaming/bench_10m.py make [--rows 10000000] [--dir bench-data/10m] [--forms file]  # once: both
    forms (30 GB), or the file
    python benchmarks/streaming/bench_10m.py run [--dir bench-data/10m] [--queries 1000] [--json
    benchmarks/results/10m.json]

Steps of ``run``: ``binarize`` (the file, and the dataset to a dataset); ``recommend --budget 48``
on its default sample (label-free, documents standing in for queries); ``apply`` of its pick;
``search`` of the queries over those codes (exact); ``search`` over the bits exactly; ``export``
of the bits to a faiss HNSW graph (graph settings ``--hnsw-m`` / ``--ef-construction``) and ``search
--graph`` through it, with its recall@10 against the exact Hamming search; ``export`` of the bits to faiss and to
usearch (an HNSW
graph with the same settings). A step whose input an earlier step writes is skipped, and says so,
when that input is missing (``--steps search`` without the 48 B codes of ``apply``). Streaming steps should stay under
1 GB of RSS; search holds the
codes plus at most 1 GB.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

SHARDS = 10


def make(args) -> None:
    import pyarrow as pa

    from embcompress.core.specs import float_spec
    from embcompress.io import VectorWriter, read_all

    src, _ = read_all(args.source)
    n, d = src.shape
    out = Path(args.dir)
    dataset = args.forms == "both"
    check_disk(out, args.rows, d, 1 + dataset)
    (out / "dataset" if dataset else out).mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    meta = {
        "format": "embcompress.embeddings",
        "normalized": True,
        "width": d,
        "model": f"the vectors of {args.source} + noise {args.noise} (bench_10m.py)",
    }
    per_shard = -(-args.rows // SHARDS)
    chunk = min(250_000, per_shard)  # divides per_shard for round sizes (10M rows: 1M per shard)
    t = time.perf_counter()
    schema = pa.schema([("id", pa.string())])
    with VectorWriter(
        out / "vectors.parquet",
        float_spec(d),
        carried_schema=schema,
        metadata=meta,
        num_rows=args.rows,
        overwrite=args.overwrite,
    ) as one:
        shard, writer = -1, None
        for s in range(0, args.rows, chunk):
            rows = np.arange(s, min(s + chunk, args.rows))
            X = src[rows % n] + rng.standard_normal((len(rows), d), dtype=np.float32) * np.float32(
                args.noise / np.sqrt(d)
            )
            X /= np.linalg.norm(X, axis=1, keepdims=True)
            ids = pa.RecordBatch.from_arrays([pa.array([f"v{i}" for i in rows], pa.string())], schema=schema)
            one.write(X, ids)
            if dataset and s // per_shard != shard:  # a new shard every per_shard rows
                if writer is not None:
                    writer.__exit__(None, None, None)
                shard = s // per_shard
                writer = VectorWriter(
                    out / "dataset" / f"part-{shard:05d}.parquet",
                    float_spec(d),
                    carried_schema=schema,
                    metadata=meta,
                    overwrite=args.overwrite,
                ).__enter__()
            if dataset:
                writer.write(X, ids)
            print(f"  {rows[-1] + 1:,} rows, {time.perf_counter() - t:.0f} s", flush=True)
        if writer is not None:
            writer.__exit__(None, None, None)
    also = f" and {out / 'dataset'}/" if dataset else ""
    print(f"wrote {args.rows:,} x {d} to {out / 'vectors.parquet'}{also} in {time.perf_counter() - t:.0f} s")


def check_disk(out: Path, rows: int, d: int, forms: int = 2) -> None:
    """Refuse to start when the disk cannot hold both forms and the run's outputs: a full disk stops
    every other program on the machine, a CI run's install included (the eighteenth session left its
    10M files on the machine it stopped on, and CI's install there failed with ENOSPC)."""
    import shutil

    need = (
        forms * rows * d * 4 * 1.05 + rows * (d // 8 + 64) * 6 + 10 * 2**30
    )  # two forms, the steps' outputs, 10 GiB spare
    probe = next(p for p in (out, *out.absolute().parents) if p.exists())
    free = shutil.disk_usage(probe).free
    if free < need:
        raise SystemExit(
            f"{probe} has {free / 2**30:.1f} GiB free; {rows:,} x {d} "
            f"{'as a file and a dataset' if forms == 2 else 'as a file'}, the run's "
            f"outputs and 10 GiB to spare need {need / 2**30:.1f} GiB. Fewer --rows, or another --dir."
        )
    print(f"{free / 2**30:.1f} GiB free, about {need / 2**30:.1f} GiB needed; remove {out} when done (rm -r)")


_LAUNCH = (
    "import json, resource, subprocess, sys, time\n"
    "proc, peak = subprocess.Popen(sys.argv[2:]), {'RssAnon': 0, 'RssFile': 0}\nwhile proc.poll() is None:\n    try:\n"
    "        for line in open(f'/proc/{proc.pid}/status'):\n            k, _, v = line.partition(':')\n"
    "            if k in peak:\n                peak[k] = max(peak[k], int(v.split()[0]))\n"
    "    except (OSError, ValueError):\n        pass\n    time.sleep(0.05)\n"
    "u = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
    "open(sys.argv[1], 'w').write(json.dumps({'rc': proc.returncode, 'maxrss_kib': u.ru_maxrss, 'cpu': u.ru_utime + "
    "u.ru_stime,\n"
    "                                         'anon_kib': peak['RssAnon'], 'file_kib': peak['RssFile']}))\n"
    "sys.exit(proc.returncode)\n"
)


def step(
    name: str,
    cmd: list[str],
    rows: int | None,
    log: list,
    only: set | None = None,
    needs: tuple[Path, ...] = (),
    key: str | None = None,
) -> dict | None:
    """Run ``embcompress cmd`` in a child process; its wall time, CPU time, rows/s and peak RSS.
    Skipped (None) when ``only`` names other steps (by the command's first word, or the step's
    ``key``), or when a file it ``needs`` (written by an earlier step) is missing."""
    if only and cmd[0] not in only and key not in only:
        return None
    missing = [p for p in needs if not p.exists()]
    if missing:
        print(f"  {name:40s} skipped: {', '.join(map(str, missing))} missing (an earlier step writes it)", flush=True)
        return None
    # the command runs under a small Python launcher that reports its child's usage: a child forked
    # straight from this process (numpy, pyarrow, the queries loaded) would count this process's
    # resident memory at the fork in its own peak (Linux carries the high-water mark across exec).
    # The launcher also samples the child's resident memory every 50 ms in two parts: private
    # (anonymous: what the process allocated) and file-backed (pages of files it mapped, such as a
    # memory-mapped graph: page cache the kernel can drop and other processes share)
    with tempfile.NamedTemporaryFile("r", suffix=".json") as usage_file:
        t = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-c", _LAUNCH, usage_file.name, sys.executable, "-m", "embcompress.cli.main", *cmd],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        wall = time.perf_counter() - t
        out = proc.stdout
        usage = json.loads(Path(usage_file.name).read_text())
    rss = usage["maxrss_kib"] / 1024
    cpu = usage["cpu"]  # not inflated when another job shares the cores, unlike wall
    r = {
        "step": name,
        "command": "embcompress " + " ".join(cmd),
        "wall_seconds": round(wall, 2),
        "cpu_seconds": round(cpu, 2),
        "rows_per_second": None if rows is None else rows / wall,
        "peak_rss_mib": round(rss),
        "rc": proc.returncode,
        "peak_private_mib": round(usage["anon_kib"] / 1024),
        "peak_file_mapped_mib": round(usage["file_kib"] / 1024),
        "started": time.strftime("%H:%M:%S", time.localtime(time.time() - wall)),
        "output_tail": out[-3000:],
    }
    print(
        f"  {name:40s} {wall:8.1f} s {cpu:8.1f} cpu-s {'' if rows is None else f'{rows / wall:12,.0f} rows/s'} "
        f"{rss:8.0f} MiB (private {usage['anon_kib'] / 1024:.0f}, file-mapped {usage['file_kib'] / 1024:.0f})"
        f"{'' if proc.returncode == 0 else '  FAILED: ' + out.strip().splitlines()[-1]}",
        flush=True,
    )
    log.append(r)
    return r


def recall_with_ties(exact: Path, found: Path) -> float:
    """Share of the found results whose score reaches the exact search's 10th best for that query
    (a document as near as the exact 10th is as good; Hamming scores tie often)."""
    import pyarrow.parquet as pq

    e, f = (pq.read_table(p, columns=["query_id", "score"]).to_pandas() for p in (exact, found))
    tenth = e.groupby("query_id", sort=False)["score"].min()
    return float((f["score"].to_numpy() >= tenth.loc[f["query_id"]].to_numpy()).mean())


def recall_at_10(a: Path, b: Path) -> float:
    import pyarrow.parquet as pq

    def sets(p):
        t = pq.read_table(p).to_pydict()
        out: dict = {}
        qk = next(k for k in t if "query" in k)
        dk = next(k for k in t if k in ("id", "doc_id", "document_id", "corpus-id"))
        for q, d in zip(t[qk], t[dk]):
            out.setdefault(q, set()).add(d)
        return out

    x, y = sets(a), sets(b)
    return float(np.mean([len(x[q] & y.get(q, set())) / len(x[q]) for q in x]))


class StepLog(list):
    """The steps measured so far, written to the JSON file after every step, so that a run stopped
    part-way keeps what it measured; a partial run (``--steps``) replaces only its own steps in an
    earlier run's file."""

    def __init__(self, path: Path | None, rows: int, only: set | None):
        super().__init__()
        self.path, self.rows = path, rows
        self.old = json.loads(path.read_text())["steps"] if path and only and path.exists() else []

    def append(self, r: dict) -> None:
        super().append(r)
        if self.path is not None:
            mine = {x["step"] for x in self}
            steps = [x for x in self.old if x["step"] not in mine] + list(self)
            self.path.write_text(
                json.dumps({"rows": self.rows, "date": time.strftime("%Y-%m-%d"), "steps": steps}, indent=1)
            )


def run(args) -> None:
    import pyarrow.parquet as pq

    d = Path(args.dir)
    one, ds, w = d / "vectors.parquet", d / "dataset", d / "work"
    w.mkdir(exist_ok=True)
    rows = pq.ParquetFile(one).metadata.num_rows
    qt = pq.read_table(args.query_source or source_queries(one)).slice(0, args.queries)
    pq.write_table(qt, w / "queries.parquet")
    print(
        f"{rows:,} rows, {one.stat().st_size / 2**30:.1f} GiB; {args.queries} real queries; {os.cpu_count()} cores; "
        f"{time.strftime('%Y-%m-%d %H:%M')}",
        flush=True,
    )
    ow = ["--overwrite"]
    graph = ["--hnsw-m", str(args.hnsw_m), "--ef-construction", str(args.ef_construction)]
    only = set(args.steps.split(",")) if args.steps else None
    log = StepLog(Path(args.json) if args.json else None, rows, only)
    bits, model, codes = w / "bits.parquet", w / "model48", w / "codes48.parquet"
    step("binarize (one file)", ["binarize", str(one), str(bits), *ow], rows, log, only)
    step("binarize (dataset -> dataset)", ["binarize", str(ds), str(w / "bits-ds"), *ow], rows, log, only, needs=(ds,))
    step(
        "recommend --budget 48 (default sample)",
        ["recommend", str(one), str(model), "--budget", "48", "--json", *ow],
        None,
        log,
        only,
    )
    step("apply the 48 B pick", ["apply", str(model), str(one), str(codes), *ow], rows, log, only, needs=(model,))
    q = str(w / "queries.parquet")
    step(
        f"search {args.queries} queries, 48 B codes (exact)",
        ["search", str(codes), q, str(w / "r48.parquet"), "--model", str(model), *ow],
        None,
        log,
        only,
        needs=(codes, model),
    )
    step(
        f"search {args.queries} queries, bits (exact)",
        ["search", str(bits), q, str(w / "rbits.parquet"), *ow],
        None,
        log,
        only,
        needs=(bits,),
        key="search-bits",
    )
    hnsw_file = w / "bits-hnsw.faiss"  # built once by export, as a user serving from a graph would, then searched
    built = step(
        f"export bits -> faiss HNSW (M={args.hnsw_m}, efC={args.ef_construction})",
        ["export", str(bits), str(hnsw_file), "--to", "faiss", "--structure", "hnsw", *graph, *ow],
        rows,
        log,
        only,
        needs=(bits,),
        key="export-hnsw",
    )
    for ef in (int(e) for e in args.ef.split(",")):
        r = step(
            f"search {args.queries} queries, bits (the exported HNSW graph, ef {ef})",
            [
                "search",
                str(bits),
                q,
                str(w / "rhnsw.parquet"),
                "--graph",
                str(hnsw_file),
                "--ef",
                str(ef),
                "--json",
                *ow,
            ],
            None,
            log,
            only,
            needs=(bits, hnsw_file),
            key="search-hnsw",
        )
        if r is None or r["rc"] != 0 or not (w / "rbits.parquet").exists():
            continue
        rec = recall_at_10(w / "rbits.parquet", w / "rhnsw.parquet")
        ties = recall_with_ties(w / "rbits.parquet", w / "rhnsw.parquet")
        s = json.loads(r["output_tail"][r["output_tail"].index("{") :])
        build = built["wall_seconds"] if built is not None else None
        print(
            f"  HNSW recall@10 at ef {ef} against the exact Hamming search: {rec:.4f} (same ids), {ties:.4f} (ties "
            f"counted); "
            f"graph read in {s['graph_seconds']:.1f} s; {args.queries} queries searched in {s['seconds']:.2f} s",
            flush=True,
        )
        log.append(
            {
                "step": f"hnsw recall@10, ef {ef}",
                "value": rec,
                "with_ties": ties,
                "hnsw_m": args.hnsw_m,
                "ef": ef,
                "ef_construction": args.ef_construction,
                "graph_seconds": build,
                "read_seconds": s["graph_seconds"],
                "search_seconds": s["seconds"],
            }
        )
    step(
        "export bits -> faiss",
        ["export", str(bits), str(w / "bits.faiss"), "--to", "faiss", *ow],
        rows,
        log,
        only,
        needs=(bits,),
        key="export-faiss",
    )
    step(
        f"export bits -> usearch (M={args.hnsw_m}, efC={args.ef_construction})",
        ["export", str(bits), str(w / "bits.usearch"), "--to", "usearch", *graph, *ow],
        rows,
        log,
        only,
        needs=(bits,),
        key="export-usearch",
    )


def source_queries(vectors: Path) -> Path:
    """The real queries beside the source the vectors were made from (``make`` names it in the
    file's metadata): queries of another corpus would make every neighbour list arbitrary."""
    import pyarrow.parquet as pq

    meta = json.loads(pq.ParquetFile(vectors).schema_arrow.metadata[b"embcompress"])
    source = Path(meta["model"].split(" vectors of ", 1)[1].split(" + noise", 1)[0])
    queries = source.parent / "queries.parquet"
    if not queries.exists():
        raise SystemExit(f"{vectors} was made from {source}; no {queries} beside it: give --query-source")
    return queries


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=("make", "run"))
    ap.add_argument("--dir", default="bench-data/10m")
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--source", default="bench-data/big/minilm/corpus.parquet")
    ap.add_argument(
        "--query-source",
        default=None,
        help="real queries (default: those beside the source the vectors were made from)",
    )
    ap.add_argument("--ef", default="128", help="candidates per query of the graph's searches, comma-separated")
    ap.add_argument("--noise", type=float, default=0.5)
    ap.add_argument(
        "--forms",
        choices=("both", "file"),
        default="both",
        help="make: the one file and the sharded dataset (both), or the file alone (half the disk; the dataset steps "
        "skip)",
    )
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--overwrite", action="store_true")
    ap.add_argument("--json", default=None)
    ap.add_argument("--hnsw-m", type=int, default=32, help="HNSW links per node (search --index hnsw, usearch export)")
    ap.add_argument("--ef-construction", type=int, default=80, help="HNSW candidates kept while inserting")
    ap.add_argument(
        "--steps",
        default=None,
        help="run only these commands or steps, comma-separated (e.g. recommend,apply,search; "
        "steps: search-bits, export-hnsw, search-hnsw, export-faiss, export-usearch)",
    )
    args = ap.parse_args()
    make(args) if args.what == "make" else run(args)


if __name__ == "__main__":
    main()
