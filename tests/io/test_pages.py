"""The direct decoder of float32 vector pages (embcompress.io.pages): the same batches as pyarrow
for every layout it accepts, and a hand-over to pyarrow (same errors) for everything else."""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from embcompress import FormatError, InputError
from embcompress.io import open_vectors, page_format, pages

from conftest import make_vectors

pytestmark = pytest.mark.skipif(not pages.available(), reason="the C extension embcompress.io._rle is not built")


def _write(path, X, *, kind="fixed", ids=True, **options):
    values = pa.array(X.reshape(-1), type=pa.float32())
    col = (
        pa.FixedSizeListArray.from_arrays(values, X.shape[1])
        if kind == "fixed"
        else pa.ListArray.from_arrays(pa.array(np.arange(len(X) + 1) * X.shape[1], type=pa.int32()), values)
    )
    table = pa.table({"id": pa.array(np.arange(len(X))), "embedding": col} if ids else {"embedding": col})
    pq.write_table(table, path, **options)
    return path


def _direct(path, dim, batch_size):
    """Every row group through the direct decoder alone (Unsupported propagates)."""
    pf = pq.ParquetFile(path)
    col = pages.find_column(pf, "embedding")
    assert col is not None
    with open(path, "rb", buffering=0) as f:
        return [
            b
            for g in range(pf.num_row_groups)
            for b in pages.decode_group(f.fileno(), pf.metadata, g, col, dim, batch_size)
        ]


def _arrow(path, batch_size):
    pf = pq.ParquetFile(path)
    return [
        np.asarray(b.column(0).flatten(), dtype=np.float32).reshape(b.num_rows, -1)
        for g in range(pf.num_row_groups)
        for b in pf.iter_batches(batch_size=batch_size, row_groups=[g], columns=["embedding"])
    ]


LAYOUTS = [
    dict(compression="snappy"),
    dict(compression="none", data_page_version="2.0"),
    dict(compression="zstd", data_page_version="2.0", write_page_checksum=True),
    dict(compression="lz4", use_dictionary=False, write_page_checksum=True),
    dict(compression="gzip", use_dictionary=False),
    dict(compression="brotli", data_page_version="1.0"),
    # PLAIN, uncompressed v1 pages: the values read straight into the batch (_direct_page)
    dict(compression="none", use_dictionary=False, write_page_checksum=True),
    # a dictionary page limit small enough that the chunk switches to PLAIN pages part-way
    dict(compression="snappy", dictionary_pagesize_limit=4096, data_page_size=2048),
]


@pytest.mark.parametrize("options", LAYOUTS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()))
@pytest.mark.parametrize("kind", ["fixed", "list"])
@pytest.mark.parametrize("dim", [1, 3, 16, 100])
def test_same_batches_as_pyarrow(tmp_path, options, kind, dim):
    X = make_vectors(1000, dim)
    X[::7] = X[0]  # repeated values: dictionary pages and RLE runs of indices
    options = {"data_page_size": 1024, **options}
    path = _write(tmp_path / "v.parquet", X, kind=kind, row_group_size=300, **options)
    for batch_size in (64, 1000):
        got, want = _direct(path, dim, batch_size), _arrow(path, batch_size)
        assert [len(b) for b in got] == [len(b) for b in want]
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a, b)
    # and through the reader, with the ids carried alongside, on 1 and 3 threads
    src = open_vectors(path)
    assert src._direct is not None
    for threads in (1, 3):
        batches = list(src.batches(50, threads=threads))
        np.testing.assert_array_equal(np.concatenate([b.vectors for b in batches]), X)
        assert np.concatenate([b.carried.column("id").to_numpy() for b in batches]).tolist() == list(range(1000))


