"""The Compressor contract.

A compressor follows the scikit-learn conventions:

* ``__init__`` stores its parameters as given, under the same names, and does nothing else;
* ``fit(X)`` (or ``fit_batches(source)`` for data larger than memory) learns state into
  attributes whose names end in ``_`` and returns ``self``; randomness is drawn from a generator
  made inside ``fit`` from ``seed``, so the same seed always gives the same compressor;
* ``transform(X)`` refuses to run before ``fit`` and refuses input of another width.

Every fitted compressor declares its output in :attr:`Compressor.output_spec` (dtype, width,
bytes per vector and how two outputs are compared) so that search and reports read it instead of
guessing. ``save``/``load`` live in :mod:`embcompress.persist` and never use pickle.

The scikit-learn estimator API holds without importing scikit-learn: ``get_params(deep=True)``,
``set_params`` with nested keys (``stages__0__dim`` in a chain), ``fit(X, y=None)``,
``fit_transform(X, y=None)``, ``__sklearn_is_fitted__`` and ``__sklearn_tags__`` (which imports
scikit-learn only when scikit-learn itself asks). So ``sklearn.base.clone`` works and any
compressor can be a step of ``sklearn.pipeline.make_pipeline``.

Every compressor answers ``float_prefix(X)`` (the float space the last stage quantizes),
``last_stage`` and ``decode``. What only some families can do (codes scanned by tables or
decoded, fits from merged block statistics, candidates for a byte budget) is declared by the
mixins of :mod:`embcompress.capabilities` they inherit, and asked with ``isinstance``.
"""

from __future__ import annotations

import inspect
from dataclasses import asdict, dataclass
from typing import Any, Callable, ClassVar, Iterable, Iterator, Union

import numpy as np

from . import persist
from .capabilities import BlockStats
from ._util import check_positive_int
from .errors import InputError, NotFittedError

#: How two compressed vectors are compared.
METRICS = ("cosine", "inner_product", "hamming", "adc")

#: Float dtypes accepted as input; everything is computed in float32.
FLOAT_DTYPES = (np.float16, np.float32, np.float64)

BatchSource = Union[np.ndarray, Iterable[np.ndarray], Callable[[], Iterator[np.ndarray]]]


@dataclass(frozen=True)
class OutputSpec:
    """What a fitted compressor produces for one input vector.

    ``kind`` is ``"float"`` (float32 values), ``"int8"`` (int8 codes), ``"bits"`` (packed bits,
    most significant bit first, ``nbytes = ceil(width / 8)``, the padding bits are zero) or
    ``"codes"`` (opaque uint8 rows of ``nbytes`` bytes scored with lookup tables, metric
    ``"adc"``: product and scalar quantization codes, RaBitQ codes with their factors).
    ``width`` counts logical dimensions (bits for ``"bits"``, bytes for ``"codes"``).
    """

    kind: str
    dtype: str
    width: int
    nbytes: int
    metric: str

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def packed(self) -> bool:
        """Rows are opaque bytes (stored as fixed-size binary), not one value per dimension."""
        return self.kind in ("bits", "codes")

    @property
    def row_width(self) -> int:
        """Values per stored row: bytes for packed kinds, dimensions otherwise."""
        return self.nbytes if self.packed else self.width


def check_array(X: Any, *, what: str = "X", row_offset: int = 0, finite: bool = True) -> np.ndarray:
    """Return ``X`` as a C-contiguous 2-D float32 array of finite values, or raise InputError.

    The error names the first bad row (counting from ``row_offset``) and what is allowed.
    ``finite=False`` skips the NaN/inf test, for callers that test each chunk themselves.
    """
    if isinstance(X, np.ndarray):
        arr = X
    elif hasattr(X, "toarray") and hasattr(X, "nnz"):  # a scipy sparse matrix or array
        raise InputError(f"{what} is sparse; sparse input is not supported, give a dense 2-D float array")
    else:
        try:
            arr = np.asarray(X)
        except ValueError as exc:  # ragged nested lists
            raise InputError(f"{what} is not a rectangular array ({exc}); give a 2-D float array") from None
    if arr.dtype == object:
        raise InputError(f"{what} has dtype object (ragged rows or mixed types); give a 2-D float array")
    if arr.ndim != 2:
        raise InputError(
            f"{what} must be 2-D (rows x dims), got {arr.ndim}-D with shape {arr.shape}. "
            "Reshape your data with x.reshape(1, -1) for a single vector"
        )
    if arr.dtype.kind == "c":
        raise InputError(f"{what} has dtype {arr.dtype}. Complex data not supported; give real float embeddings")
    if arr.dtype.type not in FLOAT_DTYPES:
        raise InputError(
            f"{what} has dtype {arr.dtype}; only float16, float32 and float64 embeddings are accepted"
        )
    if arr.shape[1] == 0:
        raise InputError(f"{what} has 0 feature(s) (shape=({arr.shape[0]}, 0)) while a minimum of 1 is required: "
                         "embeddings need at least 1 dimension")
    if finite and arr.dtype == np.float64:  # before the cast, where 1e300 is still 1e300, not inf
        check_values(arr, what=what, row_offset=row_offset)
    arr = np.ascontiguousarray(arr, dtype=np.float32)
    if finite:
        check_values(arr, what=what, row_offset=row_offset)
    return arr


