"""Search over files: build an index from a vector or code file and its metadata, refusing to
compare codes from different compressors."""

from __future__ import annotations

from dataclasses import dataclass
import os
from typing import Any, Callable

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..core._fs import atomic_file
from ..core.requests import from_keywords
from ..core.errors import FormatError, InputError
from ..io import check_output_path, open_vectors, read_all
from ..core.persist import arrays_from_json, describe, from_config, load
from .ann import Hnsw
from .fastscan import rows_into_blocks
from .index import Index, SearchResult
from .scorers import keeps_blocks


def compressor_for(meta: dict | None, model_dir: str | os.PathLike | None, path) -> Any:
    """The fitted compressor that produced a code file: loaded from ``model_dir`` (and checked
    against the file's fingerprint), or rebuilt from the file's metadata when the compressor keeps
    only per-dimension state, which the file carries (binary and its decoding levels, int8, truncate)."""
    if not meta or meta.get("format") != "embcompress.vectors":
        raise InputError(f"{path} holds codes without embcompress metadata; cannot tell which compressor made them")
    info = meta["compressor"]
    if model_dir is not None:
        comp = load(model_dir)
        if describe(comp)["fingerprint"] != info.get("fingerprint"):
            raise InputError(
                f"{path} was made by {info['name']} with fingerprint {info.get('fingerprint')}, but the compressor in "
                f"{model_dir} has fingerprint {describe(comp)['fingerprint']}; codes from different compressors cannot "
                "be compared"
            )
        return comp
    try:
        comp = from_config(info, arrays_from_json(info.get("arrays", {})))
    except (FormatError, KeyError, TypeError):
        comp = None
    if comp is None or describe(comp)["fingerprint"] != info.get("fingerprint"):
        raise InputError(
            f"{path} was made by a fitted {info['name']} compressor; pass the saved compressor directory "
            "(--model) that made it, so queries are compressed the same way"
        )
    return comp


def load_index(
    path: str | os.PathLike,
    *,
    model: str | os.PathLike | None = None,
    column: str | None = None,
    id_column: str | bool | None = None,
    threads: int | None = None,
    structure: str = "exact",
    hnsw: Hnsw | None = None,
    norm_power: float = 1.0,
) -> Index:
    """An index over a vector file: float embeddings (exact cosine search) or codes written by
    ``binarize`` / ``truncate`` / ``apply`` (``norm_power``: see :class:`Index`). ``id_column`` False reads no ids
    (a caller that keeps them elsewhere sets ``index.ids``)."""
    src = open_vectors(path, column=column, id_column=id_column, codes=None)
    if src.num_rows == 0:
        raise InputError(f"{path} has no rows; nothing to search")
    meta = src.metadata
    comp = compressor_for(meta, model, path) if meta and meta.get("format") == "embcompress.vectors" else None
    data, ids = read_all(path, column=column, id_column=id_column, codes=None, threads=threads, arrow_ids=True)
    if comp is not None:
        if keeps_blocks(comp):  # this array is ours: its rows become the fast scan's blocks where they lie
            data = rows_into_blocks(data)
        index = Index(data, compressor=comp, ids=ids, structure=structure, hnsw=hnsw, norm_power=norm_power)
    elif data.dtype.kind != "f":
        raise InputError(f"{path} holds {data.dtype} codes without embcompress metadata; cannot search them")
    else:
        index = Index(data, ids=ids, structure=structure, hnsw=hnsw)
    # what Arrow read the columns and ids into is freed (the index holds its own), but its allocator keeps the pages
    # for reuse: 300 MiB resident after ten million 48 B codes with their ids, which a server never uses again
    del data, ids
    pa.default_memory_pool().release_unused()
    return index


def load_queries(
    path: str | os.PathLike, index: Index, *, column: str | None = None, id_column: str | None = None
) -> tuple[np.ndarray, list]:
    """Float query embeddings (and ids) for ``index``; refuses code files of another compressor
    and widths that do not match."""
    src = open_vectors(path, column=column, id_column=id_column, codes=None)
    if src.num_rows == 0:
        raise InputError(f"{path} has no queries (0 rows)")
    meta = src.metadata or {}
    if meta.get("format") == "embcompress.vectors":
        theirs = meta["compressor"].get("fingerprint")
        ours = describe(index.compressor)["fingerprint"] if index.compressor else None
        if theirs != ours:
            raise InputError(
                f"{path} holds codes made by {meta['compressor']['name']} (fingerprint {theirs}), but the index was "
                f"made by {index.compressor.name if index.compressor else 'no compressor (float vectors)'} "
                f"(fingerprint {ours}); "
                "codes from different compressors cannot be compared. Give float query embeddings instead"
            )
        raise InputError(
            f"{path} holds compressed codes; give the float query embeddings, they are compressed by the index"
        )
    Q, ids = read_all(path, column=column, id_column=id_column)
    expected = index.compressor.n_features_in_ if index.compressor else index.width
    if Q.shape[1] != expected:
        raise InputError(f"queries in {path} have {Q.shape[1]} dimensions but the index expects {expected}")
    return Q, ids if ids is not None else [str(i) for i in range(len(Q))]


def write_results(path: str | os.PathLike, query_ids: list, result: SearchResult, *, overwrite: bool = False) -> None:
    """Ranked results as parquet rows: query_id, rank (1-based), doc_id, row, score."""
    check_output_path(path, overwrite=overwrite)
    nq, k = result.rows.shape
    doc_ids = result.ids if result.ids is not None else result.rows
    table = pa.table(
        {
            "query_id": pa.array(np.repeat(np.asarray(query_ids, dtype=object), k).tolist()),
            "rank": pa.array(np.tile(np.arange(1, k + 1, dtype=np.int32), nq)),
            "doc_id": pa.array(doc_ids.reshape(-1).tolist()),
            "row": pa.array(result.rows.reshape(-1)),
            "score": pa.array(result.scores.reshape(-1)),
        }
    )
    with atomic_file(path, overwrite=overwrite) as tmp:
        pq.write_table(table, tmp, write_page_checksum=True)


