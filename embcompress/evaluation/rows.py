"""What evaluating one configuration measured: a frozen :class:`ResultRow`, built by
:func:`~embcompress.evaluation.evaluate.run_configs` and read by the report, ``recommend`` and the
serving plans. Nothing writes into a row once it is made: a figure known later (retention, against
the float reference scored first) makes a new row (:meth:`ResultRow.with_retention`)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

from ..analysis import retention

if TYPE_CHECKING:
    from .configs import Config


@dataclass(frozen=True)
class ResultRow:
    """One configuration's figures: its task score (out-of-sample unless ``fitted`` says otherwise),
    every metric of the task, the in-sample score beside it, its size, fit and encoding costs and
    search speed. ``per_query`` (the main figure of each query) is kept only where asked for."""

    config: str  # the configuration as written (``pca:192+binary@asym``)
    spec: str | None  # the compressor's spec; None for float search
    rerank: str | None  # None, "asymmetric" or "float"
    kind: str  # the output kind (float, bits, uint8, codes, ...)
    bytes_per_vector: float
    compression: float  # float32's bytes over these
    extra_storage: str | None  # what a float rerank reads beside the codes
    copy: str | None  # the rerank's copy: float32, float16 or int8
    fitted: str  # how the codes were fitted and scored (the CrossFit protocol)
    score: float
    metrics: Mapping[str, float]  # every figure of the task, by name (nDCG@10, recall@10, ...)
    score_in_sample: float | None
    in_sample_queries: int | None  # the in-sample score's queries, when fewer than all
    fit_seconds: float
    encode_rows_per_second: float | None
    search_seconds: float
    queries_per_second: float
    candidates: int | None  # rows scored per query
    per_query: np.ndarray | None = field(default=None, repr=False, compare=False)
    stopped_early: bool = False  # stopped by the race after its first model
    race: Mapping[str, Any] | None = None  # which race test stopped it
    rank_proxy: float | None = None  # the label-free rank proxy, when measured
    retention: float | None = None  # score / the float reference's score
    retention_in_sample: float | None = None

    def with_retention(self, ref_score: float, in_sample_ref: float | None = None, keep_per_query: bool = True):
        """This row with its retentions against the float reference's score (the in-sample one against
        ``in_sample_ref`` when the in-sample score was taken on fewer queries); ``per_query`` dropped
        unless ``keep_per_query``."""
        inside_ref = ref_score if self.in_sample_queries is None or in_sample_ref is None else in_sample_ref
        inside = None if self.score_in_sample is None else retention(self.score_in_sample, inside_ref)
        return replace(
            self,
            retention=retention(self.score, ref_score),
            retention_in_sample=inside,
            per_query=self.per_query if keep_per_query else None,
        )

    def without_nan_retention(self):
        """This row with an undefined (NaN) retention shown as None, as the JSON output shows it."""

        def fix(v):
            return None if v is not None and v != v else v

        return replace(self, retention=fix(self.retention), retention_in_sample=fix(self.retention_in_sample))

    def to_dict(self, per_query: bool = False) -> dict[str, Any]:
        """The row as the JSON output holds it: the metrics spread among the figures, ``rank_proxy``
        only when measured, ``per_query`` only when asked for."""
        out: dict[str, Any] = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name == "metrics":
                out.update(v)
            elif f.name == "per_query":
                if per_query:
                    out["per_query"] = v
            elif f.name != "rank_proxy" or v is not None:
                out[f.name] = v
        return out

    def __getitem__(self, key: str) -> Any:
        """A figure by its name in :meth:`to_dict` (``row["ndcg@10"]``, ``row["retention"]``): read-only."""
        if key in self.metrics:
            return self.metrics[key]
        if key in _NAMES and key != "metrics":
            return getattr(self, key)
        raise KeyError(key)


_NAMES = frozenset(f.name for f in fields(ResultRow))


def row_of(
    cfg: Config,
    index,
    m,
    inside: float | None,
    costs: Mapping[str, Any],
    fitted: str,
    dim: int,
    in_sample_queries: int | None = None,
    **more: Any,
) -> ResultRow:
    """The row of configuration ``cfg`` searched through ``index``: the task's measurement ``m``, the
    in-sample score ``inside``, the fit and encoding ``costs``, how it was ``fitted``, the input width
    ``dim``; ``more`` fields as they are."""
    comp = index.compressor
    return ResultRow(
        config=cfg.label,
        spec=cfg.spec,
        rerank=cfg.rerank,
        kind="float" if comp is None else comp.output_spec.kind,
        bytes_per_vector=index.nbytes_per_vector,
        compression=4 * dim / index.nbytes_per_vector,
        extra_storage=None
        if cfg.rerank != "float"
        else "original float vectors"
        if cfg.copy == "float32"
        else f"a {cfg.copy} copy of the documents",
        copy=cfg.copy if cfg.rerank == "float" else None,
        fitted=fitted,
        score=m.score,
        metrics=dict(m.metrics),
        score_in_sample=inside,
        in_sample_queries=in_sample_queries,
        fit_seconds=costs["fit_seconds"],
        encode_rows_per_second=costs["encode_rows_per_second"],
        search_seconds=m.seconds,
        queries_per_second=m.queries / m.seconds if m.seconds > 0 else float("inf"),
        candidates=m.candidates,
        per_query=m.per_query,
        **more,
    )
