"""RaBitQ: against a plain-numpy version of the paper's estimator and faiss's IndexRaBitQ; its grid, encoder and
rotations."""

from __future__ import annotations

import numpy as np
import pytest

from embcompress import from_spec
from embcompress.search import Index, float_search
from embcompress.search.adc import adc_scores

from conftest import code_recall as recall

faiss = pytest.importorskip("faiss")


def paper_estimate(q, o, c, P):
    """RaBitQ's 1-bit inner-product estimator written plainly from the paper, one vector at a time:
    x_bar = sign(P^T o')/sqrt(d), <q, o> ~ <q, c> + ||o - c|| <x_bar, P^T q> / <x_bar, P^T o'>."""
    r = o - c
    o_unit = r / np.linalg.norm(r)
    rot_o, rot_q = P.T @ o_unit, P.T @ q
    x_bar = np.where(rot_o > 0, 1.0, -1.0) / np.sqrt(len(o))
    return q @ c + np.linalg.norm(r) * (x_bar @ rot_q) / (x_bar @ rot_o)


def test_rabitq_estimator_matches_the_paper(code_data):
    D, Q = code_data
    c = from_spec("rabitq").fit(D)
    rows = c.transform(D[:50])
    ours = Q[:5] @ c.decode(rows).T
    ref = np.array(
        [
            [
                paper_estimate(
                    q.astype(np.float64),
                    o.astype(np.float64),
                    c.center_.astype(np.float64),
                    c.rotation_.astype(np.float64),
                )
                for o in D[:50]
            ]
            for q in Q[:5]
        ]
    )
    np.testing.assert_allclose(ours, ref, rtol=1e-4, atol=1e-5)
    # the table scan gives the same ranking signal: estimate minus the per-query <q, c>
    codes, scale = c.adc_codes(rows)
    np.testing.assert_allclose(
        adc_scores(c.lookup_tables(Q[:5]), codes, scale), ours - (Q[:5] @ c.center_)[:, None], rtol=1e-4, atol=1e-5
    )


def test_rabitq_estimator_is_unbiased():
    """Over random rotations the estimate averages to the true inner product."""
    rng = np.random.default_rng(1)
    X = rng.standard_normal((400, 32)).astype(np.float32)
    q = rng.standard_normal(32).astype(np.float32)
    est = np.array(
        [
            q @ from_spec(f"rabitq:seed={s}").fit(X).decode(from_spec(f"rabitq:seed={s}").fit(X).transform(X[:5])).T
            for s in range(300)
        ]
    )  # (300, 5)
    true = X[:5] @ q
    sem = est.std(axis=0) / np.sqrt(len(est))
    assert np.all(np.abs(est.mean(axis=0) - true) < 4 * sem + 1e-3), (est.mean(axis=0), true, sem)


def test_rabitq_more_bits_estimate_better_and_factor_counts(code_data):
    D, Q = code_data
    exact = float_search(Q, D, 10)[1]
    r = []
    for b in (1, 2, 3, 4):
        c = from_spec(f"rabitq:{b}").fit(D)
        assert c.output_spec.nbytes == b * 6 + 4  # codes plus one float32 factor per vector
        r.append(recall(Index(c.transform(D), compressor=c).search(Q, 10).rows, exact))
    assert r == sorted(r) and r[-1] > 0.8, r


