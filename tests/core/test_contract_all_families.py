"""One contract suite over every registered compressor."""

from __future__ import annotations

import numpy as np
import pytest

import embcompress
from embcompress import NotFittedError, InputError, available, from_spec, load
from embcompress.core.registry import registered

from conftest import make_vectors

# One or more example specs per registered name; the first test checks none is forgotten.
#: each family's own examples (its ``examples`` declaration): a new family brings its cases with it
#: specs the contract suite runs, per family: a new family adds its own here (the test below checks every
#: registered family has some)
EXAMPLES = {
    "truncate": ["truncate:16", "truncate:16:renormalize=true"],
    "random_select": ["random_select:16:seed=3"],
    "random_projection": ["random_projection:16:seed=3"],
    "pca": ["pca:16", "pca:0.9"],
    "geopres": [
        "geopres:10:batch_size=64,min_steps=8,epochs=1",
        "geopres:10:loss=angular,batch_size=64,min_steps=8",
        "geopres:10:loss=rank,batch_size=64,min_steps=8",
    ],
    "autoencoder": ["autoencoder:10:batch_size=64,min_steps=8"],
    "rotate": ["rotate:seed=3", "rotate:center=true", "rotate:kind=hadamard,center=true"],
    "itq": ["itq:iters=5", "pca:24+itq:5+binary"],
    "int8": ["int8"],
    "binary": ["binary", "binary:mean"],
    "sq": ["sq:1", "sq:2", "sq:4", "pca:20+sq:2"],
    "pq": ["pq:8", "pq:4:nbits=4", "pca:24+pq:6"],
    "opq": ["opq:8", "opq:4:nbits=4"],
    "rq": ["rq:4", "rq:5:nbits=4"],
    "rabitq": ["rabitq", "rabitq:2", "rabitq:3", "pca:24+rabitq:4", "rabitq:1:rotation=hadamard"],
    "normalize": ["normalize", "normalize:center=true", "normalize:center=true+binary"],
    "pipeline": [
        "pca:24+binary",
        "random_projection:20+int8",
        "truncate:40+pca:9+binary",
        "geopres:12:batch_size=64,min_steps=6+binary",
    ],
}
ALL_SPECS = [s for specs in EXAMPLES.values() for s in specs]


def test_every_registered_compressor_has_examples():
    assert sorted(EXAMPLES) == available()
    assert all(EXAMPLES.values()), [n for n, e in EXAMPLES.items() if not e]
    for name, specs in EXAMPLES.items():  # each family's examples use it
        assert all(name in s for s in specs) or name == "pipeline", (name, specs)


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
    # both fits on the same thread count (tests/conftest.py: _steady_torch_threads), as on a machine whose load
    # does not change: torch may round differently on another count
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
    assert out.shape == (37, s.row_width)
    assert out.shape[1] * out.dtype.itemsize == s.nbytes
    assert s.metric in embcompress.core.base.METRICS
    assert s.kind == from_spec(spec).traits.output  # declared before the fit, what the fit makes
    # decoded codes live in the space the last stage quantizes (its input), floats are their own decoding
    assert c.decode(out).shape == (37, c.query_space.last.n_features_in_ if s.kind == "codes" else s.width)


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
    assert_same_up_to_rounding(parts, parts.transform(data), whole.transform(data), rtol=1e-4)


def assert_same_up_to_rounding(c, a, b, rtol):
    """Outputs ``a`` and ``b`` of ``c`` are equal up to float rounding: floats within ``rtol``, and
    codes, which a rounding can move across a quantization boundary, by at most one step in a
    handful of entries (or, for opaque codes, decoding alike in 99% of the rows)."""
    kind = c.output_spec.kind
    if kind == "float":
        np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol)
    elif kind == "codes":  # opaque bytes (with float factors inside for RaBitQ): compare what they decode to
        close = np.isclose(c.decode(a), c.decode(b), rtol=10 * rtol, atol=rtol).all(axis=1)
        assert close.mean() >= 0.99, f"{np.count_nonzero(~close)} of {len(close)} rows decode differently"
    else:
        differ = np.unpackbits(a ^ b) if kind == "bits" else np.abs(a.astype(np.int16) - b.astype(np.int16))
        assert differ.max() <= 1, f"codes differ by {differ.max()} steps"
        assert np.count_nonzero(differ) <= 0.002 * differ.size, (
            f"{np.count_nonzero(differ)} of {differ.size} codes differ"
        )


