"""The seam for code families (embcompress.core.capabilities): a family written in one module, with
the mixins that apply and one registration, is searched, saved, streamed, offered by
``recommend`` and the report, and fitted from merged block statistics, with no other file of
the package naming it. The family here lives in this test file only."""

from __future__ import annotations

import numpy as np
import pytest

from embcompress import InputError, from_spec, load
from embcompress.core.base import Compressor
from embcompress.core.specs import OutputSpec
from embcompress.core.capabilities import BlockStats, DenseScan
from embcompress.compressors._codes import byte_tables, pack_codes, unpack_codes
from embcompress.core.registry import _REGISTRY, register

from conftest import make_vectors


class Uniform4(BlockStats, DenseScan, Compressor):
    """4 bits per dimension on 16 evenly spaced levels between each dimension's fitted minimum and
    maximum: fitted from merged block statistics (min and max), scanned by tables or decoded."""

    name = "uniform4"
    _state_arrays = ("lo_", "hi_")

    @property
    def traits(self):  # min and max: cheap enough for every batch
        return super().traits.with_fit(stats_per_batch=True)

    def __init__(self, seed: int = 0):
        self.seed = seed

    def _block_stats(self, X):
        return {"lo": X.min(axis=0), "hi": X.max(axis=0)}

    @staticmethod
    def _merge_stats(a, b):
        return {"lo": np.minimum(a["lo"], b["lo"]), "hi": np.maximum(a["hi"], b["hi"])}

    def _fit_stats(self, stats, n_features):
        self.lo_, self.hi_ = stats["lo"].astype(np.float32), stats["hi"].astype(np.float32)

    def _levels(self):
        return (
            self.lo_[:, None] + (self.hi_ - self.lo_)[:, None] * np.linspace(0, 1, 16, dtype=np.float32)[None, :]
        ).astype(np.float32)

    def _transform(self, X):
        step = np.where(self.hi_ > self.lo_, (self.hi_ - self.lo_) / 15, 1).astype(np.float32)
        return pack_codes(np.clip(np.rint((X - self.lo_) / step), 0, 15).astype(np.uint8), 4)

    def decode(self, codes):
        self._check_fitted()
        idx = unpack_codes(np.asarray(codes, dtype=np.uint8), 4, self.n_features_in_)
        return np.take_along_axis(self._levels()[None], idx[:, :, None].astype(np.intp), axis=2)[:, :, 0]

    def lookup_tables(self, Q):
        return byte_tables(np.asarray(Q, dtype=np.float32), self._levels(), 4)

    def dense_codes(self):
        return "packed", 4, self._levels()

    def _output_spec(self):
        nbytes = (self.n_features_in_ * 4 + 7) // 8
        return OutputSpec(kind="codes", dtype="uint8", width=nbytes, nbytes=nbytes, metric="adc")


class Opaque(Compressor):
    """Codes whose family declares no scan: search refuses them by name."""

    name = "opaque_codes"

    def _fit(self, batches, n_features):
        pass

    def _transform(self, X):
        return (X > 0).astype(np.uint8)

    def _output_spec(self):
        return OutputSpec(
            kind="codes", dtype="uint8", width=self.n_features_in_, nbytes=self.n_features_in_, metric="adc"
        )


@pytest.fixture
def families():
    """Register the test families for one test, and offer Uniform4 for byte budgets (recommend's policy,
    one call), then forget them (the registry and the policies are global)."""
    from embcompress.report import candidates as cand

    for cls in (Uniform4, Opaque):
        register(cls)
    cand.offer(Uniform4, cand.BudgetPolicy(_uniform4_configs))
    yield
    cand._POLICIES.pop(Uniform4, None)
    for cls in (Uniform4, Opaque):
        _REGISTRY.pop(cls.name, None)


def _uniform4_configs(dim, budget, full):
    from embcompress.report.candidates import pca_prefix

    w = min(dim, 2 * budget)
    return [(f"{pca_prefix(w, dim)}uniform4", f"{pca_prefix(w, dim)}uniform4")] if w >= 2 else []


