"""Output paths that never lose data: one guard for output directories and one atomic directory
writer. Nothing here imports the rest of embcompress but the errors."""

from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from .errors import InputError, OutputExistsError


def check_output_dir(path: str | os.PathLike, *, overwrite: bool = False, allow_empty: bool = True) -> Path:
    """Fail early when a directory output cannot be written at ``path``: it exists (and is not an
    empty directory, when ``allow_empty``) and ``overwrite`` is False, it is a file, or no parent is writable."""
    path = Path(path)
    if path.exists():
        if not path.is_dir():
            raise InputError(f"{path} is a file; this output is a directory")
        if not overwrite and not (allow_empty and not any(path.iterdir())):
            raise OutputExistsError(f"{path} already exists and is not empty; pass --overwrite (overwrite=True) to replace it")
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not os.access(parent, os.W_OK):
        raise InputError(f"cannot write {path}: {parent} is not writable")
    return path


@contextmanager
def atomic_dir(path: str | os.PathLike, *, overwrite: bool = False) -> Iterator[Path]:
    """Yield a temporary directory beside ``path``; when the block ends without error it replaces
    ``path`` in one rename, otherwise it is removed and ``path`` is untouched."""
    path = check_output_dir(path, overwrite=overwrite)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.tmp-", dir=path.parent))
    try:
        yield tmp
        if path.exists():
            shutil.rmtree(path) if path.is_dir() else path.unlink()
        os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
