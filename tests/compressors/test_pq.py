"""Product quantization and OPQ, against faiss."""

from __future__ import annotations

import numpy as np
import pytest

from embcompress import from_spec
from embcompress.compressors import OPQ
from embcompress.search import Index
from embcompress.search import fastscan
from embcompress.search.adc import adc_topk

from conftest import code_recall as recall


faiss = pytest.importorskip("faiss")


@pytest.mark.parametrize("spec,m,nbits", [("pq:8", 8, 8), ("pq:12:nbits=4", 12, 4), ("pq:3:nbits=4", 3, 4)])
def test_pq_matches_faiss(spec, m, nbits, code_data):
    D, Q = code_data
    c = from_spec(spec).fit(D)
    ref = faiss.ProductQuantizer(48, m, nbits)
    faiss.copy_array_to_vector(c.centroids_.ravel(), ref.centroids)
    codes = c.transform(D)
    np.testing.assert_array_equal(codes, ref.compute_codes(D))
    np.testing.assert_allclose(c.decode(codes), ref.decode(codes), atol=1e-6)
    # our lookup tables and scan = faiss IndexPQ with inner product on the same codes
    index = faiss.IndexPQ(48, m, nbits, faiss.METRIC_INNER_PRODUCT)
    faiss.copy_array_to_vector(c.centroids_.ravel(), index.pq.centroids)
    index.is_trained = True
    index.add(D)
    fs, fi = index.search(Q, 10)
    s, i = adc_topk(c.lookup_tables(Q), codes, 10)
    np.testing.assert_allclose(s, fs, rtol=1e-4, atol=1e-5)
    true_ip = Q @ ref.decode(codes).T  # the same documents up to exact ties (identical codes are common)
    np.testing.assert_allclose(
        np.take_along_axis(true_ip, i, 1), np.take_along_axis(true_ip, fi, 1), rtol=1e-4, atol=1e-5
    )
    # the index ranks by <q, x_hat> / ||x_hat|| ** norm_power, x_hat faiss's reconstruction: at
    # power 1 its cosine, as float search ranks by cosine
    rec_norms = np.linalg.norm(ref.decode(codes), axis=1)
    assert Index(codes, compressor=c).norm_power == 1.0  # the cosine unless told
    for power in (1.0, 1.5, 0.0):
        ours = Index(codes, compressor=c, norm_power=power).search(Q, 10)
        exact = true_ip / rec_norms[None, :] ** power
        if nbits == 8:
            top = np.sort(exact, axis=1)[:, ::-1][:, :10]
            np.testing.assert_allclose(ours.scores, top, rtol=1e-4, atol=1e-5)
        else:  # the fast scan ranks by 8-bit tables: each score within half a step per codebook of the float one
            step = fastscan.quantize_tables(fastscan.book_tables(c.codebooks(), Q)).delta
            bound = (m * step / 2)[:, None] * (rec_norms.min() ** -power) + 1e-5
            assert (np.abs(ours.scores - np.take_along_axis(exact, ours.rows, 1)) <= bound).all()
            if m >= 12:  # (3 slices: 4,096 distinct codes, ties everywhere)
                assert recall(ours.rows, np.argsort(-exact, axis=1)[:, :10]) >= 0.8


def test_opq_rotation_is_orthogonal_and_helps(code_data):
    D, Q = code_data
    opq = from_spec("opq:6").fit(D)
    np.testing.assert_allclose(opq.rotation_ @ opq.rotation_.T, np.eye(48), atol=1e-4)
    err = {
        s: float(((from_spec(s).fit(D).decode(from_spec(s).fit(D).transform(D)) - D) ** 2).sum())
        for s in ("pq:6", "opq:6")
    }
    assert err["opq:6"] < err["pq:6"], err


def test_opq_rotation_on_a_subset_codebooks_on_all(code_data, monkeypatch):
    """``OPQ.rotation_max_rows`` below the fit rows: the rotation is learned on a seeded subset, the
    final codebooks on every row (rotated), as a faiss PQ trained on them would be."""
    D, _ = code_data
    full = from_spec("opq:6").fit(D)
    monkeypatch.setattr(OPQ, "rotation_max_rows", len(D) // 3)
    a, b = from_spec("opq:6").fit(D), from_spec("opq:6").fit(D)
    np.testing.assert_array_equal(a.rotation_, b.rotation_)
    np.testing.assert_allclose(a.rotation_ @ a.rotation_.T, np.eye(48), atol=1e-4)
    assert not np.allclose(a.rotation_, full.rotation_, atol=1e-3)
    ref = faiss.ProductQuantizer(48, 6, 8)
    ref.cp.min_points_per_centroid, ref.cp.seed = 1, 0
    ref.train(np.ascontiguousarray(D @ a.rotation_.T))
    np.testing.assert_allclose(a.centroids_.ravel(), faiss.vector_to_array(ref.centroids), rtol=1e-4, atol=1e-5)
