"""Indexes of the serving libraries over an :class:`~embcompress.search.Index`'s documents: faiss
(exact flat indexes, HNSW graphs, scalar-quantizer and product-quantizer indexes) and usearch. One
place builds them, for ``search --index hnsw`` and for ``export``; no graph is home-made here.

What each kind of document becomes (row numbers are the libraries' ids; the user's ids map back
through :attr:`Index.ids`; each row is one class below, chosen in :data:`SERVING`, the one place
this module looks at an output's kind):

=========  =====================================  ===============================  =============
kind       faiss flat                             faiss hnsw                       usearch
=========  =====================================  ===============================  =============
bits       ``IndexBinaryFlat`` (Hamming)          ``IndexBinaryHNSW``              b1, hamming
float      ``IndexFlatIP`` on unit rows (cosine)  ``IndexHNSWFlat``, inner product  f32, cos
int8       ``IndexScalarQuantizer`` QT_8bit with  (none)                           i8, cos (of
           the compressor's ranges, codes copied                                   the decoded
           as they are (inner product)                                             vectors)
pq / opq   ``IndexPQ`` / ``IndexPreTransform``    (none)                           (none)
           with the fitted codebooks, codes
           copied as they are
=========  =====================================  ===============================  =============
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..core._util import normalize_rows, require
from ..core.errors import InputError

STRUCTURES = ("flat", "hnsw")
TARGETS = ("faiss", "usearch", "lancedb")
HNSW_M = 32  # links per node: faiss' and usearch's usual choice for recall near 0.95+ at ef 64-128
HNSW_EF_CONSTRUCTION = 80
HNSW_EF_SEARCH = 128
#: documents added to a graph per call of the library's add: a graph build reports its progress and
#: answers Ctrl-C (or an error) between these; each call inserts its rows on every core
GRAPH_ADD_ROWS = 1 << 16


@dataclass(frozen=True)
class Hnsw:
    """How an HNSW graph is built and searched, in faiss (``search --index hnsw``, ``export
    --structure hnsw``) and usearch (``export --to usearch``). ``m``: links per node (faiss's M,
    usearch's connectivity; the graph's level 0 holds ``2 m`` links of 4 bytes per document in
    faiss); ``ef_construction``: candidates kept while inserting (build time grows about linearly
    with it); ``ef_search``: candidates explored per query. Fewer links and candidates build
    faster and smaller graphs with lower recall: measure recall against the exact scan
    (benchmarks/search/bench_ann.py) before lowering them. ``explore``: the graph of quantized codes hands
    ``explore`` times the rows asked for to the codes, which score them against the float query (as an
    asymmetric rerank does) and keep the best: a graph over bits ranks by Hamming distance, which loses
    more of the exact top 10 than the graph itself does (docs/how-to/choose.md)."""

    m: int = HNSW_M
    ef_construction: int = HNSW_EF_CONSTRUCTION
    ef_search: int = HNSW_EF_SEARCH
    explore: int = 1

    def __post_init__(self):
        limits = (("m", 2, 100_000), ("ef_construction", 1, 100_000), ("ef_search", 1, 100_000), ("explore", 1, 100))
        for name, low, high in limits:
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not low <= v <= high:
                raise InputError(f"HNSW {name} must be a whole number from {low} to {high:,}, got {v!r}")

    def built(self) -> dict[str, int]:
        """The settings a graph file holds and faiss or usearch search with (``explore`` is this library's)."""
        return {"m": self.m, "ef_construction": self.ef_construction, "ef_search": self.ef_search}

    @property
    def graph_bytes(self) -> float:
        """Expected bytes per document of a faiss HNSW graph's links beyond the documents' own codes: ``2 m``
        links of 4 bytes on level 0, ``m`` on each level above, which a document reaches with probability
        ``m ** -level`` (faiss draws levels so), plus its level (4 bytes) and offset (8 bytes). 272 at m = 32."""
        return 4 * (2 * self.m + self.m / (self.m - 1)) + 12

    @classmethod
    def given(cls, m: int | None = None, ef_construction: int | None = None, ef_search: int | None = None) -> "Hnsw":
        """The settings with the ones given (not None) in place of the defaults."""
        set_ = {
            k: v for k, v in (("m", m), ("ef_construction", ef_construction), ("ef_search", ef_search)) if v is not None
        }
        return cls(**set_)


class _Serving:
    """What the serving libraries make of one output kind: byte codes by default, which only a
    family that declares its own faiss index (:class:`~embcompress.core.capabilities.FaissExport`,
    unchained) can go into."""

    #: an HNSW graph can be built over these documents
    graph = False
    #: the serving targets that hold this kind whatever the family
    targets: tuple[str, ...] = ()
    #: usearch's metric for this kind, where usearch holds it
    usearch_metric: str | None = None
    #: faiss holds this kind in a binary index (read_index_binary / write_index_binary)
    faiss_binary = False

    def __init__(self, index):
        self.index = index

    def faiss_flat(self, faiss) -> Any:
        comp = self.index.compressor
        if "faiss" in comp.traits.exports:
            return comp.to_faiss(self.index.data)
        raise InputError(
            f"{comp.name} codes have no faiss index type here; faiss indexes take bits, float "
            "vectors, int8 and the codes of a family that declares one (unchained pq, opq)"
        )

    def faiss_hnsw(self, faiss, m: int) -> Any:
        raise InputError(
            f"an HNSW graph is built over bits or float vectors; these are {self.index.kind} codes "
            "(search them exactly, or export them to a flat index)"
        )

    def queries(self, Q: np.ndarray) -> np.ndarray:
        """Float queries as the faiss index takes them: in the decoded space."""
        return np.ascontiguousarray(self.index.compressor.query_space.linear(Q), dtype=np.float32)

    def scores(self, dist: np.ndarray) -> np.ndarray:
        """faiss's distances (or similarities) as the exact scan's scores."""
        return dist.astype(np.float32)

    def usearch(self, module, hnsw: Hnsw) -> tuple[Any, np.ndarray]:
        raise InputError(
            f"{self.index.compressor.name} codes have no usearch index type; usearch takes bits, float vectors and int8"
        )


class _Bits(_Serving):
    graph, targets, usearch_metric, faiss_binary = True, ("faiss", "usearch", "lancedb"), "hamming", True

    def faiss_flat(self, faiss) -> Any:
        return faiss.IndexBinaryFlat(self.index.data.shape[1] * 8)  # the padding bits are zero in documents and queries

    def faiss_hnsw(self, faiss, m: int) -> Any:
        return faiss.IndexBinaryHNSW(self.index.data.shape[1] * 8, m)

    def vectors(self) -> np.ndarray:
        return np.ascontiguousarray(self.index.data, dtype=np.uint8)

    def queries(self, Q: np.ndarray) -> np.ndarray:
        return self.index.compressor.transform(Q)

    def scores(self, dist: np.ndarray) -> np.ndarray:
        return (self.index.width - dist).astype(np.float32)

    def usearch(self, module, hnsw: Hnsw) -> tuple[Any, np.ndarray]:
        return (
            module.Index(
                ndim=self.index.data.shape[1] * 8, metric=self.usearch_metric, dtype="b1", **_usearch_graph(hnsw)
            ),
            self.vectors(),
        )


class _Float(_Serving):
    graph, targets, usearch_metric = True, ("faiss", "usearch", "lancedb"), "cos"

    def faiss_flat(self, faiss) -> Any:
        return faiss.IndexFlatIP(self.index.data.shape[1])

    def faiss_hnsw(self, faiss, m: int) -> Any:
        return faiss.IndexHNSWFlat(self.index.data.shape[1], m, faiss.METRIC_INNER_PRODUCT)

    def vectors(self) -> np.ndarray:
        return np.ascontiguousarray(self.index.data, dtype=np.float32)  # cosine indexes hold unit rows already

    def queries(self, Q: np.ndarray) -> np.ndarray:
        if self.index.compressor is not None:
            return super().queries(Q)
        return normalize_rows(Q) if self.index.metric == "cosine" else np.ascontiguousarray(Q, dtype=np.float32)

    def usearch(self, module, hnsw: Hnsw) -> tuple[Any, np.ndarray]:
        return module.Index(
            ndim=self.index.width, metric=self.usearch_metric, dtype="f32", **_usearch_graph(hnsw)
        ), self.vectors()


class _Int8(_Serving):
    targets, usearch_metric = ("faiss", "usearch"), "cos"

    def faiss_flat(self, faiss) -> Any:
        lo, hi = self.index.compressor.query_space.last.ranges_.astype(np.float32)
        out = faiss.IndexScalarQuantizer(len(lo), faiss.ScalarQuantizer.QT_8bit, faiss.METRIC_INNER_PRODUCT)
        faiss.copy_array_to_vector(np.concatenate([lo, hi - lo]).astype(np.float32), out.sq.trained)
        out.is_trained = True
        codes = np.ascontiguousarray(self.index.data, dtype=np.int8).view(np.uint8) ^ np.uint8(
            0x80
        )  # -128..127 -> 0..255
        faiss.copy_array_to_vector(codes.reshape(-1), out.codes)
        out.ntotal = len(codes)
        return out

    def usearch(self, module, hnsw: Hnsw) -> tuple[Any, np.ndarray]:
        vectors = normalize_rows(
            self.index.compressor.decode(self.index.data)
        )  # usearch's i8 maps [-1, 1] to [-127, 127]
        return module.Index(
            ndim=vectors.shape[1], metric=self.usearch_metric, dtype="i8", **_usearch_graph(hnsw)
        ), vectors


def _usearch_graph(hnsw: Hnsw) -> dict[str, int]:
    return {"connectivity": hnsw.m, "expansion_add": hnsw.ef_construction, "expansion_search": hnsw.ef_search}


#: what each output kind (OutputSpec.kind) becomes in the serving libraries
SERVING = {"bits": _Bits, "float": _Float, "int8": _Int8, "codes": _Serving}


def serve_targets(comp, kind: str) -> tuple[str, ...]:
    """Where codes of output ``kind`` made by ``comp`` (None: float vectors) can be exported and
    served: what the kind allows, plus what a whole-compressor family declares
    (:class:`~embcompress.core.capabilities.FaissExport`)."""
    declared = comp.traits.exports
    return tuple(t for t in TARGETS if t in SERVING[kind].targets or t in declared)


def graph_allowed(kind: str) -> bool:
    """Whether an HNSW graph can be built over documents of output ``kind`` (bits or float vectors): the one
    place an index, a saved plan and the plan ranking ask."""
    return SERVING[kind].graph


def require_faiss():
    return require("faiss", "faiss", "faiss indexes")


def faiss_index(
    index, structure: str = "flat", hnsw: Hnsw = Hnsw(), progress: Callable[[int], None] | None = None
) -> Any:
    """A faiss index holding ``index``'s documents in its row order (faiss ids = rows); ``hnsw``:
    the graph's settings when ``structure`` is ``"hnsw"``. ``progress(n)`` is called as each
    :data:`GRAPH_ADD_ROWS` documents are in the graph (a flat index takes them at once)."""
    if structure not in STRUCTURES:
        raise InputError(f"index structure must be one of {', '.join(STRUCTURES)}, got {structure!r}")
    faiss = require_faiss()
    serving = SERVING[index.kind](index)
    if structure == "hnsw":
        out = serving.faiss_hnsw(faiss, hnsw.m)
        out.hnsw.efConstruction = hnsw.ef_construction
        out.hnsw.efSearch = hnsw.ef_search
    else:
        out = serving.faiss_flat(faiss)
    if serving.graph:  # bits and floats are added; int8 and declared codes come filled
        vectors = serving.vectors()
        step = GRAPH_ADD_ROWS if structure == "hnsw" else max(len(vectors), 1)
        _add_in_steps(lambda lo, hi: out.add(vectors[lo:hi]), len(vectors), step, progress)
    return out


def _add_in_steps(add: Callable[[int, int], Any], n: int, step: int, progress: Callable[[int], None] | None) -> None:
    """``add(lo, hi)`` for the rows ``[lo, hi)`` of ``n``, ``step`` at a time, in order."""
    for lo in range(0, n, step):
        hi = min(lo + step, n)
        add(lo, hi)
        if progress is not None:
            progress(hi - lo)


#: how to write a graph ``search --graph`` reads
_WRITE_GRAPH = "embcompress export CODES {path} --to faiss --structure hnsw, or --to usearch"


def load_graph(index, path) -> tuple[Any, Hnsw]:
    """(the HNSW graph at ``path``, its settings): a faiss graph (``export --to faiss --structure
    hnsw``) or a usearch index (``export --to usearch``) written for ``index``'s documents, read
    instead of built again (an hour or more at ten million rows), memory-mapped where the library
    can. Its description beside it (``PATH.embcompress.json``) must name the same kind of
    documents, row count and compressor fingerprint, and the index the same row count."""
    from ..core.persist import describe

    path, desc_path = Path(path), Path(str(path) + ".embcompress.json")
    if not path.is_file():
        raise InputError(f"graph file {path} does not exist; write one with {_WRITE_GRAPH.format(path=path)}")
    try:
        desc = json.loads(desc_path.read_text())
    except (OSError, ValueError):
        raise InputError(
            f"{path} has no readable description beside it ({desc_path.name}); give a graph written by "
            f"{_WRITE_GRAPH.format(path=path)}"
        ) from None
    if not isinstance(desc, dict):
        desc = {}
    target = desc.get("target")
    if not (target == "usearch" or (target == "faiss" and desc.get("structure") == "hnsw")) or not isinstance(
        desc.get("graph"), dict
    ):
        raise InputError(
            f"{path} is not an HNSW graph (its description says target {target!r}, structure "
            f"{desc.get('structure')!r}); write one with {_WRITE_GRAPH.format(path=path)}"
        )
    fingerprint = describe(index.compressor)["fingerprint"] if index.compressor is not None else None
    theirs = (desc.get("compressor") or {}).get("fingerprint")
    if desc.get("kind") != index.kind or desc.get("rows") != index.num_docs or theirs != fingerprint:
        raise InputError(
            f"{path} was built over other documents: {desc.get('rows')} {desc.get('kind')} rows (compressor "
            f"fingerprint {theirs}), these are {index.num_docs} {index.kind} rows ({fingerprint}); "
            "export the graph again from this file"
        )
    graph = _read_faiss_graph(index, path) if target == "faiss" else UsearchGraph.read(index, path)
    if graph.ntotal != index.num_docs:
        raise InputError(
            f"{path} holds {graph.ntotal} documents; its description says {index.num_docs}: export the graph again"
        )
    return graph, Hnsw(**{k: desc["graph"][k] for k in ("m", "ef_construction", "ef_search")})


def _read_faiss_graph(index, path: Path) -> Any:
    faiss = require_faiss()
    try:
        graph = _read_mapped(faiss, path, binary=SERVING[index.kind].faiss_binary)
    except RuntimeError as exc:
        raise InputError(f"{path} is not a faiss index faiss can read ({str(exc).splitlines()[0][:200]})") from None
    if not hasattr(graph, "hnsw"):
        raise InputError(f"{path} holds a faiss index without an HNSW graph; export it again with --structure hnsw")
    return graph


class UsearchGraph:
    """A usearch index that ``export --to usearch`` wrote, viewed from its file (memory-mapped:
    page cache, not the process's own memory) and searched as :func:`hnsw_search` searches a faiss
    graph: distances in faiss's terms (differing bits for bits, the inner product for cosine), row
    -1 where it found fewer than ``k``."""

    def __init__(self, ux, cosine: bool):
        self.ux, self.cosine, self.ntotal = ux, cosine, len(ux)

    @classmethod
    def read(cls, index, path: Path) -> "UsearchGraph":
        module = require("usearch.index", "export", "usearch indexes")
        try:
            ux = module.Index.restore(str(path), view=True)
        except (ValueError, RuntimeError) as exc:
            raise InputError(
                f"{path} is not a usearch index usearch can read ({str(exc).splitlines()[0][:200]})"
            ) from None
        if ux is None:
            raise InputError(f"{path} is not a usearch index usearch can read")
        return cls(ux, cosine=SERVING[index.kind].usearch_metric == "cos")

    def search(self, queries: np.ndarray, k: int, ef: int) -> tuple[np.ndarray, np.ndarray]:
        self.ux.expansion_search = int(ef)  # usearch does not keep it in the file; the description does
        found = self.ux.search(queries, k)
        rows = np.asarray(found.keys).reshape(len(queries), -1).astype(np.int64)
        dist = np.asarray(found.distances, dtype=np.float32).reshape(len(queries), -1)
        missing = np.arange(rows.shape[1]) >= np.asarray(found.counts).reshape(-1, 1)
        rows[missing], dist[missing] = -1, 0  # usearch pads with key 0 and NaN
        return (1 - dist if self.cosine else dist), rows  # cosine: usearch's distance, faiss's inner product


#: bytes per read when a graph file is read through once before faiss maps it
_WARM_READ = 16 << 20


def _read_mapped(faiss, path: Path, binary: bool) -> Any:
    """faiss's index at ``path`` with its links and codes memory-mapped from the file where this
    faiss can (``IO_FLAG_MMAP_IFC``), else read into memory. Mapped, a graph of ten million
    documents (3.2 GB at M = 32) costs the process page cache that the kernel may drop and other
    processes reading the same file share, not 3.2 GB of its own memory, and it opens without a
    copy. faiss maps with random-access advice and reads every link list once as it checks them,
    one page per fault, 5x slower than a plain read from a cold disk; one sequential pass over the
    file first brings it into the page cache at disk speed."""
    flag = getattr(faiss, "IO_FLAG_MMAP_IFC", 0)
    if flag:
        buf = bytearray(_WARM_READ)
        with open(path, "rb", buffering=0) as fh:
            while fh.readinto(buf):
                pass
    return (faiss.read_index_binary if binary else faiss.read_index)(str(path), flag)


def faiss_queries(index, Q: np.ndarray) -> np.ndarray:
    """Float queries as the faiss index of ``index`` takes them: compressed to bits, unit rows for
    cosine, decoded space for int8 / pq."""
    return SERVING[index.kind](index).queries(Q)


def hnsw_search(index, graph, Q: np.ndarray, k: int, ef: int) -> tuple[np.ndarray, np.ndarray]:
    """(scores, rows) of the ``k`` approximate nearest documents, scored as the exact scan scores
    them (Hamming similarity for bits, cosine for floats); rows of -1 (missing) get score -inf."""
    serving = SERVING[index.kind](index)
    if isinstance(graph, UsearchGraph):
        dist, rows = graph.search(serving.queries(Q), k, max(int(ef), k))
    else:
        graph.hnsw.efSearch = max(int(ef), k)
        dist, rows = graph.search(serving.queries(Q), k)
    rows = rows.astype(np.int64)
    scores = serving.scores(dist)
    scores[rows < 0] = -np.inf
    return scores, rows


def usearch_index(index, hnsw: Hnsw = Hnsw(), progress: Callable[[int], None] | None = None) -> Any:
    """A usearch index of ``index``'s documents (keys = rows): b1 / hamming for bits, f32 / cos for
    floats, i8 / cos of the decoded vectors for int8; its graph built with ``hnsw``'s settings,
    :data:`GRAPH_ADD_ROWS` documents at a time (``progress(n)`` after each)."""
    module = require("usearch.index", "export", "usearch indexes")
    out, vectors = SERVING[index.kind](index).usearch(module, hnsw)
    _add_in_steps(
        lambda lo, hi: out.add(np.arange(lo, hi, dtype=np.uint64), vectors[lo:hi]),
        len(vectors),
        GRAPH_ADD_ROWS,
        progress,
    )
    return out
