"""A serving plan as data: how a corpus is served in a RAM budget.

A plan names
* the first stage: a fitted code (a saved compressor, ``first/``) kept in RAM and searched by the
  exact scan or through an HNSW graph with its settings;
* the rescoring copy: none, or the documents again as float32, float16 or int8 (int8 with its
  saved calibration, ``copy/``), or what the first stage's code left of them in int8 (``int8r``,
  :mod:`embcompress.serving.residual`), kept in RAM or read from a file on disk for the candidates only;
* how many candidates the first stage hands to the rescoring, and ``k``.

It is saved as one directory: ``plan.json`` (versioned, validated on load) beside the models.
``embcompress apply PLAN_DIR IN OUT`` writes every tier the plan needs in one pass
(:mod:`embcompress.serving.tiers`), and ``embcompress search OUT QUERIES RESULTS --plan PLAN_DIR``
serves them."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from ..core._fs import atomic_dir, check_output_dir
from ..core.base import Compressor
from ..core.errors import FormatError, InputError
from ..core.persist import describe, load, save
from ..search.ann import Hnsw, graph_allowed
from . import residual
from .copies import ROW_EXTRA

PLAN_FILE = "plan.json"
FORMAT = "embcompress-serving-plan"
VERSION = 1
#: the rescoring copies a plan can name, with the bytes each holds per dimension: none, the first stage's
#: own codes decoded (an asymmetric rescoring, nothing stored beside the codes), or a copy of the documents
#: (an int8 residual copy holds 8 bytes a row more: ``ROW_EXTRA``)
COPIES = {"none": 0, "decoded": 0, "float32": 4, "float16": 2, "int8": 1, "int8r": 1}
#: the copies that are files of their own
STORED = ("float32", "float16", "int8", "int8r")
PLACES = ("disk", "ram")
STRUCTURES = ("exact", "hnsw")


@dataclass(frozen=True)
class Plan:
    """What a server holds and how it searches (the models themselves are saved beside it)."""

    structure: str = "exact"  # the first stage: "exact" scan or "hnsw" graph
    copy: str = "none"  # the rescoring copy: none, decoded, float32, float16, int8 or int8r
    place: str = "disk"  # where the rescoring copy is read from: disk (candidates' rows only) or ram
    candidates: int = 10  # rows rescored per query (>= k; = k without a copy)
    k: int = 10
    graph: Hnsw | None = None  # the graph's settings, with structure "hnsw"
    measured: dict[str, Any] = field(default_factory=dict)  # what recommend measured (shown, never read back)

    def __post_init__(self) -> None:
        def refuse(what: str, allowed: str) -> None:
            raise InputError(f"serving plan: {what}; allowed: {allowed}")

        if self.structure not in STRUCTURES:
            refuse(f"structure {self.structure!r}", ", ".join(STRUCTURES))
        if self.copy not in COPIES:
            refuse(f"copy {self.copy!r}", ", ".join(COPIES))
        if self.place not in PLACES:
            refuse(f"place {self.place!r}", ", ".join(PLACES))
        for name in ("k", "candidates"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                refuse(f"{name}={v!r}", "a whole number of at least 1")
        if self.candidates < self.k:
            refuse(f"candidates={self.candidates} below k={self.k}", "candidates >= k")
        if self.copy == "none" and self.candidates != self.k:
            refuse(f"candidates={self.candidates} without a rescoring copy", f"candidates = k ({self.k})")
        if (self.graph is not None) != self.graphed:
            refuse("graph settings must be given exactly when the structure is hnsw", "structure hnsw with a graph")

    @property
    def graphed(self) -> bool:
        """Whether the first stage is searched through an HNSW graph (a tier of its own) rather than scanned."""
        return self.structure == "hnsw"

    @property
    def rescored(self) -> bool:
        return self.copy != "none"

    @property
    def stored(self) -> bool:
        """Whether the rescoring copy is a file of its own (not the codes decoded)."""
        return self.copy in STORED

    def copy_bytes(self, dim: int) -> int:
        """Bytes per vector of the rescoring copy for ``dim``-wide inputs (0 without one)."""
        return copy_bytes(self.copy, dim)

    def describe(self, first: Compressor) -> str:
        """One line: ``pca:192+binary (24 B, exact) -> int8 on disk, 100 candidates, k 10``."""
        wide = f", exploring {self.graph.explore}x" if self.graph is not None and self.graph.explore > 1 else ""
        head = f"{first!r} ({first.output_spec.nbytes} B, {self.structure}{wide})"
        if not self.rescored:
            return f"{head}, codes only, k {self.k}"
        if not self.stored:
            return f"{head} -> its codes decoded (asymmetric), {self.candidates} candidates, k {self.k}"
        what = "int8 residual" if self.copy == residual.KIND else self.copy
        return f"{head} -> {what} on {self.place}, {self.candidates} candidates, k {self.k}"

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        return {"format": FORMAT, "version": VERSION, **d}

    @classmethod
    def from_json(cls, doc: Any, where: str) -> "Plan":
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise FormatError(f'{where} is not an embcompress serving plan (no "format": "{FORMAT}")')
        if doc.get("version") != VERSION:
            raise FormatError(
                f"{where} is a version {doc.get('version')!r} serving plan; this embcompress reads version {VERSION}"
            )
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(doc) - known - {"format", "version"})
        if unknown:
            raise FormatError(
                f"{where}: unknown field(s) {', '.join(unknown)}; a plan holds {', '.join(sorted(known))}"
            )
        kw = {key: doc[key] for key in known if key in doc}
        graph = kw.pop("graph", None)
        try:
            g = None if graph is None else Hnsw(**graph)
            return cls(graph=g, **kw)
        except (TypeError, InputError) as exc:  # a graph field of another name, or a value the plan refuses
            raise FormatError(f"{where}: {exc}") from None


def copy_bytes(copy: str, dim: int) -> int:
    """Bytes per vector of a rescoring copy of kind ``copy`` for ``dim``-wide inputs."""
    return COPIES[copy] * dim + ROW_EXTRA.get(copy, 0)


@dataclass(frozen=True)
class SavedPlan:
    """A plan read from its directory, with its fitted models and the fingerprint that ties the tiers
    ``apply`` writes to it."""

    plan: Plan
    first: Compressor
    copy_model: Compressor | None
    fingerprint: str
    path: Path


def fingerprint(plan: Plan, first: Compressor, copy_model: Compressor | None) -> str:
    """What ties the tiers ``apply`` wrote to the plan that wrote them: the fitted models' fingerprints
    and the copy's kind (not the measurements): tiers of one plan's models are refused by another's."""
    parts = [describe(first)["fingerprint"], plan.copy, describe(copy_model)["fingerprint"] if copy_model else "-"]
    return hashlib.sha256("/".join(parts).encode()).hexdigest()[:32]