#: largest magnitude accepted in an embedding: squares, norms, dot products and covariance sums
#: of such values stay far inside float32 (larger finite values, such as 1e38, would overflow to
#: inf in the first product and turn every score and component into 0 or NaN)
MAX_ABS = 1e15


def values_ok(arr: np.ndarray) -> bool:
    """True when every value is finite and at most :data:`MAX_ABS` in magnitude. One pass: the
    sum of squares is finite and at most MAX_ABS**2 exactly when that holds for the common case;
    otherwise the exact test decides."""
    flat = arr.reshape(-1)
    with np.errstate(over="ignore", invalid="ignore"):
        total = np.dot(flat, flat)
    if np.isfinite(total) and total <= MAX_ABS * MAX_ABS:
        return True
    return bool(np.isfinite(arr).all() and (arr.size == 0 or np.abs(arr).max() <= MAX_ABS))


class NonFiniteChunk(Exception):
    """Raised inside a fused transform loop; the caller reports the row (see Compressor.transform)."""


def check_values(arr: np.ndarray, *, what: str = "X", row_offset: int = 0) -> None:
    """Raise InputError naming the first row that holds NaN, +-inf or a value beyond
    +-:data:`MAX_ABS` (checked in the input's own dtype, so float64 values beyond the float32
    range are named as such, not as inf)."""
    if values_ok(arr):
        return
    with np.errstate(invalid="ignore"):
        bad = ~np.isfinite(arr) | (np.abs(arr) > MAX_ABS)
    bad_rows = np.flatnonzero(bad.any(axis=1))
    row = int(bad_rows[0])
    col = int(np.flatnonzero(bad[row])[0])
    value = arr[row, col]
    where = f"{what} row {row + row_offset}"
    tail = f"{len(bad_rows)} row(s) in this batch are affected"
    if np.isfinite(value):
        raise InputError(
            f"{where} has the value {float(value):.6g} at dimension {col}, beyond the accepted range of "
            f"+-{MAX_ABS:.0e} (embcompress computes in float32; scale the embeddings down); {tail}"
        )
    raise InputError(
        f"{where} has a non-finite value ({value} at dimension {col}); {tail}; embeddings must be finite (no NaN or inf)"
    )


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
    #: True when ``_transform`` tests each chunk for NaN/inf itself (raising NonFiniteChunk),
    #: which saves a separate pass over the input
    _fused_finite_check: ClassVar[bool] = False

    #: True when the fitted state is per-dimension only (a few vectors of the input width): code
    #: files then carry it, and search rebuilds the compressor from the file alone
    _state_in_file: ClassVar[bool] = False

    #: parameter set by a bare value in a spec string, e.g. ``dim`` for ``"truncate:256"``
    _positional: ClassVar[str | None] = None
    #: parameters that take one of a few words: name -> the words
    _choices: ClassVar[dict[str, tuple[str, ...]]] = {}

    # ---- what a family declares about itself, so that adding one touches its module, its tests and
    # one registering import: the contract suite's examples and the report's colour come from here
    #: specs the contract suite runs (tests/test_contract.py)
    examples: ClassVar[tuple[str, ...]] = ()
    #: a spec for scikit-learn's estimator checks, which fit on a few rows of 1 to 5 columns
    sklearn_example: ClassVar[str | None] = None
    #: the colour of the family's codes in the report's plot (None: one derived from the name)
    color: ClassVar[str | None] = None

    # ---- parameters -------------------------------------------------------------------------
    @classmethod
    def positional(cls, value: Any) -> dict[str, Any]:
        """Keyword arguments meant by a bare value in a spec (``"pca:128"`` -> ``dim=128``)."""
        if cls._positional is None:
            raise InputError(f"{cls.name} takes no value, only key=value parameters: {', '.join(cls._param_names()) or 'none'}")
        return {cls._positional: value}

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> "Compressor":
        return cls(**params)

    @classmethod
    def _param_names(cls) -> list[str]:
        sig = inspect.signature(cls.__init__)
        return [p for p in sig.parameters if p != "self"]

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """Constructor parameters by name (scikit-learn API). With ``deep``, parameters of nested
        compressors too: ``stages__0`` and ``stages__0__dim`` for the first stage of a chain."""
        params = {name: getattr(self, name) for name in self._param_names()}
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
        own = set(self._param_names())
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

    @property
    def fitted_stages(self) -> list["Compressor"]:
        """The fitted stages in order: ``[self]`` for a single compressor."""
        self._check_fitted()
        return [self]

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

        return Tags(estimator_type=None, target_tags=TargetTags(required=False), transformer_tags=TransformerTags(),
                    input_tags=InputTags(allow_nan=False))

    @property
    def state_fits_in_file(self) -> bool:
        return self._state_in_file

    @property
    def learns_from_data(self) -> bool:
        """False when fitting needs only the input width (one peek at the first batch)."""
        return True

    @property
    def min_rows(self) -> int:
        """Fewest rows a fit needs (a grid skips what the data are too small for)."""
        return 1

    @property
    def fit_rows(self) -> int | None:
        """Rows a fit reads at most, from the start (None: all of them); file readers stop
        decoding there."""
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
                ok, kind = isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)), "an integer"
            elif isinstance(default, float):
                ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))
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

    def _check_loaded(self) -> None:
        """Raise InputError when fitted arrays (from a saved model) do not fit the parameters:
        wrong dtype (complex, text), NaN or inf, or a shape other than :meth:`_state_shapes`;
        then one row goes through ``transform`` (and ``decode``) as a final check."""
        d = self.n_features_in_
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1:
            raise InputError(f"n_features_in_ must be a positive integer, got {d!r}")
        self._check_params()
        self._validate_params(int(d))
        shapes = self._state_shapes()
        for name in self._state_arrays:
            arr = self.__dict__.get(name)
            if arr is None:
                raise InputError(f"fitted array {name!r} is missing")
            a = np.asarray(arr)
            if a.dtype.kind not in "biuf":
                raise InputError(f"fitted array {name!r} has dtype {a.dtype}; expected real numbers")
            if a.dtype.kind == "f" and not np.isfinite(a).all():
                raise InputError(f"fitted array {name!r} holds NaN or inf")
            want = shapes.get(name)
            if want is not None and (a.ndim != len(want) or any(w is not None and w != g for w, g in zip(want, a.shape))):
                shown = "(" + ", ".join("any" if w is None else str(w) for w in want) + ")"
                raise InputError(f"fitted array {name!r} has shape {a.shape}; expected {shown} for {self!r} "
                                 f"on {d} input dimensions")
        probe = np.linspace(-1, 1, 2 * d, dtype=np.float32).reshape(2, d)
        try:
            out = self.transform(probe)
            if out.shape != (2, self.output_spec.row_width):
                raise InputError(f"it produces rows of {out.shape[1]} values, but its output is declared as "
                                 f"{self.output_spec.row_width}")
            if hasattr(self, "decode"):
                self.decode(out)
        except InputError:
            raise
        except Exception as exc:  # a state that does not fit together fails in numpy or faiss
            raise InputError(f"its fitted arrays do not fit together ({type(exc).__name__}: {exc})") from None

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
                    raise InputError(
                        f"input batches differ in width: {width} then {arr.shape[1]} at row {offset}"
                    )
                offset += len(arr)
                if len(arr):
                    yield arr

        first = next(checked(), None)
        if first is None:
            raise InputError("cannot fit on empty input (0 rows)")
        return self._fitted(first.shape[1], lambda n_features: self._fit(checked, n_features))

    def _fitted(self, n_features: int, fit: Callable[[int], None]) -> "Compressor":
        """Check the parameters for ``n_features`` inputs, clear the old state, run ``fit`` and
        mark the compressor fitted: the frame of every way to fit."""
        self._check_params()
        self._validate_params(n_features)
        self._clear_state()
        fit(n_features)
        self.n_features_in_ = n_features
        return self

    # ---- fits from statistics combined across blocks (the Ray engine) --------------------------
    @property
    def combines_blocks(self) -> bool:
        """Whether this compressor can be fitted from per-block statistics computed anywhere and
        merged in any order (it is a :class:`~embcompress.capabilities.BlockStats`)."""
        return isinstance(self, BlockStats)

    def _clear_state(self) -> None:
        for attr in (*self._state_arrays, *self._state_scalars, "n_features_in_"):
            if attr in self.__dict__:
                delattr(self, attr)

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
        arr = check_array(X, what="input", row_offset=row_offset, finite=not self._fused_finite_check)
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
        """Map outputs back to float32 vectors in the space of :meth:`float_prefix`, so that a
        float query's inner product with them is the asymmetric score (identity for float outputs;
        the fitted reconstruction levels for bits; dequantized values for int8)."""
        self._check_fitted()
        return np.asarray(codes, dtype=np.float32)

    # ---- what search needs (codes scanned by tables: capabilities.TableScan and DenseScan) ----
    @property
    def last_stage(self) -> "Compressor":
        """The stage whose output is stored (itself, for a single compressor)."""
        return self

    def float_prefix(self, X: Any) -> np.ndarray:
        """``X`` mapped into the float space that :attr:`last_stage` quantizes (``X`` itself for a
        single compressor; every stage but the last for a chain)."""
        self._check_fitted()
        return check_array(X, what="queries")

    def query_prefix(self, X: Any) -> np.ndarray:
        """Float queries mapped for inner products with decoded codes: like :meth:`float_prefix`
        but through the *linear part* of each stage before the last. A stage ``z = A x + b`` (PCA,
        ITQ and centred rotations subtract a mean) reconstructs ``x ~ A^T (z - b)``, so
        ``<q, x> ~ <A q, z> - <A q, b>``: the last term is the same for every document, and
        ranking by ``<A q, z_decoded>`` is ranking by the estimated inner product ``<q, x>``.
        (Mapping the query through ``b`` too would add a per-document bias ``-<b, z>``.)"""
        return self.float_prefix(X)

    def inverse_transform(self, Z: Any) -> np.ndarray:
        """Map outputs back to the input space (scikit-learn API): the decoded vectors for codes,
        the least-squares preimage for linear maps. Raises NotImplementedError where there is none."""
        self._check_fitted()
        if self.output_spec.kind != "float":
            return self.decode(Z)
        return self._inverse(np.asarray(Z, dtype=np.float32))

    def _inverse(self, Z: np.ndarray) -> np.ndarray:
        raise NotImplementedError(f"{self.name} has no inverse_transform")

    def prefix_inverse(self, Z: np.ndarray) -> np.ndarray:
        """Vectors of the :meth:`float_prefix` space back in the input space (identity for a
        single compressor)."""
        return np.asarray(Z, dtype=np.float32)

    def _linear(self, X: np.ndarray) -> np.ndarray:
        """The linear part of ``_transform`` (the transform itself for linear stages; affine
        stages override it to leave their offset out)."""
        return self._transform(X)

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


def float_spec(width: int, metric: str = "cosine") -> OutputSpec:
    return OutputSpec(kind="float", dtype="float32", width=int(width), nbytes=4 * int(width), metric=metric)


def _nested(name: str, value: Any) -> list[tuple[str, "Compressor"]]:
    """Compressors held by a parameter: itself, or the items of a list (``stages__0``...)."""
    if isinstance(value, Compressor):
        return [(name, value)]
    if isinstance(value, (list, tuple)):
        return [(f"{name}__{i}", v) for i, v in enumerate(value) if isinstance(v, Compressor)]
    return []


def check_dim(name: str, value: Any, n_features: int, *, allow_equal: bool = True) -> int:
    """Validate a target width against the input width."""
    value = check_positive_int(name, value)
    top = n_features if allow_equal else n_features - 1
    if not 1 <= value <= top:
        raise InputError(
            f"{name}={value} is out of range: the input has {n_features} dimensions ({n_features} feature(s)), allowed is 1..{top}"
        )
    return value


def make_rng(seed: Any) -> np.random.Generator:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise InputError(f"seed must be an integer, got {seed!r}")
    return np.random.default_rng(int(seed))
