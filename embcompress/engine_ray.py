"""The main job on a Ray cluster (``--engine ray``; extra ``embcompress[ray]``).

A dataset (a directory or glob of parquet shards) is compressed by one Ray task per input shard.
Each task rebuilds the fitted compressor from its config and arrays (no pickle; put in the object
store once), compresses its shard with the local engine and writes the output shard itself, under
a temporary name, into a staging directory beside the output on shared storage. The driver
receives each shard's row count and size, never codes; it writes a manifest (shards, rows, bytes,
the compressor's fingerprint) and commits by renaming the staging directory once every shard
succeeded. The shards are byte-identical to the local engine's. A failure leaves nothing; with
``resume`` the finished shards stay staged and a rerun skips them (:func:`_workers_write`).

A single file is one shard: its row groups are compressed on the workers through Ray Data
(``map_batches`` onto actors), returned as Arrow tables tagged with their sequence number, and
written in order by the driver with the local engine's writer (the same bytes).

Fitting (see :func:`ray_fit`): statistics that combine are computed per row group on the workers
and merged on the driver (PCA, int8, RaBitQ, the binary mean threshold); learned maps receive a
uniform sample drawn on the cluster; a chain is fitted stage by stage the same ways. A fit that
reads the first rows in order (binary's levels, ``max_rows``) reads them on the driver itself, in
the local engine's batches, so its state is the local engine's exactly.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections import deque
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ._util import require
from .base import Compressor, check_values
from .errors import EmbcompressError, InputError, OutputExistsError
from .io import open_vectors, pages
from .io.readers import Batch, _batch_size, column_to_numpy
from .io.writers import to_arrow
from .persist import arrays_from_json, arrays_to_json, from_config, to_config
from .registry import get
from .stream import CompressResult, open_to_compress, write_codes


def connect(address: str | None = None, num_cpus: int | None = None):
    """Ray, started locally (``address`` None) or connected to a running cluster; an address
    that does not answer is an InputError."""
    ray = require("ray", "ray", "--engine ray")
    if ray.is_initialized():
        return ray
    if address and address != "auto":
        _probe(address)
        _probe_auth(ray, address)
    try:
        quiet = {"log_to_driver": False, "include_dashboard": False, "logging_level": "ERROR"}
        if address:
            ray.init(address=address, **quiet)
        else:
            ray.init(num_cpus=num_cpus, **quiet)
    except (ConnectionError, TimeoutError, RuntimeError, ValueError) as exc:
        raise InputError(f"cannot connect to a Ray cluster at {address!r}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
    ctx = ray.data.DataContext.get_current()
    ctx.execution_options.preserve_order = True
    ctx.enable_progress_bars = False
    return ray


def _probe(address: str, timeout: float = 5.0) -> None:
    """Fail in seconds, not minutes, when nothing answers at ``address`` (``host:port`` or
    ``ray://host:port``)."""
    import socket

    hostport = address.split("://", 1)[-1].rstrip("/")
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise InputError(f"Ray address {address!r} is not host:port or ray://host:port")
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as exc:
        raise InputError(f"cannot connect to a Ray cluster at {address!r}: nothing answers there "
                         f"({exc.strerror or exc}); start one with `ray start --head` or leave --address out") from None


def _probe_auth(ray, address: str) -> None:
    """Fail at once, in one line, where the cluster at ``address`` asks for a token that this
    process will not send. Since Ray 2.5x, ``ray start --head`` turns token authentication on
    (writing ``~/.ray/auth_token``), and ``ray.init`` sends the token only to an address found
    by itself (none or ``auto``), not to an explicit ``host:port``, unless ``RAY_AUTH_MODE=token``:
    an explicit address otherwise fails after 20 s of retries with a generic message."""
    if address.startswith("ray://"):
        return  # Ray Client: its server checks its own way
    try:
        from ray._raylet import GcsClient
        from ray.exceptions import AuthenticationError
    except ImportError:  # a Ray without token authentication or with another layout: nothing to probe
        return
    refused = False
    saved = os.dup(2)  # the probe's C++ client logs each refused call on stderr itself
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            try:
                GcsClient(address=address)
            except AuthenticationError:
                refused = True
            except Exception:  # noqa: BLE001 - anything else is left to ray.init, which reports it
                pass
    finally:
        os.dup2(saved, 2)
        os.close(saved)
    if refused:
        mode = os.environ.get("RAY_AUTH_MODE")
        how = ("its token is not the one this process has (~/.ray/auth_token, RAY_AUTH_TOKEN or "
               "RAY_AUTH_TOKEN_PATH)" if mode == "token" else
               "set RAY_AUTH_MODE=token with the cluster's token in ~/.ray/auth_token or RAY_AUTH_TOKEN "
               "(Ray sends it to an explicit address only then), or use --address auto on a node of the cluster")
        raise InputError(f"cannot connect to a Ray cluster at {address!r}: it requires token authentication; {how}")


class RayEngine:
    """The engine argument of :func:`~embcompress.stream.fit_and_compress` for Ray: the same calls
    as the local engine's ``fit_file`` and ``compress_file``. Its workers write a dataset's shards
    themselves, so it also takes an output on a pyarrow filesystem (``s3://...``)."""

    writes_remote = True

    def __init__(self, address: str | None = None, num_cpus: int | None = None, resume: bool = False):
        self.address, self.num_cpus, self.resume = address, num_cpus, resume
        connect(address, num_cpus)  # fail now on an address that does not answer

    def fit_file(self, comp, path, *, column=None, batch_size=None, max_rows=None, progress=None, threads=None):
        return ray_fit(comp, path, address=self.address, num_cpus=self.num_cpus, column=column, max_rows=max_rows,
                       batch_size=batch_size, progress=progress)

    def compress_file(self, comp, src, dst, *, column=None, id_column=None, keep_columns=(), batch_size=None,
                      overwrite=False, progress=None, threads=None):
        return ray_compress(comp, src, dst, address=self.address, num_cpus=self.num_cpus, column=column,
                            id_column=id_column, keep_columns=keep_columns, overwrite=overwrite, progress=progress,
                            resume=self.resume)


SEQ = "__embcompress_seq"


def _units(src) -> list[dict]:
    """The local engine's units of work, in row order: sequence number, shard, path, row group and
    its row count (from the metadata) for every row group of every shard."""
    sources = src.shards if hasattr(src, "shards") else [src]
    for s in sources:
        if Path(s.path).suffix.lower() == ".npy":
            raise InputError("--engine ray reads parquet; convert .npy input to parquet or use the local engine")
    units = [(i, str(s.path), g, int(n)) for i, s in enumerate(sources) for g, n in enumerate(np.diff(s._group_starts()))]
    return [{"seq": k, "shard": i, "path": p, "group": g, "rows": n} for k, (i, p, g, n) in enumerate(units)]


def _first(units: list[dict], rows: int) -> list[dict]:
    """The units that hold the first ``rows`` rows."""
    starts = np.concatenate([[0], np.cumsum([u["rows"] for u in units])])
    return [u for u, st in zip(units, starts) if st < rows]


class _Unit:
    """A Ray Data actor that reads whole row groups (Arrow in), compresses them with the fitted
    compressor it rebuilt once from its config and arrays (no pickle), and returns Arrow tables
    tagged with their sequence number; without a compressor it returns the decoded vectors."""

    def __init__(self, config: dict | None, arrays: dict | None, column: str, carried: list, dim: int, spec: Any,
                 stats_of: dict | None = None, prefix: dict | None = None, width: int | None = None):
        self.comp = from_config(config, arrays_from_json(arrays)) if config is not None else None
        # prefix: the fitted stages of a chain that map the rows before a later stage's fit sees them
        self.prefix = from_config(prefix["config"], arrays_from_json(prefix["arrays"])) if prefix else None
        # stats_of: {"name", "params"} of an unfitted compressor whose block statistics are returned
        self.stats_of = get(stats_of["name"]).from_params(stats_of["params"]) if stats_of else None
        self.column, self.carried, self.dim, self.spec = column, carried, dim, spec
        self.files: dict = {}
        self.direct: dict = {}  # path -> where io.pages decodes the column (None: pyarrow)

    def __call__(self, items: pa.Table) -> pa.Table:
        import pyarrow.parquet as pq

        out = []
        for item in items.to_pylist():
            pf = self.files.get(item["path"])
            if pf is None:
                pf = self.files[item["path"]] = pq.ParquetFile(item["path"], page_checksum_verification=True)
            if item["path"] not in self.direct:
                self.direct[item["path"]] = pages.find_column(pf, self.column)
            direct = self.direct[item["path"]]
            X = None if direct is None else pages.read_group(item["path"], pf.metadata, item["group"], direct, self.dim)
            t = pf.read_row_group(item["group"], columns=self.carried if X is not None else [self.column, *self.carried])
            try:
                if X is not None:  # the direct page decoder (io.pages); pyarrow for every other layout
                    check_values(X, what=f"column {self.column!r}")
                else:
                    X = column_to_numpy(t.column(self.column).combine_chunks(), self.dim, column=self.column)
                if item.get("take") is not None:  # a uniform sample of `take` rows of the block (no compressor)
                    rng = np.random.default_rng([int(item["sample_seed"]), int(item["seq"])])
                    X = X[np.sort(rng.choice(len(X), size=int(item["take"]), replace=False))]
                if self.prefix is not None:
                    X = self.prefix.transform(X)
                if self.stats_of is not None:  # one row: the block's statistics, as exact JSON arrays
                    stats = json.dumps(arrays_to_json(self.stats_of._block_stats(X)))
                    out.append(pa.table({"stats": [stats], SEQ: pa.array([item["seq"]], pa.int64())}))
                    continue
                values = self.comp.transform(X) if self.comp is not None else X
            except InputError as exc:
                raise InputError(f"{item['path']}, row group {item['group']}: {exc}") from None
            spec = self.spec if self.comp is not None else None
            col = to_arrow(values, spec) if spec is not None else pa.FixedSizeListArray.from_arrays(
                pa.array(values.reshape(-1)), values.shape[1])
            cols = [t.column(c).combine_chunks() for c in self.carried] + [col, pa.array([item["seq"]] * len(X), pa.int64())]
            out.append(pa.Table.from_arrays(cols, names=[*self.carried, self.column, SEQ]))
        return pa.concat_tables(out)


def _row_batches(ray, units, kwargs, size: int, limit: int | None, workers, progress) -> Iterator[np.ndarray]:
    """The rows of ``units`` (up to ``limit``), decoded on the cluster, in row order and in the
    local engine's batches (``size`` rows within each row group)."""
    seen = 0
    for _, table in _in_order(ray, units, kwargs, workers):
        X = column_to_numpy(table.column(kwargs["column"]).combine_chunks(), kwargs.get("width") or kwargs["dim"],
                            column=kwargs["column"])
        for start in range(0, len(X), size):
            part = X[start : start + size]
            if limit is not None:
                part = part[: limit - seen]
            seen += len(part)
            if progress:
                progress(len(part))
            if len(part):
                yield part
            if limit is not None and seen >= limit:
                return


def _cluster_sample(ray, units: list, kwargs: dict, m: int, comp, workers, progress) -> np.ndarray:
    """A uniform sample of ``m`` rows (all rows when there are fewer) drawn on the cluster: the
    driver splits ``m`` among the row groups by a multivariate hypergeometric draw over their row
    counts (from the metadata, nothing read), and each worker sends that many rows of its row
    group, chosen uniformly. Only the sample crosses the network."""
    sizes = np.array([u["rows"] for u in units], dtype=np.int64)
    seed = int(getattr(comp, "seed", 0) or 0)
    takes = sizes if sizes.sum() <= m else np.random.default_rng(seed).multivariate_hypergeometric(sizes, m)
    todo = [{**u, "take": int(t), "sample_seed": seed} for u, t in zip(units, takes) if t > 0]
    parts = []
    for unit, table in _in_order(ray, [{**u, "seq": k} for k, u in enumerate(todo)], kwargs, workers):
        parts.append(column_to_numpy(table.column(kwargs["column"]).combine_chunks(), kwargs.get("width") or kwargs["dim"],
                                     column=kwargs["column"]))
        if progress:
            progress(len(parts[-1]))
    return np.concatenate(parts) if parts else np.empty((0, kwargs.get("width") or kwargs["dim"]), np.float32)


def _in_order(ray, units: list, actor_kwargs: dict, workers: int | None):
    """(unit, table) for every unit, in sequence order, whatever order the cluster finishes them in."""
    ds = ray.data.from_items(units, override_num_blocks=len(units)).map_batches(
        _Unit, fn_constructor_kwargs=actor_kwargs, batch_size=1, batch_format="pyarrow", num_cpus=1,
        # an actor per core but one, which the read of the items needs: with every core held by an actor it never runs
        concurrency=(1, workers or max(1, int(ray.cluster_resources().get("CPU", 2)) - 1)))
    waiting: dict[int, pa.Table] = {}
    nxt = 0
    for block in ds.iter_batches(batch_format="pyarrow", batch_size=None):
        seqs = np.unique(block.column(SEQ).to_numpy())
        for k in seqs:
            waiting[int(k)] = block.filter(pc.equal(block.column(SEQ), k)) if len(seqs) > 1 else block
        while nxt in waiting:
            yield units[nxt], waiting.pop(nxt)
            nxt += 1
    if nxt != len(units):
        raise InputError(f"the Ray cluster returned {nxt} of {len(units)} row groups; nothing was written")


def ray_compress(comp: Compressor, src_path, dst_path, *, address: str | None = None, num_cpus: int | None = None,
                 column: str | None = None, id_column: str | None = None, keep_columns: Sequence[str] = (),
                 overwrite: bool = False, workers: int | None = None, progress=None, resume: bool = False,
                 received: dict | None = None) -> CompressResult:
    """:func:`~embcompress.stream.compress_file` on Ray: the same output bytes. A dataset's shards
    are written by the workers (:func:`_workers_write`); a single file's row groups are
    compressed on the workers and written in order by the driver. ``received``, when given, is
    filled with what the driver received from the workers (``bytes``, ``messages``) and the
    seconds the shard tasks took in all (``task_seconds``)."""
    t0 = time.perf_counter()
    src = open_to_compress(comp, src_path, dst_path, column=column, id_column=id_column, keep_columns=keep_columns,
                           overwrite=overwrite, remote_ok=True)
    _units(src)  # refuses .npy shards
    ray = connect(address, num_cpus)
    if getattr(src, "shards", None) is not None:
        from ._fs import remote_output

        remote = remote_output(dst_path)
        if remote is not None:
            return _workers_write_remote(ray, comp, src, remote, overwrite=overwrite, resume=resume, workers=workers,
                                         progress=progress, received=received, started=t0)
        return _workers_write(ray, comp, src, dst_path, overwrite=overwrite, resume=resume, workers=workers,
                              progress=progress, received=received, started=t0)
    if resume:
        raise InputError("--resume applies to a dataset's output (a directory of shards); this input is one file")
    units = _units(src)
    spec = comp.output_spec
    carried = list(src.carried_columns)
    config, arrays = to_config(comp)
    kwargs = {"config": config, "arrays": arrays_to_json(arrays), "column": src.column, "carried": carried,
              "dim": src.dim, "spec": spec}

    def batches() -> Iterator[Batch]:
        for unit, table in _in_order(ray, units, kwargs, workers):
            codes = column_to_numpy(table.column(src.column).combine_chunks(), spec.row_width, column=src.column, finite=False)
            kept = pa.RecordBatch.from_arrays([table.column(c).combine_chunks() for c in carried], names=carried) if carried else None
            yield Batch(codes, kept, 0, unit["shard"])

    return write_codes(comp, src, src_path, dst_path, batches(), overwrite=overwrite, progress=progress, started=t0)


# ---- datasets: every shard written by a worker, committed by the driver ---------------------------
MANIFEST = "_embcompress_manifest.json"


def _staging(dst: Path) -> Path:
    """Where a resumable run stages its shards: beside the output, under a fixed hidden name."""
    return dst.with_name(f".{dst.name}.partial")


COMMIT_THREADS = 32  # moves in flight while committing to an object store
_REBUILT: dict = {}  # in a worker process: the last compressor rebuilt, by its state's fingerprint


def _compress_shard(state_ref, job: dict) -> dict:
    """On a worker: compress one input shard into ``job["target"]`` with the local engine (the
    same bytes as the local engine's shard). compress_file writes under a temporary name and
    renames at the end, so a killed worker leaves no shard, only a temporary file the driver
    removes. Returns a few bytes: the shard's rows and size."""

    from .stream import compress_file

    t0 = time.perf_counter()
    comp = _REBUILT.get(job["fingerprint"])
    if comp is None:  # once per worker process and compressor (rq:24: 0.08 s of a 2 s shard)
        config, arrays = state_ref
        comp = from_config(config, arrays_from_json(arrays))
        _REBUILT.clear()
        _REBUILT[job["fingerprint"]] = comp
    if job.get("uri"):
        return _compress_shard_remote(comp, job, t0)
    target = Path(job["target"])
    if not Path(job["root"]).is_dir():  # the run was stopped and its staging directory removed: write nothing
        raise InputError(f"the run writing {job['root']} was stopped; shard {job['path']} not written")
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        res = compress_file(comp, job["path"], target, column=job["column"], id_column=job["id_column"],
                            keep_columns=job["keep"], overwrite=True, threads=1)
    except InputError as exc:
        raise InputError(f"shard {job['path']}: {exc}") from None
    except OSError as exc:
        from ._fs import storage_error

        raise storage_error(exc, target) from None
    return {"rel": job["rel"], "rows": int(res.rows), "bytes": int(os.path.getsize(target)),
            "seconds": round(time.perf_counter() - t0, 4)}


def _compress_shard_remote(comp: Compressor, job: dict, t0: float) -> dict:
    """On a worker: compress one shard into a local temporary file with the local engine (the
    same bytes), then upload it to ``job["target"]`` on the output's filesystem. An upload that
    does not finish leaves no object (object stores publish an object when its upload completes),
    and the staging prefix is deleted by the driver on a failure anyway."""
    import shutil
    import tempfile

    from ._fs import RemoteOutput, storage_error
    from .stream import compress_file

    out = RemoteOutput(job["uri"])
    if out.kind(job["root"]) != "dir":  # the run was stopped and its staging prefix removed
        raise InputError(f"the run writing {out} was stopped; shard {job['path']} not written")
    local = tempfile.mkdtemp(prefix="embcompress-shard-")
    try:
        tmp = os.path.join(local, "shard.parquet")
        try:
            res = compress_file(comp, job["path"], tmp, column=job["column"], id_column=job["id_column"],
                                keep_columns=job["keep"], overwrite=True, threads=1)
        except InputError as exc:
            raise InputError(f"shard {job['path']}: {exc}") from None
        try:
            out.fs.create_dir(job["target"].rsplit("/", 1)[0], recursive=True)  # a file system needs it
            with open(tmp, "rb") as src, out.fs.open_output_stream(job["target"]) as dst:
                shutil.copyfileobj(src, dst, 8 << 20)
        except OSError as exc:
            raise storage_error(exc, f"{out}/{job['rel']}") from None
        size = os.path.getsize(tmp)
    finally:
        shutil.rmtree(local, ignore_errors=True)
    return {"rel": job["rel"], "rows": int(res.rows), "bytes": int(size), "seconds": round(time.perf_counter() - t0, 4)}


def _shard_failure(exc: Exception, job: dict) -> Exception:
    """The error to show for a shard whose task failed: ours as raised on the worker, else one line
    naming the shard."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, EmbcompressError):
        return cause
    text = str(cause or exc).strip().splitlines()
    return InputError(f"shard {job['path']} failed on a Ray worker: {type(cause or exc).__name__}"
                      f"{': ' + text[-1] if text else ''}")


def _shard_jobs(src, root: str, fingerprint: str, skip=(), **extra) -> list[dict]:
    """One :func:`_compress_shard` job per input shard not in ``skip``, writing ``root/REL``."""
    keep = [c for c in src.carried_columns if c != src.id_column]
    return [{"rel": rel, "path": str(s.path), "target": f"{root}/{rel}", "root": root, "fingerprint": fingerprint,
             "column": src.column, "id_column": src.id_column, "keep": keep, **extra}
            for rel, s in zip(src.rels, src.shards) if rel not in skip]


def _new_manifest(comp: Compressor, src, fingerprint: str, done: dict | None = None) -> dict:
    return {"format": "embcompress.manifest", "fingerprint": fingerprint, "compressor": comp.name,
            "source": str(src.path), "shards": dict(done or {})}


def _totals(manifest: dict) -> None:
    """The manifest's rows and bytes over its shards, once every shard is in."""
    manifest["rows"] = sum(v["rows"] for v in manifest["shards"].values())
    manifest["bytes"] = sum(v["bytes"] for v in manifest["shards"].values())


def _result(comp: Compressor, src, manifest: dict, started: float, output: str) -> CompressResult:
    """What a Ray dataset write returns, from its committed manifest."""
    return CompressResult(rows=src.num_rows, input_bytes=sum(os.path.getsize(s.path) for s in src.shards),
                          output_bytes=manifest["bytes"], bytes_per_vector_in=src.nbytes_per_row,
                          bytes_per_vector_out=comp.output_spec.nbytes, seconds=time.perf_counter() - started,
                          output=output)


def _run_shards(ray, comp: Compressor, jobs: list[dict], manifest: dict, *, workers: int | None, resume: bool,
                progress, got: dict, save) -> None:
    """Run one :func:`_compress_shard` task per job, at most one per CPU of the cluster at a time,
    recording each finished shard in ``manifest`` (``save(manifest)`` at most once a second with
    ``resume``). On the first failure no more shards start; without ``resume`` it is raised at
    once, with it after the running shards finished. On any exception (Ctrl-C too) the running
    tasks are cancelled, and have ended, before it propagates."""
    config, arrays = to_config(comp)
    state_ref = ray.put((config, arrays_to_json(arrays)))
    task = ray.remote(num_cpus=1, max_retries=3)(_compress_shard)
    limit = workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
    pending: dict = {}
    failed: Exception | None = None
    last_write = 0.0
    try:
        queue = deque(jobs)
        while queue or pending:
            while queue and len(pending) < limit:
                job = queue.popleft()
                pending[task.remote(state_ref, job)] = job
            ready, _ = ray.wait(list(pending), num_returns=1)
            job = pending.pop(ready[0])
            try:
                info = ray.get(ready[0])
            except ray.exceptions.RayError as exc:
                if failed is None:
                    failed = _shard_failure(exc, job)
                    queue.clear()  # start no more shards; with resume, the running ones finish and count
                    if not resume:
                        raise failed from None
                continue
            got["bytes"] += len(json.dumps(info))
            got["messages"] += 1
            got["task_seconds"] += info["seconds"]
            manifest["shards"][info["rel"]] = {"rows": info["rows"], "bytes": info["bytes"]}
            if resume and time.monotonic() - last_write >= 1.0:  # at most once a second: O(shards) each
                save(manifest)
                last_write = time.monotonic()
            if progress:
                progress(info["rows"])
        if failed is not None:
            raise failed from None
    except BaseException:
        for ref in pending:
            ray.cancel(ref, force=True)
        if pending:  # a cancel is asynchronous: let the killed tasks end before their files are removed
            ray.wait(list(pending), num_returns=len(pending), timeout=30)
        raise


def _move_in(out, root: str, rels: Sequence[str]) -> None:
    """Move each staged shard ``root/REL`` to ``REL`` under the output, COMMIT_THREADS at a time:
    an object store's move is a copy on the server, and copies go faster many at once."""
    from concurrent.futures import ThreadPoolExecutor

    def move(rel: str) -> None:
        out.fs.create_dir(f"{out.path}/{rel}".rsplit("/", 1)[0], recursive=True)
        out.fs.move(f"{root}/{rel}", f"{out.path}/{rel}")

    with ThreadPoolExecutor(COMMIT_THREADS) as pool:
        list(pool.map(move, rels))


def _workers_write_remote(ray, comp: Compressor, src, out, *, overwrite: bool, resume: bool, workers: int | None,
                          progress, received: dict | None, started: float) -> CompressResult:
    """:func:`_workers_write` to a pyarrow filesystem (``out``, a :class:`~embcompress._fs.RemoteOutput`):
    each worker uploads its shards under a staging prefix beside the output; when every shard
    succeeded the driver moves them to their names in the output (an object store's rename is a
    copy on the server: no codes pass through the driver) and writes the manifest last, so an
    output with a manifest is complete. Any failure (Ctrl-C too) deletes the staging prefix."""
    from .persist import describe

    if resume:
        raise InputError(f"--resume needs an output on a local or shared file system; {out} is on a remote one: "
                         "rerun without --resume (the staging prefix of a failed run is deleted)")
    # the output itself was checked with the input, before any work (stream.check_destination)
    fingerprint = describe(comp)["fingerprint"]
    root = out.staging()
    manifest = _new_manifest(comp, src, fingerprint)
    jobs = _shard_jobs(src, root, fingerprint, uri=out.uri_of(root))
    got = {"bytes": 0, "messages": 0, "task_seconds": 0.0}
    try:
        out.fs.create_dir(root)
        _run_shards(ray, comp, jobs, manifest, workers=workers, resume=False, progress=progress, got=got,
                    save=lambda m: None)
        _totals(manifest)
        if out.kind() != "none":
            out.check(overwrite=overwrite)  # something appeared meanwhile: replaced only when asked
            out.remove(out.path)
        _move_in(out, root, src.rels)
        out.write_text(f"{out.path}/{MANIFEST}", json.dumps(manifest, indent=1, sort_keys=True))
        out.remove(root)
    except BaseException as exc:
        out.remove(root)
        if isinstance(exc, OSError) and not isinstance(exc, EmbcompressError):
            raise InputError(f"writing {out} failed: {str(exc).splitlines()[0]}") from None
        raise
    finally:
        if received is not None:
            received.update(got)
    return _result(comp, src, manifest, started, str(out))


def _write_manifest(root: Path, manifest: dict) -> None:
    tmp = root / f".{MANIFEST}.tmp"
    tmp.write_text(json.dumps(manifest, indent=1, sort_keys=True))
    tmp.replace(root / MANIFEST)


def _workers_write(ray, comp: Compressor, src, dst_path, *, overwrite: bool, resume: bool, workers: int | None,
                   progress, received: dict | None, started: float) -> CompressResult:
    """Compress a dataset with one Ray task per input shard, each writing its output shard
    itself into a staging directory beside the output (shared storage). The driver only receives
    each shard's row count and size, writes the manifest (shards, rows, bytes, the compressor's
    fingerprint; with ``resume`` also as they finish, at most once a second, and on a failure),
    and commits: when every shard succeeded it removes what killed
    workers left, and renames the staging directory to the output in one step.

    With ``resume`` the staging directory has a fixed name and outlives a failure; a rerun with
    the same compressor skips the shards its manifest lists (present at their recorded size).
    Without it, a failure removes the staging directory."""
    import shutil

    from ._fs import check_output_dir, storage_error, sweep_stale
    from .persist import describe

    dst = check_output_dir(dst_path, overwrite=overwrite)
    dst.parent.mkdir(parents=True, exist_ok=True)
    fingerprint = describe(comp)["fingerprint"]
    if resume:
        root = _staging(dst)
        old = json.loads((root / MANIFEST).read_text()) if (root / MANIFEST).exists() else None
        if old is not None and old.get("fingerprint") != fingerprint:
            raise InputError(f"{root} holds shards of another compressor (fingerprint {old.get('fingerprint')}, this one "
                             f"{fingerprint}); remove it, or resume with the model that wrote them")
        root.mkdir(exist_ok=True)
    else:
        import tempfile

        sweep_stale(dst)
        root = Path(tempfile.mkdtemp(prefix=f".{dst.name}.tmp-{os.getpid()}-", dir=dst.parent))
        old = None
    done = {rel: info for rel, info in (old or {}).get("shards", {}).items()
            if (root / rel).is_file() and (root / rel).stat().st_size == info["bytes"]}
    manifest = _new_manifest(comp, src, fingerprint, done)
    jobs = _shard_jobs(src, str(root), fingerprint, skip=done)
    got = {"bytes": 0, "messages": 0, "task_seconds": 0.0}
    try:
        _run_shards(ray, comp, jobs, manifest, workers=workers, resume=resume, progress=progress, got=got,
                    save=lambda m: _write_manifest(root, m))
        # commit: nothing but the shards and the manifest (a killed worker's temporary file goes)
        keep = {root / rel for rel in src.rels} | {root / MANIFEST}
        for f in sorted(root.rglob("*"), reverse=True):
            if f.is_file() and f not in keep:
                f.unlink()
        _totals(manifest)
        _write_manifest(root, manifest)
        if dst.exists():
            if not overwrite and (not dst.is_dir() or any(dst.iterdir())):
                raise OutputExistsError(f"{dst} appeared while writing; pass --overwrite (overwrite=True) to replace it")
            shutil.rmtree(dst) if dst.is_dir() else dst.unlink()
        os.replace(root, dst)
    except BaseException as exc:  # Ctrl-C included: the workers were stopped; leave no shard
        if not resume:
            shutil.rmtree(root, ignore_errors=True)
        else:  # keep the finished shards for --resume, listed; the unfinished ones' temporary files go
            for f in root.rglob(".*.tmp-*"):
                f.unlink(missing_ok=True) if f.is_file() else shutil.rmtree(f, ignore_errors=True)
            with contextlib.suppress(OSError):
                _write_manifest(root, manifest)
        if isinstance(exc, OSError) and not isinstance(exc, EmbcompressError):
            raise storage_error(exc, dst) from None
        raise
    finally:
        if received is not None:
            received.update(got)
    return _result(comp, src, manifest, started, str(dst))


def ray_fit(comp: Compressor, src_path, *, address: str | None = None, num_cpus: int | None = None,
            column: str | None = None, max_rows: int | None = None, batch_size: int | None = None,
            progress=None, workers: int | None = None) -> Compressor:
    """Fit on the cluster. A compressor whose fit is a set of statistics that combine (PCA's count,
    mean and centred scatter; int8's ranges: :class:`~embcompress.capabilities.BlockStats`) gets
    them computed per row group on the workers and merged on the driver (state equal to the local
    fit to float tolerance). One that fits on a sample of ``max_rows`` rows (itq, sq, pq, opq, rq,
    geopres, autoencoder) gets a uniform sample drawn on the cluster (equal to the local fit, up to
    float tolerance, when the data hold at most ``max_rows`` rows; another uniform sample
    otherwise). One that reads every row in order (rabitq) gets the row groups decoded on the
    cluster and handed to the fit in row order and in the local engine's batches (state equal to
    the local engine's). One that reads only the first rows (binary's levels, 65,536 rows, or the
    user's ``max_rows``) reads them on the driver, from the same storage, in the same batches.

    A chain is fitted stage by stage, one cluster pass per stage that learns from data: the
    workers map their rows through the stages fitted so far (shipped to them as saved state), then
    compute the next stage's statistics or draw its sample there. Only statistics and samples
    reach the driver. With ``max_rows`` (the first rows) the driver reads them for the whole chain."""
    src = open_vectors(src_path, column=column)
    units = _units(src)
    ray = connect(address, num_cpus)
    size = _batch_size(batch_size, src.nbytes_per_row)
    kwargs = {"config": None, "arrays": None, "column": src.column, "carried": [], "dim": src.dim, "spec": None}
    if max_rows is not None:
        units = _first(units, max_rows)
    if comp.name != "pipeline" or max_rows is not None:
        return _fit_stage(ray, src, comp, units, kwargs, src.dim, size, max_rows, workers, progress)
    from .compressors.pipeline import Pipeline

    comp._check_params()
    comp._validate_params(src.dim)
    fitted: list[Compressor] = []
    width = src.dim
    for i, template in enumerate(comp.stages):
        stage = template.clone()
        stage_kwargs = dict(kwargs)
        if fitted:  # the workers apply the fitted stages before the next one sees the rows
            config, arrays = to_config(Pipeline.from_fitted(fitted))
            stage_kwargs.update(prefix={"config": config, "arrays": arrays_to_json(arrays)}, width=width)
        _fit_stage(ray, src, stage, units, stage_kwargs, width, size, None, workers, progress if i == 0 else None)
        if i < len(comp.stages) - 1 and stage.output_spec.kind != "float":
            raise InputError(f"stage {i + 1} ({stage.name}) outputs {stage.output_spec.kind} codes, which no later "
                             "stage can take; put it last")
        fitted.append(stage)
        width = stage.output_spec.width
    comp._clear_state()
    comp.stages_ = fitted
    comp.n_features_in_ = src.dim
    return comp


def _first_rows_here(src, kwargs: dict, size: int, limit: int, progress) -> Iterator[np.ndarray]:
    """The first ``limit`` rows in the local engine's batches, read by the driver itself from the
    shared storage (binary's levels read 65,536 rows; the user's max_rows) and mapped through a
    chain's fitted stages. Starting a Ray Data pipeline for them cost 15 s on a cluster started by
    `ray start` (its actors' start-up), more than the rows' decoding anywhere."""
    prefix = kwargs.get("prefix")
    stages = from_config(prefix["config"], arrays_from_json(prefix["arrays"])) if prefix else None
    seen = 0
    for b in src.batches(size, max_rows=limit):
        x = b.vectors[: limit - seen]
        seen += len(x)
        if stages is not None:
            x = stages.transform(x)
        if progress:
            progress(len(x))
        if len(x):
            yield x
        if seen >= limit:
            return


def _fit_stage(ray, src, comp: Compressor, units: list, kwargs: dict, dim: int, size: int, max_rows: int | None,
               workers: int | None, progress) -> Compressor:
    """Fit one compressor (a chain's stage: its input is ``dim`` wide) on the rows the workers
    hand out, by statistics or a cluster sample; the first rows in order (a prefix of bounded
    size) are read by the driver (see :func:`ray_fit`)."""
    sample_rows = getattr(comp, "max_rows", None)
    if not comp.learns_from_data:  # the width is all it needs
        return comp.fit_batches(lambda: _first_rows_here(src, kwargs, size, 1, None))
    if max_rows is None and not comp.combines_blocks and isinstance(sample_rows, int) and sample_rows > 0 \
            and comp.name != "pipeline":
        return comp.fit(_cluster_sample(ray, units, kwargs, int(sample_rows), comp, workers, progress))
    if comp.combines_blocks and max_rows is None and comp.fit_rows is None:  # fit_rows: the first rows, in order
        comp._check_params()
        comp._validate_params(dim)

        def blocks():
            stats_kwargs = {**kwargs, "stats_of": {"name": comp.name, "params": comp.get_params(deep=False)}}
            for unit, table in _in_order(ray, units, stats_kwargs, workers):
                if progress:
                    progress(unit["rows"])
                yield arrays_from_json(json.loads(table.column("stats")[0].as_py()))

        # e.g. binary's levels: the first rows, in order, after the thresholds
        return comp.fit_from_block_stats(blocks(), dim, lambda: _first_rows_here(
            src, kwargs, size, comp.rows_after_stats, None))

    limit = max_rows if max_rows is not None else comp.fit_rows  # binary's levels read the first rows only

    def batches():
        if limit is not None:
            return _first_rows_here(src, kwargs, size, limit, progress)
        return _row_batches(ray, units, kwargs, size, None, workers, progress)

    return comp.fit_batches(batches)
