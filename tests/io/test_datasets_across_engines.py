"""Datasets: a directory of shards (Hive partitions included) or a glob, read as one stream and
written as a directory of shards with the same relative names."""

from __future__ import annotations

import os

import numpy as np
import pyarrow.parquet as pq
import pytest

from embcompress import InputError, from_spec
from embcompress.io import describe_path, open_vectors, read_all
from embcompress.engines.local import compress_file, fit_and_compress, fit_file

from conftest import make_vectors, write_parquet

RELS = ["lang=de/part-0.parquet", "lang=en/part-0.parquet", "lang=en/part-1.parquet"]


@pytest.fixture
def dataset(tmp_path):
    X = make_vectors(1000, 32, seed=11)
    root = tmp_path / "ds"
    cuts = [0, 300, 650, 1000]
    for rel, a, b in zip(RELS, cuts, cuts[1:]):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        write_parquet(root / rel, X[a:b], extra={"n": list(range(a, b))}, row_group_size=70)
    (root / "_SUCCESS").write_text("")  # markers and hidden files are not shards
    (root / ".lang=en").mkdir()
    whole = write_parquet(tmp_path / "whole.parquet", X, extra={"n": list(range(1000))}, row_group_size=70)
    return root, whole, X


def test_dataset_reads_as_one_stream_in_shard_order(dataset):
    root, _, X = dataset
    src = open_vectors(root)
    assert src.rels == RELS and src.num_rows == 1000
    got, ids = read_all(root)
    np.testing.assert_array_equal(got, X)
    assert ids == [f"doc{i}" for i in range(300)] + [f"doc{i}" for i in range(350)] + [f"doc{i}" for i in range(350)]
    glob_src = open_vectors(str(root / "lang=en" / "*.parquet"))
    assert glob_src.rels == ["part-0.parquet", "part-1.parquet"] and glob_src.num_rows == 700


@pytest.mark.parametrize("spec", ["binary", "pca:8+binary", "int8"])
def test_dataset_output_keeps_names_partitions_metadata_and_equals_one_file(tmp_path, dataset, spec):
    root, whole, X = dataset
    outs = []
    for threads in (1, 4):
        out = tmp_path / f"codes{threads}"
        fit_and_compress(from_spec(spec), root, out, keep_columns=["n"], threads=threads)
        outs.append(out)
        found = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
        assert found == RELS
        for rel in RELS:
            assert b"embcompress" in pq.read_schema(out / rel).metadata
    for rel in RELS:  # same bytes for any thread count
        assert (outs[0] / rel).read_bytes() == (outs[1] / rel).read_bytes()
    single = tmp_path / "single.parquet"
    fit_and_compress(from_spec(spec), whole, single, keep_columns=["n"])
    a, _ = read_all(outs[0], codes=None)
    b, _ = read_all(single, codes=None)
    np.testing.assert_array_equal(a, b)  # the fit saw the same rows in the same batches
    n = np.concatenate([pq.read_table(outs[0] / rel, columns=["n"]).column("n").to_numpy() for rel in RELS])
    np.testing.assert_array_equal(n, np.arange(1000))
    d = describe_path(outs[0])
    expected = "pipeline" if "+" in spec else spec
    assert (d["kind"], d["shards"], d["rows"], d["compressor"]) == ("dataset", 3, 1000, expected)


def test_fit_on_a_dataset_equals_fit_on_the_same_rows_in_one_file(dataset):
    root, whole, _ = dataset
    a, b = fit_file(from_spec("pca:8"), root), fit_file(from_spec("pca:8"), whole)
    np.testing.assert_allclose(np.abs(a.components_), np.abs(b.components_), atol=1e-5)
    np.testing.assert_allclose(a.mean_, b.mean_, atol=1e-6)


def test_search_over_a_codes_dataset(tmp_path, dataset):
    from embcompress.search.files import search_files

    root, whole, X = dataset
    fit_and_compress(from_spec("binary"), root, tmp_path / "codes")
    fit_and_compress(from_spec("binary"), whole, tmp_path / "codes.parquet")
    q = write_parquet(tmp_path / "q.parquet", make_vectors(20, 32, seed=3))
    search_files(tmp_path / "codes", q, tmp_path / "r1.parquet", k=5)
    search_files(tmp_path / "codes.parquet", q, tmp_path / "r2.parquet", k=5)
    r1, r2 = pq.read_table(tmp_path / "r1.parquet"), pq.read_table(tmp_path / "r2.parquet")
    assert r1.column("row").to_pylist() == r2.column("row").to_pylist()


def test_bad_datasets_are_one_error_naming_the_shard_and_leave_nothing(tmp_path, dataset):
    root, _, _ = dataset
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InputError, match="holds no .parquet or .npy files"):
        open_vectors(empty)
    with pytest.raises(InputError, match="matches no .parquet or .npy files"):
        open_vectors(str(tmp_path / "nothing-*.parquet"))
    odd = tmp_path / "odd"
    odd.mkdir()
    write_parquet(odd / "a.parquet", make_vectors(10, 32))
    write_parquet(odd / "b.parquet", make_vectors(10, 16))
    with pytest.raises(
        InputError, match=r"shard .*b.parquet has type .*16.*every shard of a dataset needs the same columns"
    ):
        open_vectors(odd)
    bad = make_vectors(350, 32, seed=2)
    bad[123, 4] = np.nan
    write_parquet(root / "lang=en/part-0.parquet", bad, extra={"n": list(range(350))}, row_group_size=70)
    out = tmp_path / "out"
    comp = fit_file(from_spec("binary"), root, max_rows=100)
    with pytest.raises(InputError, match=r"lang=en/part-0.parquet, row group 1: .*row 423"):
        compress_file(comp, root, out, threads=4)
    assert not out.exists() and not [p for p in os.listdir(tmp_path) if p.startswith(".out")]


def test_codes_of_different_compressors_cannot_be_one_dataset(tmp_path):
    X = make_vectors(50, 32)
    src = write_parquet(tmp_path / "x.parquet", X)
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    fit_and_compress(from_spec("binary"), src, mixed / "a.parquet")
    fit_and_compress(from_spec("binary:threshold=mean"), src, mixed / "b.parquet")
    with pytest.raises(InputError, match="codes of different compressors cannot be mixed"):
        open_vectors(mixed, codes=None)


def test_float_rerank_reads_originals_from_a_dataset(tmp_path, dataset):
    from embcompress.search.files import search_files

    root, whole, X = dataset
    fit_and_compress(from_spec("binary"), whole, tmp_path / "codes.parquet")
    q = write_parquet(tmp_path / "q.parquet", make_vectors(25, 32, seed=4))
    for name, originals in (("ds", root), ("file", whole)):
        search_files(
            tmp_path / "codes.parquet",
            q,
            tmp_path / f"r_{name}.parquet",
            k=5,
            rerank="float",
            originals=originals,
            threads=2,
        )
    a, b = pq.read_table(tmp_path / "r_ds.parquet"), pq.read_table(tmp_path / "r_file.parquet")
    assert a.column("row").to_pylist() == b.column("row").to_pylist()
    np.testing.assert_allclose(a.column("score").to_numpy(), b.column("score").to_numpy(), atol=1e-6)