@pytest.mark.parametrize("bits", [1, 2, 3, 4])
def test_rabitq_grid_is_the_best_direction_and_kernel_equals_numpy(bits):
    """The grid code maximizes <g, u> / ||g|| over every sign-consistent grid vector (brute force
    for 4 dimensions), and the C kernel gives the numpy version's levels and <g, u> exactly,
    zero rows, zero coordinates and all-equal rows (ties at every scale) included."""
    from embcompress.compressors.rabitq import grid_levels, grid_levels_numpy

    rng = np.random.default_rng(bits)
    top = 2**bits - 1
    for d in (4, 37, 200):
        U = rng.standard_normal((120, d)).astype(np.float32)
        U[:, 1] = 0
        U[5], U[6] = 0, 0.5
        v, dots = grid_levels(U, bits)
        v_np, dots_np = grid_levels_numpy(U, bits)
        np.testing.assert_array_equal(v, v_np)
        np.testing.assert_array_equal(dots, dots_np)
        g = 2 * v.astype(np.float64) - top
        assert np.all(np.where(U > 0, g > 0, g < 0))  # the sign of u; u = 0 counts as negative
        np.testing.assert_allclose(dots, (g * U).sum(axis=1), rtol=1e-5, atol=1e-5)
        if d == 4:
            import itertools

            mags = np.array(list(itertools.product(range(1, top + 1, 2), repeat=d)), dtype=np.float64)
            best = (mags @ np.abs(U.T.astype(np.float64))) / np.linalg.norm(mags, axis=1)[:, None]  # (codes, rows)
            ours = (g * U).sum(axis=1) / np.linalg.norm(g, axis=1)
            np.testing.assert_allclose(ours, best.max(axis=0), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("kind", ["cauchy", "sparse", "rounded", "heavy"])
def test_rabitq_grid_kernel_equals_numpy_on_skewed_rows(kind):
    """The C sweep (counting-sorted steps, chunks of whole buckets, its early stop) finds the codes
    and <g, u> of the numpy version on rows far from Gaussian: heavy tails, mostly zeros, many equal
    magnitudes (ties within and across buckets)."""
    from embcompress.compressors.rabitq import grid_levels, grid_levels_numpy

    rng = np.random.default_rng(len(kind))
    n, d = 40, 300
    U = {
        "cauchy": lambda: rng.standard_cauchy((n, d)),
        "sparse": lambda: rng.standard_normal((n, d)) * (rng.random((n, d)) < 0.1),
        "rounded": lambda: np.round(rng.standard_normal((n, d)) * 3) / 3,
        "heavy": lambda: rng.exponential(1, (n, d)) ** 3 * rng.choice([-1, 1], (n, d)),
    }[kind]().astype(np.float32)
    for bits in (2, 3, 4):
        v, dots = grid_levels(U, bits)
        v_np, dots_np = grid_levels_numpy(U, bits)
        np.testing.assert_array_equal(v, v_np)
        np.testing.assert_array_equal(dots, dots_np)


@pytest.mark.parametrize("bits", [1, 2, 3, 4])
def test_rabitq_fused_encoder_equals_numpy_path(bits):
    """The C encoder (normalize, grid, planes and factor in one pass) writes the bytes of the numpy
    path exactly: a vector at the centroid (zero residual), zero coordinates, every batch size."""
    from embcompress.compressors import rabitq

    if rabitq._pack is None:
        pytest.skip("the C kernels are not built")
    rng = np.random.default_rng(10 + bits)
    X = (rng.standard_normal((700, 45)) * np.linspace(1, 0.1, 45)).astype(np.float32)
    X[:, 3] = 0
    c = from_spec(f"rabitq:{bits}").fit(X)
    X[7] = c.center_  # residual zero: factor 0
    fused = c.transform(X)
    plain = c._encode(X, fused=False)
    np.testing.assert_array_equal(fused, plain)
    np.testing.assert_array_equal(c.transform(X[5:9]), fused[5:9])  # a short batch: the same rows
    assert c.adc_codes(fused[7:8])[1][0] == 0


def test_rabitq_against_faiss_index_rabitq(code_data):
    """Same bits, same data: our 1-bit estimator ranks about as well as faiss IndexRaBitQ."""
    D, Q = code_data
    exact = float_search(Q, D, 10)[1]
    c = from_spec("rabitq").fit(D)
    ours = recall(Index(c.transform(D), compressor=c).search(Q, 10).rows, exact)
    index = faiss.IndexRaBitQ(48, faiss.METRIC_INNER_PRODUCT)
    index.train(D)
    index.add(D)
    theirs = recall(index.search(Q, 10)[1], exact)
    assert ours >= theirs - 0.05, (ours, theirs)


@pytest.mark.parametrize("bits", [1, 4])
def test_rabitq_with_the_structured_rotation(code_data, tmp_path, bits):
    """``rotation=hadamard``: the fused encoder writes the numpy path's bytes, a saved model codes
    the same, and it ranks about as well as the dense rotation."""
    from embcompress import load, save

    D, Q = code_data
    exact = float_search(Q, D, 10)[1]
    c = from_spec(f"rabitq:{bits}:rotation=hadamard").fit(D)
    codes = c.transform(D)
    np.testing.assert_array_equal(c._encode(D, fused=False), codes)
    save(c, tmp_path / "m")
    np.testing.assert_array_equal(load(tmp_path / "m").transform(D), codes)
    ours = recall(Index(codes, compressor=c).search(Q, 10).rows, exact)
    dense = from_spec(f"rabitq:{bits}").fit(D)
    theirs = recall(Index(dense.transform(D), compressor=dense).search(Q, 10).rows, exact)
    assert ours >= theirs - 0.05, (ours, theirs)
