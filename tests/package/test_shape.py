"""Limits on the shape of the library and the CLI (issue 33), measured from their AST by
benchmarks/tools/structure.py: short functions, modules of one concern, no dispatch on a compressor's
name outside the registry and persistence, search choosing by output kind in one place, and a
slim Compressor."""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MAX_FUNCTION_LINES = 60
MAX_MODULE_LINES = 450
MAX_SEARCH_KIND_COMPARISONS = 2
MAX_COMPRESSOR_METHODS = 30
MAX_LINE = 120  # also the formatter's and the linter's line length (pyproject.toml)
MAX_PARAMETERS = 8  # beyond it, a function takes a request object (a frozen dataclass of its options)


@pytest.fixture(scope="module")
def figures():
    spec = importlib.util.spec_from_file_location("structure", ROOT / "benchmarks" / "tools" / "structure.py")
    structure = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(structure)
    return structure.figures()


def test_no_function_over_the_limit(figures):
    long = [f"{where} ({n} lines)" for n, where in figures["functions"] if n > MAX_FUNCTION_LINES]
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines: {long}"


def test_no_function_takes_more_parameters_than_the_limit(figures):
    """A compressor family's constructor is apart: its keywords are its hyperparameters, as scikit-learn's
    estimators take them (``get_params`` reads them, a saved model's config holds them by name)."""
    many = [f"{where} ({n})" for n, where in figures["params"] if n > MAX_PARAMETERS]
    assert not many, f"functions of more than {MAX_PARAMETERS} parameters (give them a request object): {many}"
    assert all(where.endswith("__init__") for _, where in figures["hyperparameters"])


def test_no_module_over_the_limit(figures):
    big = [f"{where} ({n} lines)" for n, where in figures["modules"] if n > MAX_MODULE_LINES]
    assert not big, f"modules over {MAX_MODULE_LINES} lines: {big}"


def test_no_line_over_the_limit():
    """Every Python file of the project, tests and benchmarks too (the formatter keeps code within the limit;
    strings, comments and docstrings are wrapped by hand)."""
    long = [
        f"{path.relative_to(ROOT)}:{i} ({len(line)})"
        for top in ("embcompress", "tests", "benchmarks", "docs")
        for path in sorted((ROOT / top).rglob("*.py"))
        for i, line in enumerate(path.read_text().splitlines(), 1)
        if len(line) > MAX_LINE
    ]
    assert not long, f"lines over {MAX_LINE} characters: {long}"


def test_no_dispatch_on_a_compressor_name(figures):
    assert not figures["names"], f"comparisons with a compressor's name outside the registry: {figures['names']}"


def test_search_compares_kinds_at_most_twice(figures):
    search = [k for k in figures["kinds"] if k.startswith("embcompress/search/")]
    assert len(search) <= MAX_SEARCH_KIND_COMPARISONS, search


def test_compressor_is_slim(figures):
    assert figures["methods"] <= MAX_COMPRESSOR_METHODS


def test_the_detector_sees_what_it_must_refuse(tmp_path):
    """The measures find a long function, a name test and a kind test when there is one (so the
    limits above cannot pass by measuring nothing)."""
    import ast

    spec = importlib.util.spec_from_file_location("structure", ROOT / "benchmarks" / "tools" / "structure.py")
    structure = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(structure)
    body = "\n".join(f"    x{i} = {i}" for i in range(70))
    tree = ast.parse(
        f"def f(comp, out):\n{body}\n    if comp.name == 'pq' or out.kind in ('bits', 'x'):\n        pass\n"
    )
    assert [n for _, n in structure.functions(tree)] == [73]
    assert structure.string_comparisons(tree, "name", structure.compressor_names()) == [72]
    assert structure.string_comparisons(tree, "kind", structure.KINDS) == [72]
