"""Shape figures of the library and the CLI, from their AST: the longest functions, the largest
modules, comparisons of a compressor's ``name`` or an output's ``kind`` with a string, and the
number of methods of ``Compressor``. Printed before and after a refactor (issue 33).

    python benchmarks/structure.py [--top 10]
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("embcompress", "cli")


def modules():
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            yield path, ast.parse(path.read_text())


def functions(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node, node.end_lineno - node.lineno + 1


def string_comparisons(tree: ast.AST, attr: str) -> list[int]:
    """Lines comparing ``<x>.attr`` (or a bare ``attr``) with a string constant or a tuple of them."""
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        named = any(isinstance(s, ast.Attribute) and s.attr == attr or isinstance(s, ast.Name) and s.id == attr for s in sides)
        literal = any(isinstance(s, ast.Constant) and isinstance(s.value, str) or
                      isinstance(s, (ast.Tuple, ast.Set, ast.List)) and s.elts and
                      all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in s.elts) for s in sides)
        if named and literal:
            lines.append(node.lineno)
    return lines


def compressor_methods() -> int:
    tree = ast.parse((ROOT / "embcompress" / "base.py").read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Compressor")
    return sum(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) for n in cls.body)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--top", type=int, default=10)
    args = ap.parse_args()
    funcs, sizes, names, kinds = [], [], [], []
    for path, tree in modules():
        rel = path.relative_to(ROOT)
        sizes.append((len(path.read_text().splitlines()), str(rel)))
        funcs += [(n, f"{rel}:{f.lineno} {f.name}") for f, n in functions(tree)]
        names += [f"{rel}:{ln}" for ln in string_comparisons(tree, "name")]
        kinds += [f"{rel}:{ln}" for ln in string_comparisons(tree, "kind")]
    funcs.sort(reverse=True)
    sizes.sort(reverse=True)
    print(f"functions over 60 lines: {sum(n > 60 for n, _ in funcs)}")
    for n, where in funcs[: args.top]:
        print(f"  {n:4d}  {where}")
    print(f"modules over 450 lines: {sum(n > 450 for n, _ in sizes)}")
    for n, where in sizes[: args.top]:
        print(f"  {n:4d}  {where}")
    print(f"comparisons of a name with a string: {len(names)}")
    for where in names:
        print(f"  {where}")
    print(f"comparisons of a kind with a string: {len(kinds)}")
    for where in kinds:
        print(f"  {where}")
    print(f"Compressor methods: {compressor_methods()}")


if __name__ == "__main__":
    main()