def _structure(index: str, graph, hnsw: Hnsw | None) -> str:
    """The first stage searched: ``index``, or ``"hnsw"`` with a saved ``graph``, whose own settings leave
    only ``ef_search`` of ``hnsw`` to apply."""
    if graph is None:
        return index
    if hnsw is not None and (hnsw.m, hnsw.ef_construction) != (Hnsw().m, Hnsw().ef_construction):
        raise InputError(
            "a saved graph was built with its own links per node and ef_construction; of the HNSW "
            "settings only ef (candidates per query) applies to it"
        )
    return "hnsw"


def _graph(index, structure: str, graph, hnsw: Hnsw | None, stage) -> float | None:
    """Seconds to read the saved ``graph`` or to build one for an HNSW ``structure``; None for the exact scan."""
    if graph is not None:
        return index.load_graph(graph, ef_search=hnsw.ef_search if hnsw is not None else None)
    if structure == "hnsw":
        return index.build_graph(stage("building the HNSW graph", index.num_docs) if stage is not None else None)
    return None


@dataclass(frozen=True)
class SearchOptions:
    """How :func:`search_files` searches: ``k`` results per query; the codes' ``model`` (default: the one the
    file's metadata names); ``rerank`` (None, "asymmetric" or "float", the latter reading ``originals``) of the
    top ``k x multiplier``; the vectors' ``column`` and ``id_column``; ``threads`` (None: every core) decode the
    index file's row groups and run the rerank blocks, which decode the parquet originals' row groups in parallel.
    ``index`` ``"hnsw"`` searches bits or float vectors through a faiss HNSW graph built on the fly (with
    ``hnsw``'s settings, :class:`~embcompress.search.ann.Hnsw`) instead of the exact scan; its build time is
    ``graph_seconds``, apart from the search's ``seconds``. ``norm_power``: how asymmetric scores of codes weigh
    the reconstruction's norm (see :class:`Index`). ``graph``: an HNSW graph that ``export --to faiss --structure
    hnsw`` or ``export --to usearch`` wrote for the index file, memory-mapped and searched instead of building one
    (``index`` is then ``"hnsw"``; of ``hnsw`` only ``ef_search`` may be given, the graph has the rest).
    ``stage(description, rows)`` may return a progress callback for the graph's build. ``overwrite`` replaces
    an existing output."""

    k: int = 10
    model: str | os.PathLike | None = None
    rerank: str | None = None
    multiplier: int = 10
    originals: str | os.PathLike | None = None
    column: str | None = None
    id_column: str | None = None
    overwrite: bool = False
    threads: int | None = None
    index: str = "exact"
    hnsw: Hnsw | None = None
    norm_power: float = 1.0
    graph: str | os.PathLike | None = None
    stage: Callable[[str, int], Callable[[int], None] | None] | None = None


def search_files(
    index_file: str | os.PathLike,
    queries: str | os.PathLike,
    output: str | os.PathLike,
    *,
    options: SearchOptions | None = None,
    **given: Any,
) -> dict[str, Any]:
    """Search the documents of ``index_file`` (float vectors or codes) with the float queries of ``queries`` and write
    the ranked results to ``output``, as :class:`SearchOptions` (given, or its fields as keyword arguments) says.
    Returns a summary (k is capped at the number of documents)."""
    from .stores import open_store

    (o,) = from_keywords("search_files", given, SearchOptions, values=(options,))
    check_output_path(output, overwrite=o.overwrite, inputs=(index_file, queries))
    structure = _structure(o.index, o.graph, o.hnsw)
    index = load_index(
        index_file,
        model=o.model,
        column=o.column,
        id_column=o.id_column,
        threads=o.threads,
        structure=structure,
        hnsw=o.hnsw,
        norm_power=o.norm_power,
    )
    Q, qids = load_queries(queries, index)
    store = open_store(o.originals) if o.originals is not None else None
    graph_seconds = _graph(index, structure, o.graph, o.hnsw, o.stage)
    res = index.search(Q, o.k, rerank=o.rerank, multiplier=o.multiplier, originals=store, threads=o.threads)
    write_results(output, qids, res, overwrite=o.overwrite)
    return _summary(Q, index, res, structure, (o.graph, graph_seconds), o.rerank, output)


def _summary(Q: np.ndarray, index, res: SearchResult, structure: str, graph_info: tuple, rerank, output) -> dict:
    """What :func:`search_files` returns: the sizes, the first stage and its graph (``graph_info``: the saved
    graph's path or None, and the seconds to read or build it), the rerank and the time."""
    graph, graph_seconds = graph_info
    return {
        "queries": len(Q),
        "documents": index.num_docs,
        "k": res.rows.shape[1],
        "index": index.kind,
        "bytes_per_vector": index.nbytes_per_vector,
        "structure": structure,
        "graph_seconds": graph_seconds,
        "graph": index.hnsw.built() if structure == "hnsw" else None,
        "graph_file": None if graph is None else str(graph),
        "rerank": rerank,
        "candidates": res.info["candidates"],
        "seconds": res.seconds,
        "queries_per_second": len(Q) / res.seconds,
        "output": str(output),
    }


__all__ = ["compressor_for", "load_index", "load_queries", "search_files", "write_results"]
