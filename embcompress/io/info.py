"""What a path holds: a vector file (rows, width, dtype, which compressor made it) or a saved compressor."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..core.errors import InputError
from ..core.persist import describe, is_model_dir, load
from .sources import is_dataset, open_vectors


def describe_path(path: str | os.PathLike) -> dict[str, Any]:
    """Describe a vector file (rows, width, dtype, producer) or a saved compressor directory."""
    if is_dataset(path):
        return _describe_dataset(path)
    path = Path(path)
    if path.is_dir():
        if not is_model_dir(path):
            raise InputError(f"{path} is a directory but not a saved compressor (no config.json)")
        comp = load(path)
        return {"kind": "compressor", "path": str(path), **describe(comp)}
    src = open_vectors(path, codes=None)
    result = {
        "kind": "vectors",
        "path": str(path),
        "rows": src.num_rows,
        "column": src.column,
        "id_column": src.id_column,
        "type": str(src.type),
        "width": src.dim,
        "bytes_per_vector": src.nbytes_per_row,
        "file_bytes": os.path.getsize(path),
    }
    meta = src.metadata
    if meta and meta.get("format") == "embcompress.vectors":
        result["compressor"] = meta["compressor"]["name"]
        result["compressor_params"] = meta["compressor"]["params"]
        result["fingerprint"] = meta["compressor"].get("fingerprint")
        result["input_width"] = meta.get("input_width")
        result["output"] = meta.get("output")
        result["width"] = meta.get("output", {}).get("width", src.dim)
        for key in ("bit_order", "padding"):
            if key in meta:
                result[key] = meta[key]
    elif meta and meta.get("format") == "embcompress.embeddings":
        result["model"] = meta.get("model")
        result["backend"] = meta.get("backend")  # None in files written before embed had backends
        result["normalized"] = meta.get("normalized")
    else:
        result["compressor"] = None
    return result


def _describe_dataset(path) -> dict[str, Any]:
    """A dataset as a whole: rows, shards, width, and the compressor (the same in every shard)."""
    src = open_vectors(path, codes=None)
    meta = src.metadata or {}
    comp = meta.get("compressor") if meta.get("format") == "embcompress.vectors" else None
    return {
        "kind": "dataset",
        "path": str(path),
        "shards": len(src.rels),
        "rows": src.num_rows,
        "rows_per_shard": {"min": min(s.num_rows for s in src.shards), "max": max(s.num_rows for s in src.shards)},
        "column": src.column,
        "id_column": src.id_column,
        "type": str(src.type),
        "width": (meta.get("output") or {}).get("width", src.dim),
        "bytes_per_vector": src.nbytes_per_row,
        "bytes": sum(os.path.getsize(src.root / r) for r in src.rels),
        "compressor": comp["name"] if comp else None,
        "fingerprint": comp.get("fingerprint") if comp else None,
        "first_shards": src.rels[:5],
    }
