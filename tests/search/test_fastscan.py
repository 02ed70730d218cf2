"""The fast scan of 4-bit codebook codes (search.fastscan): the C kernel's two paths against the numpy
reference, the 8-bit tables against the float ones, and an index of such codes ranking by it."""

from __future__ import annotations

import numpy as np
import pytest

from embcompress import from_spec
from embcompress.compressors._codes import nibble_tables
from embcompress.search import Index
from embcompress.search import fastscan as fs
from embcompress.search.adc import NO_FACTORS, Factors, adc_scores
from embcompress.search.exact import topk_by_blocks

from conftest import code_recall

faiss = pytest.importorskip("faiss")


def _reference(tables, codes, k, factors):
    return topk_by_blocks(
        lambda q0, q1, d0, d1: fs.approximate_scores(
            fs.Tables(tables.luts[q0:q1], tables.delta[q0:q1], tables.base[q0:q1]),
            codes[d0:d1],
            factors if factors.bias is None else factors._replace(qconst=factors.qconst[q0:q1]),
            slice(d0, d1),
        ),
        len(tables.luts),
        len(codes),
        k,
    )


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_kernel_paths_equal_the_reference_with_ties_by_row(threads, monkeypatch):
    monkeypatch.setattr("embcompress.search.topk.MIN_DOCS_PER_THREAD", 1000)  # split 5,003 rows by range
    monkeypatch.setattr(fs, "MIN_ROWS_PER_THREAD", 1000)
    rng = np.random.default_rng(0)
    n = 5003  # not a multiple of 32: the last block is partial
    codes = rng.integers(0, 4, (n, 5)).astype(np.uint8)  # few values: many exact ties
    T = rng.integers(0, 3, (3, 9, 16)).astype(np.float32)  # 9 codebooks: the last byte's high half adds 0
    tables = fs.quantize_tables(T)
    assert tables.luts.shape == (3, 10, 16) and not tables.luts[:, 9].any()
    scale = np.where(rng.random(n) < 0.5, 1.0, 2.0).astype(np.float32)
    with_bias = Factors(scale, scale * 0.5, np.array([0.25, -1.0, 2.0], np.float32))
    fast = fs.FastCodes(codes)
    for factors in (NO_FACTORS, Factors(scale), with_bias):
        for k in (1, 64, 65, 3000):  # the best k sorted by insertion up to 64, by radix past it
            rs, ri = _reference(tables, codes, k, factors)
            for path in (0, 1):  # the best this CPU has, the portable one
                s, i = fast.topk(tables, k, factors, threads=threads, path=path)
                np.testing.assert_array_equal(i, ri)
                np.testing.assert_array_equal(s, rs)
    monkeypatch.setattr(fs, "KERNEL_SPAN", 700)  # as over 2^32 rows on one thread: spans of the range merged
    for k in (1, 700, 3000):
        rs, ri = _reference(tables, codes, k, with_bias)
        s, i = fast.topk(tables, k, with_bias, threads=threads)
        np.testing.assert_array_equal(i, ri)
        np.testing.assert_array_equal(s, rs)
    numpy_only = fs.FastCodes.__new__(fs.FastCodes)  # as where the kernel is not built
    numpy_only.codes, numpy_only.blocks = codes, None
    s, i = numpy_only.topk(tables, 40, with_bias, threads=threads)
    rs, ri = _reference(tables, codes, 40, with_bias)
    np.testing.assert_array_equal(i, ri)
    np.testing.assert_array_equal(s, rs)


def test_blocks_transpose_rows_of_32():
    codes = np.random.default_rng(1).integers(0, 256, (70, 3)).astype(np.uint8)
    blocks = fs.to_blocks(codes)
    assert blocks.shape == (3, 3, 32)
    assert blocks[1, 2, 5] == codes[37, 2] and blocks[2, 0, 5] == codes[69, 0]
    assert not blocks[2, :, 6:].any()  # past the last row


