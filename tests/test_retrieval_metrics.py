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