def test_a_family_from_one_module_is_searched_saved_and_streamed(families, tmp_path):
    from embcompress.search import Index

    X = make_vectors(600, 32, seed=3)
    Q = make_vectors(80, 32, seed=4)
    c = from_spec("pca:16+uniform4").fit(X)
    codes = c.transform(X)
    assert codes.shape == (600, 8) and c.output_spec.nbytes == 8
    # search: the table scan (one query) and the dense scan (a batch of 80) find what the decoded
    # vectors score highest
    idx = Index(codes, compressor=c, norm_power=0)  # scores: <q, x_hat>
    decoded = c.decode(codes)
    want = np.argsort(-(c.query_space.linear(Q) @ decoded.T), axis=1, kind="stable")[:, :5]
    for qs in (Q[:1], Q):
        rows = idx.search(qs, 5).rows
        agree = np.mean([len(set(a) & set(b)) / 5 for a, b in zip(rows, want[: len(qs)])])
        assert agree >= 0.95
    # saved and loaded without pickle, by its registered name
    c.save(tmp_path / "m")
    np.testing.assert_array_equal(load(tmp_path / "m").transform(X), codes)
    # a fit from merged block statistics equals the fit on all rows
    parts = from_spec("uniform4").fit_from_block_stats([Uniform4()._block_stats(b) for b in np.array_split(X, 5)], 32)
    whole = from_spec("uniform4").fit(X)
    assert parts.traits.fit.block_stats and parts.traits.fit.stats_per_batch
    assert parts.traits.scans == {"tables", "dense"}  # DenseScan codes are scanned by tables too
    np.testing.assert_array_equal(parts.lo_, whole.lo_)
    np.testing.assert_array_equal(parts.hi_, whole.hi_)


def test_recommend_and_the_report_offer_a_registered_family(families):
    from embcompress.report.candidates import candidates, code_families
    from embcompress.report.grid import validate
    from embcompress.report.recommend import rank_candidates

    assert Uniform4 in code_families()
    assert [c.config for c in candidates(32, 16, families=("uniform4",))] == ["uniform4"]
    assert [c.config for c in candidates(64, 8, families=("uniform4",))] == ["pca:16+uniform4"]
    X = make_vectors(500, 32, seed=5)
    res = rank_candidates(X, 16, configs=["uniform4", "pca:16+sq:4"])
    assert {r["config"] for r in res["ranking"]} == {"uniform4", "pca:16+sq:4"}
    # on isotropic vectors, 4 bits on every dimension keep most of the neighbours, and halving the
    # dimensions first loses most of them
    assert res["winner"]["config"] == "uniform4" and res["winner"]["retention"] > 0.7
    validate(X, code_families=("uniform4",))  # a known family for the report's --codes
    with pytest.raises(InputError, match="known: .*uniform4"):
        validate(X, code_families=("nope",))


def test_codes_without_a_scan_are_refused_by_search(families):
    from embcompress.search import Index

    X = make_vectors(50, 8, seed=6)
    c = from_spec("opaque_codes").fit(X)
    with pytest.raises(InputError, match="opaque_codes codes cannot be searched.*TableScan"):
        Index(c.transform(X), compressor=c)


def test_recommend_offers_a_half_byte_code_that_fills_the_budget():
    """The 4-bit (fast-scan) product code beside the one-byte one: 2 x budget slices, after PCA to a
    multiple of that count where it does not divide the width; only in recommend's full set."""
    pytest.importorskip("faiss")
    from embcompress.report.candidates import candidates

    def opq(dim, budget, full=True):
        return [c.config for c in candidates(dim, budget, families=("opq",), full=full)]

    assert opq(384, 12) == ["opq:12", "opq:24:nbits=4"]
    assert opq(256, 48) == ["opq:32", "pca:192+opq:96:nbits=4"]  # 48 B used, not 32
    assert opq(256, 6) == ["opq:4", "pca:252+opq:12:nbits=4"]
    assert opq(384, 12, full=False) == ["opq:12"]
    for dim, budget in ((256, 48), (256, 6), (100, 24)):
        spec = opq(dim, budget)[-1]
        comp = from_spec(spec).fit(make_vectors(300, dim, seed=1))
        assert comp.output_spec.nbytes == budget  # the whole budget, in codes the fast scan takes
