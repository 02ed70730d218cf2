"""Every CLI command that reads vectors, over a set of hostile files (spans the CLI, io and the engines).

Each run ends in a correct result or a one-line error (exit 1 or 2), never a traceback, and a
failed run leaves no file behind."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from embcompress.cli.main import app

runner = CliRunner()
F32 = pa.float32()


def _parquet(path, column):
    pq.write_table(pa.table({"embedding": column}), path)


def _good(n=64, d=16, seed=0):
    return np.random.default_rng(seed).standard_normal((n, d)).astype(np.float32)


def _hostile(tmp):
    """name -> a file a user might hand us by mistake (or an attacker on purpose)."""
    files = {}

    def add(name, write):
        p = tmp / name
        write(p)
        files[name] = p

    add("zero_width.parquet", lambda p: _parquet(p, pa.array([[]] * 8, type=pa.list_(F32))))
    add("zero_width.npy", lambda p: np.save(p, np.zeros((8, 0), np.float32)))
    add("ragged.parquet", lambda p: _parquet(p, pa.array([[1.0, 2.0], [1.0], [1.0, 2.0, 3.0]] * 4, type=pa.list_(F32))))
    nan = _good()
    nan[3, 2] = np.nan
    add("nan.parquet", lambda p: _parquet(p, pa.array(list(nan), type=pa.list_(F32))))
    inf = _good()
    inf[5, 1] = np.inf
    add("inf.npy", lambda p: np.save(p, inf))
    add("empty.parquet", lambda p: _parquet(p, pa.array([], type=pa.list_(F32))))
    add("one_row.parquet", lambda p: _parquet(p, pa.array(list(_good(1)), type=pa.list_(F32))))
    add("strings.parquet", lambda p: _parquet(p, pa.array(["a", "b", "c"])))
    add(
        "list_of_lists.parquet",
        lambda p: _parquet(p, pa.array([[[1.0, 2.0]], [[3.0, 4.0]]], type=pa.list_(pa.list_(F32)))),
    )
    add("null_row.parquet", lambda p: _parquet(p, pa.array([[1.0, 2.0], None, [3.0, 4.0]], type=pa.list_(F32))))

    def truncated(p):
        _parquet(p, pa.array(list(_good(500)), type=pa.list_(F32)))
        data = p.read_bytes()
        p.write_bytes(data[: len(data) // 2])

    add("truncated.parquet", truncated)
    add("not_parquet.parquet", lambda p: p.write_text("id,vector\n1,0.5\n"))
    add("huge_width.parquet", lambda p: _parquet(p, pa.array([np.ones(1 << 20, np.float32)] * 2, type=pa.list_(F32))))
    add("object.npy", lambda p: np.save(p, np.array([[1, "a"]], dtype=object), allow_pickle=True))
    return files


@pytest.fixture(scope="module")
def setting(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hostile")
    good = tmp / "good.parquet"
    _parquet(good, pa.array(list(_good(256, 16)), type=pa.list_(F32)))
    assert runner.invoke(app, ["fit", "pca:8+binary", str(good), str(tmp / "model")]).exit_code == 0
    assert runner.invoke(app, ["binarize", str(good), str(tmp / "codes.parquet")]).exit_code == 0
    return tmp, good, _hostile(tmp)


def _commands(tmp, good, bad, out):
    """Every command that reads vectors, with the hostile file in each place that reads one."""
    return {
        "binarize": ["binarize", bad, out / "o.parquet"],
        "truncate": ["truncate", bad, out / "o.parquet", "--dim", "2"],
        "fit": ["fit", "pca:2+binary", bad, out / "m"],
        "apply": ["apply", tmp / "model", bad, out / "o.parquet"],
        "info": ["info", bad],
        "search-docs": ["search", bad, good, out / "r.parquet", "--k", "3"],
        "search-queries": ["search", good, bad, out / "r.parquet", "--k", "3"],
        "evaluate": ["evaluate", bad, good, "--config", "binary", "--k", "3"],
        "export": ["export", bad, out / "x.faiss", "--to", "faiss"],
        "analyze": ["analyze", bad],
        "report": ["report", bad, out / "rep", "--methods", "truncate", "--widths", "4"],
        "recommend": ["recommend", bad, out / "rec", "--budget", "4"],
    }


COMMANDS = [
    "binarize",
    "truncate",
    "fit",
    "apply",
    "info",
    "search-docs",
    "search-queries",
    "evaluate",
    "export",
    "analyze",
    "report",
    "recommend",
]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_over_every_hostile_file_ends_in_a_result_or_one_line_error(setting, command, tmp_path):
    tmp, good, files = setting
    failures = []
    for name, bad in files.items():
        out = tmp_path / name.replace(".", "_")
        out.mkdir()
        args = [str(a) for a in _commands(tmp, good, bad, out)[command]]
        r = runner.invoke(app, args)
        text = r.output.strip()
        if r.exception is not None and not isinstance(r.exception, SystemExit):
            failures.append(f"{name}: {type(r.exception).__name__}: {r.exception}")
        elif "Traceback" in text:
            failures.append(f"{name}: traceback in the output")
        elif r.exit_code != 0:
            error = [line for line in text.splitlines() if line.startswith("error:")]
            if len(error) != 1 or len(error[0]) < 20:
                failures.append(f"{name}: exit {r.exit_code} without one error line: {text[-300:]!r}")
            left = sorted(p.name for p in out.rglob("*"))
            if left:
                failures.append(f"{name}: a failed run left {left}")
    assert not failures, "\n".join(failures)
