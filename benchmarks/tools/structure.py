"""Shape figures of the library and the CLI, from their AST: the longest functions, the largest
modules, comparisons of a ``name`` with a registered compressor's name and of a ``kind`` with an
output kind (outside the registry and persistence, which map names to classes), and the number of
methods of ``Compressor``. Printed before and after a refactor (issue 33); tests/package/test_shape.py
holds the limits.

    python benchmarks/tools/structure.py [--top 10]
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

from embcompress.core.specs import OUTPUT_KINDS

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("embcompress",)  # the CLI is embcompress/cli


def modules():
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            yield path, ast.parse(path.read_text())


def functions(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node, node.end_lineno - node.lineno + 1


#: the output kinds (OutputSpec.kind), as the library declares them
KINDS = frozenset(OUTPUT_KINDS)
#: the modules that may compare compressor names: they map names to classes
NAME_MODULES = frozenset({"embcompress/core/registry.py", "embcompress/core/persist.py"})


def compressor_names() -> frozenset[str]:
    from embcompress.core.registry import registered

    return frozenset(cls.name for cls in registered())


def string_comparisons(tree: ast.AST, attr: str, words: frozenset[str]) -> list[int]:
    """Lines comparing ``<x>.attr`` (or a bare ``attr``) with one of ``words``, or a tuple of
    strings holding one."""
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        named = any(
            isinstance(s, ast.Attribute) and s.attr == attr or isinstance(s, ast.Name) and s.id == attr for s in sides
        )
        literal = any(
            isinstance(s, ast.Constant)
            and s.value in words
            or isinstance(s, (ast.Tuple, ast.Set, ast.List))
            and any(isinstance(e, ast.Constant) and e.value in words for e in s.elts)
            for s in sides
        )
        if named and literal:
            lines.append(node.lineno)
    return lines


def compressor_methods() -> int:
    tree = ast.parse((ROOT / "embcompress" / "core" / "base.py").read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Compressor")
    return sum(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) for n in cls.body)


def estimator_constructors(tree: ast.AST) -> set[int]:
    """Line numbers of the ``__init__`` of registered compressor families (``@register`` classes): their
    keywords are the family's hyperparameters (scikit-learn's convention, read by ``get_params`` and saved in
    a model's config), so they are counted apart from the limit on parameters."""
    return {
        f.lineno
        for c in ast.walk(tree)
        if isinstance(c, ast.ClassDef) and any(isinstance(d, ast.Name) and d.id == "register" for d in c.decorator_list)
        for f in c.body
        if isinstance(f, ast.FunctionDef) and f.name == "__init__"
    }


def figures() -> dict:
    """Every figure: (lines, where) of functions and modules, longest first, the places of name and kind
    comparisons, and (parameters, where) of functions, most first, with the estimator constructors apart."""
    funcs, sizes, names, kinds, params, hyper = [], [], [], [], [], []
    registered = compressor_names()
    for path, tree in modules():
        rel = path.relative_to(ROOT).as_posix()
        sizes.append((len(path.read_text().splitlines()), rel))
        funcs += [(n, f"{rel}:{f.lineno} {f.name}") for f, n in functions(tree)]
        if rel not in NAME_MODULES:
            names += [f"{rel}:{ln}" for ln in string_comparisons(tree, "name", registered)]
        kinds += [f"{rel}:{ln}" for ln in string_comparisons(tree, "kind", KINDS)]
        inits = estimator_constructors(tree)
        for f, _ in functions(tree):
            (hyper if f.lineno in inits else params).append((_param_count(f), f"{rel}:{f.lineno} {f.name}"))
    return {
        "params": sorted(params, reverse=True),
        "hyperparameters": sorted(hyper, reverse=True),
        "functions": sorted(funcs, reverse=True),
        "modules": sorted(sizes, reverse=True),
        "names": names,
        "kinds": kinds,
        "methods": compressor_methods(),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--top", type=int, default=10)
    args = ap.parse_args()
    f = figures()
    funcs, sizes, names, kinds = f["functions"], f["modules"], f["names"], f["kinds"]
    print(f"functions over 60 lines: {sum(n > 60 for n, _ in funcs)}")
    for n, where in funcs[: args.top]:
        print(f"  {n:4d}  {where}")
    print(f"modules over 450 lines: {sum(n > 450 for n, _ in sizes)}")
    for n, where in sizes[: args.top]:
        print(f"  {n:4d}  {where}")
    print(f"comparisons of a name with a compressor's name (outside registry and persist): {len(names)}")
    for where in names:
        print(f"  {where}")
    print(
        f"comparisons of a kind with an output kind: {len(kinds)} (in search/: "
        f"{sum(k.startswith('embcompress/search/') for k in kinds)})"
    )
    for where in kinds:
        print(f"  {where}")
    print(f"Compressor methods: {compressor_methods()}")
    long_lines = [
        (len(line), f"{path.relative_to(ROOT).as_posix()}:{i}")
        for path, _ in modules()
        for i, line in enumerate(path.read_text().splitlines(), 1)
        if len(line) > 120
    ]
    print(
        f"lines over 120 characters: {len(long_lines)} (longest {max(long_lines, default=(0, '-'))[0]}, "
        f"{max(long_lines, default=(0, '-'))[1]})"
    )
    params, hyper = f["params"], f["hyperparameters"]
    print(f"functions of more than 8 parameters: {sum(n > 8 for n, _ in params)}")
    for n, where in params[:5]:
        print(f"  {n:4d}  {where}")
    print(
        f"compressor constructors of more than 8 hyperparameters (scikit-learn's convention, apart): "
        f"{sum(n > 8 for n, _ in hyper)}"
    )
    for n, where in [h for h in hyper if h[0] > 8]:
        print(f"  {n:4d}  {where}")


def _param_count(f) -> int:
    a = f.args
    names = [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
    return len([n for n in names if n not in ("self", "cls")])


if __name__ == "__main__":
    main()
