"""What a fitted compressor declares about itself, as data: its output (:class:`OutputSpec`), how
its fit reads data (:class:`FitTags`) and where a float query meets its output
(:class:`QuerySpace`). Search, streaming, the fit recipe and reports read these instead of guessing."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from .checks import check_array

if TYPE_CHECKING:
    from .base import Compressor


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


@dataclass(frozen=True)
class FitTags:
    """How a compressor's fit reads data, computed per instance (a parameter can change it): the
    ``fit`` of its :class:`Traits`. The fit recipe (:func:`embcompress.core.fitting.fit_recipe`)
    and the fit frame read these and nothing else."""

    #: False when fitting needs only the input width (one peek at the first batch)
    learns: bool = True
    #: fewest rows a fit needs: the fit frame refuses fewer, and a grid skips what is too small
    min_rows: int = 1
    #: rows a fit reads at most, from the start (None: all of them); file readers stop there
    first_rows: int | None = None
    #: the fit reads a seeded uniform sample of this many rows (None: it reads rows as they come)
    sample: int | None = None
    #: fitted from statistics of blocks merged in any order (a :class:`BlockStats` family, for
    #: the parameters it has)
    block_stats: bool = False
    #: those statistics are cheap enough to compute for every batch on the reader's workers and
    #: merge in file order (the local engine's fit); PCA's d x d merges are not, it fits on one thread
    stats_per_batch: bool = False


#: the kinds of output (:attr:`OutputSpec.kind`, :attr:`Traits.output`)
OUTPUT_KINDS = ("float", "int8", "bits", "codes")

#: how search can score a family's codes against float queries (:attr:`Traits.scans`)
SCANS = ("tables", "dense", "planes", "rerank_tables")


@dataclass(frozen=True)
class Traits:
    """What a compressor declares, in one frozen value read through :attr:`Compressor.traits`, the way
    scikit-learn's ``Tags`` work: the base class makes the defaults, and each capability mixin of
    :mod:`embcompress.core.capabilities` and each family returns its parent's traits with its own
    changes (``super().traits.with_fit(...)`` or ``.but(...)``). Nothing probes a family for a
    capability any other way. The output's kind is declared here, before any fit; its width and bytes depend
    on the fitted state (:attr:`Compressor.output_spec`). The query space is not a declaration: every
    compressor has the same one (the stages before the last map a query into the space the last quantizes),
    built from the fitted stages by :attr:`Compressor.query_space`."""

    #: how its fit reads data
    fit: FitTags = FitTags()
    #: the kind of its output (:data:`OUTPUT_KINDS`), which its fitted ``output_spec.kind`` is
    output: str = "float"
    #: how search scores its codes against a float query: "tables" (a lookup table per code byte),
    #: "dense" (per-dimension codes, decoded block by block), "planes" (bit-planes against 8-bit
    #: queries), "rerank_tables" (an asymmetric rerank by tables over code bytes)
    scans: frozenset[str] = frozenset()
    #: a float map ``A x + b`` whose offset queries leave out before meeting decoded codes
    affine: bool = False
    #: serving targets that hold its codes as they are (when it is the whole compressor)
    exports: tuple[str, ...] = ()
    #: its fitted state is per-dimension only: code files carry it, search rebuilds it from the file
    state_in_file: bool = False
    #: its transform tests each chunk for NaN/inf itself (raising NonFiniteChunk), saving a pass
    fused_finite_check: bool = False

    def with_fit(self, **changes: Any) -> "Traits":
        """These traits with the fit tags changed."""
        return replace(self, fit=replace(self.fit, **changes))

    def but(self, **changes: Any) -> "Traits":
        """These traits with ``changes``; ``scans`` given as names are added to the ones held."""
        if "scans" in changes:
            unknown = set(changes["scans"]) - set(SCANS)
            if unknown:
                raise ValueError(f"unknown scans {sorted(unknown)}; known: {', '.join(SCANS)}")
            changes["scans"] = self.scans | frozenset(changes["scans"])
        if changes.get("output", self.output) not in OUTPUT_KINDS:
            raise ValueError(f"unknown output kind {changes['output']!r}; known: {', '.join(OUTPUT_KINDS)}")
        return replace(self, **changes)


@dataclass(frozen=True)
class QuerySpace:
    """Where a float query meets a fitted compressor's stored output: ``prefix`` (the stages
    before the last; none for a single compressor) maps a query into the float space that
    ``last`` quantizes. One name for each way across: :meth:`forward` into that space,
    :meth:`linear` into it through the linear part of each prefix stage, :meth:`back` out of it
    to the input space, and ``last.decode`` from codes into it."""

    prefix: tuple["Compressor", ...]
    last: "Compressor"
    stages: tuple["Compressor", ...] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "stages", (*self.prefix, self.last))

    def forward(self, X: Any) -> np.ndarray:
        """Queries through every stage but the last: the float space the last stage quantizes
        (where a full-precision query meets the decoded codes in a rerank)."""
        X = check_array(X, what="queries")
        for s in self.prefix:
            X = s._transform(X)
        return X

    def linear(self, X: Any) -> np.ndarray:
        """Queries mapped for inner products with decoded codes: like :meth:`forward` but through
        the *linear part* of each prefix stage. A stage ``z = A x + b`` (PCA, ITQ and centred
        rotations subtract a mean: :class:`~embcompress.core.capabilities.Affine`) reconstructs
        ``x ~ A^T (z - b)``, so ``<q, x> ~ <A q, z> - <A q, b>``: the last term is the same for
        every document, and ranking by ``<A q, z_decoded>`` is ranking by the estimated inner
        product ``<q, x>``. (Mapping the query through ``b`` too would add a per-document bias
        ``-<b, z>``.)"""
        X = check_array(X, what="queries")
        for s in self.prefix:
            X = s.linear_part(X) if s.traits.affine else s._transform(X)
        return X

    def back(self, Z: Any) -> np.ndarray:
        """Vectors of the space the last stage quantizes back in the input space (identity for a
        single compressor)."""
        Z = np.asarray(Z, dtype=np.float32)
        for s in reversed(self.prefix):
            Z = s.inverse_transform(Z)
        return Z


def float_spec(width: int, metric: str = "cosine") -> OutputSpec:
    return OutputSpec(kind="float", dtype="float32", width=int(width), nbytes=4 * int(width), metric=metric)
