from __future__ import annotations

import json
import re

import numpy as np
import pytest

import embcompress
from embcompress import FormatError, InputError, OutputExistsError, from_spec, load

from conftest import make_vectors


def _saved(tmp_path, spec="pca:4"):
    c = from_spec(spec).fit(make_vectors(50, 8))
    c.save(tmp_path / "m")
    return tmp_path / "m"


def test_unknown_name_lists_known(tmp_path):
    known = embcompress.available()
    assert {"binary", "pca", "pipeline", "pq"} <= set(known) and known == sorted(known)
    with pytest.raises(InputError, match=re.escape(f"unknown compressor 'lsh'; known: {', '.join(known)}")):
        from_spec("lsh:8")
    path = _saved(tmp_path)
    cfg = json.loads((path / "config.json").read_text())
    cfg["name"] = "nope"
    (path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(InputError, match="known: "):
        load(path)


def test_unknown_format_version(tmp_path):
    path = _saved(tmp_path)
    cfg = json.loads((path / "config.json").read_text())
    cfg["format_version"] = 99
    (path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(FormatError, match="format version 99; .* reads versions 1"):
        load(path)


def test_pickled_arrays_are_refused(tmp_path):
    path = _saved(tmp_path)
    np.savez(path / "arrays.npz", components_=np.array([object()], dtype=object))
    with pytest.raises(FormatError, match="without pickle"):
        load(path)


def test_not_a_model_dir(tmp_path):
    with pytest.raises(FormatError, match="no config.json"):
        load(tmp_path)


def test_save_refuses_existing_unless_overwrite(tmp_path):
    path = _saved(tmp_path)
    c = from_spec("int8").fit(make_vectors(50, 8))
    with pytest.raises(OutputExistsError, match="already exists"):
        c.save(path)
    c.save(path, overwrite=True)
    assert load(path).name == "int8"
    assert [p.name for p in tmp_path.iterdir()] == ["m"]  # no temporary left behind


def test_config_is_readable_json(tmp_path):
    path = _saved(tmp_path, "pca:4+binary")
    cfg = json.loads((path / "config.json").read_text())
    assert cfg["format"] == "embcompress.compressor" and cfg["format_version"] == 1
    assert cfg["library_version"] == embcompress.__version__
    assert [s["name"] for s in cfg["params"]["stages"]] == ["pca", "binary"]
    assert cfg["output"] == {"kind": "bits", "dtype": "uint8", "width": 4, "nbytes": 1, "metric": "hamming"}


@pytest.mark.parametrize(
    "spec, message",
    [
        ("", "empty compressor spec"),
        ("truncate:8:size=3", "does not take size; its parameters are: dim, renormalize"),
        ("int8:4", "takes no value"),
        ("pca:8++binary", "empty compressor name"),
    ],
)
def test_bad_specs(spec, message):
    with pytest.raises(InputError, match=message):
        from_spec(spec)


def test_spec_values_are_typed():
    c = from_spec("truncate:8:renormalize=true")
    assert c.dim == 8 and c.renormalize is True
    assert from_spec("pca:0.9").variance == 0.9
    assert from_spec("random_projection:16:seed=7").seed == 7


def test_fingerprint_differs_for_different_fits():
    a = from_spec("pca:4").fit(make_vectors(50, 8, seed=1))
    b = from_spec("pca:4").fit(make_vectors(50, 8, seed=2))
    assert embcompress.describe(a)["fingerprint"] != embcompress.describe(b)["fingerprint"]


def test_import_does_not_import_torch_or_sentence_transformers():
    import subprocess
    import sys

    code = (
        "import sys, embcompress, embcompress.engines.local, embcompress.search, embcompress.io, "
        "embcompress.report.demo; "
        "bad = [m for m in ('torch', 'sentence_transformers', 'transformers') if m in sys.modules]; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
