"""Faults: full disks, killed runs, concurrent writers, corrupted files. The only allowed outcomes
are a result or one clear error, never a traceback and never a file left behind."""

from __future__ import annotations

import errno
import os
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from embcompress import FormatError, OutputExistsError, from_spec
from embcompress.core._fs import StorageError, atomic_dir
from embcompress.io import read_all, writers
from embcompress.engines.local import compress_file, fit_and_compress, fit_file

from conftest import make_vectors, write_parquet


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "embcompress.cli", *map(str, args)], capture_output=True, text=True, timeout=120
    )


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


# ---- saved models that do not hold together ---------------------------------------------------


def _saved(tmp_path, spec="int8", d=16):
    from embcompress import save

    comp = from_spec(spec).fit(make_vectors(300, d, seed=7))
    path = tmp_path / "model"
    save(comp, path)
    return path


def _edit_config(path, fn):
    import json

    doc = json.loads((path / "config.json").read_text())
    fn(doc)
    (path / "config.json").write_text(json.dumps(doc))


def _replace_array(path, name, value):
    with np.load(path / "arrays.npz") as npz:
        arrays = {k: npz[k] for k in npz.files}
    arrays[name] = value
    np.savez(path / "arrays.npz", **arrays)


MODEL_FAULTS = {
    "int8 ranges of the wrong shape": (
        "int8",
        lambda p: _replace_array(p, "ranges_", np.zeros((3, 16), np.float32)),
        r"ranges_.*shape \(3, 16\); expected \(2, 16\)",
    ),
    "complex array": (
        "int8",
        lambda p: _replace_array(p, "ranges_", np.zeros((2, 16), np.complex64)),
        "dtype complex64; expected real numbers",
    ),
    "text array": (
        "pca:4",
        lambda p: _replace_array(p, "mean_", np.array(["a"] * 16)),
        "dtype <U1; expected real numbers",
    ),
    "NaN in an array": (
        "pca:4",
        lambda p: _replace_array(p, "mean_", np.full(16, np.nan, np.float32)),
        "holds NaN or inf",
    ),
    "n_features_in_ not a number": (
        "int8",
        lambda p: _edit_config(p, lambda d: d["fitted"].update(n_features_in_="abc")),
        "incomplete or inconsistent",
    ),
    "pca dim=5 beside 4 components": (
        "pca:4",
        lambda p: _edit_config(p, lambda d: d["params"].update(dim=5)),
        r"components_.*shape \(4, 16\); expected \(5, 16\)",
    ),
    "threshold='foo'": (
        "binary",
        lambda p: _edit_config(p, lambda d: d["params"].update(threshold="foo")),
        "threshold must be one of zero, mean, got 'foo'",
    ),
    "renormalize='maybe'": (
        "truncate:8",
        lambda p: _edit_config(p, lambda d: d["params"].update(renormalize="maybe")),
        "renormalize must be true or false, got 'maybe'",
    ),
    "truncate wider than the input": (
        "truncate:8",
        lambda p: _edit_config(p, lambda d: d["params"].update(dim=40)),
        "dim",
    ),
    "chain stages that do not connect": (
        "pca:4+binary",
        lambda p: _edit_config(p, lambda d: d["fitted"]["stages"][1].update(n_features_in_=5)),
        "stage 2 .binary. takes 5 dimensions but is given 4",
    ),
    "truncated arrays.npz": (
        "pca:4",
        lambda p: (p / "arrays.npz").write_bytes((p / "arrays.npz").read_bytes()[:200]),
        "arrays.npz is corrupt",
    ),
    "arrays.npz only a zip header": (
        "pca:4",
        lambda p: (p / "arrays.npz").write_bytes(b"PK\x03\x04" + b"\0" * 26),
        "arrays.npz is corrupt",
    ),
    "pq codebooks of the wrong shape": (
        "pq:4",
        lambda p: _replace_array(p, "centroids_", np.zeros((4, 256, 3), np.float32)),
        r"centroids_.*expected \(4, 256, 4\)",
    ),
}


