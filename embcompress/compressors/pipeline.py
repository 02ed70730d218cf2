"""Chains of compressors, e.g. PCA to 128 dims, then binary."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..core.base import Compressor
from ..core.specs import FitTags, OutputSpec, QuerySpace, Traits
from ..core.errors import InputError
from ..core.registry import register


@register
class Pipeline(Compressor):
    """Apply ``stages`` in order. Each stage is fitted on the output of the stages before it,
    reading the data once per stage that learns from data. Only the last stage may produce
    bits or int8 codes. As in scikit-learn meta-estimators, ``stages`` (the parameter) is never
    changed by ``fit``: fitted copies are kept in ``stages_``."""

    name = "pipeline"
    _positional = None
    _fit_made = ("stages_",)

    def __init__(self, stages: list[Compressor] | None = None):
        self.stages = stages

    @property
    def traits(self) -> Traits:
        """The stages' fit tags combined: it learns when a stage does, needs the most rows any stage
        needs, and reads the first rows only when every learning stage does. The rest is the stages'
        own (search reads the last stage's through the query space)."""
        stages = self.stages or []
        tags = [s.traits.fit for s in stages]
        rows = [t.first_rows for t in tags if t.learns]
        return Traits(
            fit=FitTags(
                learns=bool(rows),
                min_rows=max([t.min_rows for t in tags], default=1),
                first_rows=None if not rows or None in rows else max(rows),
            ),
            output=stages[-1].traits.output if stages else "float",
        )

    @classmethod
    def from_fitted(cls, stages: list[Compressor]) -> "Pipeline":
        """A fitted chain of stages that were fitted already, each on the previous one's output
        (saves re-training a learned first stage when only the last stage changes)."""
        pipe = cls(stages=[s.clone() for s in stages])
        for i, s in enumerate(stages):
            s._check_fitted()
            if i and s.n_features_in_ != stages[i - 1].output_spec.width:
                raise InputError(
                    f"stage {i + 1} ({s.name}) was fitted on {s.n_features_in_} dims but stage {i} outputs "
                    f"{stages[i - 1].output_spec.width}"
                )
        pipe._validate_params(stages[0].n_features_in_)
        pipe.stages_ = list(stages)
        pipe.n_features_in_ = stages[0].n_features_in_
        return pipe

    def _validate_params(self, n_features: int) -> None:
        if not self.stages or not all(isinstance(s, Compressor) for s in self.stages):
            raise InputError("a pipeline needs a non-empty list of compressors")
        for i, s in enumerate(self.stages[:-1]):
            if isinstance(s, Pipeline):
                raise InputError("pipelines cannot be nested; list the stages in one pipeline")
            if s.traits.output != "float":
                raise InputError(
                    f"stage {i + 1} ({s.name}) outputs {s.traits.output} codes, which no later stage can take; "
                    "put it last"
                )

    def _fit(self, batches, n_features: int) -> None:
        def fit_stage(stage: Compressor, done: list[Compressor]) -> None:
            def prefixed():
                for b in batches():
                    for s in done:
                        b = s._transform(b)
                    yield b

            stage.fit_batches(prefixed)

        self._fit_each_stage(fit_stage)

    def fit_stages(self, n_features: int, fit_stage: Callable[[Compressor, list[Compressor]], None]) -> "Pipeline":
        """Fit the chain stage by stage: ``fit_stage(stage, done)`` fits the fresh ``stage`` on the
        rows as the fitted stages ``done`` map them (an engine's own way: the Ray engine's workers
        map their rows and send statistics or samples). The frame, the order and the rule that
        only the last stage may output codes are the chain's. Returns self."""
        return self._fitted(n_features, lambda n: self._fit_each_stage(fit_stage))

    def _fit_each_stage(self, fit_stage: Callable[[Compressor, list[Compressor]], None]) -> None:
        fitted: list[Compressor] = []
        for i, template in enumerate(self.stages):
            stage = template.clone()
            fit_stage(stage, list(fitted))
            fitted.append(stage)
        self.stages_ = fitted

    def _transform(self, X: np.ndarray) -> np.ndarray:
        for s in self.stages_:
            X = s._transform(X)
        return X

    def decode(self, codes: np.ndarray) -> np.ndarray:
        self._check_fitted()
        return self.stages_[-1].decode(codes)

    @property
    def query_space(self) -> QuerySpace:
        self._check_fitted()
        return QuerySpace(tuple(self.stages_[:-1]), self.stages_[-1])

    def inverse_transform(self, Z) -> np.ndarray:
        self._check_fitted()
        return self.query_space.back(self.stages_[-1].inverse_transform(Z))

    def _output_spec(self) -> OutputSpec:
        return self.stages_[-1].output_spec

    def _get_state(self):
        scalars: dict[str, Any] = {"n_features_in_": int(self.n_features_in_), "stages": []}
        arrays: dict[str, np.ndarray] = {}
        for i, s in enumerate(self.stages_):
            sc, ar = s._get_state()
            scalars["stages"].append(sc)
            arrays.update({f"{i}.{k}": v for k, v in ar.items()})
        return scalars, arrays

    def _set_state(self, scalars, arrays) -> None:
        stages = [s.clone() for s in self.stages]
        for i, (s, sc) in enumerate(zip(stages, scalars["stages"], strict=True)):
            prefix = f"{i}."
            s._set_state(sc, {k[len(prefix) :]: v for k, v in arrays.items() if k.startswith(prefix)})
        self.stages_ = stages
        self.n_features_in_ = int(scalars["n_features_in_"])