def is_plan_dir(path: str | os.PathLike) -> bool:
    return (Path(path) / PLAN_FILE).is_file()


def save_plan(
    plan: Plan,
    first: Compressor,
    path: str | os.PathLike,
    *,
    copy_model: Compressor | None = None,
    overwrite: bool = False,
) -> Path:
    """Write ``plan`` with its fitted first stage (and int8 calibration) to the directory ``path``,
    all or nothing."""
    if plan.copy == "int8" and copy_model is None:
        raise InputError("an int8 rescoring copy needs its fitted int8 calibration (copy_model)")
    if plan.copy != "int8" and copy_model is not None:
        raise InputError(f"a {plan.copy} rescoring copy has no model; pass copy_model only for int8")
    if plan.copy == residual.KIND:
        residual.check_supported(first, "serving plan")
    check_output_dir(path, overwrite=overwrite)
    with atomic_dir(path, overwrite=overwrite) as tmp:
        save(first, tmp / "first")
        if copy_model is not None:
            save(copy_model, tmp / "copy")
        (tmp / PLAN_FILE).write_text(json.dumps(plan.to_json(), indent=2) + "\n")
    return Path(path)


def load_plan(path: str | os.PathLike) -> SavedPlan:
    """The plan in directory ``path``, checked: its file, its models, and that they agree."""
    path = Path(path)
    where = path / PLAN_FILE
    if not where.is_file():
        raise InputError(
            f"{path} is not a serving plan directory (no {PLAN_FILE}); write one with "
            "embcompress recommend IN DIR --ram-budget B"
        )
    try:
        doc = json.loads(where.read_text())
    except (ValueError, UnicodeDecodeError) as exc:
        raise FormatError(f"{where} is not valid JSON: {exc}") from None
    plan = Plan.from_json(doc, str(where))
    first = load(path / "first")
    copy_model = load(path / "copy") if (path / "copy").is_dir() else None
    if (plan.copy == "int8") != (copy_model is not None):
        raise FormatError(
            f"{path}: the plan's copy is {plan.copy} but the directory "
            f"{'has' if copy_model is not None else 'has no'} an int8 calibration (copy/)"
        )
    if copy_model is not None and copy_model.n_features_in_ != first.n_features_in_:
        raise FormatError(
            f"{path}: the int8 calibration is {copy_model.n_features_in_} wide, the first stage {first.n_features_in_}"
        )
    if plan.copy == residual.KIND and not residual.supports(first):
        raise FormatError(f"{path}: an int8r copy needs a first stage of codes scored by lookup tables, not {first!r}")
    if plan.graphed and not graph_allowed(first.output_spec.kind):
        raise FormatError(
            f"{path}: an HNSW first stage is built over bits or float vectors, not {first.output_spec.kind} codes"
        )
    return SavedPlan(plan, first, copy_model, fingerprint(plan, first, copy_model), path)
