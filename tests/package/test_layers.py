"""The import graph of the library: acyclic, and every import points down the layers.

Run ``python tests/package/test_layers.py`` to print the graph (module -> the embcompress modules it
imports, lazy imports inside functions included) and the layer of each module."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "embcompress"

#: the root holds only the facade (__init__), the version and the old import paths; every other module is in a layer
ROOT_MODULES = {"__init__", "_version", "_moved"}


def tree_layers() -> list[str]:
    """The subpackages of the tree, each a layer."""
    return sorted(p.parent.name for p in ROOT.glob("*/__init__.py"))


def declared_layers() -> list[str]:
    """The layers' order, lowest first, as embcompress/__init__.py declares it (read without importing)."""
    for node in ast.parse((ROOT / "__init__.py").read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "LAYERS" for t in node.targets):
            return list(ast.literal_eval(node.value))
    raise AssertionError("embcompress/__init__.py declares no LAYERS")


LAYERS = [(name, [name]) for name in declared_layers()] + [("facade", [m for m in ROOT_MODULES])]


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _exists(mod: str) -> bool:
    """A module: a .py file, a package, or a compiled extension (its .c source or built file)."""
    rel = ROOT.parent / Path(*mod.split("."))
    return (rel / "__init__.py").exists() or any(rel.parent.glob(rel.name + ".*"))


def _type_checking_only(tree: ast.AST) -> set[int]:
    """ids of import nodes inside ``if TYPE_CHECKING:`` blocks (not imported at run time)."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            skip.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return skip


def imports_of(path: Path) -> set[str]:
    """embcompress modules imported anywhere in the file (module level and inside functions)."""
    me = module_name(path)
    package = me if path.name == "__init__.py" else me.rsplit(".", 1)[0]
    found: set[str] = set()
    tree = ast.parse(path.read_text())
    skip = _type_checking_only(tree)
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "embcompress")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "embcompress":
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found.add(sub if _exists(sub) else target)
    found.discard(me)
    return found


def graph() -> dict[str, set[str]]:
    return {module_name(p): imports_of(p) for p in sorted(ROOT.rglob("*.py"))}


def layer_of(mod: str) -> int:
    if mod == "embcompress":
        return len(LAYERS) - 1
    top = mod.split(".")[1]
    if top in ROOT_MODULES and top != "__init__":
        return 0 if top == "_version" else len(LAYERS) - 1
    for i, (_, names) in enumerate(LAYERS):
        if top in names:
            return i
    raise KeyError(f"{mod} is in no layer; add it to LAYERS in embcompress/__init__.py")


def find_cycle(g: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for n in sorted(g.get(m, ())):
            if state.get(n) == 1:
                return stack[stack.index(n) :] + [n]
            if n not in state and (c := visit(n)):
                return c
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(g):
        if m not in state and (c := visit(m)):
            return c
    return None


def test_import_graph_is_acyclic():
    assert find_cycle(graph()) is None, " -> ".join(find_cycle(graph()))


def test_every_subpackage_is_a_declared_layer_and_the_root_holds_no_other_module():
    assert sorted(declared_layers()) == tree_layers()
    assert {p.stem for p in ROOT.glob("*.py")} == ROOT_MODULES


def test_the_tests_mirror_the_package():
    """One folder of tests per layer (tests/LAYER/), and a test module at the root of tests/ is none."""
    tests = ROOT.parent / "tests"
    assert {p.name for p in tests.iterdir() if p.is_dir() and p.name != "__pycache__"} >= set(declared_layers()) - {
        "report"
    }
    assert not list(tests.glob("test_*.py"))


def test_imports_point_down_the_layers():
    upward = [(m, n) for m, deps in graph().items() for n in deps if layer_of(n) > layer_of(m)]
    assert not upward, [f"{m} ({LAYERS[layer_of(m)][0]}) imports {n} ({LAYERS[layer_of(n)][0]})" for m, n in upward]


def functions(root: Path) -> list[tuple[int, str]]:
    """(lines, "path:name") of every function under ``root``, longest first."""
    out = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.append((node.end_lineno - node.lineno + 1, f"{path.relative_to(root.parent)}:{node.name}"))
    return sorted(out, reverse=True)


def command_bodies() -> dict[str, int]:
    """Lines of each CLI command's body (after its signature and docstring)."""
    bodies = {}
    for path in sorted((ROOT / "cli").glob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef) and any("command" in ast.unparse(d) for d in node.decorator_list):
                body = node.body[1:] if isinstance(node.body[0], ast.Expr) else node.body
                bodies[f"{path.name}:{node.name}"] = body[-1].end_lineno - body[0].lineno + 1
    return bodies


def test_cli_commands_are_thin():
    bodies = command_bodies()
    assert len(bodies) >= 13
    assert not {k: v for k, v in bodies.items() if v > 30}, bodies
    for path in (ROOT / "cli").glob("*.py"):  # no array work in the CLI: that is the library's
        assert "numpy" not in path.read_text(), path.name


def test_cycle_finder_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


if __name__ == "__main__":
    if "--longest" in sys.argv:
        for n, where in functions(ROOT)[:10] + [(0, "-- cli --")] + functions(ROOT / "cli")[:5]:
            print(f"{n:5d}  {where}")
        print("command bodies:", sorted(command_bodies().items(), key=lambda kv: -kv[1])[:5])
        sys.exit(0)
    g = graph()
    for m in sorted(g, key=lambda m: (layer_of(m), m)):
        print(f"[{LAYERS[layer_of(m)][0]:>11}] {m} -> {', '.join(sorted(g[m])) or '-'}")
    cycle = find_cycle(g)
    print("cycle: " + " -> ".join(cycle) if cycle else "no cycle")
    up = [(m, n) for m, deps in g.items() for n in deps if layer_of(n) > layer_of(m)]
    print(f"{len(up)} upward import(s)" + "".join(f"\n  {m} -> {n}" for m, n in up))
    sys.exit(1 if cycle or up else 0)