@pytest.mark.parametrize("case", sorted(MODEL_FAULTS))
def test_broken_saved_models_are_refused_naming_file_and_array(tmp_path, case):
    from embcompress import load

    spec, damage, message = MODEL_FAULTS[case]
    if spec.startswith("pq"):
        pytest.importorskip("faiss")
    path = _saved(tmp_path, spec)
    damage(path)
    with pytest.raises(FormatError, match=message) as e:
        load(path)
    assert str(path) in str(e.value)
    for args in (["info", path], ["apply", path, tmp_path / "x.parquet", tmp_path / "o.parquet"]):
        r = run_cli(*args)
        assert r.returncode == 1 and "Traceback" not in r.stderr and str(path) in r.stderr, (case, r.stderr)


@pytest.mark.parametrize(
    "spec, message",
    [
        ("truncate:96:renormalize=maybe", "renormalize must be true or false, got 'maybe'"),
        ("binary:threshold=foo", "threshold must be one of zero, mean, got 'foo'"),
        ("pq:8:nbits=4.5", "nbits must be an integer, got 4.5"),
        ("rotate:center=1", "center must be true or false, got 1"),
        ("geopres:8:loss=hinge", "loss must be one of positional, angular, rank, got 'hinge'"),
    ],
)
def test_nonsense_parameters_are_refused_when_the_spec_is_parsed(spec, message):
    from embcompress import InputError

    with pytest.raises(InputError, match=message):
        from_spec(spec)


def test_flags_show_as_flags_in_help():
    for cmd in ("binarize", "search", "temperature-study"):
        r = run_cli(cmd, "--help")
        assert r.returncode == 0 and "--overwrite" in r.stdout and "<bool>" not in r.stdout, r.stdout


# ---- finite but extreme values ---------------------------------------------------------------


@pytest.fixture
def huge(tmp_path):
    X = make_vectors(300, 24, seed=8) * np.float32(1e38)
    return write_parquet(tmp_path / "huge.parquet", X)


@pytest.mark.parametrize(
    "args",
    [
        ["fit", "pca:16", "{huge}", "{tmp}/m"],
        ["analyze", "{huge}"],
        ["search", "{huge}", "{huge}", "{tmp}/r.parquet"],
        ["binarize", "{huge}", "{tmp}/b.parquet"],
        ["evaluate", "{huge}", "{huge}"],
    ],
)
def test_values_beyond_the_range_are_refused_not_turned_into_garbage(tmp_path, huge, args):
    r = run_cli(*[a.format(huge=huge, tmp=tmp_path) for a in args])
    assert r.returncode == 1, r.stdout
    assert "row 0" in r.stderr and "beyond the accepted range of +-1e+15" in r.stderr and "Traceback" not in r.stderr, (
        r.stderr
    )
    assert sorted(os.listdir(tmp_path)) == ["huge.parquet"]


def test_float64_beyond_float32_is_named_as_such_not_as_inf(tmp_path):
    import pyarrow as pa

    X = make_vectors(100, 8, seed=1).astype(np.float64)
    X[42, 3] = 1e300
    path = write_parquet(tmp_path / "f64.parquet", X, dtype=pa.float64())
    r = run_cli("binarize", path, tmp_path / "o.parquet")
    assert r.returncode == 1 and "row 42 has the value 1e+300 at dimension 3, beyond the accepted range" in r.stderr, (
        r.stderr
    )
    np.save(tmp_path / "f64.npy", X)
    r = run_cli("binarize", tmp_path / "f64.npy", tmp_path / "o.npy")
    assert r.returncode == 1 and "row 42 has the value 1e+300" in r.stderr and "inf" not in r.stderr, r.stderr
    from embcompress import InputError

    with pytest.raises(InputError, match="row 42 has the value 1e\\+300"):
        from_spec("pca:4").fit(X)


def test_large_values_inside_the_range_are_computed_safely():
    """Values near the top of the accepted range give the same PCA and the same neighbours as the
    same embeddings at unit scale: nothing overflows on the way."""
    from embcompress.search import Index

    X = make_vectors(400, 32, seed=3, normalize=False)
    big = X * np.float32(1e14)
    a, b = from_spec("pca:8").fit(X), from_spec("pca:8").fit(big)
    np.testing.assert_allclose(np.abs(a.components_), np.abs(b.components_), atol=1e-4)
    ra = Index(X).search(X[:20], 5)
    rb = Index(big).search(big[:20], 5)
    np.testing.assert_array_equal(ra.rows, rb.rows)
    np.testing.assert_allclose(ra.scores, rb.scores, atol=1e-5)