@pytest.mark.parametrize("spec", ALL_SPECS)
def test_rows_are_encoded_alone(spec, data):
    """A row's output depends on that row only: not on the order of the batch, nor on its company.
    The match is up to float32 rounding: a matmul's SIMD path, and so the last bit of a sum, can
    depend on where a row sits in memory. This replaces scikit-learn's
    check_methods_sample_order_invariance, which asks for 1e-7 on float32 outputs."""
    c = from_spec(spec).fit(data)
    perm = np.random.default_rng(5).permutation(len(data))
    whole = c.transform(data)
    assert_same_up_to_rounding(c, c.transform(data[perm]), whole[perm], rtol=1e-5)
    alone = np.concatenate([c.transform(data[i : i + 1]) for i in range(0, len(data), 37)])
    assert_same_up_to_rounding(c, alone, whole[::37], rtol=1e-5)


# ---- the scikit-learn estimator contract ---------------------------------------------------------
sklearn = pytest.importorskip("sklearn")

#: one spec per registered name, at widths that fit scikit-learn's small check data (a few features)
#: a spec per family for scikit-learn's estimator checks, which fit on a few rows of 1 to 5 columns
SKLEARN_SPECS = {
    "truncate": "truncate:1",
    "random_select": "random_select:1",
    "random_projection": "random_projection:1",
    "pca": "pca:1",
    "geopres": "geopres:1:batch_size=16,min_steps=2,epochs=1",
    "autoencoder": "autoencoder:1:batch_size=16,min_steps=2,epochs=1",
    "rotate": "rotate:center=true",
    "itq": "itq:iters=3",
    "int8": "int8",
    "binary": "binary:mean",
    "sq": "sq:2",
    "pq": "pq:1:nbits=4",
    "opq": "opq:1:nbits=4",
    "rq": "rq:2:nbits=4",
    "rabitq": "rabitq:2",
    "normalize": "normalize:center=true",
    "pipeline": "pca:1+binary",
}
#: checks that do not apply, and why
NOT_APPLICABLE = {
    "check_estimators_dtypes": "integer input is refused on purpose: embeddings are float16/32/64",
    "check_dtype_object": "object arrays are refused on purpose (ragged rows are an error, not data)",
    "check_transformer_preserve_dtypes": "outputs are codes (uint8, int8) or float32 by design",
    "check_methods_sample_order_invariance": "asks for rtol 1e-7 on float32 outputs, which the last bit of a SIMD "
    "sum misses by chance; test_rows_are_encoded_alone checks it at 1e-5",
}
#: learned maps train and validate on at least 20 rows and product quantizers train 16 centroids
#: per slice (nbits=4) from at least 16; these checks fit on fewer
TOO_FEW_ROWS = {"check_n_features_in_after_fitting", "check_estimators_nan_inf", "check_fit2d_1feature"}


def test_every_registered_compressor_faces_sklearn_checks():
    assert sorted(SKLEARN_SPECS) == available()
    assert all(SKLEARN_SPECS.values()), [n for n, s in SKLEARN_SPECS.items() if not s]


@pytest.mark.parametrize("name", sorted(SKLEARN_SPECS))
def test_sklearn_estimator_checks(name):
    import warnings

    from sklearn.utils.estimator_checks import check_estimator

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = check_estimator(from_spec(SKLEARN_SPECS[name]), on_fail=None)
    skip = set(NOT_APPLICABLE) | (TOO_FEW_ROWS if name in ("geopres", "autoencoder", "pq", "opq", "rq") else set())
    failed = {
        r["check_name"]: str(r["exception"])[:200]
        for r in results
        if r["status"] == "failed" and r["check_name"] not in skip
    }
    passed = {r["check_name"] for r in results if r["status"] == "passed"}
    assert not failed, failed
    for essential in (
        "check_estimator_cloneable",
        "check_get_params_invariance",
        "check_set_params",
        "check_fit_idempotent",
        "check_transformers_unfitted",
        "check_n_features_in",
        "check_estimators_pickle",
        "check_dont_overwrite_parameters",
        "check_transformer_general",
    ):
        assert essential in passed, essential


