"""Training data: (anchor, positive[, negative]) pairs from jsonl or parquet, self-supervised pairs
from raw documents (crops, "Cropping outperforms dropout", 2025 section 3.1, or dropout: the same text twice, SimCSE).
Batching (homogeneous by source) is in :mod:`.sampling`."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np

from ..io.datasets import iter_jsonl
from ..embedding.embed import read_texts
from ..core.errors import InputError


@dataclass(frozen=True)
class Pair:
    anchor: str
    positive: str
    negative: str | None = None
    source: str | None = None


def _records(path: Path) -> Iterator[tuple[int, dict]]:
    name = path.name.lower()
    if name.endswith((".jsonl", ".jsonl.gz")):
        yield from iter_jsonl(path)
    elif name.endswith((".parquet", ".pq")):
        import pyarrow.parquet as pq

        for i, rec in enumerate(pq.read_table(path).to_pylist()):
            yield i, rec
    else:
        raise InputError(f"{path}: training data must be .jsonl, .jsonl.gz or .parquet")


def read_pairs(
    path: str | os.PathLike,
    *,
    anchor: str = "anchor",
    positive: str = "positive",
    negative: str | None = "negative",
    source: str | None = "source",
) -> list[Pair]:
    """Pairs from records with text fields ``anchor`` and ``positive`` (optionally ``negative``
    and a ``source`` name for homogeneous batches)."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path} does not exist")
    pairs = []
    unit = "line" if path.name.lower().endswith((".jsonl", ".jsonl.gz")) else "row"
    for where, rec in _records(path):
        for field in (anchor, positive):
            if not isinstance(rec.get(field), str) or not rec[field].strip():
                raise InputError(f"{path} {unit} {where} has no text in field {field!r} (fields: {', '.join(rec)})")
        neg = rec.get(negative) if negative else None
        if neg is not None and not isinstance(neg, str):
            raise InputError(f"{path} {unit} {where}: field {negative!r} must be text")
        src = rec.get(source) if source else None
        pairs.append(Pair(rec[anchor], rec[positive], neg or None, None if src is None else str(src)))
    if not pairs:
        raise InputError(f"{path} holds no training pairs")
    return pairs


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def sentences(text: str, min_chars: int = 100, max_chars: int = 250) -> list[list[str]]:
    """Runs of consecutive sentences whose lengths are within [min_chars, max_chars]; a sentence
    out of range breaks the run ("Cropping outperforms dropout", 2025 discards such sentences)."""
    runs: list[list[str]] = [[]]
    for s in _SENTENCE_END.split(" ".join(text.split())):
        if min_chars <= len(s) <= max_chars:
            runs[-1].append(s)
        elif runs[-1]:
            runs.append([])
    return [r for r in runs if r]


def crop_pairs(
    documents: Sequence[str], *, t: int = 2, min_chars: int = 100, max_chars: int = 250, seed: int = 0
) -> list[Pair]:
    """For each document, all chunks of ``t`` consecutive kept sentences; two different chunks
    sampled as anchor and positive ("Cropping outperforms dropout", 2025: t = 2, sentences of 100-250 characters).
    Documents
    with fewer than two chunks give no pair."""
    rng = np.random.default_rng(seed)
    pairs = []
    for doc in documents:
        chunks = [
            " ".join(run[i : i + t]) for run in sentences(doc, min_chars, max_chars) for i in range(len(run) - t + 1)
        ]
        if len(chunks) >= 2:
            a, p = rng.choice(len(chunks), size=2, replace=False)
            pairs.append(Pair(chunks[a], chunks[p]))
    if not pairs:
        raise InputError(
            f"no document yields two crops of {t} consecutive sentences of {min_chars}-{max_chars} characters"
        )
    return pairs


def dropout_pairs(texts: Sequence[str]) -> list[Pair]:
    """The same text as anchor and positive: the two views differ only by dropout (SimCSE)."""
    pairs = [Pair(t, t) for t in texts if t and t.strip()]
    if not pairs:
        raise InputError("no non-empty text for dropout pairs")
    return pairs


SELF_SUPERVISED = ("crop", "dropout")


def load_pairs(
    path: str | os.PathLike, *, self_supervised: str | None = None, text_field: str | None = None, seed: int = 0
) -> list[Pair]:
    """Training pairs from a file: (anchor, positive[, negative, source]) rows, or with
    ``self_supervised`` pairs made from raw texts: ``"crop"`` (two chunks of the same document)
    or ``"dropout"`` (the same text twice; dropout makes the views differ)."""
    if self_supervised is None:
        return read_pairs(path)
    if self_supervised not in SELF_SUPERVISED:
        raise InputError(f"self_supervised must be crop or dropout, got {self_supervised!r}")
    texts, _ = read_texts(path, field=text_field)
    return crop_pairs(texts, seed=seed) if self_supervised == "crop" else dropout_pairs(texts)
