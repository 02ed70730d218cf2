"""A plan's candidate count, chosen on a sample, scaled to the whole file (report/scaling.py)."""

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from embcompress.cli.main import app
from embcompress.report.scaling import growth_exponent, scaled_count
from embcompress.serving.plan import load_plan


def _data(n, d, seed):
    """Documents on a low-dimensional structure with noise, and queries near the first 40."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 8)) @ rng.standard_normal((8, d)) + 0.5 * rng.standard_normal((n, d))
    Q = X[:40] + 0.2 * rng.standard_normal((40, d))
    return X.astype(np.float32), Q.astype(np.float32)


def _parquet(path, X):
    ids = [f"doc{i}" for i in range(len(X))]
    pq.write_table(pa.table({"id": ids, "embedding": pa.array(list(X), type=pa.list_(pa.float32()))}), path)


def cli(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def test_a_count_grows_with_the_rows_by_the_measured_power():
    assert scaled_count(1000, 20_000, 250_000, 0.5, 10) == 3540  # 1000 * 12.5 ** 0.5 = 3535.5, up to a multiple of 10
    assert scaled_count(1000, 20_000, 250_000, 0.0, 10) == 1000  # ranks that do not grow: the same count
    assert scaled_count(1000, 20_000, 20_000, 0.9, 10) == 1000  # the sample is the file
    assert scaled_count(1_000, 1_000, 1_100, 1.0, 300) == 1_100  # 1,200 rounded up: never more than the rows


@pytest.mark.parametrize("c", [20, 100])
def test_a_coarse_code_needs_its_count_to_grow_faster_than_a_fine_one(c):
    X, Q = _data(4000, 48, seed=1)
    fine, medium, coarse = (growth_exponent(s, X, Q, 10, c) for s in ("int8", "pca:8+sq:4", "pca:4+sq:1"))
    assert fine < 0.05  # int8 ranks exact search's top 10 as it does: no more candidates for more rows
    assert fine < medium < coarse and coarse > 0.6
    assert 0 <= fine and coarse <= 1


def test_recommend_saves_the_count_for_the_whole_file_not_the_sample(tmp_path):
    X, _ = _data(3000, 16, seed=3)
    _parquet(tmp_path / "docs.parquet", X)
    args = ("--ram-budget", "2", "--disk-budget", "40", "--sample", "1000")
    r = cli("recommend", tmp_path / "docs.parquet", tmp_path / "plan", *args, "--json")
    assert r.exit_code == 0, r.output
    res = json.loads(r.stdout)
    w = res["winner"]
    assert res["sample"] <= 1000 and res["total_rows"] == 3000 and w["copy"] != "none"  # some sampled rows query
    expected = scaled_count(w["sample_candidates"], res["sample"], 3000, w["growth_exponent"], 10)
    assert w["candidates"] == expected >= w["sample_candidates"]
    saved = load_plan(tmp_path / "plan")
    assert saved.plan.candidates == w["candidates"]
    assert saved.plan.measured["sample_candidates"] == w["sample_candidates"]
    r = cli("recommend", tmp_path / "docs.parquet", tmp_path / "plan2", *args)
    assert r.exit_code == 0, r.output
    assert "sampled documents" in r.output and "for the file's 3,000 rows" in r.output
