"""The code scans of search.adc and search.scorers: lookup tables, dense, bit-plane and decoded scans against
plain-numpy references, and their C decoders."""

from __future__ import annotations

import numpy as np
import pytest

from embcompress import InputError, from_spec
from embcompress.search import Index
from embcompress.search import adc as adc_module
from embcompress.search import topk as topk_mod
from embcompress.search import scorers as scorers_module
from embcompress.search.adc import Factors, adc_scores, adc_topk, dense_scores, scan_adc, scan_dense
from embcompress.search.exact import topk_by_blocks


faiss = pytest.importorskip("faiss")


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_adc_kernel_equals_reference_with_ties_by_row(threads):
    rng = np.random.default_rng(0)
    codes = rng.integers(0, 4, (5000, 6)).astype(np.uint8)  # few values: many exact ties
    tables = rng.integers(0, 3, (40, 6, 256)).astype(np.float32)
    scale = np.where(rng.random(5000) < 0.5, 1.0, 2.0).astype(np.float32)
    for sc in (None, scale):
        s, i = scan_adc(tables, codes, 25, scale=sc, threads=threads)
        rs, ri = topk_by_blocks(
            lambda q0, q1, d0, d1: adc_scores(tables[q0:q1], codes[d0:d1], None if sc is None else sc[d0:d1]),
            40,
            5000,
            25,
        )
        np.testing.assert_array_equal(i, ri)
        np.testing.assert_array_equal(s, rs)
    s, i = scan_adc(tables[:1], codes, 7000 // 1000, threads=threads)  # one query split by document range
    assert i.shape == (1, 7)


@pytest.mark.parametrize("layout,bits", [("planes", 1), ("planes", 3), ("planes", 4), ("packed", 2), ("packed", 4)])
def test_dense_kernel_equals_reference_with_ties_by_row(layout, bits, monkeypatch):
    """Small integer levels, queries and factors make every sum exact, so the kernel (both its
    paths, any thread count, split by query or by document range) must equal numpy exactly,
    ties by row included. 37 dimensions leave a partly used last byte and padded lanes."""
    rng = np.random.default_rng(bits)
    d, nd, nq = 37, 3000, 21
    u = rng.integers(0, 2**bits, (nd, d)).astype(np.uint8)
    if layout == "packed":
        from embcompress.compressors._codes import pack_codes

        codes = pack_codes(u, bits)
    else:
        codes = np.concatenate([np.packbits((u >> p) & 1, axis=1) for p in range(bits - 1, -1, -1)], axis=1)
    levels = rng.integers(-3, 4, (d, 2**bits)).astype(np.float32)
    Q = rng.integers(-2, 3, (nq, d)).astype(np.float32)
    scale = np.where(rng.random(nd) < 0.5, 1.0, 2.0).astype(np.float32)
    bias, qconst = rng.integers(-1, 2, nd).astype(np.float32), rng.integers(-4, 5, nq).astype(np.float32)
    np.testing.assert_array_equal(adc_module.unpack_dense(codes, layout, bits, d), u)
    monkeypatch.setattr(topk_mod, "MIN_DOCS_PER_THREAD", 500)  # let one query split by document range
    for sc, bi, qc in ((None, None, None), (scale, bias, qconst)):
        rs, ri = topk_by_blocks(
            lambda q0, q1, d0, d1: dense_scores(
                Q[q0:q1],
                codes[d0:d1],
                layout,
                bits,
                levels,
                None if sc is None else sc[d0:d1],
                None if bi is None else bi[d0:d1],
                None if qc is None else qc[q0:q1],
            ),
            nq,
            nd,
            25,
        )
        for threads, portable in ((1, False), (2, False), (3, True)):
            for q in (slice(None), slice(0, 1)):
                s, i = scan_dense(
                    Q[q],
                    codes,
                    25,
                    decoding=(layout, bits, levels),
                    factors=Factors(sc, bi, None if qc is None else qc[q]),
                    threads=threads,
                    portable=portable,
                )
                np.testing.assert_array_equal(i, ri[q])
                np.testing.assert_array_equal(s, rs[q])
    monkeypatch.setattr(adc_module, "_adc", None)  # where the kernel was not built: numpy, same results
    s, i = scan_dense(Q, codes, 25, decoding=(layout, bits, levels), factors=Factors(scale, bias, qconst))
    np.testing.assert_array_equal(i, ri)
    np.testing.assert_array_equal(s, rs)


@pytest.mark.parametrize("bits,d", [(1, 384), (2, 37), (3, 100), (4, 70)])
def test_plane_kernel_equals_reference_with_ties_by_row(bits, d, monkeypatch):
    """Bit-plane codes against 8-bit queries: integer sums are exact, so the SIMD paths (AVX-512 or
    AVX2 fused for up to four queries, unpacked for more; AVX2 forced with path="avx2" where the
    CPU has more), the portable one and numpy give the same scores and rows, ties by row included, for 1..9 queries, any
    thread count, split by query or by document range. Few code values make many ties; the
    dimensions leave partly used bytes and short last chunks."""
    rng = np.random.default_rng(bits * 100 + d)
    nd, pb = 3000, -(-d // 8)
    u = rng.integers(0, 2**bits, (nd, d)).astype(np.uint8)
    u[rng.random(nd) < 0.3] = u[0]  # repeated rows: exact ties
    codes = np.concatenate([np.packbits((u >> p) & 1, axis=1) for p in range(bits - 1, -1, -1)], axis=1)
    dpad = -(-pb * 8 // 32) * 32
    Q8 = np.zeros((9, dpad), np.int8)
    Q8[:, :d] = rng.integers(-127, 128, (9, d))
    Q8 = np.ascontiguousarray(Q8.reshape(9, -1, 8)[:, :, ::-1].reshape(9, dpad))  # bit order, as quantized_queries
    step = rng.choice([0.5, 1.0, 2.0], 9).astype(np.float32)
    offset = rng.integers(-50, 50, 9).astype(np.float32)
    scale = np.where(rng.random(nd) < 0.5, 1.0, 2.0).astype(np.float32)
    bias, qconst = rng.integers(-1, 2, nd).astype(np.float32), rng.integers(-4, 5, 9).astype(np.float32)
    monkeypatch.setattr(topk_mod, "MIN_DOCS_PER_THREAD", 500)
    for sc, bi, qc in ((None, None, None), (scale, bias, qconst)):
        rs, ri = topk_by_blocks(
            lambda q0, q1, d0, d1: adc_module.planes_scores(
                (Q8[q0:q1], step[q0:q1], offset[q0:q1]),
                codes[d0:d1],
                bits,
                pb,
                Factors(
                    None if sc is None else sc[d0:d1],
                    None if bi is None else bi[d0:d1],
                    None if qc is None else qc[q0:q1],
                ),
            ),
            9,
            nd,
            25,
        )
        # the reference itself: <q8, u> in dimension order
        want = Q8.reshape(9, -1, 8)[:, :, ::-1].reshape(9, dpad)[:, :d].astype(np.int64) @ u.T.astype(np.int64)
        got = adc_module.planes_scores((Q8, step, offset), codes, bits, pb)
        np.testing.assert_array_equal(
            got, (want.astype(np.float32) * step[:, None] + offset[:, None]).astype(np.float32)
        )
        for threads, path in ((1, "auto"), (2, "auto"), (1, "avx2"), (2, "avx2"), (3, "portable")):
            for q in (slice(None), slice(0, 1), slice(1, 4), slice(2, 7)):
                s, i = adc_module.scan_planes(
                    (Q8[q], step[q], offset[q]),
                    codes,
                    25,
                    bits=bits,
                    plane_bytes=pb,
                    factors=Factors(sc, bi, None if qc is None else qc[q]),
                    threads=threads,
                    path=path,
                )
                np.testing.assert_array_equal(i, ri[q])
                np.testing.assert_array_equal(s, rs[q])
    with pytest.raises(InputError, match="path must be one of auto, portable, avx2"):
        adc_module.scan_planes((Q8, step, offset), codes, 5, bits=bits, plane_bytes=pb, path="avx512")
    monkeypatch.setattr(adc_module, "_adc", None)
    s, i = adc_module.scan_planes(
        (Q8, step, offset), codes, 25, bits=bits, plane_bytes=pb, factors=Factors(scale, bias, qconst)
    )
    np.testing.assert_array_equal(i, ri)


def test_rabitq_search_scores_against_8bit_queries_close_to_float(code_data):
    """RaBitQ's search quantizes the query to 8 bits: its scores stay within a few thousandths (in
    cosine units) of the float table scores, and search ranks by them for one query or many."""
    D, Q = code_data
    for bits in (1, 4):
        c = from_spec(f"rabitq:{bits}").fit(D)
        codes, scale = c.adc_codes(c.transform(D))
        q8, step, offset = c.quantized_queries(Q)
        B, pb = c.plane_layout()
        est = adc_module.planes_scores((q8, step, offset), codes, B, pb)
        exact = adc_scores(c.lookup_tables(Q), codes)
        # in cosine units (over |P^T q| |g|) the rounding error's deviation is max|q_j| / (127 sqrt(12) |q|)
        Qr = c.dense_queries(Q)
        sigma = (np.abs(Qr).max(axis=1) / (127 * np.sqrt(12) * np.linalg.norm(Qr, axis=1)))[:, None]
        err = np.abs(est - exact) / (
            np.linalg.norm(Qr, axis=1)[:, None] * np.linalg.norm(c.grid(codes), axis=1)[None, :]
        )
        assert (err / sigma).max() < 8 and (err / sigma).mean() < 1.2, ((err / sigma).max(), (err / sigma).mean())
        index = Index(c.transform(D), compressor=c)  # search takes this path, few queries or many
        for nq in (1, 70):
            rows = index.search(Q[:nq], 10).rows
            recon = index.scorer.reconstruction()
            want = adc_module.scan_planes(
                (q8[:nq], step[:nq], offset[:nq]),
                codes,
                10,
                bits=B,
                plane_bytes=pb,
                factors=Factors(index.scorer._factors(recon[0]), recon[0], Q[:nq] @ recon[1] + c.adc_offset(Q[:nq])),
            )[1]
            assert (rows == want).mean() > 0.98  # the queries' float products differ in last bits by batch shape


def test_dense_paths_agree_bit_for_bit_on_real_codes(code_data):
    """On float data the AVX2 path (where the CPU has it) and the portable one give the same scores."""
    D, Q = code_data
    c = from_spec("rabitq:4").fit(D)
    codes, scale = c.adc_codes(c.transform(D))
    layout, bits, levels = c.dense_codes()
    qd = c.dense_queries(Q)
    f = Factors(scale=scale)
    fast = scan_dense(qd, np.ascontiguousarray(codes), 30, decoding=(layout, bits, levels), factors=f)
    slow = scan_dense(qd, np.ascontiguousarray(codes), 30, decoding=(layout, bits, levels), factors=f, portable=True)
    np.testing.assert_array_equal(fast[0], slow[0])
    np.testing.assert_array_equal(fast[1], slow[1])


@pytest.mark.parametrize("spec", ["rabitq:2", "rabitq:4", "sq:4", "sq:2"])
def test_decoded_scan_matches_tables(spec, code_data):
    """dense_codes() decodes to what the lookup tables sum, and a batch large enough for the dense
    scan finds what the tables find one query at a time."""
    D, Q = code_data
    c = from_spec(spec).fit(D)
    rows = c.transform(D)
    codes, scale = c.adc_codes(rows)
    layout, bits, levels = c.dense_codes()
    np.testing.assert_allclose(
        dense_scores(c.dense_queries(Q[:20]), codes, layout, bits, levels),
        adc_scores(c.lookup_tables(Q[:20]), codes),
        rtol=1e-5,
        atol=1e-4,
    )
    index = Index(rows, compressor=c)
    assert index.scorer.dense is not None and len(Q) >= scorers_module.DENSE_MIN_QUERIES
    batch = index.search(Q, 10)
    alone = [index.search(q[None], 10) for q in Q[:40]]  # below the threshold: tables
    same = np.mean([np.array_equal(a.rows[0], b) for a, b in zip(alone, batch.rows[:40])])
    assert same >= 0.95, same  # the paths differ only in the last bits of float sums (near-ties)
    np.testing.assert_allclose(np.concatenate([a.scores for a in alone]), batch.scores[:40], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("spec", ["pq:12", "opq:12", "rq:6", "sq:1", "sq:4", "pca:24+sq:2", "rotate+sq:1"])
def test_codes_as_a_matrix_product_match_tables(spec, code_data):
    """Codes scored as a product of the queries with decoded blocks (scan_decoded) find what the
    lookup tables (or the dense scan) find for the same batch, with the same scores up to
    rounding; small document blocks make the merge across blocks count."""
    D, Q = code_data
    c = from_spec(spec).fit(D)
    index = Index(c.transform(D), compressor=c)
    scorer = index.scorer
    assert scorer.decoder is not None
    scorer.decoded_from = 10**9
    tables = index.search(Q, 10)
    scorer.decoded_from = 1
    old = adc_module.DECODED_DOC_BLOCK
    try:
        adc_module.DECODED_DOC_BLOCK = 333
        decoded = index.search(Q, 10)
    finally:
        adc_module.DECODED_DOC_BLOCK = old
    same = np.mean(tables.rows == decoded.rows)
    assert same >= 0.99, same  # near-ties may swap in the last bits of the float sums
    np.testing.assert_allclose(decoded.scores, tables.scores, rtol=1e-5, atol=1e-5)


def test_which_codes_the_matrix_product_scores(code_data):
    """The decoded product takes batches of DECODED_MIN_QUERIES or more for codes of a byte per 8
    dimensions or more, 4,096 or more for codeword sums (RQ), and never bit-plane codes (RaBitQ)
    or codes too short for it to pay."""
    D, Q = code_data
    d = D.shape[1]

    def starts(spec):
        c = from_spec(spec).fit(D)
        return Index(c.transform(D[:500]), compressor=c).scorer.decoded_from

    assert starts(f"pq:{d // 8}") == scorers_module.DECODED_MIN_QUERIES
    assert starts("sq:1") == scorers_module.DECODED_MIN_QUERIES  # d / 8 bytes
    assert starts(f"rq:{d // 8}") == scorers_module.DECODED_SUM_MIN_QUERIES
    assert starts(f"pq:{d // 16}") is None and starts(f"rq:{d // 16}") is None
    assert starts("rabitq:4") is None
    assert starts(f"pq:{d // 4}:nbits=4") is None  # 4-bit codebooks: the fast scan at every batch size


def test_decoders_in_c_equal_numpy(code_data, monkeypatch):
    """The C decoders (book_decode, dense_decode) give numpy's values exactly, and refuse an index
    past the codebook."""
    if not adc_module.kernel_available():
        pytest.skip("the C kernels were not built")
    D, _ = code_data
    cases = []
    for spec in ("pq:12", "rq:5:nbits=4", "rq:6"):
        c = from_spec(spec).fit(D)
        cases.append((adc_module.book_vectors, (c.transform(D[:300]), *c.codebooks())))
    for spec in ("sq:1", "sq:2", "rabitq:3"):
        c = from_spec(spec).fit(D)
        codes = c.adc_codes(c.transform(D[:300]))[0]
        cases.append((adc_module.dense_vectors, (codes, *c.dense_codes())))
    fast = [fn(*args) for fn, args in cases]
    monkeypatch.setattr(adc_module, "_adc", None)
    for (fn, args), got in zip(cases, fast):
        np.testing.assert_array_equal(got, fn(*args))
    monkeypatch.undo()
    books = np.zeros((2, 16, 3), np.float32)
    with pytest.raises(ValueError, match="not below ksub"):
        adc_module.book_vectors(np.array([[3, 200]], np.uint8), books, True, 8)


def test_adc_bad_inputs():
    with pytest.raises(InputError, match="do not fit codes"):
        adc_topk(np.zeros((2, 5, 256), np.float32), np.zeros((10, 4), np.uint8), 3)
    with pytest.raises(InputError, match="one value per document"):
        adc_topk(np.zeros((2, 4, 256), np.float32), np.zeros((10, 4), np.uint8), 3, scale=np.ones(9))
