"""A candidate count chosen on a sample, scaled to the whole file.

A plan's candidate count is measured on the sample's documents; the file has more, and more of them come ahead
of each relevant one. How much more is the code's: measured on the big corpus (``benchmarks/serving/
bench_count_scaling.py``), the count that holds 98% of exact search's top 10 grows as documents ** 0.12 for 48 B
sign bits after a rotation (MiniLM) and as documents ** 0.80 for 6 B residual codes (mpnet-static). So the
growth is measured on the sample itself, for the code that won: the code is fitted on half the sample and
encodes the other half; over nested quarters, halves and all of that half, the rank under the code of each of
exact search's top k is taken at the quantile the chosen count holds, and the slope ``a`` of its logarithm
against the documents' is the exponent.
The count for the file is ``count * (file rows / sample rows) ** a``."""

from __future__ import annotations

import math

import numpy as np

from ..core.registry import from_spec
from ..search import Index
from ..search.exact import float_search

#: the nested shares of the held-out half the ranks are measured over
SHARES = (0.25, 0.5, 1.0)
#: the quantile read is left with at least this many ranks above it (the extreme is noise)
TAIL = 5


def code_ranks(index: Index, docs: np.ndarray, queries: np.ndarray, k: int) -> np.ndarray:
    """Where each of exact search's top ``k`` ranks in the first stage's order over all of ``index``'s
    documents (0: first), (queries, k)."""
    _, order = index.first_stage(queries, index.num_docs)
    position = np.empty_like(order)
    np.put_along_axis(position, order, np.arange(order.shape[1])[None, :].repeat(len(order), 0), 1)
    return np.take_along_axis(position, float_search(queries, docs, k)[1], 1)


def growth_exponent(spec: str, docs: np.ndarray, queries: np.ndarray, k: int, candidates: int) -> float:
    """How the candidates the first stage ``spec`` needs grow with the documents: the exponent ``a`` of
    ``count ~ documents ** a`` (in [0, 1]), measured out-of-sample on ``docs`` at the share of exact search's top
    ``k`` that ``candidates`` hold (see the module)."""
    half = len(docs) // 2
    model = from_spec(spec).fit(docs[:half])
    held = docs[half:]
    codes = model.transform(held)
    queries = np.asarray(queries, dtype=np.float32)
    sizes = [max(int(s * len(held)), 4 * k) for s in SHARES]
    ranks = [code_ranks(Index(codes[:m], compressor=model), held[:m], queries, k).ravel() for m in sizes]
    share = min(float(np.mean(ranks[-1] < candidates)), 1 - TAIL / ranks[-1].size)
    at = [float(np.quantile(r, share)) + 1 for r in ranks]
    slope = float(np.polyfit(np.log(sizes), np.log(at), 1)[0])
    return min(max(slope, 0.0), 1.0)


def scaled_count(candidates: int, sample_rows: int, total_rows: int, exponent: float, k: int) -> int:
    """``candidates`` measured over ``sample_rows`` documents, for ``total_rows``: times the ratio to the power
    ``exponent``, rounded up to a multiple of ``k``, never fewer than measured nor more than the rows."""
    if total_rows <= sample_rows:
        return candidates
    grown = candidates * (total_rows / sample_rows) ** exponent
    return int(min(max(candidates, math.ceil(grown / k) * k), total_rows))