def test_analyze_on_vectors_that_do_not_vary_gives_no_impossible_counts(tmp_path):
    from embcompress.report import analyze_file

    path = write_parquet(tmp_path / "zeros.parquet", np.zeros((50, 12), np.float32))
    r = analyze_file(path)
    counts = [v for k, v in r.items() if k.startswith("components_for_")] + [r["intrinsic_dimensionality"]]
    assert all(0 <= c <= 12 for c in counts) and counts == [0] * len(counts)
    assert "do not vary" in r["note"]


# ---- impossible metrics and inputs that used to raise tracebacks ----------------------------------


@pytest.fixture
def task_files(tmp_path):
    write_parquet(tmp_path / "d.parquet", make_vectors(100, 32))
    write_parquet(tmp_path / "q.parquet", make_vectors(10, 32, seed=5))
    return tmp_path


def test_duplicate_document_ids_with_qrels_are_refused(task_files):
    import pyarrow as pa

    X = make_vectors(100, 32)
    pq.write_table(
        pa.table(
            {
                "id": [f"doc{i % 50}" for i in range(100)],
                "embedding": pa.FixedSizeListArray.from_arrays(pa.array(X.reshape(-1)), 32),
            }
        ),
        task_files / "dup.parquet",
    )
    (task_files / "qrels.tsv").write_text("".join(f"doc{i}\tdoc{i}\t1\n" for i in range(10)))
    for cmd in (
        ["evaluate", task_files / "dup.parquet", task_files / "q.parquet", "--qrels", task_files / "qrels.tsv"],
        [
            "report",
            task_files / "dup.parquet",
            task_files / "rep",
            "--queries",
            task_files / "q.parquet",
            "--qrels",
            task_files / "qrels.tsv",
        ],
    ):
        r = run_cli(*cmd)
        assert r.returncode == 1 and f"{task_files / 'dup.parquet'}: id 'doc0' is on rows 0 and 50" in r.stderr, (
            r.stderr
        )
    assert not (task_files / "rep").exists()


def test_retention_is_not_shown_as_nan_when_float_scores_zero(task_files):
    (task_files / "qrels.tsv").write_text("".join(f"doc{i}\tno-such-doc\t1\n" for i in range(10)))
    r = run_cli(
        "evaluate",
        task_files / "d.parquet",
        task_files / "q.parquet",
        "--qrels",
        task_files / "qrels.tsv",
        "--config",
        "float",
        "--config",
        "binary",
    )
    assert r.returncode == 0 and "nan" not in r.stdout.lower() and "n/a" in r.stdout, r.stdout
    assert "retention is undefined" in r.stderr


@pytest.mark.parametrize(
    "content, message",
    [
        ("doc0\tdoc1\tinf\n", "score 'inf' is not a relevance grade"),
        ("doc0\tdoc1\t1e400\n", "score '1e400' is not a relevance grade"),
        (b"doc0\tdoc\xff1\t1\n", "is not UTF-8 text"),
    ],
)
def test_bad_qrels_are_one_error_naming_the_file(task_files, content, message):
    path = task_files / "qrels.tsv"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    r = run_cli("evaluate", task_files / "d.parquet", task_files / "q.parquet", "--qrels", path)
    assert r.returncode == 1 and str(path) in r.stderr and message in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_cut_gz_qrels_name_the_file(task_files):
    path = task_files / "qrels.tsv.gz"
    path.write_bytes(b"\x1f\x8b\x08\x00garbage")
    r = run_cli("evaluate", task_files / "d.parquet", task_files / "q.parquet", "--qrels", path)
    assert r.returncode == 1 and str(path) in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_id_or_kept_column_cannot_be_the_embedding_column(task_files):
    for opt in (["--id-column", "embedding"], ["--keep", "embedding"]):
        r = run_cli("binarize", task_files / "d.parquet", task_files / "b.parquet", *opt)
        assert r.returncode == 1 and "embedding column" in r.stderr and "Traceback" not in r.stderr, r.stderr
        assert not (task_files / "b.parquet").exists()


