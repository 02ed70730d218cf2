"""The tiers a serving plan needs, written in one pass and served back.

``apply_plan`` reads the input once: each batch is encoded by the plan's first stage (the codes,
``first.parquet``, with the ids) and, when the plan rescores, also as its rescoring copy
(``copy.npy``: float32, float16 or int8 rows, or int8 residuals of the codes with their scale and norm,
a plain ``.npy`` so it can be read at any row).
A plan whose first stage is an HNSW graph also gets its graph (``graph.faiss``, built over the codes
once they are written, as ``search --index hnsw`` builds it), which a server memory-maps instead of
building it at every start. A first stage scored through its reconstructions (codes of lookup tables, an
asymmetric rerank, residuals) also gets each code's reconstruction norm (``norms.npy``, float32), computed
beside the codes: a server would otherwise decode every code at its first query (40 s for ten million 48 B
codes). The ids are also kept as arrays from which a server reads only those of the results it returns
(serving.ids). ``tiers.json`` ties the directory to the plan that wrote it (the models'
fingerprint, rows, width). Everything is written under a temporary name and put in place at the end.

The copy is read back by :class:`~embcompress.serving.copies.DiskCopy` (the candidates' rows only)."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..core._fs import atomic_dir, check_output_dir
from ..core.errors import FormatError, InputError
from ..core.requests import from_keywords
from ..engines.local import CompressOptions, open_to_compress, write_codes
from ..search import Index
from ..search.files import load_index
from ..search.scorers import reconstruction_norms
from . import residual
from .ids import DiskIds, IdsWriter
from .copies import COPY_DTYPES, MAP_LIMIT, ROW_EXTRA, DiskCopy, RamCopy, copy_codec, open_copy
from .plan import SavedPlan, load_plan

TIERS_FILE = "tiers.json"
TIERS_FORMAT = "embcompress-serving-tiers"
FIRST_FILE = "first.parquet"
COPY_FILE = "copy.npy"
GRAPH_FILE = "graph.faiss"
NORMS_FILE = "norms.npy"


def encoder_of(saved: SavedPlan) -> Callable[[np.ndarray, np.ndarray], np.ndarray] | None:
    """(float32 rows, their first-stage codes) -> the rows of the plan's rescoring copy (None without a
    stored copy)."""
    if not saved.plan.stored:
        return None
    if saved.plan.copy == residual.KIND:
        return lambda X, codes: residual.encode(saved.first, X, codes)
    encode = copy_codec(saved.plan.copy, saved.copy_model)[0]
    return lambda X, codes: encode(X)


class _CopyWriter:
    """A ``.npy`` file of ``rows`` x ``dim`` values (``dim`` None: one value a row) written in row order, checked
    complete at the end; ``what`` names it in an error."""

    def __init__(self, path: Path, dtype, rows: int, dim: int | None, what: str = "rescoring copy"):
        self.path, self.dtype, self.rows, self.written, self.what = path, np.dtype(dtype), rows, 0, what
        self.tail = () if dim is None else (dim,)
        self._f = open(path, "xb")
        descr = np.lib.format.dtype_to_descr(self.dtype)
        header = {"descr": descr, "fortran_order": False, "shape": (rows, *self.tail)}
        np.lib.format.write_array_header_2_0(self._f, header)
        end = self._f.tell() + rows * int(np.prod(self.tail)) * self.dtype.itemsize
        if hasattr(os, "posix_fallocate") and rows:  # the blocks now: a full disk fails before any work
            os.posix_fallocate(self._f.fileno(), 0, end)

    def write(self, values: np.ndarray) -> None:
        if values.shape[1:] != self.tail or values.dtype != self.dtype:
            raise FormatError(
                f"{self.what} rows of shape {values.shape} and {values.dtype}; expected {self.tail} {self.dtype} values"
            )
        self._f.write(np.ascontiguousarray(values).data)
        self.written += len(values)

    def close(self, *, complete: bool = True) -> None:
        self._f.close()
        if complete and self.written != self.rows:
            raise FormatError(f"the {self.what} holds {self.written} rows, the input {self.rows}")


def apply_plan(
    plan_dir: str | os.PathLike,
    src_path: str | os.PathLike,
    out_dir: str | os.PathLike,
    *,
    options: CompressOptions | None = None,
    **given: Any,
) -> dict[str, Any]:
    """Write every tier the plan in ``plan_dir`` needs for the vectors of ``src_path`` into the
    directory ``out_dir``, reading the input once; the codes' file carries the ids and ``keep_columns``
    as ``apply`` does. The options are those of a compression (:class:`~embcompress.engines.local.CompressOptions`,
    given or as its fields' keyword arguments). Returns the sizes written."""
    (o,) = from_keywords("apply_plan", given, CompressOptions, values=(options,))
    batch_size, overwrite, threads = o.batch_size, o.overwrite, o.threads
    saved = load_plan(plan_dir)
    check_output_dir(out_dir, overwrite=overwrite)
    encode = encoder_of(saved)
    first = saved.first
    with atomic_dir(out_dir, overwrite=overwrite) as tmp:
        src = open_to_compress(first, src_path, tmp / FIRST_FILE, replace(o, overwrite=False))
        writers = [
            None
            if encode is None
            else _CopyWriter(
                tmp / COPY_FILE, COPY_DTYPES[saved.plan.copy], src.num_rows, src.dim + ROW_EXTRA.get(saved.plan.copy, 0)
            ),
            _CopyWriter(tmp / NORMS_FILE, np.float32, src.num_rows, None, "norms file") if _norms_kept(saved) else None,
        ]
        ids = IdsWriter(tmp, src.schema.field(src.id_column).type, src.num_rows) if src.id_column else None

        def tiers_of(X: np.ndarray, offset: int):
            codes = first.transform(X, row_offset=offset)  # checks the values first
            copy = None if encode is None else encode(X, codes)
            return codes, copy, (None if writers[1] is None else reconstruction_norms(first, codes, offset))

        copy_bytes = saved.plan.copy_bytes(src.dim)  # 0 without a stored copy
        row_bytes = first.output_spec.nbytes + copy_bytes + 4  # the norm's float32, if kept
        batches = src.batches(batch_size, threads=threads, transform=tiers_of, result_row_bytes=row_bytes)

        try:
            res = write_codes(
                first,
                src,
                (src_path, tmp / FIRST_FILE),
                _codes_only(batches, writers, ids, src.id_column),
                replace(o, overwrite=True),
            )
        except BaseException:
            for w in [*writers, ids]:
                if w is not None:
                    w.close(complete=False)  # the directory is removed with it
            raise
        for w in writers:
            if w is not None:
                w.close()
        ids_doc = ids.close() if ids is not None else None
        graph_seconds = _write_graph(saved, tmp) if saved.plan.graphed else 0.0
        (tmp / TIERS_FILE).write_text(json.dumps(_tiers_doc(saved, src.num_rows, src.dim, ids_doc), indent=2) + "\n")
    return {**_applied(saved, src.num_rows, res, out_dir, copy_bytes), "graph_seconds": graph_seconds}


def _write_graph(saved: SavedPlan, tmp: Path) -> float:
    """The plan's HNSW graph over the codes just written to ``tmp``, with its description beside it (what
    ``export --to faiss --structure hnsw`` writes, less the ids: they are kept once, with the codes), in the
    plan's settings; the seconds it took."""
    from .export import export

    t0 = time.perf_counter()
    export(
        tmp / FIRST_FILE,
        tmp / GRAPH_FILE,
        to="faiss",
        structure="hnsw",
        hnsw=saved.plan.graph,
        model=saved.path / "first",
        ids=False,
    )
    return time.perf_counter() - t0


def _applied(saved: SavedPlan, rows: int, res, out_dir, copy_bytes: int) -> dict[str, Any]:
    """What :func:`apply_plan` returns: the rows, the bytes of each tier and per vector, the time and the plan."""
    copy_size = os.path.getsize(Path(out_dir) / COPY_FILE) if saved.plan.stored else 0
    graph = Path(out_dir) / GRAPH_FILE
    return {
        "rows": rows,
        "first_bytes": res.output_bytes,
        "copy_bytes": copy_size,
        "graph_bytes": graph.stat().st_size if saved.plan.graphed else 0,
        "ram_bytes_per_vector": saved.first.output_spec.nbytes,
        "disk_bytes_per_vector": copy_bytes,
        "seconds": res.seconds,
        "output": str(out_dir),
        "plan": saved.plan.describe(saved.first),
    }


def _norms_kept(saved: SavedPlan) -> bool:
    """Whether the plan's first stage is scored through its codes' reconstructions (and has them): codes of
    lookup tables, an asymmetric rerank, residuals on disk."""
    plan, first = saved.plan, saved.first
    scored = first.output_spec.kind == "codes" or plan.copy == residual.KIND or (plan.rescored and not plan.stored)
    try:
        d = first.n_features_in_
        first.inverse_transform(first.transform(np.full((1, d), d**-0.5, np.float32)))  # a unit row, decoded
    except NotImplementedError:
        return False
    return scored


def _codes_only(batches, writers: list[_CopyWriter | None], ids: IdsWriter | None, id_column: str | None):
    """The batches of (codes, copy rows, norms) as batches of codes, the others written by ``writers`` on the way,
    and the ids of ``id_column`` by ``ids`` (the batches come in row order: the copy's rows, the norms and the ids
    follow the file's)."""
    try:
        for b in batches:
            codes, *others = b.vectors
            for w, values in zip(writers, others):
                if w is not None:
                    w.write(values)
            if ids is not None:
                ids.write(b.carried.column(id_column))
            yield replace(b, vectors=codes)
    finally:
        batches.close()


def _tiers_doc(saved: SavedPlan, rows: int, dim: int, ids: dict[str, Any] | None) -> dict[str, Any]:
    """The tiers directory's description: its format, the plan it belongs to, the rows and the files (``ids``: the
    ids' files, serving.ids)."""
    return {
        "format": TIERS_FORMAT,
        "version": 1,
        "plan": saved.fingerprint,
        "rows": rows,
        "dim": dim,
        "first": FIRST_FILE,
        "copy": COPY_FILE if saved.plan.stored else None,
        "copy_kind": saved.plan.copy,
        "graph": GRAPH_FILE if saved.plan.graphed else None,
        "norms": NORMS_FILE if _norms_kept(saved) else None,
        "ids": ids,
    }


@dataclass
class Served:
    """A plan's tiers opened for search: the first stage's codes in memory, the copy on disk (or in RAM)."""

    saved: SavedPlan
    index: Index
    copy: DiskCopy | RamCopy | residual.ResidualCopy | None
    out_dir: Path

    def search(self, queries: np.ndarray, k: int | None = None, *, threads: int | None = None):
        """Top ``k`` (default: the plan's) of each float query, by the plan: the first stage's top
        ``candidates`` rescored against the copy."""
        plan = self.saved.plan
        k = plan.k if k is None else k
        if not plan.rescored:
            return self.index.search(queries, k, threads=threads)
        if not plan.stored:
            return self.index.search(
                queries, k, rerank="asymmetric", candidates=max(plan.candidates, k), threads=threads
            )
        return self.index.search(
            queries, k, rerank="float", candidates=max(plan.candidates, k), originals=self.copy, threads=threads
        )

    def drop_cache(self) -> bool:
        """Evict the copy on disk from the page cache and from this process's map, for a cold query next (a
        measurement); False where there is none or the platform cannot."""
        drop = getattr(self.copy, "drop_cache", None)
        return bool(drop and drop())


def open_tiers(
    out_dir: str | os.PathLike,
    plan_dir: str | os.PathLike,
    *,
    threads: int | None = None,
    id_column: str | None = None,
    map_limit: int = MAP_LIMIT,
) -> Served:
    """The tiers ``apply_plan`` wrote to ``out_dir``, checked against the plan in ``plan_dir``; a copy on disk of
    at most ``map_limit`` bytes is memory-mapped too, for its warm reads (serving.copies). The ids are read from
    their files on disk as results need them, unless ``id_column`` names a column of the codes' file."""
    out_dir = Path(out_dir)
    saved = load_plan(plan_dir)
    tiers = read_tiers(out_dir, saved)
    plan = saved.plan
    ids_on_disk = bool(tiers.get("ids")) and id_column is None
    index = load_index(
        out_dir / FIRST_FILE,
        model=saved.path / "first",
        id_column=False if ids_on_disk else id_column,
        threads=threads,
        structure=plan.structure,
        hnsw=plan.graph,
    )
    _check_rows(out_dir, index.num_docs, tiers)
    if ids_on_disk:
        index.ids = stored_ids(out_dir, tiers)
    norms = stored_norms(out_dir, tiers)
    if norms is not None:  # tiers written before the norms were kept have none: computed at the first query
        index.scorer.adopt_norms(norms)
    graph = _graph_file(out_dir, saved, tiers)
    if graph is not None:  # tiers written before graphs were a tier have none: the graph is built on first search
        index.load_graph(graph, ef_search=plan.graph.ef_search)
    copy = stored_copy(out_dir, saved, tiers, map_limit=map_limit)
    if copy is not None and plan.place == "ram":
        copy = RamCopy(copy)
    if copy is not None and plan.copy == residual.KIND:  # residuals, scored with the codes' reconstructions
        copy = residual.ResidualCopy(copy.get, index, source=copy)
    return Served(saved, index, copy, out_dir)


def tiers_json(out_dir: Path, plan_dir: Path | str = "PLAN") -> dict[str, Any]:
    """``out_dir``'s tiers.json, read and checked to be one (``plan_dir``: named in the error where there is none)."""
    where = out_dir / TIERS_FILE
    if not where.is_file():
        raise InputError(
            f"{out_dir} holds no serving tiers ({TIERS_FILE}); write them with embcompress apply "
            f"{plan_dir} IN {out_dir}"
        )
    try:
        tiers = json.loads(where.read_text())
    except ValueError as exc:
        raise FormatError(f"{where} is not valid JSON: {exc}") from None
    if not isinstance(tiers, dict) or tiers.get("format") != TIERS_FORMAT:
        raise FormatError(f"{where} is not an embcompress tiers file")
    return tiers


def read_tiers(out_dir: Path, saved: SavedPlan) -> dict[str, Any]:
    """``out_dir``'s tiers.json, checked to be the tiers of ``saved``'s plan and models."""
    plan_dir = saved.path
    tiers = tiers_json(out_dir, plan_dir)
    if tiers.get("plan") != saved.fingerprint:
        raise InputError(
            f"{out_dir} was written by another plan (or other models) than {plan_dir}; "
            f"write the tiers again with embcompress apply {plan_dir} IN {out_dir}"
        )
    return tiers


def _check_rows(out_dir: Path, rows: int, tiers: dict[str, Any]) -> None:
    if rows != tiers["rows"]:
        raise FormatError(f"{out_dir / FIRST_FILE} holds {rows:,} rows, the tiers {tiers['rows']:,}")


def _graph_file(out_dir: Path, saved: SavedPlan, tiers: dict[str, Any]) -> Path | None:
    """The tiers' HNSW graph file, there (None when the tiers have none)."""
    if not tiers.get("graph"):
        return None
    path = out_dir / tiers["graph"]
    if not path.is_file():
        raise InputError(
            f"{path}: the plan's HNSW graph is missing; write the tiers again with embcompress apply {saved.path} "
            f"IN {out_dir}"
        )
    return path


def stored_norms(out_dir: Path, tiers: dict[str, Any], *, read: bool = True) -> np.ndarray | None:
    """The codes' reconstruction norms ``apply`` kept (None where the tiers have none), checked whole; only
    checked with ``read=False``."""
    if not tiers.get("norms"):
        return None
    path = out_dir / tiers["norms"]
    try:
        norms = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise FormatError(
            f"{path}: the codes' reconstruction norms are missing or cut ({exc}); write the tiers again with "
            "embcompress apply"
        ) from None
    if norms.shape != (tiers["rows"],) or norms.dtype != np.float32:
        raise FormatError(f"{path} holds {norms.shape} {norms.dtype}; the tiers need {tiers['rows']:,} float32 norms")
    return np.array(norms) if read else None


def stored_ids(out_dir: Path, tiers: dict[str, Any]) -> DiskIds | None:
    """The ids ``apply`` kept on disk, opened and checked against the tiers' rows (None where the tiers keep them in
    the codes' file only)."""
    return DiskIds(out_dir, tiers["ids"], tiers["rows"]) if tiers.get("ids") else None


def stored_copy(
    out_dir: Path, saved: SavedPlan, tiers: dict[str, Any], *, map_limit: int = MAP_LIMIT
) -> DiskCopy | None:
    """The plan's copy on disk, checked whole and of the plan's kind and shape (None without one)."""
    if not saved.plan.stored:
        return None
    path, rows, dim = out_dir / COPY_FILE, tiers["rows"], tiers["dim"]
    return open_copy(path, saved.plan.copy, saved.copy_model, rows=rows, dim=dim, map_limit=map_limit)


def check_tiers(out_dir: str | os.PathLike, saved: SavedPlan) -> dict[str, Any]:
    """What :func:`open_tiers` checks, without reading the codes into memory (the row count from the
    file's metadata, the copy from its header and size): for a command that reads them itself."""
    from ..io import open_vectors

    out_dir = Path(out_dir)
    tiers = read_tiers(out_dir, saved)
    _check_rows(out_dir, open_vectors(out_dir / FIRST_FILE, codes=None).num_rows, tiers)
    _graph_file(out_dir, saved, tiers)
    stored_norms(out_dir, tiers, read=False)
    ids = stored_ids(out_dir, tiers)
    if ids is not None:
        ids.close()
    copy = stored_copy(out_dir, saved, tiers)
    if copy is not None:
        copy.close()
    return tiers


def search_plan_files(
    out_dir: str | os.PathLike,
    queries: str | os.PathLike,
    output: str | os.PathLike,
    plan_dir: str | os.PathLike,
    *,
    k: int | None = None,
    overwrite: bool = False,
    threads: int | None = None,
    **opening: Any,
) -> dict[str, Any]:
    """Serve the tiers in ``out_dir`` by the plan in ``plan_dir`` for the float queries of ``queries``
    and write the ranked results to ``output`` (as ``search`` does); ``opening``: :func:`open_tiers`' ``id_column``
    and ``map_limit``."""
    from ..io.writers import check_output_path
    from ..search.files import load_queries, write_results

    check_output_path(output, overwrite=overwrite, inputs=(queries,))
    served = open_tiers(out_dir, plan_dir, threads=threads, **opening)
    Q, qids = load_queries(queries, served.index)
    res = served.search(Q, k, threads=threads)
    write_results(output, qids, res, overwrite=overwrite)
    plan = served.saved.plan
    return {
        "queries": len(Q),
        "documents": served.index.num_docs,
        "k": res.rows.shape[1],
        "plan": plan.describe(served.saved.first),
        "candidates": res.info["candidates"],
        "ram_bytes_per_vector": served.index.nbytes_per_vector,
        "disk_bytes_per_vector": plan.copy_bytes(Q.shape[1]) if plan.place == "disk" else 0,
        "seconds": res.seconds,
        "queries_per_second": len(Q) / res.seconds,
        "output": str(output),
    }
