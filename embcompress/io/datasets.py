"""Retrieval data sets in the BEIR layout: ``corpus.jsonl``, ``queries.jsonl`` (records with
``_id`` and ``text``, optionally ``title``) and ``qrels.tsv`` (``query-id``, ``corpus-id``,
``score`` with a header line); each file may be gzipped (``.gz``)."""

from __future__ import annotations

import csv
import gzip
import io
import json
import math
import os
import zlib
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from ..core.errors import InputError


@dataclass
class Beir:
    corpus: dict[str, str]  # doc id -> text ("title. text" when a title is given)
    queries: dict[str, str]  # query id -> text
    qrels: dict[str, dict[str, int]]  # query id -> {doc id: relevance grade}


def _open_text(path: Path):
    if not path.is_file():
        raise InputError(f"{path} does not exist or is not a file")
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path), encoding="utf-8")
    return open(path, encoding="utf-8")


@contextmanager
def _reading(path: Path) -> Iterator[None]:
    """Errors met while reading a text file as one InputError naming it: bytes that are not UTF-8,
    a cut or corrupt .gz."""
    try:
        yield
    except UnicodeDecodeError as exc:
        raise InputError(
            f"{path} is not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset {exc.start} "
            "of a block); save it as UTF-8"
        ) from None
    except (EOFError, OSError, zlib.error) as exc:
        raise InputError(f"{path} cannot be read: {exc} (a cut or corrupt .gz?)") from None


def _find(root: Path, stem: str) -> Path:
    for name in (stem, stem + ".gz"):
        if (root / name).exists():
            return root / name
    raise InputError(f"{root} has no {stem} (or {stem}.gz)")


def iter_jsonl(path: str | os.PathLike) -> Iterator[tuple[int, dict]]:
    """(line number, record) for each non-empty line of a ``.jsonl`` or ``.jsonl.gz`` file."""
    path = Path(path)
    with _reading(path), _open_text(path) as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except ValueError:
                raise InputError(f"{path} line {lineno} is not valid JSON") from None
            if not isinstance(rec, dict):
                raise InputError(f"{path} line {lineno} is not a JSON object")
            yield lineno, rec


def read_jsonl_texts(path: str | os.PathLike) -> dict[str, str]:
    out: dict[str, str] = {}
    for lineno, rec in iter_jsonl(path):
        if "_id" not in rec or "text" not in rec:
            raise InputError(f"{path} line {lineno} lacks '_id' or 'text'")
        title = rec.get("title") or ""
        out[str(rec["_id"])] = f"{title}. {rec['text']}" if title else rec["text"]
    return out


#: largest relevance grade accepted (BEIR uses 0-3; a larger value is almost surely another column)
MAX_GRADE = 1000


def read_qrels(path: str | os.PathLike) -> dict[str, dict[str, int]]:
    """``query-id  corpus-id  score`` lines (tab-separated, header optional)."""
    path = Path(path)
    qrels: dict[str, dict[str, int]] = {}
    with _reading(path), _open_text(path) as fh:
        for lineno, row in enumerate(csv.reader(fh, delimiter="\t"), 1):
            if not row or (lineno == 1 and row[0] in ("query-id", "query_id", "qid")):
                continue
            if len(row) < 3:
                raise InputError(f"{path} line {lineno} has {len(row)} fields; expected query-id, corpus-id, score")
            try:
                value = float(row[2])
            except ValueError:
                raise InputError(f"{path} line {lineno}: score {row[2]!r} is not a number") from None
            if not (math.isfinite(value) and abs(value) <= MAX_GRADE):
                raise InputError(
                    f"{path} line {lineno}: score {row[2]!r} is not a relevance grade "
                    f"(expected a finite number, at most {MAX_GRADE} in magnitude, such as 0, 1 or 2)"
                )
            grade = int(value)
            qrels.setdefault(row[0], {})[row[1]] = grade
    if not qrels:
        raise InputError(f"{path} holds no relevance judgements")
    return qrels


def load_beir(root: str | os.PathLike) -> Beir:
    root = Path(root)
    if not root.is_dir():
        raise InputError(f"{root} is not a directory with corpus.jsonl, queries.jsonl and qrels.tsv")
    return Beir(
        corpus=read_jsonl_texts(_find(root, "corpus.jsonl")),
        queries=read_jsonl_texts(_find(root, "queries.jsonl")),
        qrels=read_qrels(_find(root, "qrels.tsv")),
    )
