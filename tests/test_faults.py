"""Faults: full disks, killed runs, concurrent writers, corrupted files. The only allowed outcomes
are a result or one clear error, never a traceback and never a file left behind."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from embcompress import FormatError, OutputExistsError, from_spec
from embcompress._fs import StorageError, atomic_dir
from embcompress.io import read_all, writers
from embcompress.stream import compress_file, fit_and_compress, fit_file

from conftest import make_vectors, write_parquet


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cli", *map(str, args)], capture_output=True, text=True, timeout=120)


@pytest.fixture
def small_fs(tmp_path):
    """A 2 MiB tmpfs: a real full disk. Needs permission to mount (root in a container); skipped
    with the reason otherwise."""
    if shutil.which("mount") is None or os.geteuid() != 0:
        pytest.skip("a small file system needs mount and root; not available here")
    d = tmp_path / f"small-{uuid.uuid4().hex[:6]}"
    d.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(d)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {r.stderr.strip()}")
    try:
        yield d
    finally:
        subprocess.run(["umount", str(d)], capture_output=True)


@pytest.fixture
def vectors(tmp_path):
    X = make_vectors(4000, 256, seed=1)  # 4 MiB of float32: more than the small disk holds
    return write_parquet(tmp_path / "v.parquet", X, row_group_size=1000), X


@pytest.mark.parametrize("suffix", [".npy", ".parquet"])
def test_full_disk_is_one_error_naming_the_path_and_leaves_nothing(small_fs, vectors, suffix):
    path, _ = vectors
    out = small_fs / f"out{suffix}"
    r = run_cli("truncate", path, out, "--dim", "256")  # float32 output, as large as the input
    assert r.returncode == 1, (r.returncode, r.stderr)  # not 135 (SIGBUS)
    assert r.stderr.strip() == f"error: no space left on device writing {out}", r.stderr
    assert os.listdir(small_fs) == []


def test_npy_space_is_reserved_before_any_work(tmp_path, vectors, monkeypatch):
    path, _ = vectors
    comp = fit_file(from_spec("binary"), path)
    called = []

    def no_space(fd, offset, length):
        called.append(length)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", no_space)
    out = tmp_path / "codes.npy"
    with pytest.raises(StorageError, match=f"no space left on device writing {out}"):
        compress_file(comp, path, out)
    assert called and sorted(os.listdir(tmp_path)) == ["v.parquet"]


def test_parquet_error_while_closing_leaves_nothing(tmp_path, vectors, monkeypatch):
    path, _ = vectors
    comp = fit_file(from_spec("binary"), path)

    def fail_close(self):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pq.ParquetWriter, "close", fail_close)
    out = tmp_path / "codes.parquet"
    with pytest.raises(StorageError, match="no space left on device writing"):
        compress_file(comp, path, out)  # the whole output fits one row group: written at close
    assert sorted(os.listdir(tmp_path)) == ["v.parquet"]


def test_stale_temp_files_of_dead_processes_are_removed(tmp_path, vectors):
    path, _ = vectors
    out = tmp_path / "codes.parquet"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # a pid that no longer runs
    stale = tmp_path / f".codes.parquet.tmp-{dead.pid}"
    stale.write_bytes(b"half a file")
    stale_dir = tmp_path / f".model.tmp-{dead.pid}-abc123"
    stale_dir.mkdir()
    live = tmp_path / f".codes.parquet.tmp-{os.getppid()}"  # a process that runs: not ours to remove
    live.write_bytes(b"in progress elsewhere")
    with pytest.warns(UserWarning, match=f"removed .*tmp-{dead.pid}.*no longer runs"):
        fit_and_compress(from_spec("binary"), path, out)
    assert not stale.exists() and live.exists() and out.exists()
    with pytest.warns(UserWarning, match="no longer runs"):
        with atomic_dir(tmp_path / "model") as d:
            (d / "x").write_text("1")
    assert not stale_dir.exists() and (tmp_path / "model" / "x").exists()


def test_cli_says_which_stale_file_it_removed(tmp_path, vectors):
    path, _ = vectors
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / f".codes.parquet.tmp-{dead.pid}").write_bytes(b"x")
    r = run_cli("binarize", path, tmp_path / "codes.parquet")
    assert r.returncode == 0, r.stderr
    assert f"warning: removed {tmp_path}/.codes.parquet.tmp-{dead.pid}" in r.stderr
    assert sorted(os.listdir(tmp_path)) == ["codes.parquet", "v.parquet"]


@pytest.mark.parametrize("suffix", [".parquet", ".npy"])
def test_output_that_appears_while_writing_is_kept(tmp_path, vectors, monkeypatch, suffix):
    """Two runs on one output: the one that finishes second fails instead of replacing the first."""
    path, _ = vectors
    out = tmp_path / f"codes{suffix}"
    comp = fit_file(from_spec("binary"), path)
    real_write = writers.VectorWriter.write

    def write_and_race(self, codes, carried=None):
        if not out.exists():
            out.write_bytes(b"the other run's result")
        return real_write(self, codes, carried)

    monkeypatch.setattr(writers.VectorWriter, "write", write_and_race)
    with pytest.raises(OutputExistsError, match="appeared while writing; pass --overwrite"):
        compress_file(comp, path, out)
    assert out.read_bytes() == b"the other run's result"
    assert sorted(os.listdir(tmp_path)) == sorted(["v.parquet", out.name])
    compress_file(comp, path, out, overwrite=True)  # asked to replace: it does
    assert out.read_bytes() != b"the other run's result"


def test_model_directory_that_appears_while_saving_is_kept(tmp_path):
    target = tmp_path / "model"
    with pytest.raises(OutputExistsError, match="appeared while writing"):
        with atomic_dir(target) as d:
            (d / "config.json").write_text("{}")
            target.mkdir()
            (target / "theirs").write_text("1")
    assert os.listdir(target) == ["theirs"] and os.listdir(tmp_path) == ["model"]


def test_saved_directories_follow_the_umask(tmp_path):
    old = os.umask(0o022)
    try:
        with atomic_dir(tmp_path / "m") as d:
            (d / "a").write_text("1")
    finally:
        os.umask(old)
    assert (tmp_path / "m").stat().st_mode & 0o777 == 0o755


def _flip_inside_first_data_page(path: Path) -> None:
    md = pq.ParquetFile(path).metadata
    col = md.row_group(0).column(md.num_columns - 1)  # the embedding column
    start = col.dictionary_page_offset if col.has_dictionary_page else col.data_page_offset
    data = bytearray(path.read_bytes())
    pos = start + col.total_compressed_size // 2
    data[pos] ^= 0xFF
    data[pos + 1] ^= 0xFF
    path.write_bytes(bytes(data))


def test_our_parquet_files_carry_page_checksums_that_reads_verify(tmp_path, vectors):
    path, _ = vectors
    out = tmp_path / "trunc.parquet"
    fit_and_compress(from_spec("truncate:64"), path, out, batch_size=500)
    X, _ = read_all(out)
    _flip_inside_first_data_page(out)
    with pytest.raises(FormatError, match=r"trunc.parquet is corrupt.* row group 0.*(checksum|CRC)"):
        read_all(out)
    r = run_cli("info", out)
    assert "Traceback" not in r.stderr
    r = run_cli("search", out, path, tmp_path / "res.parquet")
    assert r.returncode == 1 and "row group 0" in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_checksums_of_other_writers_are_verified_too(tmp_path):
    X = make_vectors(3000, 64, seed=2)
    path = tmp_path / "theirs.parquet"
    write_parquet(path, X, row_group_size=1000)
    # rewrite with checksums, as any writer may
    pq.write_table(pq.read_table(path), path, row_group_size=1000, write_page_checksum=True)
    _flip_inside_first_data_page(path)
    out = tmp_path / "codes.parquet"
    r = run_cli("binarize", path, out)
    assert r.returncode == 1 and "row group 0" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert not out.exists() and sorted(os.listdir(tmp_path)) == ["theirs.parquet"]
