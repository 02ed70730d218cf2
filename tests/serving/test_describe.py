"""``embcompress info`` on a serving plan and on its tiers, and a plan's directories refused as vector datasets."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from typer.testing import CliRunner

import embcompress
from embcompress.cli.main import app
from embcompress.serving.describe import describe_serving
from embcompress.serving.plan import Plan, save_plan
from embcompress.serving.tiers import apply_plan

N, D = 600, 32


def _plan_and_tiers(tmp_path):
    X = np.random.default_rng(0).standard_normal((N, D)).astype(np.float32)
    ids = pa.array([f"doc-{i}" for i in range(N)])
    pq.write_table(
        pa.table({"id": ids, "embedding": pa.array(list(X), type=pa.list_(pa.float32()))}), tmp_path / "d.parquet"
    )
    first = embcompress.from_spec("binary").fit(X)
    plan = Plan(copy="int8", candidates=50, k=10, measured={"retention": 0.987, "metric": "nDCG@10", "latency_ms": 1.5})
    save_plan(plan, first, tmp_path / "plan", copy_model=embcompress.Int8().fit(X))
    apply_plan(tmp_path / "plan", tmp_path / "d.parquet", tmp_path / "tiers")
    np.save(tmp_path / "q.npy", X[:5])
    return tmp_path / "plan", tmp_path / "tiers"


def test_info_says_what_a_plan_and_its_tiers_hold(tmp_path):
    plan, tiers = _plan_and_tiers(tmp_path)
    p = describe_serving(plan)
    assert p["kind"] == "plan" and p["copy"] == "int8" and p["place"] == "disk" and p["candidates"] == 50
    assert (p["ram_bytes_per_vector"], p["disk_bytes_per_vector"], p["input_width"]) == (D // 8, D, D)
    assert p["measured"] == {"retention": 0.987, "metric": "nDCG@10", "latency_ms": 1.5}
    t = describe_serving(tiers)
    assert (t["kind"], t["rows"], t["input_width"], t["copy"], t["ids"]) == ("tiers", N, D, "int8", "string")
    assert t["plan_fingerprint"] == p["fingerprint"]
    assert t["files"]["copy.npy"] == (tiers / "copy.npy").stat().st_size and t["bytes"] == sum(t["files"].values())
    assert describe_serving(tmp_path) is None  # neither: info reads it as a dataset
    runner = CliRunner()
    r = runner.invoke(app, ["info", str(plan)])
    assert r.exit_code == 0 and "4 B in RAM, 32 B on disk" in r.output and "retention 98.7%" in r.output
    r = runner.invoke(app, ["info", str(tiers), "--json"])
    assert r.exit_code == 0 and json.loads(r.output)["rows"] == N


def test_a_plan_or_its_tiers_given_as_vectors_say_what_they_are(tmp_path):
    plan, tiers = _plan_and_tiers(tmp_path)
    runner = CliRunner()
    r = runner.invoke(app, ["search", str(tiers), str(tmp_path / "q.npy"), str(tmp_path / "r.parquet")])
    assert r.exit_code != 0 and "serving plan's tiers" in r.output and "--plan PLAN_DIR" in r.output
    r = runner.invoke(app, ["search", str(plan), str(tmp_path / "q.npy"), str(tmp_path / "r.parquet")])
    assert r.exit_code != 0 and "is a serving plan (plan.json)" in r.output and "embcompress apply" in r.output
    assert "Traceback" not in r.output and not (tmp_path / "r.parquet").exists()
    (tiers / "tiers.json").write_text("{not json")
    r = runner.invoke(app, ["info", str(tiers)])
    assert r.exit_code != 0 and "is not valid JSON" in r.output and "Traceback" not in r.output