def test_embed_refuses_bad_text_bad_parquet_and_bad_device(tmp_path):
    pytest.importorskip("sentence_transformers")
    (tmp_path / "bad.txt").write_bytes(b"hello\n\xff\xfe world\n")
    (tmp_path / "rand.parquet").write_bytes(os.urandom(3000))
    (tmp_path / "ok.jsonl").write_text('{"text": "hi"}\n')
    for args, message in (
        ([tmp_path / "bad.txt"], "is not UTF-8 text"),
        ([tmp_path / "rand.parquet"], "is not a readable parquet file"),
        ([tmp_path / "ok.jsonl", "--device", "bogus"], "device 'bogus' is not a torch device"),
    ):
        r = run_cli("embed", args[0], tmp_path / "e.parquet", *args[1:])
        assert r.returncode == 1 and message in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert not (tmp_path / "e.parquet").exists()


def test_default_grids_skip_what_cannot_apply_and_say_so(tmp_path):
    for n, d in ((50, 1), (1, 16)):
        write_parquet(tmp_path / "d.parquet", make_vectors(n, d))
        write_parquet(tmp_path / "q.parquet", make_vectors(5, d, seed=3))
        r = run_cli("evaluate", tmp_path / "d.parquet", tmp_path / "q.parquet")
        assert r.returncode == 0 and "left out of the default grid" in r.stderr, r.stderr
    write_parquet(tmp_path / "d.parquet", make_vectors(100, 32))
    r = run_cli("recommend", tmp_path / "d.parquet", tmp_path / "best", "--budget", "8")
    assert r.returncode == 0 and re.search(r"too few to train them: .*\bopq:8\b", r.stderr), r.stderr


def test_corrupt_originals_name_the_file_and_row_group(task_files):
    codes = task_files / "b.parquet"
    fit_and_compress(from_spec("binary"), task_files / "d.parquet", codes)
    data = (task_files / "d.parquet").read_bytes()
    (task_files / "cut.parquet").write_bytes(data[: len(data) // 2] + data[-2000:])
    r = run_cli(
        "search",
        codes,
        task_files / "q.parquet",
        task_files / "r.parquet",
        "--rerank",
        "float",
        "--originals",
        task_files / "cut.parquet",
    )
    assert r.returncode == 1 and f"{task_files / 'cut.parquet'} is corrupt" in r.stderr and "row group 0" in r.stderr, (
        r.stderr
    )


def test_label_free_recall_with_fewer_documents_than_k_is_full_for_float(tmp_path):
    from embcompress.evaluation.evaluate import evaluate_files

    write_parquet(tmp_path / "d.parquet", make_vectors(5, 16))
    write_parquet(tmp_path / "q.parquet", make_vectors(4, 16, seed=2))
    res = evaluate_files(tmp_path / "d.parquet", tmp_path / "q.parquet", configs=["float", "binary"], k=10)
    float_row = res["rows"][0]
    assert float_row["config"] == "float" and float_row["score"] == 1.0 and float_row["retention"] == 1.0
    assert all(0 <= r["score"] <= 1 for r in res["rows"])


def test_full_disk_while_saving_a_model_or_search_results(small_fs, tmp_path):
    src = write_parquet(tmp_path / "wide.parquet", make_vectors(300, 1024, seed=4))
    r = run_cli("fit", "rotate", src, small_fs / "model")  # a 1024 x 1024 rotation: 4 MiB
    assert r.returncode == 1 and r.stderr.strip() == f"error: no space left on device writing {small_fs / 'model'}", (
        r.stderr
    )
    assert os.listdir(small_fs) == []
    docs = write_parquet(tmp_path / "d.parquet", make_vectors(2000, 16))
    queries = write_parquet(tmp_path / "q.parquet", make_vectors(3000, 16, seed=1))
    out = small_fs / "results.parquet"
    r = run_cli("search", docs, queries, out, "--k", "200")
    assert r.returncode == 1 and r.stderr.strip() == f"error: no space left on device writing {out}", r.stderr
    assert os.listdir(small_fs) == []


def test_read_only_output_is_refused_before_any_work(small_fs, tmp_path):
    """Even for root (who passes every permission check): a read-only mount is found up front."""
    r = subprocess.run(["mount", "-o", "remount,ro", str(small_fs)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot remount read-only here: {r.stderr.strip()}")
    src = write_parquet(tmp_path / "d.parquet", make_vectors(300, 16))
    for args in (
        ["report", src, small_fs / "rep"],
        ["recommend", src, small_fs / "best", "--budget", "4"],
        ["binarize", src, small_fs / "b.parquet"],
    ):
        r = run_cli(*args)
        assert r.returncode == 1 and "is not writable" in r.stderr and "Traceback" not in r.stderr, r.stderr
