"""Analysis functions on synthetic data with known answers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from embcompress import InputError, from_spec
from embcompress.analysis import (
    alignment,
    intrinsic_dimensionality,
    knn_accuracy,
    local_spearman,
    preservation,
    uniformity,
)


def low_rank(n=2000, d=50, r=6, noise=1e-3, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((n, r)) @ rng.standard_normal((r, d)) + noise * rng.standard_normal((n, d))).astype(
        np.float32
    )


def test_intrinsic_dimension_of_known_rank():
    res = intrinsic_dimensionality(low_rank(r=6), 0.95)
    assert res.components <= 6 and res.width == 50
    assert intrinsic_dimensionality(low_rank(r=6), 0.99999).components >= 6
    curve = res.to_dict()["cumulative_explained_variance"]
    assert len(curve) == 50 and curve[-1] == pytest.approx(1.0) and all(np.diff(curve) >= -1e-9)


def test_intrinsic_dimension_of_isotropic_noise_is_near_full():
    X = np.random.default_rng(0).standard_normal((20000, 32)).astype(np.float32)
    assert intrinsic_dimensionality(X, 0.95).components >= 29  # ~0.95 * 32 for equal variances


def test_uniformity_limits():
    same = np.tile([[1.0, 0.0, 0.0]], (50, 1))
    assert uniformity(same) == pytest.approx(1.0)  # every cosine is 1: log mean exp(1) = 1
    opposite = np.array([[1.0, 0], [-1.0, 0]] * 25)
    spread = uniformity(opposite)
    assert spread < uniformity(same)
    Z = np.zeros((10, 4))
    assert uniformity(Z) == pytest.approx(0.0) and math.isfinite(uniformity(Z))  # zero vectors: cos 0


def test_alignment():
    X = np.eye(3)
    assert alignment(X, X) == 0.0
    assert alignment(X, -X) == pytest.approx(4.0)
    with pytest.raises(InputError, match="paired rows"):
        alignment(X, X[:2])


def test_preservation_identity_and_scaled_copies():
    X = low_rank(300, 20, 20, noise=0.0)
    p = preservation(X, X)
    assert p.positional == pytest.approx(0.0, abs=1e-9) and p.angular == pytest.approx(0.0, abs=1e-12)
    assert p.spearman == pytest.approx(1.0)
    q = preservation(X, 3 * X)  # scaling keeps angles and ranks, not distances
    assert q.angular == pytest.approx(0.0, abs=1e-12) and q.spearman == pytest.approx(1.0) and q.positional > 0


def test_preservation_orders_compressors_as_expected():
    X = low_rank(800, 64, 8, noise=0.05)
    scores = {
        spec: preservation(X, from_spec(spec).fit(X).transform(X)).spearman
        for spec in ("pca:8", "random_select:8", "pca:2")
    }
    assert scores["pca:8"] > 0.95 > scores["random_select:8"] and scores["pca:8"] > scores["pca:2"]


def test_preservation_survives_duplicates_and_zero_vectors():
    X = low_rank(100, 10, 10)
    X[5] = X[6]
    X[7] = 0.0
    Z = X.copy()
    Z[:, 5:] = 0
    Z[9] = 0.0
    p = preservation(X, Z)
    assert all(math.isfinite(v) for v in (p.positional, p.angular, p.spearman))


def test_local_spearman_ties_and_constant_rows():
    a = np.array([[1, 2, 3], [1, 1, 1], [1, 1, 1], [3, 2, 1]], dtype=float)
    b = np.array([[10, 20, 30], [1, 1, 1], [1, 2, 3], [1, 2, 3]], dtype=float)
    np.testing.assert_allclose(local_spearman(a, b), [1.0, 1.0, 0.0, -1.0])
    ties = local_spearman(np.array([[1.0, 1.0, 2.0]]), np.array([[1.0, 2.0, 3.0]]))
    assert ties[0] == pytest.approx(np.corrcoef([1.5, 1.5, 3], [1, 2, 3])[0, 1])


def test_knn_accuracy_separable_and_random():
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(4), 100)
    centers = rng.standard_normal((4, 16)) * 10
    X = centers[labels] + rng.standard_normal((400, 16))
    assert knn_accuracy(X, labels) == 1.0
    assert knn_accuracy(rng.standard_normal((400, 16)), labels) < 0.6
    with pytest.raises(InputError, match="labels for"):
        knn_accuracy(X, labels[:10])
