"""Few-bit scalar codes: Lloyd levels, packing, and bits against recall."""

from __future__ import annotations

import numpy as np
import pytest

from embcompress import from_spec
from embcompress.compressors.sq import lloyd_levels
from embcompress.search import Index, float_search
from embcompress.search.adc import adc_scores

from conftest import code_recall as recall

faiss = pytest.importorskip("faiss")


def test_lloyd_levels_beat_uniform_levels():
    X = np.random.default_rng(0).standard_normal((20000, 3)).astype(np.float32)
    lv = lloyd_levels(X, 4, 200)
    # the Lloyd-Max 2-bit quantizer of a standard normal: +-0.4528, +-1.510 (up to sampling noise)
    for j in range(3):
        np.testing.assert_allclose(np.sort(lv[j]), [-1.510, -0.4528, 0.4528, 1.510], atol=0.05)


@pytest.mark.parametrize("bits", [1, 2, 4])
def test_sq_codes_pack_and_decode(bits, code_data):
    D, Q = code_data
    c = from_spec(f"sq:{bits}").fit(D)
    codes = c.transform(D)
    assert codes.shape == (len(D), 48 * bits // 8) and c.output_spec.kind == "codes"
    dec = c.decode(codes)
    assert dec.shape == D.shape
    # every decoded value is its column's level nearest to the original value
    nearest = np.abs(D[:, :, None] - c.levels_[None]).argmin(axis=2)
    np.testing.assert_array_equal(
        dec, np.take_along_axis(c.levels_[None].repeat(len(D), 0), nearest[:, :, None], 2)[:, :, 0]
    )
    np.testing.assert_allclose(adc_scores(c.lookup_tables(Q), codes), Q @ dec.T, rtol=1e-4, atol=1e-5)


def test_sq_bits_trade_size_for_recall(code_data):
    D, Q = code_data
    exact = float_search(Q, D, 10)[1]
    r = [
        recall(Index(c.transform(D), compressor=c).search(Q, 10).rows, exact)
        for c in (from_spec(f"sq:{b}").fit(D) for b in (1, 2, 4))
    ]
    assert r[0] < r[1] < r[2] and r[2] > 0.65, r
