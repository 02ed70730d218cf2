"""Which fitted model encodes which documents, so that codes are scored on documents their fit did not
see (:class:`CrossFit`), and the fitted models of one sample, each spec fitted once with its prefix
reused (:class:`FitCache`). The evaluation engine (:mod:`embcompress.evaluation.evaluate`) runs on these."""

from __future__ import annotations

import time
from typing import Any, Sequence

import numpy as np

from ..core._util import check_positive_int, sample_rows
from ..core.base import Compressor
from ..compressors import fit_together
from ..core.errors import InputError
from ..core.registry import from_spec, get
from ..search import Index, PartedIndex


class FitCache:
    """Fitted compressors by spec, fitted on ``docs``. A chain reuses its longest fitted prefix
    (``pca:96+binary`` fits only the binary stage when ``pca:96`` was fitted before). Keeps what
    each fit and encoding cost: ``fit_seconds[spec]`` (the stages fitted for it) and
    ``encoded[spec]`` (rows, seconds) over every encoding it ran."""

    def __init__(self, docs: np.ndarray):
        self.docs = docs
        self._fitted: dict[str, Compressor] = {}
        self._outputs: dict[str, np.ndarray] = {}  # float outputs of fitted prefixes, to fit later stages on
        # (spec, {id(documents): (documents, their codes)}): the encodings of the last spec
        self._last_codes: tuple[str, dict[int, tuple[np.ndarray, np.ndarray]]] | None = None
        self.fit_seconds: dict[str, float] = {}
        self.encoded: dict[str, tuple[int, float]] = {}
        self._together: dict[str, list[str]] = {}  # a first stage -> the specs fitted with it (plan)

    def prepare(self, specs: Sequence[str | None]) -> None:
        """Say which specs (None: float) will be fitted: the first stages of ``specs`` that train faster
        together (:meth:`~embcompress.core.base.Compressor.joint_fit_key`, GeoPres at several widths)
        are fitted together when the first of them is needed, each to the model it gets alone,
        and each is charged an equal share of the time."""
        groups: dict[Any, list[str]] = {}
        for first in dict.fromkeys(s.split("+")[0] for s in specs if s):
            key = from_spec(first).joint_fit_key()
            if key is not None and first not in self._fitted:
                groups.setdefault(key, []).append(first)
        for group in groups.values():
            if len(group) > 1:
                self._together.update({s: group for s in group})

    def encode(self, spec: str, docs: np.ndarray) -> np.ndarray:
        """``docs`` through the fitted ``spec``. The encodings of the last spec are kept, so that
        consecutive configurations of one spec on the same documents (its reranks, or several norm
        powers) encode them once; those of one spec, not all, to bound the memory."""
        if self._last_codes is None or self._last_codes[0] != spec:
            self._last_codes = (spec, {})
        kept = self._last_codes[1].get(id(docs))
        if kept is not None and kept[0] is docs:
            return kept[1]
        comp = self.fit(spec)
        t0 = time.perf_counter()
        codes = comp.transform(docs)
        rows, secs = self.encoded.get(spec, (0, 0.0))
        self.encoded[spec] = (rows + len(docs), secs + time.perf_counter() - t0)
        self._last_codes[1][id(docs)] = (docs, codes)
        return codes

    def fit(self, spec: str) -> Compressor:
        if spec in self._fitted:
            return self._fitted[spec]
        group = self._together.get(spec.split("+")[0])
        if group and group[0] not in self._fitted:
            self._fit_group(group)
            return self.fit(spec)
        t0 = time.perf_counter()
        stages = spec.split("+")
        done = 0
        for i in range(len(stages) - 1, 0, -1):
            if "+".join(stages[:i]) in self._fitted:
                done = i
                break
        if done == 0:
            comp = from_spec(spec).fit(self.docs)
        else:
            prefix_spec = "+".join(stages[:done])
            prefix = self._fitted[prefix_spec]
            if prefix_spec not in self._outputs:
                self._outputs[prefix_spec] = prefix.transform(self.docs)
            rest = from_spec("+".join(stages[done:])).fit(self._outputs[prefix_spec])
            comp = get("pipeline").from_fitted([*prefix.query_space.stages, *rest.query_space.stages])
        self._fitted[spec] = comp
        self.fit_seconds[spec] = time.perf_counter() - t0
        return comp

    def _fit_group(self, group: list[str]) -> None:
        t0 = time.perf_counter()
        comps = [from_spec(s) for s in group]
        fit_together(comps, self.docs)
        share = (time.perf_counter() - t0) / len(group)
        for s, comp in zip(group, comps):
            self._fitted[s], self.fit_seconds[s] = comp, share


