"""The copy on disk scored as it is read (``DiskCopy.cosines``, the C kernel in ``embcompress.io._pread``):
the same cosines as decoding the rows to float32 and scoring them with numpy, for every kind of copy."""

from __future__ import annotations

import numpy as np
import pytest

import embcompress
from embcompress.core._util import normalize_rows
from embcompress.core.errors import FormatError
from embcompress.search import Index
from embcompress.search.index import float_rerank_scores
from embcompress.serving import copies as copies_mod
from embcompress.serving.copies import DiskCopy, drop_cache

needs_c = pytest.mark.skipif(copies_mod._pread is None, reason="the C reader is not built here")


def _copy(tmp_path, kind, n=700, d=45, seed=0):
    """A copy of ``kind`` on disk, the DiskCopy scoring it in C, and the float32 vectors it decodes to."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)).astype(np.float32)
    X[5] = 0  # a row of zeros scores 0, not nan
    if kind == "int8":
        model = embcompress.from_spec("int8").fit(X)
        rows, decode, affine = model.transform(X), model.decode, model.affine()
    else:
        rows, affine, decode = X.astype(kind), None, embcompress.serving.copies.copy_codec(kind)[1]
    np.save(tmp_path / "c.npy", rows)
    store = DiskCopy(tmp_path / "c.npy", decode, rows=n, dim=d, kind=kind, affine=affine)
    return store, decode(rows), rng


def _numpy_cosines(V, Q, rows):
    X = V[rows]  # (q, c, d)
    dots = np.einsum("qcd,qd->qc", X.astype(np.float64), Q.astype(np.float64))
    norms = np.sqrt(np.einsum("qcd,qcd->qc", X.astype(np.float64), X.astype(np.float64)))
    return np.divide(dots, norms, out=np.zeros_like(dots), where=norms > 0)


@needs_c
@pytest.mark.parametrize("kind", ["float32", "float16", "int8"])
def test_each_kind_of_copy_scores_as_its_decoded_vectors_do(tmp_path, kind, monkeypatch):
    store, V, rng = _copy(tmp_path, kind)
    Q = normalize_rows(rng.standard_normal((3, V.shape[1])).astype(np.float32))
    # any order, repeats, neighbouring runs longer than a read chunk, the zero row, the last row
    rows = np.stack([rng.permutation(700)[:300], np.r_[5, 5, 699, np.arange(0, 297)], rng.integers(0, 700, 300)])
    calls = []
    real = copies_mod._pread.cosines

    def spy(*args):
        calls.append(args[4])
        return real(*args)

    monkeypatch.setattr(copies_mod._pread, "cosines", spy)
    got = store.cosines(Q, rows)
    assert calls == [{"float32": "f", "float16": "h", "int8": "b"}[kind]] * 3  # scored in C, one call per query
    assert got.dtype == np.float32 and got.shape == (3, 300)
    np.testing.assert_allclose(got, _numpy_cosines(V, Q, rows), rtol=0, atol=2e-6)
    if kind != "int8":  # (int8 decodes zeros to the lower edge of their steps, not to zero)
        assert got[1, 0] == 0 and got[1, 1] == 0
    store.close()


@needs_c
def test_an_int8_copy_without_its_calibration_is_scored_from_decoded_rows(tmp_path, monkeypatch):
    store, V, rng = _copy(tmp_path, "int8")
    plain = DiskCopy(store.path, store._decode, rows=700, dim=45, kind="int8")  # no affine: decode, then numpy
    monkeypatch.setattr(copies_mod._pread, "cosines", None)  # would fail if called
    Q = normalize_rows(rng.standard_normal((2, 45)).astype(np.float32))
    rows = rng.integers(0, 700, (2, 50))
    assert plain.cosines(Q, rows) is None  # not scored in C: float_rerank_scores decodes get()'s rows instead
    np.testing.assert_allclose(float_rerank_scores(Q, rows, plain), _numpy_cosines(V, Q, rows), rtol=0, atol=2e-6)
    plain.close()
    store.close()


@needs_c
def test_a_plan_search_rescored_in_c_ranks_as_the_numpy_rescoring(tmp_path):
    store, V, rng = _copy(tmp_path, "int8", n=2000, d=48)
    first = embcompress.from_spec("binary").fit(V)
    index = Index(first.transform(V), compressor=first)
    Q = rng.standard_normal((20, 48)).astype(np.float32)
    got = index.search(Q, 10, rerank="float", candidates=200, originals=store)
    want = index.search(Q, 10, rerank="float", candidates=200, originals=V)  # ArrayStore: get() and numpy
    assert np.mean(got.rows == want.rows) > 0.99  # equal but for ties broken by the last bit
    np.testing.assert_allclose(got.scores, want.scores, atol=2e-6)
    store.close()


@needs_c
def test_a_copy_cut_while_scored_is_a_short_read(tmp_path):
    store, V, rng = _copy(tmp_path, "float32")
    with open(store.path, "r+b") as f:
        f.truncate(store.offset + 400 * store.row_bytes)
    Q = normalize_rows(rng.standard_normal((1, 45)).astype(np.float32))
    assert store.cosines(Q, np.array([[1, 399]])).shape == (1, 2)
    with pytest.raises(FormatError, match="short read at row 650"):
        store.cosines(Q, np.array([[2, 650, 651]]))
    store.close()


@needs_c
def test_the_kernel_refuses_buffers_of_the_wrong_shape(tmp_path):
    store, V, _ = _copy(tmp_path, "float32")
    q, out = np.zeros(45, np.float32), np.empty(2, np.float32)
    rows, empty = np.array([1, 2]), np.empty(0, np.float32)
    cos = copies_mod._pread.cosines
    with pytest.raises(ValueError, match="kind must be"):
        cos(store._fd, rows, store.row_bytes, store.offset, "x", q, empty, empty, out)
    with pytest.raises(ValueError, match="rows int64"):
        cos(store._fd, rows, store.row_bytes, store.offset, "f", q[:44], empty, empty, out)  # width != row
    with pytest.raises(ValueError, match="rows int64"):
        cos(store._fd, rows, store.row_bytes, store.offset, "b", q, empty, empty, out)  # int8 without a, b
    store.close()


@needs_c
def test_rows_read_cold_score_as_rows_read_warm(tmp_path):
    """A copy dropped from the page cache: the runs not in memory are deferred to a second pass (where the
    platform lets a read ask the page cache only); every row is still scored, to the same value."""
    store, V, rng = _copy(tmp_path, "float16", n=5000, d=64)
    Q = normalize_rows(rng.standard_normal((2, 64)).astype(np.float32))
    rows = np.stack([rng.permutation(5000)[:800], rng.permutation(5000)[:800]])
    warm = store.cosines(Q, rows)
    drop_cache(store.path)
    cold = store.cosines(Q, rows)
    assert np.array_equal(cold, warm) and np.isfinite(cold).all()
    np.testing.assert_allclose(cold, _numpy_cosines(V, Q, rows), rtol=0, atol=2e-6)
    store.close()


@needs_c
def test_rows_fetched_cold_are_the_rows_fetched_warm(tmp_path):
    """``get`` (the rows themselves, as an int8r copy and an uncalibrated int8 copy read them) defers the runs
    not in the page cache to a second pass as the scoring does: the same bytes in the asked order, repeats
    included, and a file cut short is still a short read."""
    store, V, rng = _copy(tmp_path, "float32", n=5000, d=64)
    rows = np.r_[rng.permutation(5000)[:900], 17, 17, 4999, 0]
    warm = store.get(rows)
    drop_cache(store.path)
    assert np.array_equal(store.get(rows), warm) and np.array_equal(warm, V[rows])
    with open(store.path, "r+b") as f:
        f.truncate(store.offset + 4000 * store.row_bytes)
    drop_cache(store.path)
    with pytest.raises(FormatError, match="short read at row 4"):
        store.get(np.r_[3, 10, 4500, 4999])
    store.close()
