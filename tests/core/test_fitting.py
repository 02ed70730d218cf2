"""One fit recipe per stage, decided in one place (embcompress.core.fitting) and executed by both
engines: the recipe each kind of family gets."""

from __future__ import annotations

import numpy as np
import pytest

from embcompress import InputError, from_spec
from embcompress.core.fitting import StatsPass, FirstRows, Sample, Stream, WidthOnly, fit_recipe

from conftest import make_vectors


@pytest.mark.parametrize(
    "spec, max_rows, recipe",
    [
        ("truncate:8", None, WidthOnly()),
        ("rotate", None, WidthOnly()),
        ("binary:decoder=sign", None, WidthOnly()),
        ("int8", None, StatsPass(None, None, True)),
        ("pca:8", None, StatsPass(None, None, False)),
        ("rotate:center=true", None, StatsPass(None, None, True)),
        ("binary", None, StatsPass(65536, None, True)),  # zero threshold: the levels' sums of the first rows
        ("binary:mean", None, StatsPass(None, 65536, True)),  # the mean, then the levels of the first rows
        ("int8", 1000, StatsPass(1000, None, True)),
        ("sq:2", None, Sample(100_000)),
        ("itq:max_rows=500", None, Sample(500)),
        ("sq:2", 1000, FirstRows(1000)),
        ("rabitq", None, StatsPass(None, None, True)),  # the centroid: a mean
        ("pca:8+binary", None, Stream()),  # a chain as a whole streams; its stages are planned one by one
        ("pca:8+binary", 300, FirstRows(300)),
    ],
)
def test_recipe_of_each_kind_of_fit(spec, max_rows, recipe):
    assert fit_recipe(from_spec(spec), max_rows) == recipe


def test_a_chain_fits_its_stages_in_order_and_keeps_codes_last():
    X = make_vectors(400, 16)
    seen = []

    def fit_stage(stage, done):
        seen.append((stage.name, [s.name for s in done]))
        Y = X
        for s in done:
            Y = s.transform(Y)
        stage.fit(Y)

    chain = from_spec("pca:8+rotate+binary")
    assert chain.fit_stages(16, fit_stage) is chain
    assert seen == [("pca", []), ("rotate", ["pca"]), ("binary", ["pca", "rotate"])]
    np.testing.assert_array_equal(chain.transform(X), from_spec("pca:8+rotate+binary").fit(X).transform(X))
    with pytest.raises(InputError, match="stage 1 \\(binary\\) outputs bits codes.*put it last"):
        from_spec("binary+pca:4").fit_stages(16, fit_stage)
