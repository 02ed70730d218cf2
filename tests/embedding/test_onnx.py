"""embed --backend onnx / onnx-int8: exported from the packaged MiniLM's own weights, checked
against torch, cached, refused cleanly where it does not apply."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

pytest.importorskip("onnxruntime")
pytest.importorskip("sentence_transformers")

from embcompress.cli.main import app

from embcompress import InputError, embed_onnx
from embcompress.embedding.embed import encode, load_model
from embcompress.io import read_all

TEXTS = [
    "How do I read a parquet file in chunks?",
    "Binary codes keep most of the ranking.",
    "short",
    "The standard library's docstrings make a small corpus for retrieval tests. " * 6,
    "Embeddings cost memory; compression trades a little quality for a lot of it.",
]


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    root = tmp_path_factory.mktemp("onnx-cache")
    mp = pytest.MonkeyPatch()
    mp.setenv("EMBCOMPRESS_CACHE", str(root))
    yield root
    mp.undo()


@pytest.fixture(scope="module")
def torch_vectors():
    return encode(load_model(None), TEXTS, batch_size=2)


@pytest.mark.parametrize("backend, floor", [("onnx", 0.9999), ("onnx-int8", 0.98)])
def test_onnx_backends_give_torchs_embeddings(cache, torch_vectors, backend, floor):
    model = load_model(None, backend=backend)
    got = encode(model, TEXTS, batch_size=2)  # batches of two: padding differs from torch's batches
    assert got.shape == torch_vectors.shape and got.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    cos = (got * torch_vectors).sum(axis=1)
    assert cos.min() >= floor, cos
    if backend == "onnx-int8":
        assert cos.mean() < 0.99999  # int8 weights really are in use: not the float graph again
    meta = json.loads(next((cache / "onnx").glob("*/meta.json")).read_text()) if backend == "onnx" else None
    if meta:
        assert meta["pooling"] == "mean" and meta["normalize"] is True and meta["dim"] == 384


def test_a_cached_export_is_used_without_exporting_again(cache, monkeypatch):
    load_model(None, backend="onnx")  # made by the test above or here

    def boom(*a, **k):
        raise AssertionError("exported again")

    monkeypatch.setattr(embed_onnx, "_export", boom)
    model = load_model(None, backend="onnx")
    assert model.get_embedding_dimension() == 384
    assert not list((cache / "onnx").glob(".*tmp*"))  # no temporary export left behind


def test_bad_backend_and_device_are_refused():
    with pytest.raises(InputError, match="backend must be one of torch, onnx, onnx-int8"):
        load_model(None, backend="tensorrt")
    with pytest.raises(InputError, match="runs on the CPU only"):
        load_model(None, backend="onnx", device="cuda")


def test_models_the_export_does_not_cover_are_refused(tmp_path, cache):
    (tmp_path / "modules.json").write_text(
        json.dumps(
            [
                {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
                {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"},
            ]
        )
    )
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(InputError, match="Transformer \\+ Pooling \\+ Dense; use --backend torch"):
        load_model(str(tmp_path), backend="onnx")
    (tmp_path / "modules.json").write_text(
        json.dumps(
            [
                {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
            ]
        )
    )
    (tmp_path / "1_Pooling").mkdir()
    (tmp_path / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode": "weightedmean"}))
    with pytest.raises(InputError, match="pools by 'weightedmean'"):
        load_model(str(tmp_path), backend="onnx")
    assert not (cache / "onnx").exists() or not list((cache / "onnx").glob(".*tmp*"))


def test_embed_cli_with_the_int8_backend(tmp_path, cache):
    (tmp_path / "t.txt").write_text("\n".join(TEXTS) + "\n")
    res = CliRunner().invoke(
        app, ["embed", str(tmp_path / "t.txt"), str(tmp_path / "v.parquet"), "--backend", "onnx-int8", "--json"]
    )
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["backend"] == "onnx-int8"  # the JSON alone on stdout (progress may go to stderr)
    info = CliRunner().invoke(app, ["info", str(tmp_path / "v.parquet")])
    assert info.exit_code == 0 and "backend onnx-int8" in " ".join(info.output.split())
    X, ids = read_all(tmp_path / "v.parquet")
    assert X.shape == (len(TEXTS), 384) and list(ids) == [str(i) for i in range(len(TEXTS))]
    bad = CliRunner().invoke(app, ["embed", str(tmp_path / "t.txt"), str(tmp_path / "w.parquet"), "--backend", "fast"])
    assert bad.exit_code != 0 and "backend must be one of" in bad.output
    assert not (tmp_path / "w.parquet").exists()
