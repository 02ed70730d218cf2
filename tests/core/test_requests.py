"""core.requests: the options of a call as a dataclass, from keywords or given whole."""

from dataclasses import dataclass

import pytest

from embcompress.core.requests import from_keywords


@dataclass(frozen=True)
class _Data:
    ids: tuple = ()


@dataclass(frozen=True)
class _Options:
    folds: int = 2
    target: float | None = None


def test_keywords_go_to_the_class_that_names_them():
    data, opts = from_keywords("f", {"folds": 1, "ids": (1, 2)}, _Data, _Options)
    assert data == _Data(ids=(1, 2)) and opts == _Options(folds=1)


def test_a_given_value_is_used_whole_and_cannot_be_mixed_with_its_fields():
    given = _Options(target=0.9)
    assert from_keywords("f", {}, _Data, _Options, values=(None, given))[1] is given
    with pytest.raises(TypeError, match=r"f\(\) got both _Options and its fields folds"):
        from_keywords("f", {"folds": 3}, _Data, _Options, values=(None, given))


def test_an_unknown_keyword_names_what_is_taken():
    with pytest.raises(
        TypeError, match=r"f\(\) got unexpected keyword argument\(s\) fold; it takes: folds, ids, target"
    ):
        from_keywords("f", {"fold": 3}, _Data, _Options)


def test_rank_candidates_takes_its_options_as_keywords_or_as_values():
    import numpy as np

    from embcompress.report.recommend import RankOptions, rank_candidates

    X = np.random.default_rng(0).standard_normal((200, 16)).astype(np.float32)
    by_keywords = rank_candidates(X, 4, configs=["sq:2"], folds=1)
    by_value = rank_candidates(X, 4, options=RankOptions(configs=["sq:2"], folds=1))
    assert [r["config"] for r in by_keywords["ranking"]] == [r["config"] for r in by_value["ranking"]] == ["sq:2"]
    assert by_keywords["winner"]["retention"] == by_value["winner"]["retention"]
    with pytest.raises(TypeError, match="max_fit_second"):
        rank_candidates(X, 4, max_fit_second=1.0)
