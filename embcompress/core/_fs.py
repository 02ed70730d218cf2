"""Output paths that never lose data. Every output is written under a hidden temporary name
beside it (``.NAME.tmp-PID``, directories ``.NAME.tmp-PID-XXXX``) and put in place in one final
step that never replaces a file that appeared meanwhile unless asked to; temporary files of
processes that no longer run (after kill -9) are removed by the next run on the same output; a
full disk is one clear error. Nothing here imports the rest of embcompress but the errors."""

from __future__ import annotations

import errno
import os
import re
import shutil
import tempfile
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from .errors import EmbcompressError, InputError, OutputExistsError


class StorageError(EmbcompressError, OSError):
    """Writing an output failed for a reason of the storage (full disk, quota, I/O error)."""

    def __str__(self) -> str:
        return self.strerror or super().__str__()


def storage_error(exc: OSError, path: str | os.PathLike) -> EmbcompressError:
    """An OSError met while writing ``path`` as an error that names the path and the cause."""
    if isinstance(exc, EmbcompressError):
        return exc
    code = getattr(exc, "errno", None)
    text = str(exc)
    if code == errno.ENOSPC or "No space left" in text:
        return StorageError(errno.ENOSPC, f"no space left on device writing {path}")
    if code == errno.EDQUOT or "quota exceeded" in text.lower():
        return StorageError(errno.EDQUOT, f"disk quota exceeded writing {path}")
    if code == errno.EFBIG or "File too large" in text:
        return StorageError(errno.EFBIG, f"file too large for the output storage (its file size limit) writing {path}")
    if isinstance(exc, PermissionError):
        return StorageError(errno.EACCES, f"permission denied writing {path}")
    return StorageError(code or errno.EIO, f"cannot write {path}: {exc.strerror or text}")


def temp_name(path: str | os.PathLike) -> Path:
    """The hidden temporary name an output is written under until it is complete."""
    path = Path(path)
    return path.with_name(f".{path.name}.tmp-{os.getpid()}")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def sweep_stale(path: str | os.PathLike) -> list[Path]:
    """Remove the temporary outputs for ``path`` left by processes that no longer run (a run
    killed with SIGKILL cannot clean up), with a warning naming each; returns them."""
    path = Path(path)
    parent = path.parent if str(path.parent) else Path(".")
    pattern = re.compile(re.escape(f".{path.name}.tmp-") + r"(\d+)(?:-[A-Za-z0-9_]+)?$")
    removed = []
    try:
        entries = list(parent.iterdir())
    except OSError:
        return removed
    for entry in entries:
        m = pattern.match(entry.name)
        if not m or int(m.group(1)) == os.getpid() or _alive(int(m.group(1))):
            continue
        try:
            shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()
        except OSError:
            continue
        warnings.warn(f"removed {entry}, a temporary output left by process {m.group(1)}, which no longer runs")
        removed.append(entry)
    return removed


def commit_file(tmp: Path, path: Path, *, overwrite: bool) -> None:
    """Put the complete ``tmp`` in place as ``path``. Without ``overwrite`` the step is exclusive:
    if ``path`` appeared while we were writing (another run), it is kept and this fails."""
    if overwrite:
        os.replace(tmp, path)
        return
    try:
        os.link(tmp, path)  # atomic, and fails if path exists
    except FileExistsError:
        raise OutputExistsError(
            f"{path} appeared while writing; pass --overwrite (overwrite=True) to replace it"
        ) from None
    except OSError:  # no hard links on this file system: reserve the name, then rename over it
        try:
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        except FileExistsError:
            raise OutputExistsError(
                f"{path} appeared while writing; pass --overwrite (overwrite=True) to replace it"
            ) from None
        os.replace(tmp, path)
        return
    tmp.unlink()


@contextmanager
def atomic_file(path: str | os.PathLike, *, overwrite: bool = False) -> Iterator[Path]:
    """Yield the temporary path to write ``path`` under; it is put in place (exclusively unless
    ``overwrite``) when the block ends without error and removed otherwise. Storage errors name
    ``path``."""
    path = Path(path)
    sweep_stale(path)
    tmp = temp_name(path)
    try:
        yield tmp
        commit_file(tmp, path, overwrite=overwrite)
    except OSError as exc:
        if isinstance(exc, EmbcompressError):
            raise
        raise storage_error(exc, path) from None
    finally:
        tmp.unlink(missing_ok=True)


def check_output_dir(path: str | os.PathLike, *, overwrite: bool = False, allow_empty: bool = True) -> Path:
    """Fail early when a directory output cannot be written at ``path``: it exists (and is not an
    empty directory, when ``allow_empty``) and ``overwrite`` is False, it is a file, or no parent is writable."""
    path = Path(path)
    if path.exists():
        if not path.is_dir():
            raise InputError(f"{path} is a file; this output is a directory")
        if not overwrite and not (allow_empty and not any(path.iterdir())):
            raise OutputExistsError(
                f"{path} already exists and is not empty; pass --overwrite (overwrite=True) to replace it"
            )
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not writable(parent):
        raise InputError(f"cannot write {path}: {parent} is not writable")
    return path


