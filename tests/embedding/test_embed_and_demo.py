"""Embedding with the packaged offline MiniLM, and the demo on a small built-in corpus."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from embcompress.embedding.corpus import stdlib_docstring_pairs
from embcompress.embedding.embed import read_texts
from embcompress.io import read_all
from embcompress.cli.main import app

runner = CliRunner()


def test_stdlib_corpus_is_real_and_deterministic():
    a = stdlib_docstring_pairs(50)
    b = stdlib_docstring_pairs(50)
    assert [p.id for p in a] == [p.id for p in b] and len(a) == 50
    assert len({p.query for p in a}) == 50 and all(len(p.document) >= 80 for p in a)


def test_docstring_pairs_from_any_source_tree(tmp_path):
    body = "The body of the docstring, long enough to be kept as a document on its own. " * 2
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text(
        f'def f():\n    """Do one thing well.\n\n    {body}\n    """\n\n'
        f'class C:\n    def g(self):\n        """Summary of g here.\n\n        {body}and more.\n        """\n'
        'def short():\n    """No body."""\n'
    )
    (tmp_path / "pkg" / "broken.py").write_text("def (:\n")  # not Python: skipped
    pairs = stdlib_docstring_pairs(None, root=tmp_path)
    assert [(p.id, p.query) for p in pairs] == [
        ("pkg.mod.f", "Do one thing well."),
        ("pkg.mod.C.g", "Summary of g here."),
    ]
    assert pairs[0].document == body.strip()


def test_docstring_pairs_have_unique_ids_where_a_name_is_defined_twice(tmp_path):
    body = "A body long enough to be kept as a document, which says what the value holds and why. " * 2
    (tmp_path / "m.py").write_text(
        f'class C:\n    @property\n    def v(self):\n        """Get the value.\n\n        {body}\n        """\n'
        f'    @v.setter\n    def v(self, x):\n        """Set the value.\n\n        {body}and the setter.\n        """\n'
    )
    pairs = stdlib_docstring_pairs(None, root=tmp_path)
    assert [p.id for p in pairs] == ["m.C.v", "m.C.v#2"]  # qrels name documents by id


def test_read_texts_formats(tmp_path):
    (tmp_path / "t.txt").write_text("alpha\n\nbeta\n")
    assert read_texts(tmp_path / "t.txt") == (["alpha", "beta"], ["0", "1"])
    (tmp_path / "t.jsonl").write_text('{"_id": "x", "text": "hello"}\n{"_id": "y", "title": "T", "text": "world"}\n')
    assert read_texts(tmp_path / "t.jsonl") == (["hello", "T. world"], ["x", "y"])
    (tmp_path / "bad.jsonl").write_text('{"body2": 1}\n')
    from embcompress import InputError

    with pytest.raises(InputError, match="line 1 has no text field"):
        read_texts(tmp_path / "bad.jsonl")
    (tmp_path / "e.txt").write_text("\n\n")
    with pytest.raises(InputError, match="holds no texts"):
        read_texts(tmp_path / "e.txt")


def test_embed_cli_with_packaged_model(tmp_path):
    texts = ["binary quantization of embeddings", "sign bits packed into bytes", "a recipe for tomato soup"]
    (tmp_path / "t.txt").write_text("\n".join(texts))
    res = runner.invoke(app, ["embed", str(tmp_path / "t.txt"), str(tmp_path / "e.parquet"), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["width"] == 384
    X, ids = read_all(tmp_path / "e.parquet")
    assert X.shape == (3, 384) and ids == ["0", "1", "2"]
    np.testing.assert_allclose(np.linalg.norm(X, axis=1), 1.0, atol=1e-5)
    sims = X @ X.T
    assert sims[0, 1] > sims[0, 2]  # the model is real: related texts are closer
    res = runner.invoke(app, ["embed", str(tmp_path / "t.txt"), str(tmp_path / "f.parquet"), "--model", str(tmp_path)])
    assert res.exit_code == 1 and "not a sentence-transformers model directory" in res.stderr


def test_demo_runs_on_builtin_corpus(tmp_path):
    res = runner.invoke(app, ["demo", "--out", str(tmp_path / "d"), "--limit", "40", "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    rows = {r["name"]: r for r in d["rows"]}
    assert d["documents"] == 40 and rows["float32"]["recall_at_10"] == 1.0
    assert rows["binary"]["bytes_per_vector"] == 48
    for r in d["rows"]:
        assert (tmp_path / "d" / r["file"]).exists()
        assert 0.3 < r["recall_at_10"] <= 1.0
    assert rows["int8"]["recall_at_10"] > rows["binary"]["recall_at_10"]
    ret = {r["config"]: r for r in d["retrieval"]}
    assert ret["float"]["retention"] == 1.0 and ret["rotate:center=true+binary@asym"]["bytes_per_vector"] == 48
    assert ret["sq:2"]["bytes_per_vector"] == 96 and all(0 < r["retention"] <= 1.05 for r in d["retrieval"])
    res = runner.invoke(app, ["demo", "--out", str(tmp_path / "d"), "--limit", "40"])
    assert res.exit_code == 1 and "already exists" in res.stderr
