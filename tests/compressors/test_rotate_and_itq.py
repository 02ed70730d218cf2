"""Rotations (dense and structured Hadamard, seeded by splitmix64) and ITQ, against faiss's ITQ."""

from __future__ import annotations

import numpy as np
import pytest

from embcompress import InputError, from_spec
from embcompress.search import Index, float_search

from conftest import code_recall as recall

faiss = pytest.importorskip("faiss")


def test_rotation_is_orthogonal_and_seeded(code_data):
    D, _ = code_data
    r = from_spec("rotate:seed=4").fit(D)
    np.testing.assert_allclose(r.rotation_ @ r.rotation_.T, np.eye(48), atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(r.transform(D), axis=1), 1, atol=1e-5)  # lengths kept
    assert np.array_equal(r.rotation_, from_spec("rotate:seed=4").fit(D).rotation_)
    assert not np.array_equal(r.rotation_, from_spec("rotate:seed=5").fit(D).rotation_)


def test_splitmix64_gives_the_published_sequence():
    """The structured rotation draws its signs and permutations from SplitMix64 written out in
    numpy (so that a saved model's rotation is rebuilt by any numpy): the reference generator's
    first outputs for seed 1234567."""
    from embcompress.compressors.rotate import _splitmix64

    assert [int(v) for v in _splitmix64(1234567, 5)] == [
        6457827717110365317,
        3203168211198807973,
        9817491932198370423,
        4593380528125082431,
        16408922859458223821,
    ]


@pytest.mark.parametrize("d", [1, 5, 64, 100, 384])
def test_hadamard_rotation_is_orthogonal_and_its_kernel_equals_numpy(d, monkeypatch):
    """rotate's structured rotation: orthogonal, the dense matrix it saves is the transform, the
    C kernel writes the numpy path's bytes (rows in groups of 8, and a tail), any batch the same
    rows, another seed another rotation."""
    from embcompress.compressors import rotate

    X = np.random.default_rng(d).standard_normal((203, d)).astype(np.float32)
    X[4] = 0
    M = rotate.hadamard_matrix(d, 3)
    np.testing.assert_allclose(M @ M.T, np.eye(d), atol=1e-5)
    fast = rotate.hadamard_rotate(X, 3)
    np.testing.assert_allclose(fast, X @ M, atol=1e-5)
    np.testing.assert_array_equal(rotate.hadamard_rotate(X[5:12], 3), fast[5:12])
    if d > 1:
        assert not np.allclose(rotate.hadamard_matrix(d, 4), M)
    mean = X.mean(0)
    centred = rotate.hadamard_rotate(X, 3, mean)  # centring in the same pass: the centred rows' rotation
    np.testing.assert_array_equal(centred, rotate.hadamard_rotate(X - mean, 3))
    if rotate._pack is not None:
        monkeypatch.setattr(rotate, "_pack", None)
        np.testing.assert_array_equal(rotate.hadamard_rotate(X, 3), fast)
        np.testing.assert_array_equal(rotate.hadamard_rotate(X, 3, mean), centred)


def test_rotate_hadamard_saves_loads_and_keeps_what_the_dense_rotation_keeps(code_data, tmp_path):
    """``rotate:kind=hadamard`` before sign bits: the same codes after a save and load, and
    about the nearest neighbours a dense random rotation keeps (within sampling noise here)."""
    from embcompress import load, save

    D, Q = code_data
    exact = float_search(Q, D, 10)[1]
    got = {}
    for kind in ("haar", "hadamard"):
        chain = from_spec(f"rotate:center=true,kind={kind}+binary").fit(D)
        codes = chain.transform(D)
        if kind == "hadamard":
            save(chain, tmp_path / "m")
            np.testing.assert_array_equal(load(tmp_path / "m").transform(D), codes)
        got[kind] = recall(Index(codes, compressor=chain).search(Q, 10).rows, exact)
    assert got["hadamard"] > 0.3 and got["hadamard"] >= got["haar"] - 0.05, got
    with pytest.raises(InputError, match="rotate kind must be one of haar, hadamard, got 'fast'"):
        from_spec("rotate:kind=fast")  # refused as the spec is read, before any data
    with pytest.raises(InputError, match="rabitq rotation must be one of haar, hadamard, got 'dense'"):
        from_spec("rabitq:1:rotation=dense")


def test_itq_lowers_the_quantization_loss(code_data):
    """Each iteration solves the Procrustes step exactly, so the loss never rises, and it ends
    below the loss of the random rotation it started from and of other random rotations."""
    D, _ = code_data
    itq = from_spec("itq:iters=50").fit(D)
    loss = itq.loss_
    assert np.all(np.diff(loss) <= 1e-6) and loss[-1] < loss[0] - 0.01
    np.testing.assert_allclose(itq.rotation_ @ itq.rotation_.T, np.eye(48), atol=1e-4)
    V = D - itq.mean_
    for seed in range(5):
        Z = V @ from_spec(f"rotate:seed={seed}").fit(D).rotation_
        assert loss[-1] < ((np.sign(Z) - Z) ** 2).mean()


def test_itq_against_faiss_itq_transform(code_data):
    """faiss ITQTransform (PCA to the same width, then ITQ) and ours reach a similar loss."""
    D, _ = code_data
    ours = from_spec("itq:iters=50").fit(D)
    Z = ours.transform(D)
    our_loss = float(((np.sign(Z) - Z * np.abs(Z).mean()) ** 2).mean())
    ft = faiss.ITQTransform(48, 48, False)
    ft.train(D)
    F = ft.apply_py(D)
    their_loss = float(((np.sign(F) - F * np.abs(F).mean()) ** 2).mean())
    assert our_loss <= their_loss * 1.05, (our_loss, their_loss)
