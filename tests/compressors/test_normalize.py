"""The normalize family: unit rows, optionally centred first (the contract suite covers the rest
through its declared examples)."""

from __future__ import annotations

import numpy as np
import pytest

from embcompress import InputError, from_spec
from embcompress.engines.local import fit_file

from conftest import make_vectors, write_parquet


def test_rows_become_unit_length_and_keep_their_direction():
    X = make_vectors(200, 12, normalize=False) * 7.0
    Z = from_spec("normalize").fit(X).transform(X)
    np.testing.assert_allclose(np.linalg.norm(Z, axis=1), 1.0, rtol=1e-6)
    np.testing.assert_allclose(Z, X / np.linalg.norm(X, axis=1, keepdims=True), rtol=1e-6)


def test_centering_removes_a_shared_direction():
    rng = np.random.default_rng(0)
    X = (rng.standard_normal((500, 16)) + 5.0).astype(np.float32)  # every row leans the same way
    c = from_spec("normalize:center=true").fit(X)
    np.testing.assert_allclose(c.mean_, X.mean(axis=0), rtol=1e-5)
    Z = c.transform(X)
    assert abs(float(Z.mean(axis=0) @ np.ones(16))) < 0.5  # the common direction is gone
    zero = c.transform(c.mean_[None, :])
    assert np.all(zero == 0)  # a row equal to the mean stays zero, never NaN


def test_fit_from_a_stream_equals_the_fit_in_memory(tmp_path):
    X = make_vectors(3000, 8, normalize=False) + 1.0
    write_parquet(tmp_path / "v.parquet", X, row_group_size=500)
    streamed = fit_file(from_spec("normalize:center=true"), tmp_path / "v.parquet")
    np.testing.assert_allclose(streamed.mean_, from_spec("normalize:center=true").fit(X).mean_, rtol=1e-5)


def test_bad_center_is_refused():
    with pytest.raises(InputError, match="center must be true or false"):
        from_spec("normalize:center=maybe").fit(make_vectors(10, 4))
