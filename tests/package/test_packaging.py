"""The core install needs only its declared dependencies (numpy, pyarrow, typer, rich): the main
commands run with every optional package made unimportable, and the optional parts say which
extra to install."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np

from conftest import write_parquet

OPTIONAL = ["torch", "sentence_transformers", "sklearn", "scipy", "faiss", "ray", "transformers"]

BLOCKER = textwrap.dedent(f"""
    import sys, importlib.abc
    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in {OPTIONAL!r}:
                raise ImportError(f"{{name}} is blocked: not part of the core install")
    sys.meta_path.insert(0, Block())
""")


def run_core(code: str, tmp_path: Path) -> subprocess.CompletedProcess:
    script = tmp_path / "core.py"
    script.write_text(BLOCKER + textwrap.dedent(code))
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path, timeout=300)


def test_core_commands_run_without_optional_packages(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((400, 32)).astype(np.float32)
    write_parquet(tmp_path / "v.parquet", X)
    write_parquet(tmp_path / "q.parquet", X[:20] + 0.01)
    res = run_core(
        """
        import sys
        from typer.testing import CliRunner
        from embcompress.cli.main import app
        r = CliRunner()
        for args in (["binarize", "v.parquet", "b.parquet"], ["fit", "pca:8+binary", "v.parquet", "m"],
                     ["apply", "m", "v.parquet", "c.parquet"], ["search", "b.parquet", "q.parquet", "r.parquet",
                     "--rerank", "asymmetric"],
                     ["evaluate", "v.parquet", "q.parquet", "--config", "pca:8+binary@asym"], ["analyze", "v.parquet"],
                     ["report", "v.parquet", "rep", "--methods", "truncate,pca"], ["info", "c.parquet"]):
            out = r.invoke(app, args)
            assert out.exit_code == 0, (args, out.output, out.exception)
        blocked = [m for m in sys.modules if m.split(".")[0] in %r]
        assert not blocked, blocked
        print("ok")
    """
        % OPTIONAL,
        tmp_path,
    )
    assert res.returncode == 0 and res.stdout.strip().endswith("ok"), res.stderr[-3000:]


def test_optional_parts_name_their_extra(tmp_path):
    from embcompress import from_spec, save

    X = np.random.default_rng(0).standard_normal((100, 16)).astype(np.float32)
    write_parquet(tmp_path / "v.parquet", X)
    save(from_spec("rq:2:nbits=4").fit(X), tmp_path / "rq-model")  # here faiss is installed (the test extra)
    (tmp_path / "t.txt").write_text("a first text\na second text\n")
    res = run_core(
        """
        from typer.testing import CliRunner
        from embcompress.cli.main import app
        r = CliRunner()
        out = r.invoke(app, ["fit", "geopres:4", "v.parquet", "m"])
        print(out.exit_code, out.stderr.strip())
        out = r.invoke(app, ["embed", "t.txt", "e.parquet"])
        print(out.exit_code, out.stderr.strip())
        out = r.invoke(app, ["apply", "rq-model", "v.parquet", "c.parquet"])
        print(out.exit_code, out.stderr.strip())
    """,
        tmp_path,
    )
    lines = res.stdout.strip().splitlines()
    assert (
        lines[0] == "1 error: fitting geopres needs torch, which is not installed; install it with: pip install "
        '"embcompress[learned]"'
    ), res.stdout + res.stderr
    assert lines[1].startswith("1 error: ") and "embcompress[models]" in lines[1], lines[1]
    # a model saved where faiss was installed, applied where it is not: the model is fine, the extra is missing
    assert lines[2] == (
        "1 error: rq-model: rq (residual quantization) needs faiss, which is not installed; install it "
        'with: pip install "embcompress[faiss]"'
    ), lines[2]
    assert not (tmp_path / "c.parquet").exists()
