"""Streaming readers and writers: types accepted, refusals naming the row, atomic output."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from embcompress import Binary, FormatError, InputError, OutputExistsError, from_spec
from embcompress.io import open_vectors, read_all
from embcompress.io import describe_path as info
from embcompress.engines.local import compress_file, fit_file

from conftest import make_vectors, write_parquet


@pytest.mark.parametrize("kind", ["fixed", "list"])
@pytest.mark.parametrize("dtype", [pa.float16(), pa.float32(), pa.float64()])
def test_reads_every_float_layout(tmp_path, kind, dtype):
    X = make_vectors(300, 12)
    path = write_parquet(tmp_path / "v.parquet", X, kind=kind, dtype=dtype, row_group_size=100)
    src = open_vectors(path)
    got = np.concatenate([b.vectors for b in src.batches(64)])
    assert got.dtype == np.float32 and got.shape == (300, 12)
    np.testing.assert_allclose(got, X.astype(dtype.to_pandas_dtype()).astype(np.float32))
    # batches never span row groups (of 100 rows here), whatever the number of threads
    for threads in (1, 2):
        assert [b.offset for b in src.batches(64, threads=threads)] == [0, 64, 100, 164, 200, 264]


def test_fixed_size_list_float32_is_zero_copy(tmp_path):
    X = make_vectors(100, 8)
    path = write_parquet(tmp_path / "v.parquet", X)
    b = next(open_vectors(path).batches(100))
    assert b.vectors.base is not None and not b.vectors.flags.owndata


def _table(col, n=None):
    return pa.table({"id": pa.array([str(i) for i in range(n or len(col))]), "embedding": col})


@pytest.mark.parametrize(
    "col, message",
    [
        (pa.array([[1.0, 2.0], None, [3.0, 4.0]], type=pa.list_(pa.float32())), "row 1 is null"),
        (pa.array([[1.0, 2.0], [1.0, 2.0], [3.0]], type=pa.list_(pa.float32())), "row 2 has 1 values, expected 2"),
        (pa.array([[1.0, 2.0], [1.0, None]], type=pa.list_(pa.float32())), "row 1 has a null value at dimension 1"),
        (pa.array([[1.0, 2.0], [1.0, float("nan")]], type=pa.list_(pa.float32())), "row 1 has a non-finite value"),
        (pa.array([[1.0, float("inf")]], type=pa.list_(pa.float64(), 2)), "row 0 has a non-finite value"),
    ],
)
def test_bad_rows_are_named(tmp_path, col, message):
    pq.write_table(_table(col), tmp_path / "bad.parquet")
    with pytest.raises(InputError, match=message):
        for _ in open_vectors(tmp_path / "bad.parquet").batches():
            pass


def test_error_row_counts_across_batches(tmp_path):
    X = make_vectors(1000, 4)
    X[777, 2] = np.nan
    path = write_parquet(tmp_path / "v.parquet", X, row_group_size=100)
    with pytest.raises(InputError, match="row 777 has a non-finite value .* at dimension 2"):
        fit_file(from_spec("pca:2"), path, batch_size=64)


def test_non_float_and_missing_columns(tmp_path):
    pq.write_table(
        pa.table({"id": ["a"], "embedding": pa.array([[1, 2]], type=pa.list_(pa.int64()))}), tmp_path / "i.parquet"
    )
    with pytest.raises(
        InputError,
        match="no column of a list or fixed_size_list of float16/float32/float64; its columns are: id \\(string\\), "
        "embedding \\(list<\\w+: int64>\\)",
    ):
        open_vectors(tmp_path / "i.parquet")
    with pytest.raises(InputError, match="column 'embedding' .* has type list<\\w+: int64>; expected a list"):
        open_vectors(tmp_path / "i.parquet", column="embedding")
    path = write_parquet(tmp_path / "v.parquet", make_vectors(5, 4))
    with pytest.raises(InputError, match="has no column 'vec'; its columns are: id, embedding"):
        open_vectors(path, column="vec")
    with pytest.raises(InputError, match="no id column 'key'"):
        open_vectors(path, id_column="key")


def test_several_embedding_columns_need_a_choice(tmp_path):
    col = pa.FixedSizeListArray.from_arrays(pa.array(np.ones(8, dtype=np.float32)), 4)
    pq.write_table(pa.table({"a": col, "b": col}), tmp_path / "two.parquet")
    with pytest.raises(InputError, match="several embedding columns \\(a, b\\); pick one with --column"):
        open_vectors(tmp_path / "two.parquet")
    assert open_vectors(tmp_path / "two.parquet", column="b").dim == 4


def test_corrupt_truncated_and_empty_files(tmp_path):
    path = write_parquet(tmp_path / "v.parquet", make_vectors(2000, 16), row_group_size=500)
    data = path.read_bytes()
    (tmp_path / "trunc.parquet").write_bytes(data[: len(data) // 2])
    with pytest.raises(FormatError, match="not a readable parquet file"):
        open_vectors(tmp_path / "trunc.parquet")
    (tmp_path / "empty.parquet").write_bytes(b"")
    with pytest.raises(FormatError, match="not a readable parquet file"):
        open_vectors(tmp_path / "empty.parquet")
    # corrupt inside a data page but with an intact footer
    bad = bytearray(data)
    bad[200:4000] = b"\x00" * 3800
    (tmp_path / "corrupt.parquet").write_bytes(bytes(bad))
    with pytest.raises((FormatError, InputError)):
        for _ in open_vectors(tmp_path / "corrupt.parquet").batches(100):
            pass


def test_zero_rows(tmp_path):
    path = write_parquet(tmp_path / "z.parquet", np.zeros((0, 4), dtype=np.float32))
    with pytest.raises(InputError, match="has no rows"):
        fit_file(Binary(), path)


def test_compress_writes_types_ids_and_metadata(tmp_path, vec_file, X):
    for spec, arrow_type in (
        ("binary", pa.binary(6)),
        ("int8", pa.list_(pa.int8(), 48)),
        ("pca:5", pa.list_(pa.float32(), 5)),
    ):
        comp = fit_file(from_spec(spec), vec_file)
        out = tmp_path / f"{spec.replace(':', '')}.parquet"
        compress_file(comp, vec_file, out, keep_columns=["lang"], batch_size=100)
        table = pq.read_table(out)
        assert table.column_names == ["id", "lang", "embedding"]
        assert table.schema.field("embedding").type == arrow_type
        assert table.column("id").to_pylist() == [f"doc{i}" for i in range(len(X))]
        meta = json.loads(table.schema.metadata[b"embcompress"])
        assert meta["compressor"]["name"] == spec.split(":")[0] and meta["input_width"] == 48
        codes, ids = read_all(out, codes=None)
        if spec.startswith("pca"):  # float output: BLAS blocking differs by batch size in the last ulp
            np.testing.assert_allclose(codes, comp.transform(X), rtol=1e-5, atol=1e-6)
        else:
            np.testing.assert_array_equal(codes, comp.transform(X))
    d = info(tmp_path / "binary.parquet")
    assert d["compressor"] == "binary" and d["bit_order"].startswith("msb-first") and d["rows"] == len(X)


def test_npy_in_and_out(tmp_path, X):
    np.save(tmp_path / "v.npy", X)
    comp = fit_file(from_spec("pca:8+binary"), tmp_path / "v.npy", batch_size=77)
    compress_file(comp, tmp_path / "v.npy", tmp_path / "c.npy", batch_size=77)
    np.testing.assert_array_equal(np.load(tmp_path / "c.npy"), comp.transform(X))
    assert info(tmp_path / "c.npy")["compressor"] == "pipeline"
    np.save(tmp_path / "ints.npy", np.ones((3, 3), dtype=np.int64))
    with pytest.raises(InputError, match="dtype int64; only float16"):
        fit_file(Binary(), tmp_path / "ints.npy")


def test_output_is_atomic_and_not_overwritten(tmp_path, vec_file, X):
    out = tmp_path / "out.parquet"
    out.write_text("precious")
    comp = Binary().fit(X)
    with pytest.raises(OutputExistsError, match="already exists; pass --overwrite"):
        compress_file(comp, vec_file, out)
    assert out.read_text() == "precious"
    # a failure half-way leaves no output and no temporary
    Y = X.copy()
    Y[450] = np.inf
    bad = write_parquet(tmp_path / "bad.parquet", Y, row_group_size=100)
    with pytest.raises(InputError, match="row 450"):
        compress_file(comp, bad, tmp_path / "new.parquet", batch_size=100)
    assert not (tmp_path / "new.parquet").exists()
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]
    with pytest.raises(InputError, match="has 48 dimensions but the binary compressor was fitted on 10"):
        compress_file(Binary().fit(X[:, :10]), vec_file, tmp_path / "w.parquet")
    with pytest.raises(InputError, match="same file as the input"):
        compress_file(comp, vec_file, vec_file, overwrite=True)
    with pytest.raises(InputError, match="does not exist"):
        compress_file(comp, vec_file, tmp_path / "nodir" / "o.parquet")
    with pytest.raises(InputError, match="unknown file type '.csv'"):
        compress_file(comp, vec_file, tmp_path / "o.csv")


def test_larger_than_batch_stream_matches_in_memory(tmp_path):
    X = make_vectors(5000, 97, normalize=False)
    path = write_parquet(tmp_path / "v.parquet", X, row_group_size=999)
    comp = fit_file(from_spec("binary"), path, batch_size=333)
    compress_file(comp, path, tmp_path / "b.parquet", batch_size=333)
    codes, ids = read_all(tmp_path / "b.parquet", codes=True)
    from sentence_transformers.util.quantization import quantize_embeddings

    np.testing.assert_array_equal(codes, quantize_embeddings(X, precision="ubinary"))
    assert ids[:2] == ["doc0", "doc1"] and len(ids) == 5000


@pytest.mark.parametrize("announced", [-137, 0, 250])
def test_read_all_fills_one_array_whatever_the_announced_row_count(tmp_path, monkeypatch, announced):
    """read_all puts the rows straight into one array of the row count the metadata announces;
    a file announcing fewer rows (or more) than it holds still reads whole and in order."""
    import embcompress.io.whole as whole

    X = make_vectors(1000, 12)
    path = write_parquet(tmp_path / "v.parquet", X, row_group_size=90)
    opened = whole.open_vectors

    def lying(*args, **kwargs):
        src = opened(*args, **kwargs)
        src.num_rows += announced
        return src

    monkeypatch.setattr(whole, "open_vectors", lying)
    got, ids = read_all(path)
    np.testing.assert_array_equal(got, X)
    assert got.flags.c_contiguous and got.dtype == np.float32
    assert ids == [f"doc{i}" for i in range(1000)]
    codes = tmp_path / "bits.parquet"
    monkeypatch.setattr(whole, "open_vectors", opened)
    compress_file(Binary().fit(X), path, codes)
    monkeypatch.setattr(whole, "open_vectors", lying)
    bits, _ = read_all(codes, codes=True)
    np.testing.assert_array_equal(bits, Binary().fit(X).transform(X))


@pytest.mark.skipif(importlib.util.find_spec("pandas") is None, reason="pandas is not installed")
def test_streaming_does_not_import_pandas(tmp_path):
    """pyarrow imports pandas, when installed, from pa.array, to_numpy and empty_table: 0.4 s of
    every streaming command, holding the GIL. Fits and writes of every output kind, from the
    direct decoder's and pyarrow's layouts, stay clear of it."""
    X = make_vectors(3000, 16)
    files = [write_parquet(tmp_path / f"{k}.parquet", X, kind=k, row_group_size=1000) for k in ("fixed", "list")]
    code = (
        "import sys; from embcompress import from_spec; from embcompress.engines.local import fit_and_compress\n"
        "for i, path in enumerate(sys.argv[1:]):\n    for j, spec in enumerate(('truncate:8', 'int8', 'binary')):\n"
        "        fit_and_compress(from_spec(spec), path, f'{path}.{j}.out.parquet', threads=2)\n"
        "sys.exit(3 if 'pandas' in sys.modules else 0)"
    )
    run = subprocess.run([sys.executable, "-c", code, *map(str, files)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr or "pandas was imported"
    assert len(list(tmp_path.glob("*.out.parquet"))) == 6
