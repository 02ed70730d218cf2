"""Metric maths against hand-computed cases."""

from __future__ import annotations

import math

import pytest

from embcompress.analysis import evaluate_run, mrr_at_k, ndcg_at_k, recall_at_k, retention


def test_ndcg_hand_computed():
    judged = {"a": 1, "b": 2, "z": 1}
    # ranked: x, b, a -> DCG = 0 + 2/log2(3) + 1/log2(4); ideal over grades (2, 1, 1)
    dcg = 2 / math.log2(3) + 1 / 2
    ideal = 2 + 1 / math.log2(3) + 1 / 2
    assert ndcg_at_k(["x", "b", "a"], judged, 10) == pytest.approx(dcg / ideal)
    assert ndcg_at_k(["b", "a", "z"], judged, 10) == pytest.approx(1.0)
    # cut at k=1: only 'x' counts, ideal is the single best grade
    assert ndcg_at_k(["x", "b"], judged, 1) == 0.0
    assert ndcg_at_k(["b", "x"], judged, 1) == 1.0


def test_recall_and_mrr_hand_computed():
    judged = {"a": 1, "b": 1, "c": 0}
    assert recall_at_k(["c", "a", "x"], judged, 2) == 0.5
    assert recall_at_k(["c", "a", "b"], judged, 3) == 1.0
    assert mrr_at_k(["c", "x", "b"], judged, 10) == pytest.approx(1 / 3)
    assert mrr_at_k(["c", "x", "b"], judged, 2) == 0.0


def test_ties_in_the_run_are_scored_in_run_order():
    # two documents with equal scores: the search put the lower row first; metrics follow that order
    judged = {"d2": 1}
    assert mrr_at_k(["d1", "d2"], judged, 10) == 0.5
    assert mrr_at_k(["d2", "d1"], judged, 10) == 1.0


def test_evaluate_run_means_and_skips_unjudged_queries():
    qrels = {"q1": {"a": 1}, "q2": {"b": 1}, "q3": {"c": 0}}
    run = {"q1": ["a", "x"], "q2": ["x", "b"], "q3": ["c"], "q4": ["a"]}
    s = evaluate_run(run, qrels, k=10)
    assert s.queries == 2
    assert s.mrr == pytest.approx((1 + 0.5) / 2)
    assert s.recall == 1.0
    assert s.ndcg == pytest.approx((1 + 1 / math.log2(3)) / 2)


def test_retention():
    assert retention(0.75, 0.8) == pytest.approx(0.9375)
    assert math.isnan(retention(0.5, 0.0))


@pytest.mark.parametrize("k,width", [(10, 10), (10, 4), (3, 8)])
def test_judged_queries_score_exactly_as_evaluate_run(k, width):
    """Prepared judgments give evaluate_run's per-query figures and means bit for bit: graded and
    negative grades, relevant documents never retrieved, queries without judgments or with none
    relevant (NaN, left out of the means), and runs shorter or longer than k."""
    import numpy as np

    from embcompress.analysis import JudgedQueries

    rng = np.random.default_rng(k * 10 + width)
    docs = [f"d{i}" for i in range(60)]
    qids = [f"q{i}" for i in range(300)]
    qrels = {}
    for q in qids[:-40]:  # the last 40: no judgments at all
        picked = rng.choice(60, size=rng.integers(1, 8), replace=False)
        qrels[q] = {docs[j]: int(rng.integers(-1, 4)) for j in picked}
    qrels["q0"] = {"d1": 0, "ghost": 0}  # judged, none relevant
    qrels["q1"] = {"ghost": 2, "d2": 1}  # a relevant document that cannot be retrieved
    ranked = np.array([[docs[j] for j in rng.permutation(60)[:width]] for _ in qids], dtype=object)
    ref = evaluate_run({q: list(r) for q, r in zip(qids, ranked)}, qrels, k)
    per = JudgedQueries(qids, qrels, k).score(ranked)
    for i, q in enumerate(qids):
        if q in ref.per_query:
            assert [per[m][i] for m in ("ndcg", "recall", "mrr")] == [
                ref.per_query[q][m] for m in ("ndcg", "recall", "mrr")
            ]
        else:
            assert all(np.isnan(per[m][i]) for m in per)
    assert "q0" not in ref.per_query and np.isnan(per["ndcg"][0])
    judged = ~np.isnan(per["ndcg"])
    assert float(np.mean(per["ndcg"][judged])) == ref.ndcg and float(np.mean(per["mrr"][judged])) == ref.mrr
