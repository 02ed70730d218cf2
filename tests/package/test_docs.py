"""Every code block of README.md and docs/ runs (spans the CLI and the library through the documentation).

Each page's blocks run in order in one fresh directory that holds small generated files under the
names the pages use (``docs.parquet`` with ids, ``queries.parquet``, ``qrels.tsv``); a page makes the rest.
``bash`` blocks run with ``bash -e``; ``python`` blocks are executed there. A block that cannot run
here is marked ``<!-- skip: REASON -->`` on the line before it, and the reason must be given."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"(?:<!-- skip: (?P<skip>[^>]*?) -->\n)?```(?P<lang>\w+)\n(?P<body>.*?)\n```", re.S)


def blocks(page: Path) -> list[tuple[str, str, str | None]]:
    """(language, code, skip reason or None) of each fenced block of ``page``."""
    return [(m["lang"], m["body"], m["skip"]) for m in FENCE.finditer(page.read_text())]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("docs-data")
    rng = np.random.default_rng(0)
    n, dim = 1500, 32
    X = (rng.standard_normal((n, 6)) @ rng.standard_normal((6, dim)) + 0.4 * rng.standard_normal((n, dim))).astype(
        np.float32
    )
    ids = [f"d{i}" for i in range(n)]
    pq.write_table(
        pa.table({"id": ids, "embedding": pa.array(list(X), type=pa.list_(pa.float32()))}), d / "docs.parquet"
    )
    Q = X[:120] + 0.3 * rng.standard_normal((120, dim)).astype(np.float32)
    pq.write_table(
        pa.table({"id": [f"q{i}" for i in range(120)], "embedding": pa.array(list(Q), type=pa.list_(pa.float32()))}),
        d / "queries.parquet",
    )
    (d / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(f"q{i}\td{i}\t1\n" for i in range(120)))
    return d


def test_every_page_has_code_and_every_skip_says_why():
    counted = {p.name: len(blocks(p)) for p in PAGES}
    assert sum(counted.values()) >= 20, counted
    for page in PAGES:
        for _, _, skip in blocks(page):
            assert skip is None or len(skip.strip()) > 10, f"{page}: a skipped block must say why"


@pytest.mark.parametrize(
    "page", [p for p in PAGES if any(s is None for _, _, s in blocks(p))], ids=lambda p: str(p.relative_to(ROOT))
)
def test_the_pages_code_blocks_run(page, files, tmp_path, monkeypatch):
    for f in files.iterdir():
        (shutil.copytree if f.is_dir() else shutil.copy)(f, tmp_path / f.name)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    monkeypatch.chdir(tmp_path)
    for i, (lang, code, skip) in enumerate(blocks(page)):
        if skip is not None or lang not in ("bash", "python"):
            continue
        if lang == "bash":
            r = subprocess.run(
                ["bash", "-e", "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
            )
            assert r.returncode == 0, f"{page.name} block {i}:\n{code}\n--- stderr:\n{r.stderr[-2000:]}"
        else:
            exec(compile(code, f"{page.name}[{i}]", "exec"), {"__name__": "__docs__"})


def test_the_generated_cli_reference_lists_every_command_and_option():
    import importlib.util

    import typer

    from embcompress.cli.main import app

    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    page = hooks.cli_reference()
    group = typer.main.get_command(app)
    for name, cmd in group.commands.items():
        assert f"## `{name}`" in page
        for p in cmd.params:
            for opt in p.opts if p.param_type_name == "option" else [p.name.upper()]:
                assert f"`{opt}`" in page, (name, opt)
