"""Import paths of modules that moved when the package was split into layers.

``import embcompress.stream`` and ``from embcompress.evaluate import evaluate`` keep working: a finder
placed on ``sys.meta_path`` by ``embcompress/__init__.py`` answers each old name with the module at
its new place (the same module object, not a copy), imported only when the old name is asked for."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys

#: old module path -> new module path (a package's submodules follow their package)
MOVED = {
    "embcompress.errors": "embcompress.core.errors",
    "embcompress.checks": "embcompress.core.checks",
    "embcompress.registry": "embcompress.core.registry",
    "embcompress.persist": "embcompress.core.persist",
    "embcompress.base": "embcompress.core.base",
    "embcompress.capabilities": "embcompress.core.capabilities",
    "embcompress.specs": "embcompress.core.specs",
    "embcompress.fitplan": "embcompress.core.fitting",
    "embcompress.core.fitplan": "embcompress.core.fitting",
    "embcompress.references": "embcompress.report.references",
    "embcompress.datasets": "embcompress.io.datasets",
    "embcompress.corpus": "embcompress.embedding.corpus",
    "embcompress.embed_onnx": "embcompress.embedding.onnx",
    "embcompress.embed": "embcompress.embedding.embed",
    "embcompress.stream": "embcompress.engines.local",
    "embcompress.ray_engine": "embcompress.engines.ray",
    "embcompress.crossfit": "embcompress.evaluation.crossfit",
    "embcompress.tasks": "embcompress.evaluation.tasks",
    "embcompress.evaluate": "embcompress.evaluation.evaluate",
    "embcompress.export": "embcompress.serving.export",
    "embcompress.demo": "embcompress.report.demo",
}


def new_path(name: str) -> str | None:
    """The current path of a module asked for by its old path, or None if it did not move."""
    for old, new in MOVED.items():
        if name == old or name.startswith(old + "."):
            return new + name[len(old) :]
    return None


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path=None, target=None):
        if not fullname.startswith("embcompress.") or new_path(fullname) is None:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        module = importlib.import_module(new_path(spec.name))
        spec.loader_state = module.__spec__  # the import machinery sets __spec__ to the alias's: put it back
        return module

    def exec_module(self, module):
        module.__spec__ = module.__spec__.loader_state


def install() -> None:
    if not any(isinstance(f, _Alias) for f in sys.meta_path):
        sys.meta_path.append(_Alias())