@pytest.mark.parametrize("spec", ALL_SPECS)
def test_clone_and_params(spec, data):
    from sklearn.base import clone

    c = from_spec(spec).fit(data)
    fresh = clone(c)
    assert type(fresh) is type(c) and not fresh.is_fitted
    assert fresh.get_params(deep=False).keys() == c.get_params(deep=False).keys()
    np.testing.assert_array_equal(fresh.fit(data, None).transform(data), c.transform(data))
    np.testing.assert_array_equal(from_spec(spec).fit_transform(data, None), c.transform(data))
    assert fresh.set_params() is fresh


def test_nested_params_of_a_chain(data):
    c = from_spec("truncate:40+pca:9+binary")
    deep = c.get_params(deep=True)
    assert deep["stages__0__dim"] == 40 and deep["stages__1__dim"] == 9 and deep["stages__2__threshold"] == "zero"
    c.set_params(stages__1__dim=5, stages__2__threshold="mean")
    assert c.fit(data).output_spec.width == 5 and c.stages_[2].threshold == "mean"
    assert c.stages[1].dim == 5 and not c.stages[1].is_fitted  # the parameter is never fitted in place
    c.set_params(stages__0=embcompress.Truncate(dim=30), stages__0__renormalize=True)
    assert c.stages[0].dim == 30 and c.stages[0].renormalize is True
    with pytest.raises(InputError, match="no parameter 'stages__7__dim'"):
        c.set_params(stages__7__dim=3)
    with pytest.raises(InputError, match="no parameter 'width'; valid: dim, renormalize"):
        embcompress.Truncate().set_params(width=3)


def test_steps_of_a_sklearn_pipeline():
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GridSearchCV
    from sklearn.pipeline import make_pipeline

    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 600)
    X = (rng.standard_normal((600, 32)) + y[:, None] * 0.8).astype(np.float32)
    for step in (embcompress.PCA(dim=8), embcompress.Truncate(dim=16), from_spec("pca:16+binary"), embcompress.Int8()):
        pipe = make_pipeline(step, LogisticRegression(max_iter=500)).fit(X[:500], y[:500])
        assert pipe.score(X[500:], y[500:]) > 0.8, step
    X[:, :8] = rng.standard_normal((600, 8))  # no signal in the first 8 dimensions
    search = GridSearchCV(
        make_pipeline(embcompress.Truncate(dim=4), LogisticRegression()), {"truncate__dim": [4, 16]}, cv=2
    ).fit(X, y)
    assert search.best_params_["truncate__dim"] == 16


def test_every_compressor_module_registers_its_classes():
    """A compressor file whose class is not registered (forgotten @register) fails here."""
    import importlib
    import inspect
    import pkgutil

    import embcompress.compressors as pkg
    from embcompress.core.base import Compressor
    from embcompress.core.registry import get

    modules = [m.name for m in pkgutil.iter_modules(pkg.__path__) if not m.name.startswith("_")]
    assert modules
    for name in modules:
        mod = importlib.import_module(f"embcompress.compressors.{name}")
        classes = [
            c
            for _, c in inspect.getmembers(mod, inspect.isclass)
            if issubclass(c, Compressor) and c.__module__ == mod.__name__ and c.name
        ]
        assert classes, f"embcompress/compressors/{name}.py defines no named compressor"
        for cls in classes:
            assert get(cls.name) is cls, f"{cls.__name__} in {name}.py is not registered"


