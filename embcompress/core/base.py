"""The Compressor contract.

A compressor follows the scikit-learn conventions:

* ``__init__`` stores its parameters as given, under the same names, and does nothing else;
* ``fit(X)`` (or ``fit_batches(source)`` for data larger than memory) learns state into
  attributes whose names end in ``_`` and returns ``self``; randomness is drawn from a generator
  made inside ``fit`` from ``seed``, so the same seed always gives the same compressor;
* ``transform(X)`` refuses to run before ``fit`` and refuses input of another width.

Every fitted compressor declares its output in :attr:`Compressor.output_spec` (dtype, width,
bytes per vector and how two outputs are compared) so that search and reports read it instead of
guessing, and what it declares (how its fit reads data, how search scans it, where it can be
served) in :attr:`Compressor.traits` (per instance, as
scikit-learn's tags), which the fit recipe (:mod:`embcompress.core.fitting`) and the fit frame read.
``save``/``load`` live in :mod:`embcompress.core.persist` and never use pickle.

The scikit-learn estimator API holds without importing scikit-learn: ``get_params(deep=True)``,
``set_params`` with nested keys (``stages__0__dim`` in a chain), ``fit(X, y=None)``,
``fit_transform(X, y=None)``, ``__sklearn_is_fitted__`` and ``__sklearn_tags__`` (which imports
scikit-learn only when scikit-learn itself asks). So ``sklearn.base.clone`` works and any
compressor can be a step of ``sklearn.pipeline.make_pipeline``.

Where a float query meets the stored output is one object, :attr:`Compressor.query_space`: the
stages before the last, the last stage, and the maps into and back out of the space the last
stage quantizes. What only some families can do (codes scanned by tables or decoded, fits from
merged block statistics, candidates for a byte budget, an affine map) is declared by the mixins
of :mod:`embcompress.core.capabilities` they inherit, and asked with ``isinstance``.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable, ClassVar, Iterable, Iterator, Union

import numpy as np

from . import persist
from .checks import NonFiniteChunk, check_array, check_values
from .errors import InputError, NotFittedError
from .registry import param_names
from .specs import OutputSpec, QuerySpace, Traits

#: How two compressed vectors are compared.
METRICS = ("cosine", "inner_product", "hamming", "adc")

BatchSource = Union[np.ndarray, Iterable[np.ndarray], Callable[[], Iterator[np.ndarray]]]


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(a == b) and type(a) is type(b)
    except Exception:  # arrays and other values without a plain truth value
        return a is b


def _batch_factory(source: BatchSource) -> Callable[[], Iterator[np.ndarray]]:
    """Normalize an array, a re-iterable of arrays or a factory of iterators to a factory."""
    if isinstance(source, np.ndarray) or not (callable(source) or isinstance(source, Iterable)):
        return lambda: iter([source])
    if callable(source):
        return source
    if iter(source) is source:  # a one-shot generator cannot be read twice
        items = source

        def once() -> Iterator[np.ndarray]:
            nonlocal items
            if items is None:
                raise InputError(
                    "this compressor needs more than one pass over the data; pass a list of arrays "
                    "or a function that returns a fresh iterator, not a generator"
                )
            it, items = items, None
            return iter(it)

        return once
    return lambda: iter(source)


class Compressor:
    """Base class. Subclasses set ``name``, implement ``_fit`` / ``_transform`` / ``_output_spec``
    and list their fitted arrays in ``_state_arrays`` and fitted scalars in ``_state_scalars``."""

    name: ClassVar[str] = ""
    _state_arrays: ClassVar[tuple[str, ...]] = ()
    _state_scalars: ClassVar[tuple[str, ...]] = ()
    #: other attributes a fit makes (a chain's fitted stages, a faiss object), dropped by a refit
    _fit_made: ClassVar[tuple[str, ...]] = ()

    #: parameter set by a bare value in a spec string, e.g. ``dim`` for ``"truncate:256"``
    _positional: ClassVar[str | None] = None
    #: parameters that take one of a few words: name -> the words
    _choices: ClassVar[dict[str, tuple[str, ...]]] = {}

    # ---- parameters -------------------------------------------------------------------------
    @classmethod
    def positional(cls, value: Any) -> dict[str, Any]:
        """Keyword arguments meant by a bare value in a spec (``"pca:128"`` -> ``dim=128``)."""
        if cls._positional is None:
            raise InputError(
                f"{cls.name} takes no value, only key=value parameters: {', '.join(param_names(cls)) or 'none'}"
            )
        return {cls._positional: value}

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """Constructor parameters by name (scikit-learn API). With ``deep``, parameters of nested
        compressors too: ``stages__0`` and ``stages__0__dim`` for the first stage of a chain."""
        params = {name: getattr(self, name) for name in param_names(type(self))}
        if deep:
            for name, value in list(params.items()):
                for key, sub in _nested(name, value):
                    params[key] = sub
                    params.update({f"{key}__{k}": v for k, v in sub.get_params(deep=True).items()})
        return params

    def set_params(self, **params: Any) -> "Compressor":
        """Set constructor parameters (scikit-learn API), nested ones by ``a__b`` keys: ``stages__0``
        replaces the first stage of a chain, ``stages__0__dim=64`` sets its width. Unknown names
        are an InputError listing the valid ones. Returns self."""
        valid = self.get_params(deep=True)
        own = set(param_names(type(self)))
        nested: dict[str, dict[str, Any]] = {}
        for key, value in params.items():
            if key not in valid:
                raise InputError(f"{type(self).__name__} has no parameter {key!r}; valid: {', '.join(sorted(valid))}")
            head, _, tail = key.rpartition("__")
            if key in own:
                setattr(self, key, value)
            elif isinstance(valid.get(head), Compressor):
                nested.setdefault(head, {})[tail] = value
            else:  # an item of a list of compressors, e.g. stages__0
                items = list(getattr(self, head))
                items[int(tail)] = value
                setattr(self, head, items)
        for head, sub in nested.items():  # after replacements, so stages__0 and stages__0__dim combine
            self.get_params(deep=True)[head].set_params(**sub)
        return self

    def clone(self) -> "Compressor":
        """A new unfitted compressor with the same parameters (nested compressors cloned too), as
        ``sklearn.base.clone`` makes."""
        params = {}
        for name, value in self.get_params(deep=False).items():
            if isinstance(value, Compressor):
                value = value.clone()
            elif isinstance(value, list) and any(isinstance(v, Compressor) for v in value):
                value = [v.clone() if isinstance(v, Compressor) else v for v in value]
            params[name] = value
        return type(self)(**params)

    def __repr__(self) -> str:
        """``Binary()``, ``PCA(dim=128)``: the class and the parameters that differ from the defaults."""
        sig = inspect.signature(type(self).__init__)
        shown = []
        for name, p in sig.parameters.items():
            if name == "self":
                continue
            value = getattr(self, name, p.default)
            if p.default is inspect.Parameter.empty or not _same(value, p.default):
                shown.append(f"{name}={value!r}")
        return f"{type(self).__name__}({', '.join(shown)})"

    def __sklearn_is_fitted__(self) -> bool:
        return self.is_fitted

    def __sklearn_tags__(self):  # called by scikit-learn only, so importing it here costs nothing otherwise
        from sklearn.utils import InputTags, Tags, TargetTags, TransformerTags

        return Tags(
            estimator_type=None,
            target_tags=TargetTags(required=False),
            transformer_tags=TransformerTags(),
            input_tags=InputTags(allow_nan=False),
        )

    @property
    def traits(self) -> Traits:
        """What this compressor declares (see :class:`~embcompress.core.specs.Traits`): these defaults,
        changed by each capability mixin and by the family, each from its parent's."""
        return Traits()

    #: read-only: the fit tags of :attr:`traits` (``traits.fit``), for code that reads them by this name
    fit_tags = property(lambda self: self.traits.fit, doc="How this compressor's fit reads data: ``traits.fit``.")

    def joint_fit_key(self):
        """Compressors with equal keys (not None) fitted on the same rows train faster together,
        each to the model it gets alone (:func:`embcompress.compressors.fit_together`); None: fitted alone."""
        return None

    def _validate_params(self, n_features: int) -> None:
        """Raise InputError for parameters that cannot work with ``n_features`` inputs."""

    def _check_params(self) -> None:
        """Refuse parameter values of the wrong kind before anything runs: when a spec is parsed,
        a saved model loaded, and at fit. The kind is the default's: a flag takes true or false
        (``renormalize=maybe`` is refused, not read as true), a count an integer, a rate a number,
        and a word one of :attr:`_choices`."""
        sig = inspect.signature(type(self).__init__)
        for name, p in sig.parameters.items():
            default = p.default
            if name == "self" or default is None or default is inspect.Parameter.empty:
                continue
            value = getattr(self, name, default)
            if isinstance(default, bool):
                ok, kind = isinstance(value, (bool, np.bool_)), "true or false"
            elif isinstance(default, int):
                ok, kind = (
                    isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)),
                    "an integer",
                )
            elif isinstance(default, float):
                ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(
                    value, (bool, np.bool_)
                )
                kind = "a number"
            elif isinstance(default, str):
                ok, kind = isinstance(value, str), "a word"
            else:
                continue
            if not ok:
                raise InputError(f"{self.name} parameter {name} must be {kind}, got {value!r}")
            if name == "seed" and value < 0:
                raise InputError(f"{self.name} seed must be a non-negative integer, got {value!r}")
        for name, words in self._choices.items():
            value = getattr(self, name)
            if value not in words:
                raise InputError(f"{self.name} {name} must be one of {', '.join(words)}, got {value!r}")

    def _state_shapes(self) -> dict[str, tuple[int | None, ...]]:
        """The shape each fitted array must have (None: any length), from the parameters and
        ``n_features_in_``; a loaded model is checked against it."""
        return {}

    # ---- fitting ----------------------------------------------------------------------------
    def fit(self, X: Any, y: Any = None) -> "Compressor":
        """Fit on an in-memory array (rows x dims). ``y`` is ignored (scikit-learn API). Returns self."""
        return self.fit_batches([X])

    def fit_batches(self, source: BatchSource) -> "Compressor":
        """Fit on data given in batches, for data larger than memory.

        ``source`` is a list of arrays, or a zero-argument function returning a fresh iterator of
        arrays (needed when a chain has several stages that learn from data: each reads the data
        once). Returns self.
        """
        factory = _batch_factory(source)

        def checked() -> Iterator[np.ndarray]:
            offset = 0
            width = None
            for batch in factory():
                arr = check_array(batch, what="input", row_offset=offset)
                if width is None:
                    width = arr.shape[1]
                elif arr.shape[1] != width:
                    raise InputError(f"input batches differ in width: {width} then {arr.shape[1]} at row {offset}")
                offset += len(arr)
                if len(arr):
                    yield arr

        first = next(checked(), None)
        if first is None:
            raise InputError("cannot fit on empty input (0 rows)")

        def rows_up_to(need: int) -> int:  # a second pass only when the first batch is too short
            rows = len(first)
            if rows < need:
                rows = 0
                for batch in checked():
                    rows += len(batch)
                    if rows >= need:
                        break
            return rows

        return self._fitted(first.shape[1], lambda n_features: self._fit(checked, n_features), rows=rows_up_to)

    def _fitted(
        self, n_features: int, fit: Callable[[int], None], *, rows: Callable[[int], int] | None = None
    ) -> "Compressor":
        """The frame of every way to fit: check the parameters for ``n_features`` inputs (before
        anything reads them, the fit tags included), refuse fewer rows than
        :attr:`FitTags.min_rows` (``rows(need)``: the rows there are, counted up to ``need``;
        None when unknown), clear the old state, run ``fit`` and mark the compressor fitted."""
        check_fit(self, n_features, rows)
        for attr in (*self._state_arrays, *self._state_scalars, *self._fit_made, "n_features_in_"):
            self.__dict__.pop(attr, None)
        fit(n_features)
        self.n_features_in_ = n_features
        return self

    def _fit(self, batches: Callable[[], Iterator[np.ndarray]], n_features: int) -> None:
        raise NotImplementedError

    # ---- transforming -----------------------------------------------------------------------
    @property
    def is_fitted(self) -> bool:
        return "n_features_in_" in self.__dict__

    def _check_fitted(self) -> None:
        if not self.is_fitted:
            raise NotFittedError(
                f"this {type(self).__name__} is not fitted yet; call fit(X) (or load a saved one) first"
            )

    def transform(self, X: Any, *, row_offset: int = 0) -> np.ndarray:
        """Compress rows of ``X``; returns an array of ``output_spec.dtype``."""
        self._check_fitted()
        arr = check_array(X, what="input", row_offset=row_offset, finite=not self.traits.fused_finite_check)
        if arr.shape[1] != self.n_features_in_:
            raise InputError(
                f"input has {arr.shape[1]} dimensions but this {self.name} compressor was fitted on "
                f"{self.n_features_in_} (X has {arr.shape[1]} features, but {type(self).__name__} is expecting "
                f"{self.n_features_in_} features as input)"
            )
        try:
            return self._transform(arr)
        except NonFiniteChunk:
            check_values(arr, what="input", row_offset=row_offset)
            raise  # unreachable: check_values raised

    def fit_transform(self, X: Any, y: Any = None) -> np.ndarray:
        """``fit(X).transform(X)``; ``y`` is ignored (scikit-learn API)."""
        return self.fit(X).transform(X)

    def _transform(self, X: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def decode(self, codes: np.ndarray) -> np.ndarray:
        """Map outputs back to float32 vectors in the space of ``query_space.forward``, so that a
        float query's inner product with them is the asymmetric score (identity for float outputs;
        the fitted reconstruction levels for bits; dequantized values for int8)."""
        self._check_fitted()
        return np.asarray(codes, dtype=np.float32)

    # ---- where a float query meets the output ----------------------------------------------
    @property
    def query_space(self) -> QuerySpace:
        """The stages before the last (none here), the last stage (itself) and the maps between
        the input space and the space the last stage quantizes (see :class:`QuerySpace`)."""
        self._check_fitted()
        return QuerySpace((), self)

    def inverse_transform(self, Z: Any) -> np.ndarray:
        """Map outputs back to the input space (scikit-learn API): the decoded vectors for codes,
        the least-squares preimage for linear maps. Raises NotImplementedError where there is none."""
        self._check_fitted()
        if self.output_spec.kind != "float":
            return self.decode(Z)
        return self._inverse(np.asarray(Z, dtype=np.float32))

    def _inverse(self, Z: np.ndarray) -> np.ndarray:
        raise NotImplementedError(f"{self.name} has no inverse_transform")

    # ---- output ------------------------------------------------------------------------------
    @property
    def output_spec(self) -> OutputSpec:
        self._check_fitted()
        return self._output_spec()

    def _output_spec(self) -> OutputSpec:
        raise NotImplementedError

    # ---- persistence helpers (see persist.py) ------------------------------------------------
    def _get_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        scalars = {name: getattr(self, name) for name in self._state_scalars}
        scalars["n_features_in_"] = int(self.n_features_in_)
        arrays = {name: getattr(self, name) for name in self._state_arrays}
        return scalars, arrays

    def _set_state(self, scalars: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        for name in self._state_scalars:
            setattr(self, name, scalars[name])
        for name in self._state_arrays:
            setattr(self, name, arrays[name])
        self.n_features_in_ = int(scalars["n_features_in_"])

    def save(self, path, *, overwrite: bool = False) -> None:
        """Write ``config.json`` and ``arrays.npz`` into the directory ``path``."""
        persist.save(self, path, overwrite=overwrite)


def _nested(name: str, value: Any) -> list[tuple[str, "Compressor"]]:
    """Compressors held by a parameter: itself, or the items of a list (``stages__0``...)."""
    if isinstance(value, Compressor):
        return [(name, value)]
    if isinstance(value, (list, tuple)):
        return [(f"{name}__{i}", v) for i, v in enumerate(value) if isinstance(v, Compressor)]
    return []


def check_fit(comp: Compressor, n_features: int, rows: Callable[[int], int] | None = None) -> None:
    """The checks of :meth:`Compressor._fitted`, before anything is read or trained: the
    parameters for ``n_features`` inputs (the fit tags included) and at least
    :attr:`FitTags.min_rows` rows (``rows(need)``: the rows there are, counted up to ``need``)."""
    comp._check_params()
    comp._validate_params(n_features)
    tags = comp.traits.fit
    if tags.sample is not None and tags.sample < tags.min_rows:
        raise InputError(f"{comp.name} max_rows={tags.sample} is below the {tags.min_rows} rows its fit needs")
    got = None if rows is None else rows(tags.min_rows)
    if got is not None and got < tags.min_rows:
        raise InputError(f"{comp.name} needs at least {tags.min_rows} rows to fit, got {got} (n_samples = {got})")
