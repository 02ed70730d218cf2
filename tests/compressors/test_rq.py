"""Residual quantization, against faiss (with and without a beam)."""

from __future__ import annotations

import numpy as np
import pytest

from embcompress import from_spec
from embcompress.search.adc import adc_scores


faiss = pytest.importorskip("faiss")


@pytest.mark.parametrize("spec,m,nbits", [("rq:4", 4, 8), ("rq:5:nbits=4", 5, 4)])
def test_rq_matches_faiss_and_beats_pq(spec, m, nbits, code_data):
    D, Q = code_data
    c = from_spec(spec).fit(D)
    ref = faiss.ResidualQuantizer(48, m, nbits)
    ref.max_beam_size = 1  # our default beam
    faiss.copy_array_to_vector(c.codebooks_.ravel(), ref.codebooks)
    ref.is_trained = True
    codes = c.transform(D)
    np.testing.assert_array_equal(codes, ref.compute_codes(D - c.mean_))
    np.testing.assert_allclose(c.decode(codes), ref.decode(codes) + c.mean_, atol=1e-5)
    np.testing.assert_allclose(
        adc_scores(c.lookup_tables(Q), codes) + (Q @ c.mean_)[:, None], Q @ c.decode(codes).T, rtol=1e-4, atol=1e-4
    )
    if nbits == 8:  # every codebook spans all dimensions: less error than pq at the same bytes
        err = {
            s: float(((from_spec(s).fit(D).decode(from_spec(s).fit(D).transform(D)) - D) ** 2).sum())
            for s in ("pq:4", "rq:4")
        }
        assert err["rq:4"] < err["pq:4"], err


def test_rq_beam_encodes_as_faiss_does(code_data):
    """With a beam, codes come from faiss's table-based beam search (faster); it finds the codes the
    plain beam search finds, up to float near-ties, which leave the error the same."""
    D, _ = code_data
    c = from_spec("rq:6:beam=4").fit(D)
    codes = c.transform(D)
    plain = faiss.ResidualQuantizer(48, 6, 8)
    plain.max_beam_size = 4
    faiss.copy_array_to_vector(c.codebooks_.ravel(), plain.codebooks)
    plain.is_trained = True
    ref = plain.compute_codes(D - c.mean_)
    assert (codes == ref).all(axis=1).mean() >= 0.99
    plain.max_beam_size = 1  # the same codebooks without a beam: the beam is what finds the better codes
    err = [float(((c.decode(x) - D) ** 2).sum()) for x in (codes, ref, plain.compute_codes(D - c.mean_))]
    assert err[0] == pytest.approx(err[1], rel=1e-3)
    assert err[0] < 0.95 * err[2]
    # the tables are built where they speed up a beam and are not too large to hold with the model
    assert c._faiss().use_beam_LUT == 1
    from embcompress.compressors.rq import RQ

    assert not RQ(m=6)._beam_tables and RQ(m=64, beam=4)._beam_tables and not RQ(m=65, beam=4)._beam_tables


@pytest.mark.parametrize("spec", ["rq:6:beam=4", "pca:40+rq:6:beam=4"])
def test_loading_builds_no_beam_tables(spec, code_data, tmp_path):
    """Loading checks the arrays by encoding a probe; that probe's quantizer is not kept, so a server that
    loads a model only to score codes never holds the beam tables (296 MB at 48 codebooks of 384-d).
    The first real encode builds them, and gives the fitted model's codes."""
    from embcompress import load

    D, _ = code_data
    c = from_spec(spec).fit(D)
    c.save(tmp_path / "m")
    built = []
    compute = faiss.ResidualQuantizer.compute_codebook_tables
    faiss.ResidualQuantizer.compute_codebook_tables = lambda self: (built.append(1), compute(self))[1]
    try:
        back = load(tmp_path / "m")
        rq = back.stages_[-1] if hasattr(back, "stages_") else back
        assert rq.__dict__.get("_faiss_obj") is None and built == []
        np.testing.assert_array_equal(back.transform(D), c.transform(D))
        assert rq._faiss().use_beam_LUT == 1 and built == [1]
    finally:
        faiss.ResidualQuantizer.compute_codebook_tables = compute


@pytest.mark.parametrize("spec", ["rq:4", "rq:4:beam=4"])
def test_rq_training_settings_reach_faiss(spec, monkeypatch):
    """RQ's settings of the training (class attributes, not parameters) are what faiss trains with."""
    from embcompress.compressors import RQ

    seen = []
    train = faiss.ResidualQuantizer.train

    def spy(self, *args, **kwargs):
        seen.append((self.max_beam_size, self.cp.niter, self.cp.progressive_dim_steps, self.cp.max_points_per_centroid))
        return train(self, *args, **kwargs)

    monkeypatch.setattr(faiss.ResidualQuantizer, "train", spy)
    monkeypatch.setattr(RQ, "kmeans_max_points_per_centroid", 7)
    monkeypatch.setattr(RQ, "beam_kmeans_max_points_per_centroid", 5)
    monkeypatch.setattr(RQ, "progressive_steps", 3)
    from_spec(spec).fit(np.random.default_rng(0).standard_normal((600, 16)).astype(np.float32))
    beam = 4 if "beam" in spec else 1
    assert seen == [(beam, RQ.beam_kmeans_iterations if beam > 1 else RQ.kmeans_iterations, 3, 5 if beam > 1 else 7)]