def test_a_family_fitted_from_block_statistics_writes_its_fit_once():
    """Its fit is BlockStats' own: the statistics of the batches, merged, then ``_fit_stats`` (no second
    version of the fit beside the statistics), and a fit over batches equals one from the same blocks. PCA
    alone streams its batches around one shift (the sums :meth:`_block_stats` makes of the rows at once:
    the same helper, the same bytes as before), where blocks, each around its own mean, are merged."""
    from embcompress.core.capabilities import BlockStats

    families = [cls for cls in registered() if issubclass(cls, BlockStats)]
    assert {c.name for c in families} >= {"pca", "int8", "binary", "rabitq", "rotate", "normalize"}
    for cls in families:
        own = [k.__name__ for k in cls.__mro__[: cls.__mro__.index(BlockStats)] if "_fit" in vars(k)]
        assert own == (["PCA"] if cls.name == "pca" else []), f"{cls.name}: _fit written again in {own}"
    X = make_vectors(3000, 24, seed=5)
    blocks = np.array_split(X, 4)
    for spec in (
        "pca:8",
        "int8",
        "binary:mean",
        "rabitq:2",
        "rotate:center=true",
        "binary:threshold=zero,decoder=levels",
    ):
        fitted = from_spec(spec).fit_batches(blocks)
        stats = [from_spec(spec)._block_stats(b) for b in blocks]
        merged = from_spec(spec).fit_from_block_stats(stats, 24, lambda: iter(blocks))  # binary's levels: first rows
        if spec.startswith("pca"):  # one shift or one per block: equal to float rounding
            np.testing.assert_allclose(fitted.transform(X), merged.transform(X), rtol=1e-4, atol=1e-5)
            whole = from_spec(spec).fit_from_stats(from_spec(spec)._block_stats(X), 24)  # the rows at once
            np.testing.assert_array_equal(from_spec(spec).fit(X).transform(X), whole.transform(X))
            continue
        np.testing.assert_array_equal(fitted.transform(X), merged.transform(X), err_msg=spec)


def test_every_registered_family_has_contract_examples_and_an_sklearn_spec():
    names = {cls.name for cls in registered()}
    assert names <= {n for n, specs in EXAMPLES.items() if specs}, names - set(EXAMPLES)
    assert names <= {n for n, s in SKLEARN_SPECS.items() if s}, names - set(SKLEARN_SPECS)


def test_each_family_declares_its_capabilities_in_one_frozen_traits_value():
    """What search, streaming and export read of a family is its traits: the scans, the serving targets,
    where its state lives; each mixin adds its part to its parent's (as scikit-learn's tags)."""
    import dataclasses

    from embcompress.core.specs import Traits

    t = {
        name: from_spec(spec).traits
        for name, spec in {
            "sq": "sq:2",
            "rabitq": "rabitq:2",
            "binary": "binary",
            "pq": "pq:4",
            "int8": "int8",
            "pca": "pca:4",
            "truncate": "truncate:4",
            "chain": "pca:4+binary",
        }.items()
    }
    assert all(isinstance(v, Traits) for v in t.values())
    with pytest.raises(dataclasses.FrozenInstanceError):
        t["sq"].affine = True
    assert t["sq"].scans == {"tables", "dense"} and t["rabitq"].scans == {"tables", "dense", "planes"}
    assert t["binary"].scans == {"rerank_tables"} and t["pca"].scans == frozenset()
    assert t["pq"].exports == ("faiss",) and t["sq"].exports == ()
    assert t["int8"].state_in_file and t["int8"].fused_finite_check and t["int8"].fit.stats_per_batch
    assert t["pca"].affine and t["pca"].fit.block_stats and not t["pca"].fit.stats_per_batch
    assert t["truncate"].state_in_file and not t["truncate"].fit.learns
    assert [t[n].output for n in ("pca", "int8", "binary", "sq", "rabitq", "chain")] == [
        "float",
        "int8",
        "bits",
        "codes",
        "codes",
        "bits",
    ]
    with pytest.raises(ValueError, match="unknown output kind"):
        t["sq"].but(output="float16")
    assert from_spec("binary").fit_tags == t["binary"].fit  # the old name reads the same tags
    assert t["chain"].fit.learns and t["chain"].scans == frozenset()  # a chain's scans are its last stage's
    with pytest.raises(ValueError, match="unknown scans"):
        t["sq"].but(scans={"graph"})