@pytest.mark.parametrize("spec", ["pq:8:nbits=4", "opq:12:nbits=4", "rq:7:nbits=4"])
def test_8bit_tables_stay_within_half_a_step_per_codebook(spec, code_data):
    D, Q = code_data
    comp = from_spec(spec).fit(D)
    last = comp.query_space.last
    qf = comp.query_space.linear(Q[:20])
    books = last.codebooks()
    T = fs.book_tables(books, last.table_queries(qf))
    np.testing.assert_allclose(nibble_tables(T), last.lookup_tables(qf), rtol=1e-5, atol=1e-5)
    codes = comp.transform(D)
    exact = adc_scores(last.lookup_tables(qf), codes)
    tables = fs.quantize_tables(T)
    approx = fs.approximate_scores(tables, codes, NO_FACTORS)
    m = books[0].shape[0]
    err = np.abs(approx - exact)
    assert (err <= (m * tables.delta[:, None] / 2) * 1.001 + 1e-5).all()
    assert err.max() > 0  # the rounding is real: this is not the float scan


def test_an_index_of_4bit_codes_ranks_by_the_fast_scan_for_one_query_or_many(code_data):
    D, Q = code_data
    comp = from_spec("opq:24:nbits=4").fit(D)
    index = Index(comp.transform(D), compressor=comp)
    assert index.scorer.fast is not None
    s, rows = index.first_stage(Q, 50)
    for q in (0, 7, 199):
        s1, r1 = index.first_stage(Q[q : q + 1], 50)
        np.testing.assert_array_equal(r1[0], rows[q])
        np.testing.assert_allclose(s1[0], s[q], rtol=1e-5)  # the tables' products: last bits by batch size
    assert (np.diff(s, axis=1) <= 0).all()
    exact = np.argsort(-(Q @ D.T), axis=1)[:, :10]
    assert code_recall(rows, exact) > 0.9  # 50 candidates of 4-bit codes hold the float top 10
    eight = from_spec("opq:12").fit(D)  # the same bytes in 8-bit codebooks: the float table scan
    assert Index(eight.transform(D), compressor=eight).scorer.fast is None


def test_the_kernel_refuses_buffers_that_do_not_fit():
    if fs._fastscan is None:
        pytest.skip("the fast-scan kernel is not built")
    blocks = np.zeros((2, 4, 32), np.uint8)
    luts = np.zeros((1, 8, 16), np.uint8)
    f32 = np.zeros(1, np.float32)
    s, i = np.zeros((1, 5), np.float32), np.zeros((1, 5), np.int64)
    with pytest.raises(ValueError, match="blocks must be"):
        fs._fastscan.topk(blocks, 4, 100, luts, f32, f32, b"", b"", b"", 5, 0, 100, s, i, 0)
    with pytest.raises(ValueError, match="luts must be"):
        fs._fastscan.topk(blocks, 4, 60, luts[:, :6], f32, f32, b"", b"", b"", 5, 0, 60, s, i, 0)
    with pytest.raises(ValueError, match="doc_start"):
        fs._fastscan.topk(blocks, 4, 60, luts, f32, f32, b"", b"", b"", 5, 0, 61, s, i, 0)


def test_block_rows_read_back_every_row_as_the_array_holds_it():
    codes = np.random.default_rng(3).integers(0, 256, (101, 6), dtype=np.uint8)  # 101: a last block part empty
    br = fs.BlockRows(fs.to_blocks(codes), len(codes))
    assert br.shape == codes.shape and len(br) == 101 and br.dtype == np.uint8
    rows = np.array([[0, 100, 31], [32, 33, -1]])
    mask = np.zeros(101, bool)
    mask[[4, 64, 99]] = True
    for key in (5, -1, slice(None), slice(30, 70, 3), rows, mask, [7, 7, 2], (rows, slice(1, 4)), (slice(10, 20), 2)):
        np.testing.assert_array_equal(br[key], codes[key], err_msg=str(key))
    np.testing.assert_array_equal(np.asarray(br), codes)
    np.testing.assert_array_equal(np.ascontiguousarray(br, dtype=np.int16), codes.astype(np.int16))
    with pytest.raises(ValueError, match="copy=False"):
        np.asarray(br, copy=False)
    for bad in (101, -102, np.array([3, 101])):
        with pytest.raises(IndexError, match="out of range"):
            br[bad]
    with pytest.raises(IndexError, match="mask"):
        br[np.ones(5, bool)]


