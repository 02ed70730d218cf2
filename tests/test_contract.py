"""One contract suite over every registered compressor."""

from __future__ import annotations

import numpy as np
import pytest

import embcompress
from embcompress import NotFittedError, InputError, available, from_spec, load

from conftest import make_vectors

# One or more example specs per registered name; the first test checks none is forgotten.
EXAMPLES = {
    "truncate": ["truncate:16", "truncate:16:renormalize=true"],
    "random_select": ["random_select:16:seed=3"],
    "random_projection": ["random_projection:16:seed=3"],
    "pca": ["pca:16", "pca:0.9"],
    "binary": ["binary", "binary:mean"],
    "int8": ["int8"],
    "pipeline": ["pca:24+binary", "random_projection:20+int8", "truncate:40+pca:9+binary", "geopres:12:batch_size=64,min_steps=6+binary"],
    # tiny training budgets: the contract, not the quality, is tested here (see test_geopres.py)
    "geopres": ["geopres:10:batch_size=64,min_steps=8,epochs=1", "geopres:10:loss=angular,batch_size=64,min_steps=8",
                "geopres:10:loss=rank,batch_size=64,min_steps=8"],
    "autoencoder": ["autoencoder:10:batch_size=64,min_steps=8"],
}
ALL_SPECS = [s for specs in EXAMPLES.values() for s in specs]


def test_every_registered_compressor_has_examples():
    assert sorted(EXAMPLES) == available()


@pytest.fixture(scope="module")
def data():
    return make_vectors(400, 48, seed=1)


@pytest.mark.parametrize("spec", ALL_SPECS)
def test_fit_returns_self(spec, data):
    c = from_spec(spec)
    assert c.fit(data) is c


@pytest.mark.parametrize("spec", ALL_SPECS)
def test_transform_before_fit_fails(spec, data):
    with pytest.raises(NotFittedError, match="not fitted"):
        from_spec(spec).transform(data)


@pytest.mark.parametrize("spec", ALL_SPECS)
def test_init_only_stores_params(spec):
    c = from_spec(spec)
    assert not [k for k in vars(c) if k.endswith("_")], "fitted state must not exist before fit"
    assert set(c.get_params(deep=False)) == set(vars(c))


@pytest.mark.parametrize("spec", ALL_SPECS)
def test_same_seed_same_output(spec, data):
    a = from_spec(spec).fit(data).transform(data)
    b = from_spec(spec).fit(data).transform(data)
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("spec", ALL_SPECS)
def test_save_load_round_trip_identical(spec, data, tmp_path):
    c = from_spec(spec).fit(data)
    c.save(tmp_path / "m")
    c2 = load(tmp_path / "m")
    assert type(c2) is type(c)
    np.testing.assert_array_equal(c2.transform(data), c.transform(data))
    assert embcompress.describe(c2)["fingerprint"] == embcompress.describe(c)["fingerprint"]


@pytest.mark.parametrize("spec", ALL_SPECS)
def test_declared_output_holds(spec, data):
    c = from_spec(spec).fit(data)
    out = c.transform(data[:37])
    s = c.output_spec
    assert out.dtype == np.dtype(s.dtype)
    assert out.shape == (37, s.nbytes if s.kind == "bits" else s.width)
    assert out.shape[1] * out.dtype.itemsize == s.nbytes
    assert s.metric in embcompress.base.METRICS
    assert c.decode(out).shape == (37, s.width)


@pytest.mark.parametrize("spec", ALL_SPECS)
def test_wrong_width_is_refused(spec, data):
    c = from_spec(spec).fit(data)
    with pytest.raises(InputError, match="fitted on 48"):
        c.transform(data[:, :40])


@pytest.mark.parametrize("spec", ALL_SPECS)
def test_refits_cleanly(spec, data):
    c = from_spec(spec).fit(data[:, :40])
    c.fit(data)
    assert c.n_features_in_ == 48
    assert c.transform(data).shape[0] == len(data)


@pytest.mark.parametrize("spec", ALL_SPECS)
def test_batches_equal_single_fit(spec, data):
    """Fitting over batches learns the state one fit learns. The match is up to float rounding
    (a matmul over a 1-row batch sums in another order than over 400 rows), so codes may differ
    where a value sits exactly on a quantization boundary: by one step, in a handful of entries."""
    whole = from_spec(spec).fit(data)
    parts = from_spec(spec).fit_batches([data[:150], data[150:151], data[151:]])
    _, state_whole = whole._get_state()
    _, state_parts = parts._get_state()
    assert sorted(state_parts) == sorted(state_whole)
    for name in state_whole:
        np.testing.assert_allclose(state_parts[name], state_whole[name], rtol=1e-4, atol=1e-5, err_msg=name)
    a, b = parts.transform(data), whole.transform(data)
    kind = whole.output_spec.kind
    if kind == "float":
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)
    else:
        differ = np.unpackbits(a ^ b) if kind == "bits" else np.abs(a.astype(np.int16) - b.astype(np.int16))
        assert differ.max() <= 1, f"codes differ by {differ.max()} steps"
        assert np.count_nonzero(differ) <= 0.002 * differ.size, f"{np.count_nonzero(differ)} of {differ.size} codes differ"