@pytest.mark.parametrize("compression", ["none", "snappy"])
def test_plain_pages_are_read_into_the_batches(tmp_path, monkeypatch, compression):
    """PLAIN v1 pages go through _read_plain (values read or decompressed in place), those that
    cross a batch's end into that batch and the next; a page cut by the start row, or longer than
    a batch, goes the general way; the batches are pyarrow's either way."""
    X = make_vectors(1000, 16)
    X[::3, :8] = 0.5  # repeats: snappy copies, some of them across the levels' end
    path = _write(
        tmp_path / "v.parquet",
        X,
        compression=compression,
        use_dictionary=False,
        write_page_checksum=True,
        row_group_size=1000,
        data_page_size=640,
    )
    pf = pq.ParquetFile(path)
    col = pages.find_column(pf, "embedding")
    with open(path, "rb", buffering=0) as f:
        index = pages.scan_pages(f.fileno(), pf.metadata, 0, col, 16)
    starts = [v // 16 for v in index.first_values] + [1000]  # each page's rows
    assert len(starts) > 3
    taken = []
    real = pages._read_plain
    monkeypatch.setattr(pages, "_read_plain", lambda *a: taken.append(a[3]) or real(*a))
    for batch_size in (starts[1] * 2, starts[1] + 7, starts[1] - 5, 1000):
        taken.clear()
        got = _direct(path, 16, batch_size)
        assert [len(b) for b in got] == [len(b) for b in _arrow(path, batch_size)]
        np.testing.assert_array_equal(np.concatenate(got), X)
        if batch_size >= starts[1]:  # every page
            assert sum(taken) == 16000
        else:  # pages longer than a batch: those that would reach past the next batch go the general way
            assert 0 < sum(taken) < 16000
    with open(path, "rb", buffering=0) as f:  # a start inside a page: that page the general way
        taken.clear()
        tail = list(pages.decode_group(f.fileno(), pf.metadata, 0, col, 16, 40, span=pages.Span((995, 1000), index)))
    np.testing.assert_array_equal(tail[0], X[995:])
    assert sum(taken) == 16 * sum(b - a for a, b in zip(starts, starts[1:]) if a >= 995)  # only pages from row 995 on


@pytest.mark.skipif(not hasattr(page_format._rle, "snappy_split"), reason="the C extension was not built")
def test_snappy_split_is_pyarrows_snappy_and_refuses_bad_blocks():
    """Any split point gives pyarrow's bytes; a cut, corrupted or wrongly sized block raises
    ValueError (never writes out of bounds: a fuzz of 3,000 corrupted blocks)."""
    codec, rng = pa.Codec("snappy"), np.random.default_rng(0)
    blocks = [
        make_vectors(500, 16).tobytes(),
        bytes(5000) + rng.bytes(300) + b"xyz" * 2000,
        np.tile(make_vectors(3, 5), (400, 1)).tobytes(),
    ]
    for data in blocks:
        z = codec.compress(data, asbytes=True)
        for cut in (0, 1, 7, 4096, len(data) - 1, len(data)):
            head, tail = bytearray(cut), bytearray(len(data) - cut)
            page_format._rle.snappy_split(z, head, tail)
            assert bytes(head) + bytes(tail) == data
            for cut2 in (cut, cut + 3, len(data)):  # and a third part
                if cut2 <= len(data):
                    parts = bytearray(cut), bytearray(cut2 - cut), bytearray(len(data) - cut2)
                    page_format._rle.snappy_split(z, *parts)
                    assert b"".join(parts) == data
        for wrong in (z[:-1], z[: len(z) // 2], z + b"\x00"):
            with pytest.raises(ValueError):
                page_format._rle.snappy_split(wrong, bytearray(5), bytearray(len(data) - 5))
        with pytest.raises(ValueError, match="size"):
            page_format._rle.snappy_split(z, bytearray(5), bytearray(len(data)))
        for _ in range(1000):
            bad = bytearray(z)
            for i in rng.integers(0, len(bad), rng.integers(1, 4)):
                bad[i] = int(rng.integers(256))
            head, tail = bytearray(64), bytearray(len(data) - 64)
            try:
                page_format._rle.snappy_split(bytes(bad), head, tail)
            except ValueError:
                pass


def test_dictionary_pages_are_decoded_directly(tmp_path):
    X = np.tile(make_vectors(5, 8), (200, 1))
    path = _write(tmp_path / "v.parquet", X, compression="snappy")
    md = pq.ParquetFile(path).metadata.row_group(0).column(1)
    assert md.has_dictionary_page and "RLE_DICTIONARY" in md.encodings
    np.testing.assert_array_equal(np.concatenate(_direct(path, 8, 128)), X)


def test_level_checks_find_the_first_bad_level():
    from embcompress.io import _rle

    # RLE run of 6 ones (header 6 << 1 = 12, value 1), then a bit-packed group of 8 (header 3)
    stream = bytes([12, 1, 3, 0b10101010])
    assert _rle.check_levels(stream, 1, 14, 1, 0, 0) == (4, 6)  # the 7th level is 0
    assert _rle.check_levels(stream, 1, 6, 1, 0, 0)[1] == -1
    # repetition levels of lists of 2 values: 0,1,0,1,... bit-packed
    assert _rle.check_levels(bytes([3, 0b10101010]), 1, 8, 1, 2, 0) == (2, -1)
    assert _rle.check_levels(bytes([3, 0b10101010]), 1, 8, 1, 2, 1)[1] == 0  # shifted by one value
    assert _rle.check_levels(bytes([3, 0b10101010]), 1, 8, 1, 4, 0)[1] == 2  # lists of 4 values: too short
    with pytest.raises(ValueError, match="ends early"):
        _rle.check_levels(bytes([12]), 1, 6, 1, 0, 0)
    out = np.empty(5, dtype=np.float32)
    dictionary = np.array([10, 20, 30], dtype=np.float32)
    _rle.decode_dict(bytes([6, 2, 3, 0b100001]), 2, 5, dictionary, out)  # run of 3 x index 2, then 1, 0
    np.testing.assert_array_equal(out, [30, 30, 30, 20, 10])
    with pytest.raises(ValueError, match="out of range"):
        _rle.decode_dict(bytes([2, 3]), 2, 1, dictionary, out)


@pytest.mark.parametrize(
    "col, message",
    [
        (pa.array([[1.0, 2.0]] * 500 + [None] + [[3.0, 4.0]] * 99, type=pa.list_(pa.float32())), "row 500 is null"),
        (
            pa.array([[1.0, 2.0]] * 400 + [[3.0]] + [[3.0, 4.0]] * 99, type=pa.list_(pa.float32())),
            "row 400 has 1 values, expected 2",
        ),
        (
            pa.array([[1.0, 2.0]] * 450 + [[1.0, None]], type=pa.list_(pa.float32())),
            "row 450 has a null value at dimension 1",
        ),
    ],
)
def test_rows_pyarrow_must_judge_get_its_errors(tmp_path, col, message):
    """Nulls and ragged rows part-way through a row group: the direct decoder hands over to pyarrow
    at the batch where they are; the rows before it are delivered once, the error names the row."""
    pq.write_table(pa.table({"embedding": col}), tmp_path / "bad.parquet", data_page_size=256)
    src = open_vectors(tmp_path / "bad.parquet")
    assert src._direct is not None
    offsets = []
    with pytest.raises(InputError, match=message):
        for b in src.batches(100):
            offsets.append(b.offset)
    assert offsets == list(range(0, int(message.split()[1]) // 100 * 100, 100))


def test_corrupt_page_fails_its_checksum(tmp_path):
    X = make_vectors(2000, 16)
    path = _write(
        tmp_path / "v.parquet",
        X,
        compression="none",
        use_dictionary=False,
        write_page_checksum=True,
        row_group_size=500,
        data_page_size=4096,
    )
    data = bytearray(path.read_bytes())
    col = pq.ParquetFile(path).metadata.row_group(2).column(1)
    data[col.data_page_offset + col.total_compressed_size // 2] ^= 0xFF  # one bit pattern inside a page's values
    (tmp_path / "bad.parquet").write_bytes(bytes(data))
    with pytest.raises(FormatError, match="row group 2"):
        for _ in open_vectors(tmp_path / "bad.parquet").batches(100):
            pass
    pf = pq.ParquetFile(tmp_path / "bad.parquet")
    with open(tmp_path / "bad.parquet", "rb") as f, pytest.raises(page_format.Unsupported, match="checksum"):
        list(pages.decode_group(f.fileno(), pf.metadata, 2, pages.find_column(pf, "embedding"), 16, 100))


def test_nan_is_named_by_the_direct_path(tmp_path):
    X = make_vectors(1000, 8)
    X[612, 5] = np.inf
    path = _write(tmp_path / "v.parquet", X, row_group_size=400)
    with pytest.raises(InputError, match="row group 1: column 'embedding' row 612 has a non-finite value"):
        for _ in open_vectors(path).batches(100):
            pass


def test_columns_it_leaves_to_pyarrow(tmp_path):
    nested = pa.table({"embedding": pa.array([{"v": [1.0, 2.0]}], type=pa.struct([("v", pa.list_(pa.float32()))]))})
    pq.write_table(nested, tmp_path / "s.parquet")
    assert pages.find_column(pq.ParquetFile(tmp_path / "s.parquet"), "embedding") is None
    X = make_vectors(10, 4)
    pq.write_table(
        pa.table({"embedding": pa.array(list(X.astype(np.float64)), type=pa.list_(pa.float64()))}),
        tmp_path / "d.parquet",
    )
    src = open_vectors(tmp_path / "d.parquet")
    assert src._direct is None
    np.testing.assert_allclose(np.concatenate([b.vectors for b in src.batches()]), X, rtol=1e-6)
    # byte-stream-split pages: the chunk's encodings exclude the direct decoder, pyarrow reads them
    path = _write(tmp_path / "b.parquet", X, use_dictionary=False, use_byte_stream_split=True)
    with open(path, "rb") as f, pytest.raises(page_format.Unsupported, match="encodings"):
        pf = pq.ParquetFile(path)
        list(pages.decode_group(f.fileno(), pf.metadata, 0, pages.find_column(pf, "embedding"), 4, 10))
    np.testing.assert_array_equal(np.concatenate([b.vectors for b in open_vectors(path).batches()]), X)
    assert os.path.getsize(path) > 0


def test_rerank_store_decodes_row_groups_directly(tmp_path, monkeypatch):
    from embcompress.search.stores import ParquetStore

    X = make_vectors(900, 24)
    path = _write(tmp_path / "v.parquet", X, row_group_size=200)
    used = []
    real = pages.read_group
    monkeypatch.setattr(pages, "read_group", lambda *a, **k: used.append(a[2]) or real(*a, **k))
    store = ParquetStore(path)
    rows = np.array([899, 3, 450, 201, 0])
    np.testing.assert_array_equal(store.get(rows), X[rows])
    assert sorted(used) == [0, 1, 2, 4]
    X[333, 7] = np.nan
    bad = _write(tmp_path / "nan.parquet", X, row_group_size=200)
    with pytest.raises(InputError, match="row group 1: column 'embedding' row 333 has a non-finite value"):
        ParquetStore(bad).get(np.array([300]))


def test_garbage_page_headers_hand_over(tmp_path):
    """Random bytes where page headers should be: always a hand-over to pyarrow, never a hang or
    another exception (and pyarrow then reports the corruption)."""
    X = make_vectors(400, 8)
    path = _write(tmp_path / "v.parquet", X, compression="none", use_dictionary=False)
    pf = pq.ParquetFile(path)
    chunk = pf.metadata.row_group(0).column(1)
    data = bytearray(path.read_bytes())
    rng = np.random.default_rng(0)
    col = pages.find_column(pf, "embedding")
    for trial in range(200):
        garbage = bytearray(data)
        start = chunk.data_page_offset
        garbage[start : start + 64] = (
            rng.integers(0, 256, 64, dtype=np.uint8).tobytes() if trial % 2 else bytes([0x1C]) * 64
        )
        (tmp_path / "g.parquet").write_bytes(bytes(garbage))
        with open(tmp_path / "g.parquet", "rb") as f, pytest.raises(page_format.Unsupported):
            list(pages.decode_group(f.fileno(), pf.metadata, 0, col, 8, 100))


@pytest.mark.parametrize(
    "options",
    [
        dict(compression="snappy"),
        dict(compression="zstd", data_page_version="2.0"),
        dict(compression="none", use_dictionary=False, write_page_checksum=True),
    ],
    ids=["snappy", "zstd-v2", "plain-crc"],
)
def test_one_huge_row_group_is_split_among_workers(tmp_path, monkeypatch, options):
    """A row group above SPLIT_BYTES becomes spans of whole batches, each decoded from the page
    that holds its first row: the same batches, ids, fitted state and output bytes as one reader."""
    from embcompress import from_spec
    from embcompress.io import readers
    from embcompress.engines.local import compress_file, fit_file

    X = make_vectors(5000, 16)
    X[::3] = X[1]  # dictionary-encoded pages all through the chunk (with snappy / zstd)
    path = _write(tmp_path / "v.parquet", X, row_group_size=5000, data_page_size=1000, **options)
    whole = [(b.offset, b.vectors.copy()) for b in open_vectors(path).batches(100, threads=1)]
    monkeypatch.setattr(readers, "SPLIT_BYTES", 4096)
    monkeypatch.setattr(readers, "SPAN_BYTES", 64 * 100 * 7)  # spans of 700 rows
    src = open_vectors(path)
    units, unit_bytes = src.units(100)
    assert len(units) == 8 and unit_bytes == 700 * (64 + 16)
    assert src._page_index(pq.ParquetFile(path), 0) is not None

    def no_fallback(*args, **kwargs):
        raise AssertionError("a span was handed over to pyarrow")
        yield

    monkeypatch.setattr(readers.ParquetVectors, "_read_group_arrow", no_fallback)
    for threads in (1, 3):
        batches = list(src.batches(100, threads=threads))
        assert [b.offset for b in batches] == [o for o, _ in whole]
        np.testing.assert_array_equal(np.concatenate([b.vectors for b in batches]), X)
        assert np.concatenate([b.carried.column("id").to_numpy() for b in batches]).tolist() == list(range(5000))
    a = fit_file(from_spec("pca:4"), path, batch_size=100, threads=1)
    b = fit_file(from_spec("pca:4"), path, batch_size=100, threads=3)
    np.testing.assert_array_equal(a.components_, b.components_)
    binary = fit_file(from_spec("binary"), path, batch_size=100)
    compress_file(binary, path, tmp_path / "a.parquet", threads=3)
    monkeypatch.setattr(readers, "SPLIT_BYTES", 1 << 40)
    compress_file(binary, path, tmp_path / "b.parquet", threads=1)
    assert (tmp_path / "a.parquet").read_bytes() == (tmp_path / "b.parquet").read_bytes()


def test_a_bad_row_inside_a_span_is_named(tmp_path, monkeypatch):
    from embcompress.io import readers

    col = pa.array([[1.0, 2.0]] * 2345 + [None] + [[3.0, 4.0]] * 1654, type=pa.list_(pa.float32()))
    pq.write_table(pa.table({"embedding": col}), tmp_path / "bad.parquet", data_page_size=256, row_group_size=4000)
    monkeypatch.setattr(readers, "SPLIT_BYTES", 1024)
    monkeypatch.setattr(readers, "SPAN_BYTES", 8 * 100 * 5)
    src = open_vectors(tmp_path / "bad.parquet")
    assert len(src.units(100)[0]) == 8
    offsets = []
    with pytest.raises(InputError, match="row group 0: column 'embedding' row 2345 is null"):
        for b in src.batches(100, threads=2):
            offsets.append(b.offset)
    assert offsets == list(range(0, 2300, 100))


# ---- the writer of list codes (io.writers.PageWriter, io.page_encoder.encode_chunk) ---------------------


def _reference_and_ours(tmp_path, table, groups):
    """The table written by pyarrow and by PageWriter, in row groups of ``groups`` rows."""
    from embcompress.io.writers import PageWriter

    ref = tmp_path / "ref.parquet"
    pq.write_table(table, ref, row_group_size=groups)
    ours = tmp_path / "ours.parquet"
    w = PageWriter(ours, table.schema, compression="zstd", codes_compression="zstd")
    for s in range(0, table.num_rows, groups):
        w.write_table(table.slice(s, groups))
    w.close()
    return ref, ours


@pytest.mark.parametrize("dtype", [np.int8, np.float32, np.uint8, "nullable uint8"])
@pytest.mark.parametrize("dim", [1, 3, 16, 300])
def test_written_list_codes_read_back_as_pyarrow_writes_them(tmp_path, dtype, dim):
    """List codes, and packed codes (uint8: fixed_size_binary, required or nullable)."""
    rng = np.random.default_rng(dim)
    n = 2500
    nullable = dtype == "nullable uint8"
    dtype = np.uint8 if nullable else dtype
    X = (
        rng.integers(-128, 128, (n, dim))
        if dtype == np.int8
        else rng.integers(0, 256, (n, dim))
        if dtype == np.uint8
        else rng.standard_normal((n, dim))
    ).astype(dtype)
    col = (
        pa.FixedSizeBinaryArray.from_buffers(pa.binary(dim), n, [None, pa.py_buffer(X)])
        if dtype == np.uint8
        else pa.FixedSizeListArray.from_arrays(pa.array(X.reshape(-1)), dim)
    )
    table = pa.table(
        {
            "id": pa.array([f"doc{i}" for i in range(n)]),
            "lang": pa.array(["en", None, "de", "fr"] * (n // 4) + ["en"] * (n % 4)),  # nulls and a dictionary
            "tags": pa.array([["a", "b"] if i % 3 else [] for i in range(n)]),  # a nested carried column
            "embedding": col,
        },
        schema=pa.schema(
            [
                ("id", pa.string()),
                ("lang", pa.string()),
                ("tags", pa.list_(pa.string())),
                pa.field("embedding", col.type, nullable=nullable),
            ],
            metadata={b"embcompress": b'{"k": 1}'},
        ),
    )
    ref, ours = _reference_and_ours(tmp_path, table, 1000)
    got = pq.read_table(ours)
    assert got.equals(pq.read_table(ref)) and got.schema.metadata == {b"embcompress": b'{"k": 1}'}
    pf = pq.ParquetFile(ours, page_checksum_verification=True)
    assert pf.metadata.num_row_groups == 3 and [pf.metadata.row_group(g).num_rows for g in range(3)] == [
        1000,
        1000,
        500,
    ]
    for b in pf.iter_batches(batch_size=333):  # every page's checksum verified on the way
        pass
    if dtype == np.float32:  # and the direct decoder reads what the writer wrote
        np.testing.assert_array_equal(np.concatenate([b.vectors for b in open_vectors(ours).batches(100)]), X)


@pytest.mark.parametrize("codec", ["zstd", None])
def test_pages_compressed_on_threads_are_the_same_bytes(codec):
    """Pages compressed and checksummed on several threads: the same parts, in the same order."""
    from embcompress.io.page_encoder import encode_chunk

    rng = np.random.default_rng(0)
    blocks = [rng.integers(-128, 128, (n, 300)).astype(np.int8) for n in (20000, 13333, 17000)]  # about 16 pages
    one = encode_chunk(blocks, 4, max_def=1, path=["embedding", "list", "element"], codec=codec)
    three = encode_chunk(blocks, 4, max_def=1, path=["embedding", "list", "element"], codec=codec, threads=3)
    assert len(one[0]) >= 30
    assert [bytes(p) for p in one[0]] == [bytes(p) for p in three[0]] and one[1] == three[1]


def test_pages_are_views_of_the_blocks_and_never_shorter_than_half_but_the_last():
    from embcompress.io.page_encoder import _page_rows

    rng = np.random.default_rng(3)
    for sizes in ([1024] * 3 + [1009] + [1024] * 4, [15, 30, 1024, 3000, 7, 512, 511, 1], [2048], [5]):
        blocks = [rng.standard_normal((k, 4)).astype(np.float32) for k in sizes]
        pages = list(_page_rows(blocks, 1024))
        np.testing.assert_array_equal(np.concatenate(pages), np.concatenate(blocks))
        assert all(len(p) <= 1024 for p in pages) and all(len(p) >= 512 for p in pages[:-1])
        if sizes[0] == 1024:  # blocks of a page and more, shifted by one short block: not one copy
            assert all(any(np.shares_memory(p, b) for b in blocks) for p in pages)


def test_written_codes_read_by_duckdb(tmp_path):
    duckdb = pytest.importorskip("duckdb")
    rng = np.random.default_rng(5)
    X = rng.integers(-128, 128, (3000, 24)).astype(np.int8)
    table = pa.table(
        {"id": np.arange(3000), "embedding": pa.FixedSizeListArray.from_arrays(pa.array(X.reshape(-1)), 24)}
    )
    _, ours = _reference_and_ours(tmp_path, table, 1024)
    rows = duckdb.sql(f"select id, embedding from '{ours}' order by id").fetchall()
    assert [r[0] for r in rows] == list(range(3000))
    np.testing.assert_array_equal(np.array([r[1] for r in rows], dtype=np.int8), X)
    bits = np.packbits(X > 0, axis=1)  # packed codes too
    table = pa.table(
        {
            "id": np.arange(3000),
            "embedding": pa.FixedSizeBinaryArray.from_buffers(pa.binary(3), 3000, [None, pa.py_buffer(bits)]),
        }
    )
    _, ours = _reference_and_ours(tmp_path, table, 1024)
    rows = duckdb.sql(f"select id, embedding from '{ours}' order by id").fetchall()
    assert [r[0] for r in rows] == list(range(3000)) and b"".join(r[1] for r in rows) == bits.tobytes()


def test_zero_rows_and_a_failed_write_leave_nothing(tmp_path):
    from embcompress.core.specs import OutputSpec
    from embcompress.io import VectorWriter
    from embcompress.io.writers import PageWriter

    spec = OutputSpec(kind="int8", dtype="int8", width=4, nbytes=4, metric="cosine")
    with VectorWriter(tmp_path / "empty.parquet", spec) as w:
        assert isinstance(w._writer, PageWriter)
    assert pq.read_table(tmp_path / "empty.parquet").num_rows == 0
    with pytest.raises(RuntimeError), VectorWriter(tmp_path / "bad.parquet", spec) as w:
        w.write(np.zeros((10, 4), np.int8))
        raise RuntimeError("stop")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.parquet"]


def test_rerank_store_decodes_spans_of_a_huge_row_group(tmp_path, monkeypatch):
    """A row group the direct decoder splits is cached span by span, not as one array."""
    from embcompress.io import readers
    from embcompress.search.stores import ParquetStore

    X = make_vectors(3000, 16)
    X[::4] = X[2]  # dictionary pages all through
    path = _write(tmp_path / "v.parquet", X, row_group_size=3000, data_page_size=1000)
    monkeypatch.setattr(readers, "SPLIT_BYTES", 4096)
    monkeypatch.setattr(readers, "SPAN_BYTES", 64 * 700)  # spans of 700 rows
    store = ParquetStore(path)
    assert [(g, r0, r1) for _, g, r0, r1 in store._groups] == [
        (0, 0, 700),
        (0, 700, 1400),
        (0, 1400, 2100),
        (0, 2100, 2800),
        (0, 2800, 3000),
    ]
    calls = []
    real = pages.read_group
    monkeypatch.setattr(
        pages,
        "read_group",
        lambda *a, **k: (lambda r: calls.append((k["span"].rows, r is not None)) or r)(real(*a, **k)),
    )
    rows = np.array([2999, 5, 1500, 701, 699, 2800])
    np.testing.assert_array_equal(store.get(rows), X[rows])
    assert sorted(calls) == [((0, 700), True), ((700, 1400), True), ((1400, 2100), True), ((2800, 3000), True)]
    assert store.decoded_groups == 4 and max(a.shape[0] for a in store._cache.values()) == 700  # spans 0, 1, 2, 4
    X[2222, 3] = np.inf
    bad = _write(tmp_path / "inf.parquet", X, row_group_size=3000, data_page_size=1000)
    with pytest.raises(InputError, match="row group 0: column 'embedding' row 2222 has a non-finite value"):
        ParquetStore(bad).get(np.array([2500]))
    assert ParquetStore(bad).get(np.array([5]))[0].tolist() == X[5].tolist()  # other spans stay readable


@pytest.mark.skipif(page_format._rle is None, reason="the C extension was not built")
def test_crc32_is_zlibs():
    """The extension's CRC-32 (carry-less multiplication where the CPU has it, a table otherwise
    and for the ends) gives zlib.crc32's value for every length, alignment and starting value."""
    import zlib

    rng = np.random.default_rng(0)
    data = rng.integers(0, 256, (1 << 17) + 64, dtype=np.uint8).tobytes()
    lengths = [*range(0, 200), 255, 256, 1023, 4096, 65535, 65536, 65537, 1 << 17]
    for n in lengths:
        for off in (0, 1, 7, 16, 33):
            chunk = memoryview(data)[off : off + n]
            for start in (0, 1, 0xFFFFFFFF, 0xDEADBEEF):
                assert page_format._rle.crc32(chunk, start) == zlib.crc32(chunk, start), (n, off, start)
    # a running value over pieces is the value of the whole
    whole = memoryview(data)[:100_000]
    running = 0
    for a in range(0, len(whole), 777):
        running = page_format._rle.crc32(whole[a : a + 777], running)
    assert running == zlib.crc32(whole)
    assert page_format.crc32 in (page_format._rle.crc32, zlib.crc32)


@pytest.mark.parametrize("kind", ["float32", "int8"])
def test_a_batch_of_no_rows_writes_an_empty_readable_file(tmp_path, kind):
    """The page writer takes a row group of no rows (a chunk of no pages), as pyarrow reads it."""
    from embcompress import from_spec
    from embcompress.core.specs import float_spec
    from embcompress.io import VectorWriter, read_all

    X = make_vectors(50, 8)
    spec = float_spec(8) if kind == "float32" else from_spec("int8").fit(X).output_spec
    with VectorWriter(tmp_path / "e.parquet", spec) as w:
        w.write(np.empty((0, 8), dtype=kind))
    assert pq.read_table(tmp_path / "e.parquet").num_rows == 0
    assert read_all(tmp_path / "e.parquet", codes=None)[0].shape == (0, 8)