def test_a_fast_scan_index_holds_its_codes_once_and_scores_as_from_the_rows(code_data, monkeypatch):
    """With the kernel built, the index keeps the blocks only (its ``data`` reads rows back from them: the
    RAM a plan states is what it holds); the candidates' table sums and decodings are the row-major ones'."""
    if fs._fastscan is None:
        pytest.skip("the fast-scan kernel is not built")
    D, Q = code_data
    comp = from_spec("pq:16:nbits=4").fit(D)
    codes = comp.transform(D)
    index = Index(codes.copy(), compressor=comp)
    assert isinstance(index.data, fs.BlockRows) and index.data.nbytes < codes.nbytes + 32 * codes.shape[1]
    assert index.scorer.codes is index.data and index.scorer.stored.data is index.data
    rows = np.random.default_rng(0).integers(0, len(D), (len(Q), 40))
    from embcompress.search.adc import rows_table_sums

    T = comp.lookup_tables(Q)
    np.testing.assert_array_equal(rows_table_sums(T, index.data, rows), rows_table_sums(T, codes, rows))
    with monkeypatch.context() as m:
        m.setattr(fs, "_fastscan", None)  # the numpy path: the rows as stored
        by_rows = Index(codes, compressor=comp)
    assert isinstance(by_rows.data, np.ndarray)
    np.testing.assert_array_equal(index.scorer.asymmetric(Q, rows), by_rows.scorer.asymmetric(Q, rows))
    np.testing.assert_array_equal(
        index.scorer.reconstruction_dots(Q, rows), by_rows.scorer.reconstruction_dots(Q, rows)
    )


@pytest.mark.parametrize("rows", [1, 32, 33, 101])
def test_rows_made_into_blocks_where_they_lie_equal_the_copy_into_blocks(rows):
    if fs._fastscan is None:
        pytest.skip("the fast-scan kernel is not built")
    codes = np.random.default_rng(rows).integers(0, 256, (rows, 5), dtype=np.uint8)
    given = codes.copy()
    held = fs.rows_into_blocks(given)
    assert isinstance(held, fs.BlockRows) and len(held) == rows
    np.testing.assert_array_equal(held.blocks, fs.to_blocks(codes))  # the tail's rows past the end are 0
    assert np.shares_memory(held.blocks, given)  # the array given up holds the blocks: no second copy
    np.testing.assert_array_equal(np.asarray(held), codes)
    view = codes[1:]  # not its own data (someone else's rows): left as it is, not written over
    assert fs.rows_into_blocks(view) is view
    np.testing.assert_array_equal(codes, np.asarray(held))
    with pytest.raises(ValueError, match="the buffer must be"):
        fs._fastscan.blocks_in_place(np.zeros(5 * 32 + 1, np.uint8), 32, 5)


def test_a_loaded_fast_scan_index_takes_the_files_rows_as_its_blocks(tmp_path, code_data, monkeypatch):
    """load_index reads the codes into an array of its own and makes them the blocks there (the peak of a load is
    the codes once, not twice); it ranks exactly as an index of the same codes built in memory."""
    from embcompress.engines.local import compress_file
    from embcompress.search.files import load_index
    from embcompress.search.scorers import keeps_blocks

    from conftest import write_parquet

    D, Q = code_data
    comp = from_spec("pq:16:nbits=4").fit(D)
    assert keeps_blocks(comp) and not keeps_blocks(from_spec("pq:16").fit(D))
    compress_file(comp, write_parquet(tmp_path / "d.parquet", D), tmp_path / "codes.parquet")
    comp.save(tmp_path / "m")
    with monkeypatch.context() as m:  # no copy into blocks beside the rows read
        m.setattr(fs, "to_blocks", lambda codes: pytest.fail("the rows read were copied into blocks"))
        loaded = load_index(tmp_path / "codes.parquet", model=tmp_path / "m")
    built = Index(comp.transform(D), compressor=comp)
    if fs._fastscan is not None:
        assert isinstance(loaded.data, fs.BlockRows) and loaded.scorer.fast.codes is loaded.data
    np.testing.assert_array_equal(np.asarray(loaded.data), np.asarray(built.data))
    for q in (Q[:1], Q):
        a, b = loaded.search(q, 10), built.search(q, 10)
        np.testing.assert_array_equal(a.rows, b.rows)
        np.testing.assert_array_equal(a.scores, b.scores)