def check_folds(folds, n: int | None = None) -> int:
    if isinstance(folds, bool) or not isinstance(folds, (int, np.integer)) or folds < 1:
        raise InputError(
            f"folds must be a whole number of at least 1 (2: fit on one half, score the other; "
            f"1: fit on every document, in-sample only), got {folds!r}"
        )
    if n is not None and folds > 1 and n < 2 * folds:
        raise InputError(f"{folds}-fold fitting needs at least {2 * folds} documents (two per fold), got {n}")
    return int(folds)


def fold_pool_rows(n: int, folds: int, fit_rows: int | None = None) -> int:
    """The fewest documents any model of a ``folds``-fold evaluation of ``n`` documents is fitted on."""
    pool = n if folds == 1 else n - -(-n // folds)
    return pool if fit_rows is None else min(pool, fit_rows)


class CrossFit:
    """Which fitted model encodes which documents, so that codes are scored on documents their fit
    did not see (out-of-sample), with the in-sample figure beside it.

    With ``folds`` >= 2 (the default 2) the documents are split at random (seeded) into that many
    folds; model ``i`` is fitted on the documents outside fold ``i`` (its *pool*; a seeded uniform
    sample of ``fit_rows`` of it when given) and encodes fold ``i``: every document is scored through a code
    whose fit never saw it, in a corpus of the same size, as the rows of a file larger than the
    fit sample are. For the in-sample figure fold ``i`` is encoded by model ``i + 1``, whose pool
    holds it: the same models, so the gap between the two is what the fit memorized. Each
    document's codes come from one model; :class:`~embcompress.search.PartedIndex` searches them
    as one corpus. ``folds=1`` fits one model on all the documents (or a seeded uniform sample of ``fit_rows``):
    in-sample only. ``fit_on`` fits one model on those vectors instead (a protocol of the caller's)."""

    def __init__(
        self,
        docs: np.ndarray,
        folds: int = 2,
        *,
        fit_on: np.ndarray | None = None,
        fit_rows: int | None = None,
        seed: int = 0,
    ):
        n = len(docs)
        self.docs = docs
        if fit_on is not None:
            self.folds, self.protocol = 1, f"fitted on {len(fit_on):,} given vectors"
            self.parts, self.pools = [np.arange(n)], [None]
            self.caches = [FitCache(fit_on)]
        else:
            self.folds = check_folds(folds, n)
            if fit_rows is not None:
                fit_rows = check_positive_int("fit_rows", fit_rows)
            if self.folds == 1:
                self.parts = [np.arange(n)]
                self.pools = [sample_rows(n, fit_rows, seed + 1)]
                self.protocol = self.describe(1)
            else:
                perm = np.random.default_rng(seed).permutation(n)
                self.parts = [np.sort(p) for p in np.array_split(perm, self.folds)]
                pools = [np.setdiff1d(np.arange(n), p) for p in self.parts]  # each fit: a uniform sample of its pool
                self.pools = [pool[sample_rows(len(pool), fit_rows, seed + 1 + i)] for i, pool in enumerate(pools)]
                self.protocol = self.describe(self.folds)
            self.caches = [FitCache(docs[p]) for p in self.pools]
        self.part_docs = [docs if len(p) == n else docs[p] for p in self.parts]
        self.fit_rows = min(len(c.docs) for c in self.caches)
        #: the last spec's indexes, kept for its next configurations: a graph's (built once), and with
        #: ``reuse_first_stage`` every spec's (each exact scan answering the smaller candidate counts after it)
        self._kept: tuple[tuple, dict[str, Index | PartedIndex]] | None = None
        self.reuse_first_stage = False

    def prepare(self, specs: Sequence[str | None]) -> None:
        """The specs that will be fitted (:meth:`FitCache.plan`), for every fold's cache."""
        for cache in self.caches:
            cache.prepare(specs)

    @staticmethod
    def describe(folds: int) -> str:
        return "in-sample" if folds == 1 else f"out-of-sample ({folds}-fold)"

    @property
    def out_of_sample(self) -> bool:
        return self.folds > 1

    def indexes(
        self, spec: str, doc_ids: Sequence, norm_power: float = 1.0, structure: str = "exact", in_sample: bool = True
    ) -> dict[str, Index | PartedIndex]:
        """``{"headline": index}``, plus ``"in_sample"`` when the headline is out-of-sample and ``in_sample`` asks for
        it (without, each fold is not encoded a second time by the other model); ``structure`` "hnsw" searches each
        part's codes through an HNSW graph (with the default settings), built at its first search and kept for the
        configurations of the same spec that follow."""
        key = (spec, norm_power, id(doc_ids), structure, in_sample)
        keep = structure == "hnsw" or self.reuse_first_stage
        if keep and self._kept is not None and self._kept[0] == key:
            return self._kept[1]
        if self.folds == 1:
            out = {"headline": self._index(self.caches[0], spec, self.docs, (norm_power, structure), doc_ids)}
        else:
            out = {"headline": self._parted(spec, doc_ids, (norm_power, structure), lambda i: i)}
            if in_sample:
                out["in_sample"] = self._parted(spec, doc_ids, (norm_power, structure), lambda i: (i + 1) % self.folds)
        if keep:
            self._kept = (key, out)
        return out

    def first_model_index(self, spec: str, doc_ids: Sequence, norm_power: float = 1.0) -> PartedIndex:
        """Every document encoded by the first fold's model alone (out-of-sample ``folds >= 2``):
        its own fold new to it, the others its fit rows; the headline and in-sample indexes reuse
        these encodings. A fitted code scores no lower here than out-of-sample, in expectation."""
        return self._parted(spec, doc_ids, (norm_power, "exact"), lambda i: 0)

    def _parted(self, spec: str, doc_ids: Sequence, searched: tuple[float, str], model_of) -> PartedIndex:
        """Fold ``i``'s documents encoded by model ``model_of(i)``, searched as one corpus; ``searched``: the
        indexes' norm power and structure."""
        built = [
            (rows, self._index(self.caches[model_of(i)], spec, part, searched))
            for i, (rows, part) in enumerate(zip(self.parts, self.part_docs))
        ]
        return PartedIndex(built, ids=doc_ids)

    def _index(self, cache: FitCache, spec: str, docs: np.ndarray, searched: tuple[float, str], ids=None) -> Index:
        """``docs`` encoded by ``cache``'s model of ``spec`` as an index (``searched``: its norm power and
        structure) that reuses its last first-stage scan when the evaluation asks (``reuse_first_stage``)."""
        norm_power, structure = searched
        codes = cache.encode(spec, docs)
        index = Index(codes, compressor=cache.fit(spec), ids=ids, norm_power=norm_power, structure=structure)
        index.reuse_first_stage = self.reuse_first_stage
        return index

    def costs(self, spec: str) -> dict[str, Any]:
        """Mean seconds to fit one model of ``spec`` (on ``fit_rows``-odd rows) and rows/s encoded."""
        fit = [c.fit_seconds[spec] for c in self.caches if spec in c.fit_seconds]
        rows = sum(c.encoded.get(spec, (0, 0.0))[0] for c in self.caches)
        secs = sum(c.encoded.get(spec, (0, 0.0))[1] for c in self.caches)
        return {
            "fit_seconds": sum(fit) / len(fit) if fit else 0.0,
            "encode_rows_per_second": rows / secs if secs > 0 else float("inf"),
        }
