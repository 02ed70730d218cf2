"""Put compressed vectors where queries are served: a faiss index file, a usearch index, or a
LanceDB table, from a file written by ``binarize`` / ``truncate`` / ``apply`` (or float vectors).

The libraries number documents by row. Beside a faiss or usearch index go ``OUT.ids.parquet``
(row -> the user's id, when the file has ids) and ``OUT.embcompress.json`` (the compressor's
description, its fingerprint, and how queries must be prepared); a LanceDB table keeps the ids and
the kept columns as columns and the description in its schema metadata. Every output is written
under a temporary name and put in place at the end; a failure leaves nothing.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..core._fs import atomic_dir, atomic_file, check_output_dir
from ..core._util import require
from ..core.requests import from_keywords
from ..core.errors import InputError, OutputExistsError
from ..io import check_output_path, open_vectors
from ..core.persist import describe
from ..search import ann
from ..search.files import load_index
from ..search.index import arrow_ids

TARGETS = ann.TARGETS

QUERY_HOWTO = {
    "bits": "compress float queries with the same compressor (embcompress binarize/apply, or the saved model) "
    "and search the packed bits; scores are Hamming distances",
    "float": "normalize float queries to unit length; scores are cosine similarities (inner products)",
    "int8": "give float queries as they are; scores are inner products with the decoded documents",
    "codes": "give float queries (after the compressor's linear prefix, if any); scores are inner products with the "
    "decoded documents",
}


@dataclass(frozen=True)
class ExportOptions:
    """What :func:`export` writes: a ``to`` index (faiss, usearch or lancedb) of the codes read with ``model``
    (default: the one the file's metadata names) from ``column``, with ``id_column``'s ids. ``structure``
    (faiss only): ``flat`` (exact) or ``hnsw`` (bits and floats). ``hnsw``: the graph's settings
    (:class:`~embcompress.search.ann.Hnsw`; None: the defaults) for faiss's HNSW and for usearch, whose indexes
    are HNSW graphs. ``table``: LanceDB's table name. ``stage(description, rows)`` may return a progress
    callback for a graph's build (an hour or more at ten million rows). ``overwrite`` replaces outputs. ``ids``:
    False leaves ``OUT.ids.parquet`` out where the ids are kept elsewhere (a plan's tiers keep them with the codes)."""

    to: str
    model: str | os.PathLike | None = None
    structure: str = "flat"
    table: str = "vectors"
    column: str | None = None
    id_column: str | None = None
    overwrite: bool = False
    hnsw: ann.Hnsw | None = None
    stage: Callable[[str, int], Callable[[int], None] | None] | None = None
    ids: bool = True


def export(
    codes_path: str | os.PathLike, out: str | os.PathLike, *, options: ExportOptions | None = None, **given: Any
) -> dict[str, Any]:
    """Export the vectors or codes of ``codes_path`` to ``out`` as :class:`ExportOptions` (given, or its fields
    as keyword arguments) says. Returns what was written."""
    (o,) = from_keywords("export", given, ExportOptions, values=(options,))
    to, structure, table, overwrite, hnsw = o.to, o.structure, o.table, o.overwrite, o.hnsw
    column, id_column, stage = o.column, o.id_column, o.stage
    out = Path(out)
    sidecars, graph = _checked(to, structure, hnsw, out, codes_path, overwrite, ids=o.ids)
    hnsw = (hnsw or ann.Hnsw()) if graph else None
    index = load_index(codes_path, model=o.model, column=column, id_column=id_column)
    description = _description(index, codes_path, to, structure, hnsw, ids=o.ids)
    if to == "lancedb":
        _write_lancedb(
            index, codes_path, out, table, description, column=column, id_column=id_column, overwrite=overwrite
        )
        return {"output": str(out), "target": to, "table": table, "rows": index.num_docs, "kind": index.kind}
    progress = stage(f"building the {to} HNSW graph", index.num_docs) if stage is not None and graph else None
    built = (
        ann.faiss_index(index, structure, hnsw or ann.Hnsw(), progress)
        if to == "faiss"
        else ann.usearch_index(index, hnsw, progress)
    )
    written = _write_index(built, index.ids if o.ids else None, description, [out, *sidecars], overwrite)
    return {
        "output": str(out),
        "target": to,
        "structure": structure if to == "faiss" else "hnsw",
        "graph": description["graph"],
        "rows": index.num_docs,
        "kind": index.kind,
        "files": [str(p) for p in written],
    }


def sidecar_paths(out: Path) -> list[Path]:
    """What goes beside a faiss or usearch index at ``out``: its ids (``OUT.ids.parquet``) and its description
    (``OUT.embcompress.json``)."""
    return [Path(str(out) + ".ids.parquet"), Path(str(out) + ".embcompress.json")]


def _checked(
    to: str, structure: str, hnsw, out: Path, codes_path, overwrite: bool, *, ids: bool
) -> tuple[list[Path], bool]:
    """(the sidecar files of a faiss or usearch index to write, the ids' only with ``ids``; whether the index is a
    graph), once the target, the structure, the HNSW settings and every output are checked."""
    if to not in TARGETS:
        raise InputError(f"export target must be one of {', '.join(TARGETS)}, got {to!r}")
    sidecars = sidecar_paths(out)[0 if ids else 1 :] if to != "lancedb" else []
    if to == "lancedb":
        _check_new_dir(out, overwrite)
    else:
        check_output_path(out, overwrite=overwrite, inputs=(codes_path,))
        for p in sidecars:
            check_output_path(p, overwrite=overwrite, inputs=(codes_path,))
    if structure not in ann.STRUCTURES:
        raise InputError(f"index structure must be one of {', '.join(ann.STRUCTURES)}, got {structure!r}")
    if structure == "hnsw" and to != "faiss":
        raise InputError(f"--structure hnsw is for faiss; {to} indexes are built its own way")
    graph = structure == "hnsw" or to == "usearch"
    if hnsw is not None and not graph:
        raise InputError(
            f"HNSW settings (links per node, ef) apply to a graph: export --to faiss --structure hnsw, "
            f"or --to usearch; a {to} {'flat index' if to == 'faiss' else 'table'} has none"
        )
    return sidecars, graph


def _write_index(built, ids, description: dict, paths: list[Path], overwrite: bool) -> list[Path]:
    """Write the built index to ``paths[0]``, the ``ids`` (None: none) and the description beside it
    (``paths[-1]``); all or nothing. The files written."""
    out, meta_file = paths[0], paths[-1]
    is_faiss = description["target"] == "faiss"
    written: list[Path] = []
    try:
        with atomic_file(out, overwrite=overwrite) as tmp:
            if is_faiss:
                faiss = ann.require_faiss()
                (faiss.write_index_binary if ann.SERVING[description["kind"]].faiss_binary else faiss.write_index)(
                    built, str(tmp)
                )
            else:
                built.save(str(tmp))
        written.append(out)
        if ids is not None:
            write_ids(paths[1], ids, overwrite)
            written.append(paths[1])
        with atomic_file(meta_file, overwrite=overwrite) as tmp:
            tmp.write_text(json.dumps(description, indent=2, sort_keys=True, default=str) + "\n")
        written.append(meta_file)
    except BaseException:
        for p in written:  # all or nothing
            p.unlink(missing_ok=True)
        raise
    return written


def write_ids(path: Path, ids, overwrite: bool) -> None:
    """``OUT.ids.parquet`` beside an index that numbers documents by row: each row with the user's id."""
    with atomic_file(path, overwrite=overwrite) as tmp:
        pq.write_table(
            pa.table({"row": np.arange(len(ids), dtype=np.int64), "id": arrow_ids(ids)}), tmp, write_page_checksum=True
        )


def _check_new_dir(out: Path, overwrite: bool) -> None:
    if out.exists() and not overwrite:
        raise OutputExistsError(f"{out} already exists; pass --overwrite (overwrite=True) to replace it")
    check_output_dir(out, overwrite=True)


def _description(index, codes_path, to: str, structure: str, hnsw: ann.Hnsw | None, *, ids: bool) -> dict[str, Any]:
    comp = index.compressor
    return {
        "format": "embcompress.serving.export",
        "source": str(Path(codes_path).name),
        "target": to,
        "structure": structure,
        "graph": None if hnsw is None else hnsw.built(),
        "rows": index.num_docs,
        "kind": index.kind,
        "ids": "OUT.ids.parquet maps row -> id" if ids and index.ids is not None else None,
        "compressor": describe(comp) if comp is not None else None,
        "queries": QUERY_HOWTO[index.kind],
        "load": _load_howto(to, ann.SERVING[index.kind].faiss_binary),
    }


def _load_howto(to: str, binary: bool) -> str | None:
    """How a server opens the index mapped from its file (page cache that processes share) rather
    than read into its own memory, as ``search --graph`` does."""
    if to == "faiss":
        return (
            f"faiss.{'read_index_binary' if binary else 'read_index'}(path, faiss.IO_FLAG_MMAP_IFC) maps the "
            "codes and any graph from the file (faiss 1.11 or later); without the flag faiss reads them into memory"
        )
    if to == "usearch":
        return (
            "usearch.index.Index.restore(path, view=True) maps the index from the file; "
            "without view=True usearch loads it"
        )
    return None


def _write_lancedb(
    index, codes_path, out: Path, table: str, description: dict, *, column, id_column, overwrite
) -> None:
    lancedb = require("lancedb", "export", "LanceDB tables")
    if index.kind not in ("bits", "float"):
        raise InputError(
            f"{index.compressor.name} codes ({index.kind}) have no LanceDB vector type; LanceDB searches "
            "float vectors and bits (uint8, Hamming): export the float vectors or binary codes instead"
        )
    src = open_vectors(codes_path, column=column, id_column=id_column, codes=None)
    names = src.schema.names if src.schema is not None else []
    keep = [c for c in names if c not in (src.column, src.id_column)]  # every other column of the file
    carried = pq.read_table(codes_path, columns=keep).columns if keep else []
    data = np.ascontiguousarray(index.data)
    if index.kind == "bits":
        vec = pa.FixedSizeListArray.from_arrays(pa.array(data.reshape(-1), type=pa.uint8()), data.shape[1])
    else:
        vec = pa.FixedSizeListArray.from_arrays(pa.array(data.reshape(-1).astype(np.float32)), data.shape[1])
    ids = arrow_ids(index.ids) if index.ids is not None else pa.array(np.arange(index.num_docs, dtype=np.int64))
    names = ["id", *keep, "vector"]
    t = pa.Table.from_arrays([ids, *carried, vec], names=names)
    t = t.replace_schema_metadata({b"embcompress": json.dumps(description, sort_keys=True, default=str).encode()})
    with atomic_dir(out, overwrite=overwrite) as tmp:
        lancedb.connect(str(tmp)).create_table(table, data=t)


__all__ = ["TARGETS", "export"]
