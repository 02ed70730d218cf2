"""Latencies of serving plans on this machine, for ``recommend --ram-budget``'s ranking
(:mod:`embcompress.report.plans`): each plan's first stage over the sample's codes and its rescoring
from a copy in a file, one query at a time and in a batch."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from ..core.registry import from_spec
from ..evaluation.configs import parse_config
from ..search import Index
from ..serving import residual
from ..serving.copies import COPY_DTYPES, MAP_LIMIT, DiskCopy, copy_codec, open_copy

#: single queries timed per plan (the median is kept), and the batch size of the batch figure
LATENCY_QUERIES = 64
LATENCY_BATCH = 256


class LatencyBench:
    """Latencies of plans on this machine, over the sample's documents: each first stage fitted on (at
    most 5,000 of) ``docs`` and each copy written to a file in ``scratch`` once, however many plans
    share them (an int8 residual copy once per first stage: it is made from the codes); an exact first
    stage's time scaled by ``total_rows / len(docs)``, a graph's (built before it is timed, with the
    settings ``graph``) taken as measured: its search time grows about with the logarithm of the rows,
    not with them. A copy is read from its file as the whole input's would be: memory-mapped for its warm reads
    only where the whole input's copy would be within the map's limit (serving.copies.MAP_LIMIT)."""

    def __init__(self, docs: np.ndarray, queries: np.ndarray, total_rows: int, k: int, scratch: Path, graph=None):
        self.docs, self.queries, self.k, self.scratch, self.graph = docs, queries, k, scratch, graph
        self.scale = total_rows / len(docs)
        self._indexes: dict[tuple[str, str], Index] = {}
        self._stores: dict[tuple[str, str], DiskCopy | residual.ResidualCopy] = {}

    def index(self, spec: str, structure: str = "exact") -> Index:
        if (spec, structure) not in self._indexes:
            comp = from_spec(spec).fit(self.docs[: min(len(self.docs), 5_000)])
            index = Index(comp.transform(self.docs), compressor=comp, structure=structure, hnsw=self.graph)
            if structure == "hnsw":
                index.build_graph()
            self._indexes[spec, structure] = index
        return self._indexes[spec, structure]

    def store(self, kind: str, spec: str) -> DiskCopy | residual.ResidualCopy:
        """The copy of ``kind`` in a file (for an int8 residual copy, of ``spec``'s exact first stage)."""
        key = (kind, spec if kind == residual.KIND else "")
        if key not in self._stores:
            from ..compressors import Int8

            n, d = self.docs.shape
            path = self.scratch / f"copy-{kind}-{len(self._stores)}.npy"
            int8 = Int8().fit(self.docs) if kind == "int8" else None
            if kind == residual.KIND:
                index = self.index(spec)
                np.save(path, residual.encode(index.compressor, self.docs, index.data))
                disk = open_copy(path, kind, rows=n, dim=d, map_limit=self._map_limit(path))
                self._stores[key] = residual.ResidualCopy(disk.get, index, source=disk)
            else:
                np.save(path, copy_codec(kind, int8)[0](self.docs))
                self._stores[key] = open_copy(path, kind, int8, rows=n, dim=d, map_limit=self._map_limit(path))
        return self._stores[key]

    def _map_limit(self, path: Path) -> int:
        """The sample's copy mapped only where the whole input's would be (its size scaled to every row)."""
        return MAP_LIMIT if path.stat().st_size * self.scale <= MAP_LIMIT else 0

    def close(self) -> None:
        for store in self._stores.values():
            store.close()

    def measure(self, plan) -> dict[str, float]:
        """A plan's latencies (a :class:`~embcompress.report.plans.PlanRow`'s fields): one query at a time
        (the median) and in a batch, in ms, and the first stage's part of the first."""
        index = self.index(plan.spec, plan.structure)
        scale = self.scale if plan.structure == "exact" else 1.0
        store = self.store(plan.copy, plan.spec) if plan.copy in COPY_DTYPES else None
        cfg = parse_config(plan.config)

        def run(Q: np.ndarray) -> tuple[float, float]:
            t0 = time.perf_counter()
            if store is None:
                index.search(Q, self.k, rerank=cfg.rerank, multiplier=cfg.multiplier, threads=1)
                return time.perf_counter() - t0, 0.0
            res = index.search(Q, self.k, rerank="float", candidates=plan.candidates, originals=store, threads=1)
            first = res.info["first_stage_seconds"]
            return first, time.perf_counter() - t0 - first

        run(self.queries[:1])  # warm: the scan's tables, the copy's pages
        single = np.array([run(self.queries[i : i + 1]) for i in range(min(LATENCY_QUERIES, len(self.queries)))])
        batch = self.queries[:LATENCY_BATCH]
        b_first, b_rest = run(batch)
        med_first, med_rest = np.median(single[:, 0]), np.median(single[:, 1])
        return {
            "latency_ms": 1e3 * (med_first * scale + med_rest),
            "batch_ms": 1e3 * (b_first * scale + b_rest) / len(batch),
            "first_stage_ms": 1e3 * med_first * scale,
        }
