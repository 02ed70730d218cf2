"""A graph over bits that explores more rows and lets the codes rank them against the float query."""

import json

import numpy as np
import pytest

import embcompress
from embcompress.core.errors import InputError
from embcompress.search import Index
from embcompress.search.ann import Hnsw
from embcompress.serving.plan import Plan, load_plan, save_plan
from embcompress.serving.tiers import apply_plan, open_tiers

pytest.importorskip("faiss")


def _data(n=4000, d=64, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 12)) @ rng.standard_normal((12, d)) + 0.6 * rng.standard_normal((n, d))
    Q = X[rng.choice(n, 60, replace=False)] + 0.5 * rng.standard_normal((60, d))
    return X.astype(np.float32), Q.astype(np.float32)


def _held(rows, X, Q, k=10):
    Xn = X / np.linalg.norm(X, axis=1, keepdims=True)
    exact = np.argsort(-(Q @ Xn.T), axis=1)[:, :k]
    return np.mean([len(set(e) & set(r)) / k for e, r in zip(exact, rows)])


def test_exploring_more_rows_and_ranking_them_by_the_codes_holds_more_of_the_exact_top_10():
    X, Q = _data()
    comp = embcompress.from_spec("rotate:center=true+binary").fit(X)
    codes = comp.transform(X)
    held = {}
    for w in (1, 4):
        index = Index(codes, compressor=comp, structure="hnsw", hnsw=Hnsw(explore=w))
        scores, rows = index.first_stage(Q, 50)
        assert rows.shape == (60, 50) and (rows >= 0).all() and len({tuple(sorted(r)) for r in rows}) > 1
        assert (np.diff(scores, axis=1) <= 1e-6).all()  # best first
        held[w] = _held(rows, X, Q)
    scanned = Index(codes, compressor=comp)
    # the asymmetric scan of every code: what exploring wider approaches
    asym = _held(scanned.search(Q, 50, rerank="asymmetric", candidates=len(X)).rows, X, Q)
    assert held[4] > held[1] + 0.02 and held[4] <= asym + 1e-9


def test_a_plan_that_explores_is_saved_applied_and_served_so(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    X, Q = _data(2000, 32, seed=1)
    comp = embcompress.from_spec("binary").fit(X)
    plan = Plan(structure="hnsw", graph=Hnsw(explore=3), copy="int8", candidates=40, k=10)
    save_plan(plan, comp, tmp_path / "plan", copy_model=embcompress.Int8().fit(X))
    assert json.loads((tmp_path / "plan" / "plan.json").read_text())["graph"]["explore"] == 3
    saved = load_plan(tmp_path / "plan")
    assert saved.plan.graph.explore == 3 and "exploring 3x" in saved.plan.describe(comp)
    pq.write_table(pa.table({"embedding": pa.array(list(X), type=pa.list_(pa.float32()))}), tmp_path / "d.parquet")
    apply_plan(tmp_path / "plan", tmp_path / "d.parquet", tmp_path / "tiers")
    served = open_tiers(tmp_path / "tiers", tmp_path / "plan")
    assert served.index.hnsw.explore == 3  # the graph file's settings, searched as the plan says
    res = served.search(Q)
    assert res.rows.shape == (60, 10) and _held(res.rows, X, Q) > 0.5
    with pytest.raises(InputError, match="explore must be a whole number from 1 to 100"):
        Hnsw(explore=0)
