"""A real retrieval corpus present on every Python installation: the standard library's
docstrings. Each function or class docstring with a summary line and a body gives one query (the
summary line) and one document (the body). Sources are parsed with ``ast``; nothing is imported
or executed, so no module's side effects run."""

from __future__ import annotations

import ast
import sysconfig
from dataclasses import dataclass, replace
from pathlib import Path

from ..core._util import sample_rows

_SKIP_DIRS = {
    "test",
    "tests",
    "idlelib",
    "lib2to3",
    "site-packages",
    "dist-packages",
    "__pycache__",
    "turtledemo",
    "ensurepip",
    "venv",
}


@dataclass
class DocPair:
    id: str  # "module.qualname"
    query: str  # summary line
    document: str  # the rest of the docstring


def stdlib_dir() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def _pairs_from_source(source: str, module: str, min_body: int) -> list[DocPair]:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    out: list[DocPair] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}.{child.name}"
                doc = ast.get_docstring(child, clean=True)
                if doc:
                    parts = doc.strip().split("\n\n", 1)
                    summary = " ".join(parts[0].split())
                    body = " ".join(parts[1].split()) if len(parts) > 1 else ""
                    if 10 <= len(summary) <= 200 and len(body) >= min_body:
                        out.append(DocPair(name, summary, body[:2000]))
                visit(child, name)

    visit(tree, module)
    return out


def _sources_under(root: Path):
    """(module name, source text) of every Python file under ``root``, in path order, skipping
    test and tooling folders."""
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if any(part in _SKIP_DIRS for part in rel.parts[:-1]):
            continue
        try:
            yield ".".join(rel.with_suffix("").parts), path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue


def _sources_in_wheel(wheel: Path):
    """(module name, source text) of every Python file inside a wheel (a zip archive), read from
    the archive without installing or importing anything."""
    import zipfile

    with zipfile.ZipFile(wheel) as zf:
        for name in sorted(zf.namelist()):
            parts = name.split("/")
            if not name.endswith(".py") or any(
                part in _SKIP_DIRS or part.endswith((".dist-info", ".data")) for part in parts[:-1]
            ):
                continue
            try:
                yield ".".join(parts)[:-3], zf.read(name).decode("utf-8")
            except (UnicodeDecodeError, KeyError):
                continue


def unique_pairs(pairs, limit: int | None = None, *, seed: int = 0) -> list[DocPair]:
    """``pairs`` with every repeated query or document dropped (the first one kept), a name seen
    twice renamed ``name#2``; a seeded sample of ``limit`` of them when there are more."""
    seen_q: set[str] = set()
    seen_d: set[str] = set()
    ids: dict[str, int] = {}
    unique = []
    for p in pairs:
        if p.query in seen_q or p.document in seen_d:
            continue
        seen_q.add(p.query)
        seen_d.add(p.document)
        n = ids[p.id] = ids.get(p.id, 0) + 1  # a name defined twice (a property's getter and setter)
        unique.append(p if n == 1 else replace(p, id=f"{p.id}#{n}"))
    if limit is not None and len(unique) > limit:
        unique = [unique[i] for i in sample_rows(len(unique), limit, seed)]
    return unique


def stdlib_docstring_pairs(
    limit: int | None = 2000, *, seed: int = 0, min_body: int = 80, root: str | Path | None = None
) -> list[DocPair]:
    """Up to ``limit`` (query, document) pairs from the standard library (or from the Python
    sources under ``root``, e.g. a site-packages directory), a seeded sample with duplicate
    queries and documents removed; the same sources give the same pairs."""
    root = stdlib_dir() if root is None else Path(root)
    pairs = (p for module, source in _sources_under(root) for p in _pairs_from_source(source, module, min_body))
    return unique_pairs(pairs, limit, seed=seed)


def wheel_docstring_pairs(wheels, *, min_body: int = 80) -> list[DocPair]:
    """(query, document) pairs from the Python files inside the given wheels, in the order given,
    duplicates removed as in :func:`unique_pairs`. Nothing is installed or imported."""
    pairs = (
        p
        for wheel in wheels
        for module, source in _sources_in_wheel(Path(wheel))
        for p in _pairs_from_source(source, module, min_body)
    )
    return unique_pairs(pairs)
