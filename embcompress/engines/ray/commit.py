"""Committing a dataset written by the workers: the manifest (shards, rows, bytes, the compressor's
fingerprint), and one destination step for each kind of output: a staging directory renamed into
place on a local or shared file system (resumable), or a staging prefix moved into place on an
object store. A failure (Ctrl-C too) leaves nothing but, with resume, the finished shards."""

from __future__ import annotations

import contextlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from ...core.base import Compressor
from ...core.errors import EmbcompressError, InputError, OutputExistsError
from ..local import CompressResult
from .shards import run_shards, shard_jobs


MANIFEST = "_embcompress_manifest.json"
COMMIT_THREADS = 32  # moves in flight while committing to an object store


@dataclass(frozen=True)
class DatasetWrite:
    """One write of a dataset's shards by Ray tasks: what runs them (``ray``, at most ``workers`` at
    once), the fitted ``comp`` and the input ``src``; whether an existing output is replaced
    (``overwrite``) and finished shards are kept for a rerun (``resume``); ``progress`` of rows,
    ``received`` (filled with what the driver received, when given) and when the job ``started``."""

    ray: Any
    comp: Compressor
    src: Any
    overwrite: bool = False
    resume: bool = False
    workers: int | None = None
    progress: Any = None
    received: dict | None = None
    started: float = 0.0


def _staging(dst: Path) -> Path:
    """Where a resumable run stages its shards: beside the output, under a fixed hidden name."""
    return dst.with_name(f".{dst.name}.partial")


def _new_manifest(comp: Compressor, src, fingerprint: str, done: dict | None = None) -> dict:
    return {
        "format": "embcompress.manifest",
        "fingerprint": fingerprint,
        "compressor": comp.name,
        "source": str(src.path),
        "shards": dict(done or {}),
    }


def _totals(manifest: dict) -> None:
    """The manifest's rows and bytes over its shards, once every shard is in."""
    manifest["rows"] = sum(v["rows"] for v in manifest["shards"].values())
    manifest["bytes"] = sum(v["bytes"] for v in manifest["shards"].values())


def _result(comp: Compressor, src, manifest: dict, started: float, output: str) -> CompressResult:
    """What a Ray dataset write returns, from its committed manifest."""
    return CompressResult(
        rows=src.num_rows,
        input_bytes=sum(os.path.getsize(s.path) for s in src.shards),
        output_bytes=manifest["bytes"],
        bytes_per_vector_in=src.nbytes_per_row,
        bytes_per_vector_out=comp.output_spec.nbytes,
        seconds=time.perf_counter() - started,
        output=output,
    )


def _move_in(out, root: str, rels: Sequence[str]) -> None:
    """Move each staged shard ``root/REL`` to ``REL`` under the output, COMMIT_THREADS at a time:
    an object store's move is a copy on the server, and copies go faster many at once."""
    from concurrent.futures import ThreadPoolExecutor

    def move(rel: str) -> None:
        out.fs.create_dir(f"{out.path}/{rel}".rsplit("/", 1)[0], recursive=True)
        out.fs.move(f"{root}/{rel}", f"{out.path}/{rel}")

    with ThreadPoolExecutor(COMMIT_THREADS) as pool:
        list(pool.map(move, rels))


def write_dataset_remote(job: DatasetWrite, out) -> CompressResult:
    """:func:`write_dataset` to a pyarrow filesystem (``out``, a :class:`~embcompress.core._fs.RemoteOutput`):
    each worker uploads its shards under a staging prefix beside the output; when every shard
    succeeded the driver moves them to their names in the output (an object store's rename is a
    copy on the server: no codes pass through the driver) and writes the manifest last, so an
    output with a manifest is complete. Any failure (Ctrl-C too) deletes the staging prefix."""
    from ...core.persist import describe

    comp, src = job.comp, job.src
    if job.resume:
        raise InputError(
            f"--resume needs an output on a local or shared file system; {out} is on a remote one: "
            "rerun without --resume (the staging prefix of a failed run is deleted)"
        )
    # the output itself was checked with the input, before any work (stream.check_destination)
    fingerprint = describe(comp)["fingerprint"]
    root = out.staging()
    manifest = _new_manifest(comp, src, fingerprint)
    jobs = shard_jobs(src, root, fingerprint, uri=out.uri_of(root))
    got = {"bytes": 0, "messages": 0, "task_seconds": 0.0}
    try:
        out.fs.create_dir(root)
        run_shards(job, jobs, manifest, got=got, save=lambda m: None)
        _totals(manifest)
        if out.kind() != "none":
            out.check(overwrite=job.overwrite)  # something appeared meanwhile: replaced only when asked
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
        if job.received is not None:
            job.received.update(got)
    return _result(comp, src, manifest, job.started, str(out))


def _write_manifest(root: Path, manifest: dict) -> None:
    tmp = root / f".{MANIFEST}.tmp"
    tmp.write_text(json.dumps(manifest, indent=1, sort_keys=True))
    tmp.replace(root / MANIFEST)


def _staged(dst: Path, fingerprint: str, resume: bool) -> tuple[Path, dict]:
    """The staging directory of a dataset write and the shards already in it: with ``resume`` the
    fixed one beside the output and the shards its manifest lists (present at their recorded
    size; a manifest of another compressor is refused), else a new temporary one, empty."""
    if not resume:
        import tempfile

        from ...core._fs import sweep_stale

        sweep_stale(dst)
        return Path(tempfile.mkdtemp(prefix=f".{dst.name}.tmp-{os.getpid()}-", dir=dst.parent)), {}
    root = _staging(dst)
    old = json.loads((root / MANIFEST).read_text()) if (root / MANIFEST).exists() else None
    if old is not None and old.get("fingerprint") != fingerprint:
        raise InputError(
            f"{root} holds shards of another compressor (fingerprint {old.get('fingerprint')}, this one "
            f"{fingerprint}); remove it, or resume with the model that wrote them"
        )
    root.mkdir(exist_ok=True)
    done = {
        rel: info
        for rel, info in (old or {}).get("shards", {}).items()
        if (root / rel).is_file() and (root / rel).stat().st_size == info["bytes"]
    }
    return root, done


def write_dataset(job: DatasetWrite, dst_path) -> CompressResult:
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

    from ...core._fs import check_output_dir, storage_error
    from ...core.persist import describe

    comp, src, resume = job.comp, job.src, job.resume
    dst = check_output_dir(dst_path, overwrite=job.overwrite)
    dst.parent.mkdir(parents=True, exist_ok=True)
    fingerprint = describe(comp)["fingerprint"]
    root, done = _staged(dst, fingerprint, resume)
    manifest = _new_manifest(comp, src, fingerprint, done)
    jobs = shard_jobs(src, str(root), fingerprint, skip=done)
    got = {"bytes": 0, "messages": 0, "task_seconds": 0.0}
    try:
        run_shards(job, jobs, manifest, got=got, save=lambda m: _write_manifest(root, m))
        _commit(root, dst, src.rels, manifest, job.overwrite)
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
        if job.received is not None:
            job.received.update(got)
    return _result(comp, src, manifest, job.started, str(dst))


def _commit(root: Path, dst: Path, rels: Sequence[str], manifest: dict, overwrite: bool) -> None:
    """Put a staged dataset in place: nothing but the shards and the manifest (a killed worker's
    temporary file goes), the manifest with its totals, then one rename to ``dst``."""
    import shutil

    keep = {root / rel for rel in rels} | {root / MANIFEST}
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
