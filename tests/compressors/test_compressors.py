"""Mathematical properties of each compressor, and agreement with reference implementations."""

from __future__ import annotations

import numpy as np
import pytest
from sentence_transformers.util.quantization import quantize_embeddings
from sklearn.decomposition import PCA as SkPCA

from embcompress import Binary, InputError, Int8, PCA, Pipeline, RandomProjection, RandomSelect, Truncate, from_spec
from embcompress.compressors import pack_bits, unpack_signs

from conftest import make_vectors, write_parquet


@pytest.mark.parametrize("d", [1, 7, 8, 9, 97, 384])
def test_binary_byte_identical_to_sentence_transformers(d):
    X = make_vectors(64, d, seed=d, normalize=False)
    X[0, 0] = 0.0  # exactly zero maps to bit 0 in both
    ours = Binary().fit(X).transform(X)
    np.testing.assert_array_equal(ours, quantize_embeddings(X, precision="ubinary"))


def test_pack_kernel_is_built():
    from embcompress.compressors.binary import pack_kernel

    assert pack_kernel() in ("avx2", "portable"), (
        "the C packing kernel should build here (gcc is on every machine of this project)"
    )


@pytest.mark.parametrize("portable", [False, True])
@pytest.mark.parametrize("d", [1, 7, 8, 9, 15, 16, 17, 97, 1024])
def test_pack_kernel_equals_numpy_and_finds_non_finite(d, portable):
    """Both C paths (AVX2 where the CPU has it, and the portable loop) give numpy.packbits' bytes,
    for the sign and for per-dimension thresholds, and report NaN, inf and values beyond +-MAX_ABS
    in any lane, tail included."""
    from embcompress.compressors.binary import _pack

    X = make_vectors(50, d, seed=d, normalize=False)
    X[0], X[1] = 0.0, -0.0  # zeros of both signs map to bit 0
    t = make_vectors(1, d, seed=d + 1, normalize=False)[0]
    for thr in (np.zeros(1, np.float32), t):
        out = np.empty((50, (d + 7) // 8), np.uint8)
        assert _pack.pack(X, thr, d, out, portable)
        np.testing.assert_array_equal(out, np.packbits(X > thr, axis=-1))
    from embcompress.core.checks import MAX_ABS

    edge = np.full((3, d), MAX_ABS, np.float32) * np.float32(0.999999)  # the largest accepted magnitude
    assert _pack.pack(edge, t, d, np.empty((3, (d + 7) // 8), np.uint8), portable)
    assert _pack.pack(-edge, t, d, np.empty((3, (d + 7) // 8), np.uint8), portable)
    for bad in (np.nan, np.inf, -np.inf, 3e38, -2 * MAX_ABS):
        for row, col in ((0, 0), (49, d - 1), (17, d // 2)):
            Y = X.copy()
            Y[row, col] = bad
            assert not _pack.pack(Y, t, d, out, portable), (bad, row, col)


@pytest.mark.parametrize("portable", [False, True])
@pytest.mark.parametrize("d", [1, 3, 4, 5, 97, 1024])
def test_level_sums_kernel_equals_numpy(d, portable):
    """The C kernel of binary's level statistics (both paths) gives numpy's sums bit for bit (the
    same order of additions per dimension, in double; for one dimension numpy's einsum orders the
    squares' sum otherwise); values equal to the threshold count below
    it, as in numpy; the statistics add to what the arrays held."""
    from embcompress.compressors import binary

    X = make_vectors(300, d, seed=d, normalize=False) * np.linspace(0.01, 50, d, dtype=np.float32)
    t = make_vectors(1, d, seed=d + 1, normalize=False)[0]
    X[3] = t  # exactly at the threshold: below
    saved, binary._pack = binary._pack, None
    try:
        want = binary.level_sums(X, t)
    finally:
        binary._pack = saved
    total, hi, sq, n_hi = np.zeros(d), np.zeros(d), np.zeros(d), np.zeros(d, np.int64)
    binary._pack.level_sums(X, t, d, total, hi, sq, n_hi, portable)
    np.testing.assert_array_equal(np.vstack([total - hi, hi]), want[0])
    np.testing.assert_array_equal(np.vstack([len(X) - n_hi, n_hi]), want[1])
    if d > 1:
        np.testing.assert_array_equal(sq, want[2])
    else:  # numpy's einsum sums one column's squares in another order
        np.testing.assert_allclose(sq, want[2], rtol=1e-12)
    binary._pack.level_sums(X[:100], t, d, total, hi, sq, n_hi, portable)  # adds on
    assert n_hi.sum() == want[1][1].sum() + (X[:100] > t).sum()
    with pytest.raises(ValueError, match="d float64"):
        binary._pack.level_sums(X, t, d, total[:-1] if d > 1 else np.zeros(2), hi, sq, n_hi)


def test_pack_bits_non_contiguous_and_float64_use_numpy_path():
    X = make_vectors(40, 30, normalize=False)
    for Y in (X[:, ::2], X.astype(np.float64), X[::3]):
        np.testing.assert_array_equal(pack_bits(Y), np.packbits(Y > 0, axis=-1))


def test_binary_rows_do_not_bleed_and_padding_is_zero():
    X = np.full((3, 9), -1.0, dtype=np.float32)
    X[1] = 1.0
    codes = Binary().fit(X).transform(X)
    assert codes.tolist() == [[0, 0], [255, 128], [0, 0]]  # 9 bits: 8 ones, then 1 + 7 zero padding


def test_binary_msb_first():
    X = np.array([[1, -1, -1, -1, -1, -1, -1, 1]], dtype=np.float32)
    assert Binary().fit(X).transform(X).tolist() == [[0b10000001]]


def test_binary_sign_decoder_is_signs():
    X = make_vectors(20, 13, normalize=False)
    b = Binary(decoder="sign").fit(X)
    np.testing.assert_array_equal(b.decode(b.transform(X)), np.where(X > 0, 1.0, -1.0))
    np.testing.assert_array_equal(unpack_signs(pack_bits(X), 13), np.where(X > 0, 1.0, -1.0))


@pytest.mark.parametrize("threshold", ["zero", "mean"])
def test_binary_levels_are_the_one_bit_lloyd_max_quantizer(threshold):
    """Each dimension decodes to the mean of the fitted values on its side of the threshold, which
    is the least-squares 1-bit reconstruction: no other pair of levels has a lower error."""
    X = make_vectors(500, 9, normalize=False) * np.linspace(0.1, 3, 9, dtype=np.float32) + 0.02
    b = Binary(threshold=threshold, decoder="levels").fit(X)
    above = X > (0 if threshold == "zero" else X.mean(axis=0))
    expect_hi = np.array([X[above[:, j], j].mean() for j in range(9)])
    expect_lo = np.array([X[~above[:, j], j].mean() for j in range(9)])
    np.testing.assert_allclose(b.levels_, np.vstack([expect_lo, expect_hi]), rtol=1e-5, atol=1e-6)
    dec = b.decode(b.transform(X))
    err = ((dec - X) ** 2).sum()
    for nudge in (0.95, 1.05):  # moving the levels only adds error
        assert ((b.levels_[0] + (b.levels_[1] - b.levels_[0]) * above * nudge - X) ** 2).sum() > err
    # the codes do not depend on the decoder
    np.testing.assert_array_equal(b.transform(X), Binary(threshold=threshold, decoder="sign").fit(X).transform(X))


def test_binary_auto_decoder_takes_levels_on_centred_input_and_signs_otherwise(tmp_path):
    """decoder="auto" (the default) decodes with the fitted levels where the input is centred (after
    PCA or a centred rotation) and with +-1 where it is not (raw embeddings share a large mean),
    the same decision in memory, through a file's block statistics, and after a save and load."""
    from embcompress.core.persist import load, save
    from embcompress.engines.local import fit_file

    rng = np.random.default_rng(0)
    X = rng.standard_normal((3000, 24)).astype(np.float32)
    raw = X + 0.8  # |mean| is 0.8 * sqrt(24) against an RMS norm of sqrt(24 * 1.64): a share of 0.62
    for data, expect in ((X - X.mean(axis=0), "levels"), (raw, "sign")):
        b = Binary().fit(data)
        assert b.decoder_ == expect
        alone = Binary(decoder=expect).fit(data)
        np.testing.assert_array_equal(b.levels_, alone.levels_)
        np.testing.assert_array_equal(b.decode(b.transform(data[:50])), alone.decode(alone.transform(data[:50])))
        write_parquet(tmp_path / f"{expect}.parquet", data, row_group_size=500)
        streamed = fit_file(Binary(), tmp_path / f"{expect}.parquet")
        assert streamed.decoder_ == expect
        np.testing.assert_allclose(streamed.levels_, b.levels_, rtol=1e-5, atol=1e-6)
        back = load(save(b, tmp_path / f"model-{expect}"))
        assert back.decoder_ == expect and back.decoder == "auto"
        np.testing.assert_array_equal(back.levels_, b.levels_)
    # in a chain the centred rotation comes first, so the bits decode with the levels
    chain = from_spec("rotate:center=true+binary").fit(raw)
    assert chain.stages_[1].decoder_ == "levels" and Binary().fit(raw).decoder_ == "sign"
    # with the mean threshold the levels come after the statistics, by the same rule
    assert Binary(threshold="mean").fit(raw).decoder_ == "sign"
    assert Binary(threshold="mean").fit(X - X.mean(axis=0)).decoder_ == "levels"


def test_binary_saved_before_the_auto_decoder_loads_with_its_own(tmp_path):
    """A model saved before decoder_ existed (decoder="levels" then the default) loads with it."""
    import json

    from embcompress.core.persist import load, save

    X = make_vectors(200, 16, normalize=False)
    path = save(Binary(decoder="levels").fit(X), tmp_path / "m")
    files = [f for f in path.iterdir() if f.suffix == ".json"]
    changed = 0
    for f in files:
        text = f.read_text()
        if '"decoder_"' in text:
            doc = json.loads(text)
            doc.get("state", doc).pop("decoder_", None)
            for v in doc.values():
                if isinstance(v, dict):
                    v.pop("decoder_", None)
            f.write_text(json.dumps(doc))
            changed += 1
    assert changed == 1 and '"decoder_"' not in "".join(f.read_text() for f in files)
    back = load(path)
    assert back.decoder_ == "levels"
    np.testing.assert_array_equal(back.levels_, Binary(decoder="levels").fit(X).levels_)


def test_binary_mean_threshold_balances_bits():
    X = np.abs(make_vectors(2000, 16, normalize=False)) + 1.0  # all positive: sign gives all ones
    assert Binary(decoder="sign").fit(X).decode(Binary().fit(X).transform(X)).min() == 1.0
    b = Binary(threshold="mean").fit(X)
    ones = np.unpackbits(b.transform(X), axis=1).mean(axis=0)
    assert np.all((ones > 0.4) & (ones < 0.6))
    np.testing.assert_allclose(b.thresholds_, X.mean(axis=0), rtol=1e-5)


def test_binary_bad_threshold():
    with pytest.raises(InputError, match="zero, mean"):
        Binary(threshold="median").fit(make_vectors(10, 4))


def test_int8_matches_sentence_transformers_with_same_ranges():
    X = make_vectors(300, 33, normalize=False)
    q = Int8().fit(X)
    np.testing.assert_array_equal(q.transform(X), quantize_embeddings(X, precision="int8", ranges=q.ranges_))
    np.testing.assert_array_equal(q.ranges_, np.vstack([X.min(0), X.max(0)]))


def test_int8_clips_outside_calibrated_range_and_decodes_close():
    X = make_vectors(300, 8, normalize=False)
    q = Int8().fit(X)
    far = np.vstack([X.max(0) + 10, X.min(0) - 10])
    codes = q.transform(far)
    assert codes[0].tolist() == [127] * 8 and codes[1].tolist() == [-128] * 8
    step = (q.ranges_[1] - q.ranges_[0]) / 255
    err = np.abs(q.decode(q.transform(X)) - X)
    assert np.all(err <= step * 1.0001 + 1e-6)


def test_int8_constant_dimension_does_not_divide_by_zero():
    X = make_vectors(50, 4, normalize=False)
    X[:, 2] = 0.5
    codes = Int8().fit(X).transform(X)
    assert np.all(codes[:, 2] == -128)


def test_pca_matches_sklearn():
    rng = np.random.default_rng(0)
    X = (rng.standard_normal((2000, 30)) * np.linspace(5, 0.1, 30)).astype(np.float32) + 7.0
    ours = PCA(dim=10).fit(X)
    ref = SkPCA(n_components=10, svd_solver="full").fit(X.astype(np.float64))
    np.testing.assert_allclose(ours.explained_variance_ratio_[:10], ref.explained_variance_ratio_, rtol=1e-4)
    cos = np.abs(np.sum(ours.components_ * ref.components_, axis=1))
    np.testing.assert_allclose(cos, 1.0, atol=1e-4)  # same directions up to sign
    np.testing.assert_allclose(np.abs(ours.transform(X)), np.abs(ref.transform(X)), atol=2e-3)


def test_pca_variance_target_picks_fewest_components():
    rng = np.random.default_rng(0)
    Z = rng.standard_normal((3000, 5)).astype(np.float32)
    X = Z @ rng.standard_normal((5, 40)).astype(np.float32) + 0.05 * rng.standard_normal((3000, 40)).astype(np.float32)
    p = PCA(variance=0.95).fit(X)  # data with intrinsic dimension 5
    assert p.output_spec.width <= 5
    assert PCA(variance=0.99999).fit(X).output_spec.width > 5
    ratio = p.explained_variance_ratio_
    k = p.output_spec.width
    assert ratio[:k].sum() >= 0.95 and ratio[: k - 1].sum() < 0.95


def test_pca_is_stable_for_large_offsets():
    rng = np.random.default_rng(0)
    X = (rng.standard_normal((5000, 4)) * [1, 0.5, 0.1, 0.01] + 1e3).astype(np.float32)
    p = PCA(dim=4).fit(X)
    np.testing.assert_allclose(
        p.eigenvalues_, np.var(X.astype(np.float64), axis=0, ddof=1)[np.argsort(-np.var(X, axis=0))], rtol=2e-2
    )


def test_fit_checks_parameters_before_counting_rows():
    """The fit frame reads a compressor's fit tags (its row minimum) only after its parameters are
    checked: a bad parameter is named, not a ValueError or AttributeError from the tags."""
    from embcompress.compressors import SQ, Pipeline

    X = make_vectors(50, 8)
    with pytest.raises(InputError, match="bits must be an integer"):
        SQ(bits="x").fit(X)
    with pytest.raises(InputError, match="non-empty list of compressors"):
        Pipeline(stages=[1, 2]).fit(X)
    with pytest.raises(InputError, match="sq needs at least 16 rows to fit, got 9"):
        SQ(bits=4).fit_batches([X[:4], X[4:9]])


def test_pca_needs_two_rows_and_one_target():
    with pytest.raises(InputError, match="at least 2 rows"):
        PCA(dim=1).fit(make_vectors(1, 4))
    with pytest.raises(InputError, match="exactly one"):
        PCA(dim=2, variance=0.5).fit(make_vectors(10, 4))
    with pytest.raises(InputError, match="out of range"):
        PCA(dim=5).fit(make_vectors(10, 4))


def test_random_projection_preserves_distances_within_jl_bound():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 2000)).astype(np.float32)
    Y = RandomProjection(dim=1000, seed=0).fit_transform(X)
    i, j = np.triu_indices(len(X), 1)
    before = np.sum((X[i] - X[j]) ** 2, axis=1)
    after = np.sum((Y[i] - Y[j]) ** 2, axis=1)
    ratio = after / before
    # eps = 0.25 needs dim >= 4 ln(60) / (eps^2/2 - eps^3/3) ~ 620 <= 1000
    assert ratio.min() > 0.75 and ratio.max() < 1.25
    assert abs(ratio.mean() - 1) < 0.02


def test_random_projection_seed_matters():
    X = make_vectors(10, 32)
    a = RandomProjection(dim=8, seed=1).fit_transform(X)
    b = RandomProjection(dim=8, seed=2).fit_transform(X)
    assert not np.allclose(a, b)


def test_random_select_picks_distinct_sorted_dims():
    X = make_vectors(10, 64)
    r = RandomSelect(dim=20, seed=5).fit(X)
    assert len(set(r.indices_.tolist())) == 20 and np.all(np.diff(r.indices_) > 0)
    np.testing.assert_array_equal(r.transform(X), X[:, r.indices_])


def test_truncate_and_renormalize():
    X = make_vectors(10, 16)
    X[3] = 0.0  # zero vector stays zero, no NaN
    np.testing.assert_array_equal(Truncate(dim=5).fit_transform(X), X[:, :5])
    Y = Truncate(dim=5, renormalize=True).fit_transform(X)
    norms = np.linalg.norm(Y, axis=1)
    assert np.allclose(np.delete(norms, 3), 1.0, atol=1e-6) and norms[3] == 0 and np.isfinite(Y).all()


def test_pipeline_fits_later_stages_on_earlier_output():
    X = make_vectors(500, 32, normalize=False) + 2.0
    p = from_spec("pca:8+binary:mean")
    p.fit(X)
    assert isinstance(p, Pipeline)
    Z = p.stages_[0].transform(X)
    np.testing.assert_allclose(p.stages_[1].thresholds_, Z.mean(axis=0), atol=1e-5)
    np.testing.assert_array_equal(p.transform(X), Binary(threshold="mean").fit(Z).transform(Z))


def test_pipeline_refuses_codes_before_last_stage():
    with pytest.raises(InputError, match="put it last"):
        from_spec("binary+pca:4").fit(make_vectors(20, 8))


def test_pipeline_from_one_shot_generator_fails_clearly_when_two_passes_needed():
    X = make_vectors(50, 8)
    gen = (b for b in [X[:25], X[25:]])
    with pytest.raises(InputError, match="more than one pass"):
        from_spec("pca:4+int8").fit_batches(gen)
    # a factory works
    from_spec("pca:4+int8").fit_batches(lambda: iter([X[:25], X[25:]]))


@pytest.mark.parametrize(
    "bad, message",
    [
        (np.array([[1.0, np.nan]], dtype=np.float32), "row 0 has a non-finite value"),
        (np.array([[1.0, 2.0], [np.inf, 0]], dtype=np.float32), "row 1 has a non-finite value"),
        (np.array([[1, 2]], dtype=np.int64), "only float16, float32 and float64"),
        (np.zeros(4, dtype=np.float32), "must be 2-D"),
        (np.zeros((0, 4), dtype=np.float32), "empty input"),
    ],
)
def test_bad_arrays_are_refused(bad, message):
    with pytest.raises(InputError, match=message):
        Binary().fit(bad)


def test_float16_and_float64_input_accepted():
    X = make_vectors(30, 12)
    for dt in (np.float16, np.float64):
        np.testing.assert_array_equal(Binary().fit(X.astype(dt)).transform(X.astype(dt)), Binary().fit(X).transform(X))


def test_threaded_path_matches_reference_and_names_bad_row(monkeypatch):
    monkeypatch.setenv("EMBCOMPRESS_NUM_THREADS", "2")
    X = make_vectors(20000, 24, normalize=False)  # above the per-thread threshold: 2 parts
    np.testing.assert_array_equal(Binary().fit(X).transform(X), quantize_embeddings(X, precision="ubinary"))
    q = Int8().fit(X)
    np.testing.assert_array_equal(q.transform(X), quantize_embeddings(X, precision="int8", ranges=q.ranges_))
    X[15001, 3] = -np.inf
    for c in (Binary().fit(X[:10]), q):
        with pytest.raises(InputError, match="row 15001 has a non-finite value"):
            c.transform(X)


@pytest.mark.parametrize(
    "spec", ["pca:2", "rotate", "rotate:kind=hadamard", "rabitq:1:rotation=hadamard", "itq+binary"]
)
def test_a_square_state_too_large_for_the_machine_is_one_clear_error(spec):
    X = np.random.default_rng(0).standard_normal((4, 1 << 20)).astype(np.float32)
    with pytest.raises(InputError, match="matrix .* more than half of this machine"):
        from_spec(spec).fit(X)