def writable(directory: str | os.PathLike) -> bool:
    """Whether files can be created in ``directory``: permission bits, and then a real probe file
    (root passes every permission check, but not a read-only mount)."""
    directory = Path(directory)
    if not os.access(directory, os.W_OK):
        return False
    probe = directory / f".embcompress-probe-{os.getpid()}"
    try:
        os.close(os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except FileExistsError:
        return True
    except OSError:
        return False
    probe.unlink(missing_ok=True)
    return True


@contextmanager
def atomic_dir(path: str | os.PathLike, *, overwrite: bool = False) -> Iterator[Path]:
    """Yield a temporary directory beside ``path``; when the block ends without error it replaces
    ``path`` in one rename, otherwise it is removed and ``path`` is untouched."""
    path = check_output_dir(path, overwrite=overwrite)
    path.parent.mkdir(parents=True, exist_ok=True)
    sweep_stale(path)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.tmp-{os.getpid()}-", dir=path.parent))
    os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp makes 0700; outputs follow the umask like files
    try:
        yield tmp
        if path.exists():
            if not overwrite and (not path.is_dir() or any(path.iterdir())):
                raise OutputExistsError(
                    f"{path} appeared while writing; pass --overwrite (overwrite=True) to replace it"
                )
            shutil.rmtree(path) if path.is_dir() else path.unlink()
        os.replace(tmp, path)
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(exc, OSError) and not isinstance(exc, EmbcompressError):
            raise storage_error(exc, path) from None
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# ---- outputs on a pyarrow filesystem (s3://, gs://, hdfs://, ...) ----------------------------------
class RemoteOutput:
    """An output directory on a pyarrow filesystem, named by a URI (``s3://bucket/codes``, with
    pyarrow's query options such as ``?endpoint_override=host:port&scheme=http``). Only the Ray
    engine writes one: each worker uploads its shards itself (see :mod:`embcompress.engines.ray`).
    Object stores rename nothing in one step, so a run stages its shards under a hidden prefix
    beside the output, moves them in when every shard succeeded and writes the manifest last;
    a failed run deletes its staging prefix."""

    def __init__(self, uri: str):
        from pyarrow import fs as pafs

        self.uri = uri
        self.shown = shown_uri(uri)  # the query and user info may hold credentials: never shown
        try:
            self.fs, self.path = pafs.FileSystem.from_uri(uri)
        except Exception as exc:  # noqa: BLE001 - pyarrow raises ArrowInvalid, ValueError or OSError by scheme
            raise InputError(f"cannot open the output storage {self.shown}: {str(exc).splitlines()[0]}") from None
        self.path = self.path.rstrip("/")
        if "/" not in self.path:
            raise InputError(
                f"{self.shown}: name a directory inside the bucket or volume (e.g. {self.shown.rstrip('/')}/codes), "
                "as the shards are staged beside it"
            )

    def __str__(self) -> str:
        return self.shown

    def uri_of(self, path: str) -> str:
        """The URI of another path on the same storage (same options), for a worker to open."""
        scheme, rest = self.uri.split("://", 1)
        head, _, query = rest.partition("?")
        auth = head.split("/", 1)[0].rpartition("@")[0]
        return f"{scheme}://{auth + '@' if auth else ''}{path}{'?' + query if query else ''}"

    def kind(self, path: str | None = None) -> str:
        from pyarrow import fs as pafs

        try:
            t = self.fs.get_file_info(path or self.path).type
        except OSError as exc:
            raise InputError(f"cannot reach the output storage {self.shown}: {str(exc).splitlines()[0]}") from None
        return {pafs.FileType.NotFound: "none", pafs.FileType.Directory: "dir"}.get(t, "file")

    def check(self, *, overwrite: bool) -> None:
        """Fail before any work when the output exists (and ``overwrite`` is False) or is a file."""
        from pyarrow import fs as pafs

        kind = self.kind()
        if kind == "file":
            raise InputError(f"{self.shown} is a file; this output is a directory of shards")
        if kind == "dir" and not overwrite and self.fs.get_file_info(pafs.FileSelector(self.path, recursive=False)):
            raise OutputExistsError(
                f"{self.shown} already exists and is not empty; pass --overwrite (overwrite=True) to replace it"
            )

    def staging(self) -> str:
        import secrets

        parent, name = self.path.rsplit("/", 1)
        return f"{parent}/.{name}.tmp-{os.getpid()}-{secrets.token_hex(4)}"

    def remove(self, path: str) -> None:
        """Delete ``path`` (a directory with what it holds, or a file) if it exists; quietly, as
        it also runs on the way out of a failure that must not be masked."""
        import contextlib

        from pyarrow import fs as pafs

        with contextlib.suppress(OSError):
            kind = self.fs.get_file_info(path).type
            if kind == pafs.FileType.Directory:
                self.fs.delete_dir(path)
            elif kind == pafs.FileType.File:
                self.fs.delete_file(path)

    def write_text(self, path: str, text: str) -> None:
        with self.fs.open_output_stream(path) as out:
            out.write(text.encode())


def is_uri(path: str | os.PathLike) -> bool:
    """Whether ``path`` names a location by URI (``s3://...``) rather than a file-system path."""
    return "://" in str(path)


def shown_uri(path: str | os.PathLike) -> str:
    """A URI as it may be shown: without its query (options, maybe credentials) or user info."""
    scheme, _, rest = str(path).split("?", 1)[0].partition("://")
    head, slash, tail = rest.partition("/")
    return f"{scheme}://{head.rpartition('@')[2]}{slash}{tail}"


def remote_output(path: str | os.PathLike) -> RemoteOutput | None:
    """A :class:`RemoteOutput` where ``path`` is a URI (``file://`` too: pyarrow's local
    filesystem, written the same way); None for a plain path."""
    return RemoteOutput(str(path)) if is_uri(path) else None


def output_name(path: str | os.PathLike) -> str:
    """The last part of an output's path or URI, for a progress bar or a table title."""
    return (shown_uri(path) if is_uri(path) else str(path)).rstrip("/").rsplit("/", 1)[-1]
