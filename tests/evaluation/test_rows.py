"""The result row: frozen, built once by the engine, read by name or attribute, written as JSON."""

import dataclasses
import json

import numpy as np
import pytest

from embcompress.evaluation.evaluate import evaluate, run_configs
from embcompress.evaluation.tasks import LabelFreeTask


def _docs(n=300, d=16, seed=0):
    X = np.random.default_rng(seed).standard_normal((n, d)).astype(np.float32)
    return X / np.linalg.norm(X, axis=1, keepdims=True)


def test_a_row_cannot_be_written_and_reads_by_attribute_or_name():
    X = _docs()
    rows = run_configs(X[50:], LabelFreeTask(X[:50]), ["binary", "pca:8"], folds=2, per_query=True)
    float_row, binary = rows[0], rows[1]
    with pytest.raises(dataclasses.FrozenInstanceError):
        binary.retention = 1.0
    with pytest.raises(TypeError):
        binary["retention"] = 1.0
    assert float_row.retention == 1.0 and binary.retention == pytest.approx(binary.score / float_row.score)
    assert binary["recall@10_vs_float"] == binary.metrics["recall@10_vs_float"] == binary.score
    assert binary["bytes_per_vector"] == binary.bytes_per_vector == 2
    with pytest.raises(KeyError):
        binary["metrics"]  # the metrics are spread among the figures by name, as the JSON holds them
    assert binary.per_query.shape == (50,)
    assert run_configs(X[50:], LabelFreeTask(X[:50]), ["binary"], folds=2)[1].per_query is None


def test_the_json_row_keeps_its_keys_in_order():
    X = _docs()
    out = evaluate(X[50:], X[:50], configs=["binary"])
    row = out["rows"][1]
    assert isinstance(row, dict)
    keys = list(row)
    assert keys[:3] == ["config", "spec", "rerank"] and keys[-2:] == ["retention", "retention_in_sample"]
    assert "per_query" not in row and "metrics" not in row and "recall@10_vs_float" in row
    assert "rank_proxy" not in row  # only where the proxy was measured
    json.dumps(out)


def test_an_undefined_retention_is_shown_as_none():
    X = _docs()
    qrels = {"0": {"no-such-document": 1}}  # nothing relevant is indexed: float scores 0
    with pytest.warns(UserWarning):
        out = evaluate(X[50:], X[:1], qrels=qrels, configs=["binary"])
    assert "note" in out["summary"] and [r["retention"] for r in out["rows"]] == [None, None]
