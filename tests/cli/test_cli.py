"""The CLI as a user drives it: exit codes, one-line errors, outputs, nothing left behind."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from embcompress.cli.main import app
from embcompress.io import read_all

from conftest import make_vectors, write_parquet

runner = CliRunner()


def run(*args):
    return runner.invoke(app, [str(a) for a in args])


def assert_one_line_error(res, *fragments):
    assert res.exit_code == 1, res.output
    err = res.stderr.strip()
    assert err.startswith("error: ") and "\n" not in err, err
    assert "Traceback" not in res.output
    for f in fragments:
        assert f in err, err


def test_binarize_and_info(tmp_path, vec_file, X):
    out = tmp_path / "codes.parquet"
    res = run("binarize", vec_file, out, "--json", "--keep", "lang")
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    assert summary["rows"] == 500 and summary["bytes_per_vector_out"] == 6 and summary["ratio"] == 32.0
    codes, ids = read_all(out, codes=True)
    np.testing.assert_array_equal(codes, np.packbits(X > 0, axis=-1))
    assert pq.read_table(out).column_names == ["id", "lang", "embedding"]
    res = run("info", out, "--json")
    d = json.loads(res.stdout)
    assert d["compressor"] == "binary" and d["width"] == 48 and d["bytes_per_vector"] == 6
    res = run("info", out)
    assert res.exit_code == 0 and "produced by" in res.stdout and "binary" in res.stdout


def test_truncate_renormalize(tmp_path, vec_file, X):
    out = tmp_path / "t.npy"
    res = run("truncate", vec_file, out, "--dim", 10, "--renormalize")
    assert res.exit_code == 0, res.output
    Y = np.load(out)
    np.testing.assert_allclose(Y, X[:, :10] / np.linalg.norm(X[:, :10], axis=1, keepdims=True), rtol=1e-5)
    assert "10.0 -> " not in res.stdout and "4.8x smaller" in res.stdout


def test_fit_apply_chain_and_info_model(tmp_path, vec_file, X):
    model = tmp_path / "pca8-bin"
    res = run("fit", "pca:8+binary", vec_file, model, "--batch-size", 64)
    assert res.exit_code == 0, res.output
    res = run("apply", model, vec_file, tmp_path / "c.parquet")
    assert res.exit_code == 0, res.output
    codes, _ = read_all(tmp_path / "c.parquet", codes=True)
    assert codes.shape == (500, 1)
    d = json.loads(run("info", model, "--json").stdout)
    assert d["kind"] == "compressor" and d["output"]["nbytes"] == 1
    assert json.loads(run("info", tmp_path / "c.parquet", "--json").stdout)["fingerprint"] == d["fingerprint"]


def test_existing_output_refused_then_overwritten(tmp_path, vec_file):
    out = tmp_path / "o.parquet"
    out.write_bytes(b"keep me")
    assert_one_line_error(run("binarize", vec_file, out), "already exists", "--overwrite")
    assert out.read_bytes() == b"keep me"
    assert run("binarize", vec_file, out, "--overwrite").exit_code == 0
    model = tmp_path / "m"
    model.mkdir()
    (model / "x").write_text("x")
    assert_one_line_error(run("fit", "int8", vec_file, model), "already exists")


@pytest.mark.parametrize(
    "case", ["nan", "ragged", "null", "intcol", "missingcol", "empty", "corrupt", "zero_rows", "not_there"]
)
def test_bad_inputs_give_one_line_and_no_output(tmp_path, case):
    p = tmp_path / "in.parquet"
    X = make_vectors(20, 6)
    expect = {
        "nan": "row 3 has a non-finite value",
        "ragged": "row 1 has 5 values, expected 6",
        "null": "row 2 is null",
        "intcol": "no column of a list",
        "missingcol": "no column 'vec'",
        "empty": "not a readable parquet file",
        "corrupt": "not a readable parquet file",
        "zero_rows": "has no rows",
        "not_there": "does not exist",
    }[case]
    extra = []
    if case == "nan":
        X[3, 1] = np.nan
        write_parquet(p, X)
    elif case == "ragged":
        pq.write_table(pa.table({"embedding": pa.array([[0.1] * 6, [0.1] * 5], type=pa.list_(pa.float32()))}), p)
    elif case == "null":
        pq.write_table(pa.table({"embedding": pa.array([[0.1] * 6, [0.2] * 6, None], type=pa.list_(pa.float32()))}), p)
    elif case == "intcol":
        pq.write_table(pa.table({"embedding": pa.array([[1] * 6], type=pa.list_(pa.int32()))}), p)
    elif case == "missingcol":
        write_parquet(p, X)
        extra = ["--column", "vec"]
    elif case == "empty":
        p.write_bytes(b"")
    elif case == "corrupt":
        write_parquet(p, X)
        p.write_bytes(p.read_bytes()[:-20])
    elif case == "zero_rows":
        write_parquet(p, np.zeros((0, 6), dtype=np.float32))
    for cmd in (
        ["binarize", p, tmp_path / "o.parquet"],
        ["truncate", p, tmp_path / "o.parquet", "--dim", 2],
        ["fit", "pca:2", p, tmp_path / "model"],
    ):
        assert_one_line_error(run(*cmd, *extra), expect)
    assert sorted(x.name for x in tmp_path.iterdir()) == (["in.parquet"] if case != "not_there" else [])


def test_width_mismatch_bad_spec_and_unwritable(tmp_path, vec_file):
    small = write_parquet(tmp_path / "small.parquet", make_vectors(30, 12))
    assert run("fit", "pca:4", small, tmp_path / "m").exit_code == 0
    assert_one_line_error(
        run("apply", tmp_path / "m", vec_file, tmp_path / "o.parquet"), "has 48 dimensions", "fitted on 12"
    )
    assert_one_line_error(run("fit", "pca:400", vec_file, tmp_path / "m2"), "dim=400 is out of range", "1..48")
    assert_one_line_error(run("fit", "nope:3", vec_file, tmp_path / "m3"), "unknown compressor 'nope'; known:")
    assert_one_line_error(run("binarize", vec_file, tmp_path / "missing_dir" / "o.parquet"), "does not exist")
    assert_one_line_error(run("binarize", vec_file, tmp_path / "o.txt"), "unknown file type '.txt'")
    assert_one_line_error(run("binarize", vec_file, tmp_path / "o.parquet", "--threshold", "median"), "zero, mean")
    assert_one_line_error(run("apply", tmp_path, vec_file, tmp_path / "o.parquet"), "not a saved compressor")
    assert not (tmp_path / "o.parquet").exists()


def test_version_and_help():
    assert run("--version").stdout.startswith("embcompress ")
    res = run("--help")
    for cmd in ("binarize", "truncate", "fit", "apply", "embed", "info", "demo"):
        assert cmd in res.stdout
