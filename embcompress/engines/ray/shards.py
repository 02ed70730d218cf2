"""A dataset's shards, each compressed and written by a Ray task on a worker with the local engine
(the same bytes), to a shared file system or uploaded to an object store; the driver schedules
them and hears back a few bytes per shard."""

from __future__ import annotations

import json
import os
import time
from collections import deque
from pathlib import Path

from ...core.base import Compressor
from ...core.errors import EmbcompressError, InputError
from ...core.persist import arrays_from_json, arrays_to_json, from_config, to_config

_REBUILT: dict = {}  # in a worker process: the last compressor rebuilt, by its state's fingerprint


def compress_shard(state_ref, job: dict) -> dict:
    """On a worker: compress one input shard into ``job["target"]`` with the local engine (the
    same bytes as the local engine's shard). compress_file writes under a temporary name and
    renames at the end, so a killed worker leaves no shard, only a temporary file the driver
    removes. Returns a few bytes: the shard's rows and size."""

    from ..local import compress_file

    t0 = time.perf_counter()
    comp = _REBUILT.get(job["fingerprint"])
    if comp is None:  # once per worker process and compressor (rq:24: 0.08 s of a 2 s shard)
        config, arrays = state_ref
        comp = from_config(config, arrays_from_json(arrays))
        _REBUILT.clear()
        _REBUILT[job["fingerprint"]] = comp
    if job.get("uri"):
        return compress_shard_remote(comp, job, t0)
    target = Path(job["target"])
    if not Path(job["root"]).is_dir():  # the run was stopped and its staging directory removed: write nothing
        raise InputError(f"the run writing {job['root']} was stopped; shard {job['path']} not written")
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        res = compress_file(
            comp,
            job["path"],
            target,
            column=job["column"],
            id_column=job["id_column"],
            keep_columns=job["keep"],
            overwrite=True,
            threads=1,
        )
    except InputError as exc:
        raise InputError(f"shard {job['path']}: {exc}") from None
    except OSError as exc:
        from ...core._fs import storage_error

        raise storage_error(exc, target) from None
    return {
        "rel": job["rel"],
        "rows": int(res.rows),
        "bytes": int(os.path.getsize(target)),
        "seconds": round(time.perf_counter() - t0, 4),
    }


def compress_shard_remote(comp: Compressor, job: dict, t0: float) -> dict:
    """On a worker: compress one shard into a local temporary file with the local engine (the
    same bytes), then upload it to ``job["target"]`` on the output's filesystem. An upload that
    does not finish leaves no object (object stores publish an object when its upload completes),
    and the staging prefix is deleted by the driver on a failure anyway."""
    import shutil
    import tempfile

    from ...core._fs import RemoteOutput, storage_error
    from ..local import compress_file

    out = RemoteOutput(job["uri"])
    if out.kind(job["root"]) != "dir":  # the run was stopped and its staging prefix removed
        raise InputError(f"the run writing {out} was stopped; shard {job['path']} not written")
    local = tempfile.mkdtemp(prefix="embcompress-shard-")
    try:
        tmp = os.path.join(local, "shard.parquet")
        try:
            res = compress_file(
                comp,
                job["path"],
                tmp,
                column=job["column"],
                id_column=job["id_column"],
                keep_columns=job["keep"],
                overwrite=True,
                threads=1,
            )
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
    return InputError(
        f"shard {job['path']} failed on a Ray worker: {type(cause or exc).__name__}{': ' + text[-1] if text else ''}"
    )


def shard_jobs(src, root: str, fingerprint: str, skip=(), **extra) -> list[dict]:
    """One :func:`compress_shard` job per input shard not in ``skip``, writing ``root/REL``."""
    keep = [c for c in src.carried_columns if c != src.id_column]
    return [
        {
            "rel": rel,
            "path": str(s.path),
            "target": f"{root}/{rel}",
            "root": root,
            "fingerprint": fingerprint,
            "column": src.column,
            "id_column": src.id_column,
            "keep": keep,
            **extra,
        }
        for rel, s in zip(src.rels, src.shards)
        if rel not in skip
    ]


def run_shards(write, jobs: list[dict], manifest: dict, *, got: dict, save) -> None:
    """Run one :func:`compress_shard` task per job of the dataset write ``write``
    (:class:`~embcompress.engines.ray.commit.DatasetWrite`: Ray, the compressor, at most ``workers`` tasks
    at once, else one per CPU of the cluster, ``resume``, ``progress``), recording each finished shard in
    ``manifest`` (``save(manifest)`` at most once a second with ``resume``) and what the driver received in
    ``got``. On the first failure no more shards start; without ``resume`` it is raised at once, with it
    after the running shards finished. On any exception (Ctrl-C too) the running tasks are cancelled
    (:func:`_cancel`), and have ended, before it propagates."""
    ray, comp, workers, resume, progress = write.ray, write.comp, write.workers, write.resume, write.progress
    config, arrays = to_config(comp)
    state_ref = ray.put((config, arrays_to_json(arrays)))
    task = ray.remote(num_cpus=1, max_retries=3)(compress_shard)
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
        _cancel(ray, list(pending))
        raise


def _cancel(ray, refs: list, grace: float = 10.0) -> None:
    """Stop the tasks behind ``refs`` and wait until they have ended (a cancel is asynchronous, and
    their files are removed after). First as Ctrl-C would: KeyboardInterrupt in each running task,
    whose ``with`` blocks remove its temporary file, its worker kept. Only the tasks still running
    after ``grace`` seconds (stuck in native code) have their worker killed. Killing first raced in
    Ray's own task bookkeeping (Ray 2.60): now and then the driver aborted in a failed internal
    check of task_manager.cc, and a Ctrl-C ended in Ray's stack trace and exit code 1."""
    if not refs:
        return
    for ref in refs:
        ray.cancel(ref)
    _, left = ray.wait(refs, num_returns=len(refs), timeout=grace)
    for ref in left:
        ray.cancel(ref, force=True)
    if left:
        ray.wait(left, num_returns=len(left), timeout=30)
