"""Search backends, rerank, stores and file-level search against plain reference computations."""

from __future__ import annotations

import json

import faiss
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

import embcompress
from embcompress import InputError, from_spec
from embcompress.search import (
    Index,
    NpyStore,
    ParquetStore,
    float_search,
    hamming_search,
    hamming_topk,
    kernel_available,
)
from embcompress.search import topk as topk_mod
from embcompress.search.files import load_index, load_queries
from embcompress.engines.local import compress_file, fit_file
from embcompress.cli.main import app

from conftest import make_vectors, write_parquet


@pytest.fixture(scope="module")
def clustered():
    rng = np.random.default_rng(3)
    centers = rng.standard_normal((30, 40)).astype(np.float32)
    D = centers[rng.integers(0, 30, 2000)] + 0.6 * rng.standard_normal((2000, 40)).astype(np.float32)
    Q = D[:60] + 0.3 * rng.standard_normal((60, 40)).astype(np.float32)
    return D.astype(np.float32), Q.astype(np.float32)


def test_kernel_is_built():
    assert kernel_available(), "the C Hamming kernel should build here (gcc is on every machine of this project)"


@pytest.mark.parametrize("nbytes", [1, 3, 6, 8, 12, 13, 16, 24, 32, 48, 64, 96, 128, 192, 256])
def test_hamming_kernel_equals_reference(nbytes, monkeypatch):
    rng = np.random.default_rng(nbytes)
    d = rng.integers(0, 256, (1500, nbytes), dtype=np.uint8)
    q = rng.integers(0, 256, (9, nbytes), dtype=np.uint8)
    ref = hamming_search(q, d, 40)
    for threads in (1, 2, 3):
        got = hamming_topk(q, d, 40, threads=threads)
        np.testing.assert_array_equal(got[0], ref[0])
        np.testing.assert_array_equal(got[1], ref[1])
    monkeypatch.setattr(topk_mod, "MIN_DOCS_PER_THREAD", 100)  # exercise split-by-documents + merge
    got = hamming_topk(q[:1], d, 40, threads=3)
    np.testing.assert_array_equal(got[1], ref[1][:1])


def test_hamming_agrees_with_faiss_distances():
    rng = np.random.default_rng(0)
    d = rng.integers(0, 256, (3000, 16), dtype=np.uint8)
    q = rng.integers(0, 256, (20, 16), dtype=np.uint8)
    index = faiss.IndexBinaryFlat(128)
    index.add(d)
    fd, _ = index.search(q, 10)
    ours, _ = hamming_topk(q, d, 10)
    np.testing.assert_array_equal(ours, fd)  # same distances; ids may differ only inside ties


def test_float_search_matches_faiss(clustered):
    D, Q = clustered
    Dn = D / np.linalg.norm(D, axis=1, keepdims=True)
    Qn = Q / np.linalg.norm(Q, axis=1, keepdims=True)
    index = faiss.IndexFlatIP(D.shape[1])
    index.add(Dn)
    fs, fi = index.search(Qn, 10)
    s, i = float_search(Q, D, 10)
    np.testing.assert_array_equal(i, fi)
    np.testing.assert_allclose(s, fs, atol=1e-5)


def test_float_search_blocks_merge_correctly(clustered, monkeypatch):
    from embcompress.search import exact

    D, Q = clustered
    full = float_search(Q, D, 25)
    monkeypatch.setattr(exact, "DOC_BLOCK", 97)
    monkeypatch.setattr(exact, "QUERY_BLOCK", 7)
    s, i = exact.topk_by_blocks(
        lambda q0, q1, d0, d1: exact.normalize_rows(Q)[q0:q1] @ exact.normalize_rows(D)[d0:d1].T,
        len(Q),
        len(D),
        25,
        doc_block=97,
        query_block=7,
    )
    np.testing.assert_array_equal(i, full[1])


@pytest.mark.skipif(not kernel_available(), reason="the C kernels were not built")
def test_row_topk_kernel_orders_as_numpy():
    """The C one-pass top-k of score blocks (every float and decoded-code search) against numpy's
    partition: heavy ties (integer scores), k from 1 to the width, a column offset, and rows with
    -inf and NaN scores that the kernel cannot fill (they fall back to numpy)."""
    from embcompress.search import exact

    rng = np.random.default_rng(5)
    sim = rng.integers(-3, 4, (40, 57)).astype(np.float32)
    sim[3, :50] = -np.inf
    sim[4, ::2] = np.nan
    sim[5] = 0.0
    for k in (1, 2, 10, 56, 57):
        s, i = exact.block_topk(sim, k, 1000)
        rs, ri = exact.numpy_block_topk(sim, k, 1000)
        np.testing.assert_array_equal(i, ri)
        np.testing.assert_array_equal(s, rs)  # NaN where numpy keeps NaN columns (k past the finite ones)
        assert set(i[4, :28]) <= set(1000 + np.arange(1, 57, 2))  # NaN columns only after the finite ones
        np.testing.assert_array_equal(i[5], 1000 + np.arange(k))  # all tied: the lowest columns


def test_int8_index_equals_decoded_brute_force(clustered):
    D, Q = clustered
    c = from_spec("int8").fit(D)
    res = Index(c.transform(D), compressor=c).search(Q, 10)
    s, i = float_search(Q, c.decode(c.transform(D)), 10)
    np.testing.assert_array_equal(res.rows, i)


def test_float_rerank_over_all_documents_is_exact(clustered):
    D, Q = clustered
    c = from_spec("binary").fit(D)
    idx = Index(c.transform(D), compressor=c)
    res = idx.search(Q, 10, rerank="float", multiplier=len(D), originals=D)  # every doc is a candidate
    np.testing.assert_array_equal(res.rows, float_search(Q, D, 10)[1])


@pytest.mark.parametrize("decoder", ["levels", "sign"])
@pytest.mark.parametrize("power", [1.0, 1.75])
def test_asymmetric_rerank_scores_are_cosines_with_the_reconstruction(clustered, decoder, power):
    """The asymmetric score of a document is the inner product of the float query with the
    document rebuilt in the original space over the rebuilt norm to ``norm_power`` (at 1 their
    cosine): each bit's fitted level (the 1-bit Lloyd-Max quantizer, or +-1), mapped back through
    PCA (mean + components)."""
    D, Q = clustered
    c = from_spec(f"pca:24+binary:decoder={decoder}").fit(D)
    idx = Index(c.transform(D), compressor=c, norm_power=power)
    res = idx.search(Q, 5, rerank="asymmetric", multiplier=len(D))
    pca = c.stages_[0]
    above = pca.transform(D) > 0
    lo, hi = (-1.0, 1.0) if decoder == "sign" else c.stages_[1].levels_
    rebuilt = np.where(above, hi, lo) @ pca.components_ + pca.mean_
    ref = (Q @ rebuilt.T) / np.linalg.norm(rebuilt, axis=1)[None, :] ** power
    top = np.lexsort((np.broadcast_to(np.arange(len(D)), ref.shape), -ref), axis=1)[:, :5]
    np.testing.assert_allclose(res.scores, np.take_along_axis(ref, top, axis=1), rtol=1e-4, atol=1e-4)
    # the same documents, except where two scores are equal to float32 rounding (documents with the
    # same code have the same score; which of them comes first depends on the BLAS's rounding)
    got = np.take_along_axis(ref, res.rows, axis=1)
    np.testing.assert_allclose(got, np.take_along_axis(ref, top, axis=1), rtol=1e-5, atol=1e-5)
    assert all(len(set(r)) == 5 for r in res.rows)


@pytest.mark.parametrize("d", [21, 64])
def test_binary_rerank_tables_sum_to_the_decoded_inner_products(d, monkeypatch):
    """The asymmetric rerank of bits through byte tables (``Binary.rerank_tables`` summed by
    ``adc.rows_table_sums``, in C and in numpy) equals the inner product with the decoded rows,
    for a width that is not a multiple of 8 too."""
    from embcompress.search import adc

    rng = np.random.default_rng(d)
    X = rng.standard_normal((500, d)).astype(np.float32)
    Q = rng.standard_normal((7, d)).astype(np.float32)
    b = from_spec("binary:threshold=mean,decoder=levels").fit(X)
    codes = b.transform(X)
    rows = rng.integers(0, len(X), (7, 40))
    ref = np.einsum("qd,qcd->qc", Q, b.decode(codes[rows]))
    tables, offsets = b.rerank_tables(Q)
    got = adc.rows_table_sums(tables, codes, rows) + offsets[:, None]
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
    monkeypatch.setattr(adc, "_adc", None)
    np.testing.assert_allclose(adc.rows_table_sums(tables, codes, rows) + offsets[:, None], ref, rtol=1e-5, atol=1e-5)


def test_rows_table_sums_refuses_rows_outside_the_codes():
    from embcompress.search import adc

    if adc._adc is None:
        pytest.skip("the C kernel is not built")
    codes = np.zeros((10, 3), dtype=np.uint8)
    with pytest.raises(ValueError, match="outside the codes"):
        adc.rows_table_sums(np.zeros((1, 3, 256), np.float32), codes, np.array([[0, 10]]))


def test_rerank_improves_binary_on_clustered_data(clustered):
    D, Q = clustered
    c = from_spec("binary").fit(D)
    idx = Index(c.transform(D), compressor=c)
    exact = float_search(Q, D, 10)[1]
    recall = lambda rows: np.mean([len(set(a) & set(b)) / 10 for a, b in zip(rows, exact)])  # noqa: E731
    plain = recall(idx.search(Q, 10).rows)
    asym = recall(idx.search(Q, 10, rerank="asymmetric").rows)
    full = recall(idx.search(Q, 10, rerank="float", originals=D).rows)
    assert plain < asym <= full and full > 0.9


def test_ids_are_preserved_and_k_capped(clustered):
    D, Q = clustered
    ids = [f"doc-{i}" for i in range(20)]
    idx = Index(D[:20], ids=ids)
    res = idx.search(Q[:3], 50)
    assert res.rows.shape == (3, 20) and (res.rows >= 0).all()
    assert sorted(res.ids[0]) == sorted(ids)
    c = from_spec("binary").fit(D)
    res = Index(c.transform(D[:20]), compressor=c, ids=ids).search(Q[:3], 50, rerank="asymmetric")
    assert res.rows.shape == (3, 20) and len(set(res.ids[0])) == 20


def test_file_index_keeps_ids_as_arrow_and_finds_the_same(tmp_path, clustered):
    """load_index keeps the ids as one Arrow column (compact at 10M rows), its row groups' chunks joined
    (a take from many chunks cost milliseconds a query), and returns the ids a list-backed index returns;
    ids that are not UTF-8 are refused by name."""
    D, Q = clustered
    path = write_parquet(tmp_path / "d.parquet", D, row_group_size=37)
    assert pq.read_table(path).column("id").num_chunks > 1
    index = load_index(path)
    assert isinstance(index.ids, pa.Array)
    got = index.search(Q[:4], 7)
    want = Index(D, ids=[f"doc{i}" for i in range(len(D))]).search(Q[:4], 7)
    assert got.ids.shape == (4, 7) and got.ids.tolist() == want.ids.tolist()
    assert got.ids.tolist() == [[f"doc{r}" for r in row] for row in got.rows]
    text = b"".join(b"doc%d" % i for i in range(len(D))).replace(b"doc5", b"do\xff5", 1)
    offsets = np.cumsum([0] + [len(b"doc%d" % i) for i in range(len(D))]).astype(np.int32)
    bad = pa.Array.from_buffers(pa.string(), len(D), [None, pa.py_buffer(offsets.tobytes()), pa.py_buffer(text)])
    emb = pq.read_table(path).column("embedding")
    pq.write_table(pa.table({"id": bad, "embedding": emb}), tmp_path / "bad.parquet")
    with pytest.raises(
        embcompress.FormatError, match="column 'id' of .*bad.parquet holds bytes that are not UTF-8 text in rows 0"
    ):
        load_index(tmp_path / "bad.parquet")


def test_index_bad_inputs(clustered):
    D, Q = clustered
    c = from_spec("binary").fit(D)
    idx = Index(c.transform(D), compressor=c)
    with pytest.raises(InputError, match="queries have 39 dimensions but the index expects 40"):
        idx.search(Q[:, :39], 10)
    with pytest.raises(InputError, match="no queries"):
        idx.search(Q[:0], 10)
    with pytest.raises(InputError, match="float rerank needs the original"):
        idx.search(Q, 10, rerank="float")
    with pytest.raises(InputError, match="rerank must be one of asymmetric, float"):
        idx.search(Q, 10, rerank="exact")
    with pytest.raises(InputError, match="asymmetric rerank needs an index of codes"):
        Index(D).search(Q, 10, rerank="asymmetric")
    with pytest.raises(InputError, match="originals hold 10 vectors but the index holds 2000"):
        idx.search(Q, 10, rerank="float", originals=D[:10])
    with pytest.raises(InputError, match="produces uint8 rows of 5 values"):
        Index(D[:, :8].astype(np.uint8), compressor=c)
    for bad in (-0.5, 4.5, True, "1", float("nan")):
        with pytest.raises(InputError, match="norm_power must be a number from 0 to 4"):
            Index(c.transform(D), compressor=c, norm_power=bad)


def test_stores_return_requested_rows(tmp_path):
    X = make_vectors(1000, 12)
    np.save(tmp_path / "x.npy", X)
    write_parquet(tmp_path / "x.parquet", X, row_group_size=128)
    rows = np.array([999, 0, 5, 5, 640, 128, 127])
    for store in (NpyStore(tmp_path / "x.npy"), ParquetStore(tmp_path / "x.parquet")):
        np.testing.assert_array_equal(store.get(rows), X[rows])


def test_parquet_store_decodes_each_row_group_once_within_its_budget(tmp_path):
    X = make_vectors(1000, 12)  # 8 row groups of 128 rows (6 KiB each)
    write_parquet(tmp_path / "x.parquet", X, row_group_size=128)
    rng = np.random.default_rng(0)
    calls = [rng.integers(0, 1000, 50) for _ in range(20)]  # like rerank blocks: candidates everywhere
    roomy = ParquetStore(tmp_path / "x.parquet")
    tight = ParquetStore(tmp_path / "x.parquet", cache_bytes=2 * 128 * 12 * 4)  # room for 2 groups
    for rows in calls:
        for store in (roomy, tight):
            np.testing.assert_array_equal(store.get(rows), X[rows])
    assert roomy.decoded_groups == 8
    assert tight.decoded_groups > 8 and tight._cached_bytes <= tight.cache_bytes


def test_file_search_checks_compressor_identity(tmp_path, clustered):
    D, Q = clustered
    docs = write_parquet(tmp_path / "d.parquet", D)
    queries = write_parquet(tmp_path / "q.parquet", Q)
    pca_bin = fit_file(from_spec("pca:16+binary"), docs)
    compress_file(pca_bin, docs, tmp_path / "codes.parquet")
    with pytest.raises(InputError, match="pass the saved compressor directory"):
        load_index(tmp_path / "codes.parquet")
    pca_bin.save(tmp_path / "m")
    index = load_index(tmp_path / "codes.parquet", model=tmp_path / "m")
    Qf, qids = load_queries(queries, index)
    assert index.search(Qf, 5).ids[0][0].startswith("doc")
    other = fit_file(from_spec("pca:16+binary"), write_parquet(tmp_path / "d2.parquet", D[::-1].copy() + 1))
    other.save(tmp_path / "m2")
    with pytest.raises(InputError, match="codes from different compressors cannot be compared"):
        load_index(tmp_path / "codes.parquet", model=tmp_path / "m2")
    compress_file(other, tmp_path / "d2.parquet", tmp_path / "qcodes.parquet")
    with pytest.raises(InputError, match="codes from different compressors cannot be compared"):
        load_queries(tmp_path / "qcodes.parquet", index)
    # binary (with its decoding levels) and int8 need no model: the file carries their per-dimension state
    for spec, kind in (("binary", "bits"), ("binary:mean", "bits"), ("int8", "int8"), ("truncate:8+int8", "int8")):
        b = fit_file(from_spec(spec), docs)
        compress_file(b, docs, tmp_path / "small.parquet", overwrite=True)
        rebuilt = load_index(tmp_path / "small.parquet")
        assert rebuilt.kind == kind
        np.testing.assert_array_equal(
            rebuilt.search(Q, 5, rerank="asymmetric").rows,
            Index(b.transform(D), compressor=b).search(Q, 5, rerank="asymmetric").rows,
        )


runner = CliRunner()


def test_cli_search_and_evaluate(tmp_path, clustered):
    D, Q = clustered
    docs = write_parquet(tmp_path / "d.parquet", D)
    qs = write_parquet(tmp_path / "q.parquet", Q)
    np.save(tmp_path / "d.npy", D)
    assert runner.invoke(app, ["binarize", str(docs), str(tmp_path / "b.parquet")]).exit_code == 0
    res = runner.invoke(
        app,
        [
            "search",
            str(tmp_path / "b.parquet"),
            str(qs),
            str(tmp_path / "r.parquet"),
            "--k",
            "3",
            "--rerank",
            "float",
            "--originals",
            str(tmp_path / "d.npy"),
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["candidates"] == 30
    t = pq.read_table(tmp_path / "r.parquet")
    assert t.column_names == ["query_id", "rank", "doc_id", "row", "score"] and t.num_rows == 180
    assert t.column("rank").to_pylist()[:3] == [1, 2, 3]
    exact = float_search(Q, D, 3)[1]
    assert t.column("row").to_pylist()[:3] == exact[0].tolist()
    # --norm-power: the asymmetric scores are those of the library's Index at that power
    comp = from_spec("binary").fit(D)
    for power in ("1", "2.5"):
        res = runner.invoke(
            app,
            [
                "search",
                str(tmp_path / "b.parquet"),
                str(qs),
                str(tmp_path / f"p{power}.parquet"),
                "--k",
                "3",
                "--rerank",
                "asymmetric",
                "--norm-power",
                power,
            ],
        )
        assert res.exit_code == 0, res.output
        want = Index(comp.transform(D), compressor=comp, norm_power=float(power)).search(Q, 3, rerank="asymmetric")
        np.testing.assert_allclose(
            np.asarray(pq.read_table(tmp_path / f"p{power}.parquet").column("score").to_pylist()),
            want.scores.reshape(-1),
            rtol=1e-5,
        )
    res = runner.invoke(
        app, ["search", str(tmp_path / "b.parquet"), str(qs), str(tmp_path / "r2.parquet"), "--norm-power", "-1"]
    )
    assert res.exit_code == 2 and "--norm-power" in res.output
    # graph settings: used with --index hnsw, refused without it
    res = runner.invoke(
        app, ["search", str(tmp_path / "b.parquet"), str(qs), str(tmp_path / "r2.parquet"), "--hnsw-m", "8"]
    )
    assert res.exit_code == 2 and "add --index hnsw" in res.output
    res = runner.invoke(
        app,
        [
            "search",
            str(tmp_path / "b.parquet"),
            str(qs),
            str(tmp_path / "h.parquet"),
            "--index",
            "hnsw",
            "--hnsw-m",
            "8",
            "--ef-construction",
            "16",
            "--ef",
            "20",
            "--k",
            "3",
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    s = json.loads(res.stdout)
    assert s["graph"] == {"m": 8, "ef_construction": 16, "ef_search": 20} and s["graph_seconds"] > 0
    assert pq.read_table(tmp_path / "h.parquet").num_rows == 180
    # evaluate --norm-power: recall of the lookup-table scan at that power, as the Index gives it
    sq = from_spec("sq:2").fit(D)
    exact = float_search(Q, D, 10)[1]
    for power in ("0", "1", "3"):
        res = runner.invoke(
            app, ["evaluate", str(docs), str(qs), "--config", "sq:2", "--norm-power", power, "--folds", "1", "--json"]
        )
        assert res.exit_code == 0, res.output
        found = Index(sq.transform(D), compressor=sq, norm_power=float(power)).search(Q, 10).rows
        want = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(found, exact)])
        assert json.loads(res.stdout)["rows"][1]["recall@10_vs_float"] == pytest.approx(want)
    # wrong widths, empty queries, k beyond the corpus
    narrow = write_parquet(tmp_path / "n.parquet", Q[:, :10])
    res = runner.invoke(app, ["search", str(tmp_path / "b.parquet"), str(narrow), str(tmp_path / "r2.parquet")])
    assert res.exit_code == 1 and "have 10 dimensions but the index expects 40" in res.stderr
    empty = write_parquet(tmp_path / "e.parquet", Q[:0])
    res = runner.invoke(app, ["search", str(tmp_path / "b.parquet"), str(empty), str(tmp_path / "r2.parquet")])
    assert res.exit_code == 1 and "has no queries" in res.stderr
    small = write_parquet(tmp_path / "s.parquet", D[:4])
    res = runner.invoke(app, ["search", str(small), str(qs), str(tmp_path / "r3.parquet"), "--k", "10"])
    assert res.exit_code == 0 and "returning 4 per query" in res.stderr
    assert set(pq.read_table(tmp_path / "r3.parquet").column("row").to_pylist()) == {0, 1, 2, 3}
    assert not (tmp_path / "r2.parquet").exists()
    # evaluate with qrels naming unknown ids: warned and counted
    qrels = tmp_path / "qrels.tsv"
    qrels.write_text(
        "query-id\tcorpus-id\tscore\n"
        + "".join(f"doc{i}\tdoc{i}\t1\n" for i in range(60))
        + "nope\tdoc1\t1\ndoc1\tghost\t1\n"
    )
    res = runner.invoke(
        app,
        [
            "evaluate",
            str(docs),
            str(qs),
            "--qrels",
            str(qrels),
            "--config",
            "binary",
            "--config",
            "binary@asymx4",
            "--config",
            "int8@float",
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert d["summary"]["qrels_unknown_queries"] == 1 and d["summary"]["qrels_unknown_docs"] == 1
    assert "warning: qrels: 1 judged queries" in res.stderr
    rows = {r["config"]: r for r in d["rows"]}
    assert rows["float"]["retention"] == 1.0 and rows["binary@asymx4"]["candidates"] == 40
    assert rows["binary"]["bytes_per_vector"] == 5 and 0 < rows["binary"]["retention"] <= 1.01
    bad = tmp_path / "bad.tsv"
    bad.write_text("query-id\tcorpus-id\tscore\nx\ty\t1\n")
    res = runner.invoke(app, ["evaluate", str(docs), str(qs), "--qrels", str(bad)])
    assert res.exit_code == 1 and "none of the 1 queries in the qrels" in res.stderr
    res = runner.invoke(app, ["evaluate", str(docs), str(qs), "--config", "binary@fast"])
    assert res.exit_code == 1 and "error:" in res.stderr


@pytest.mark.parametrize(
    "spec,rerank",
    [
        ("binary", None),
        ("binary", "asymmetric"),
        ("rotate+binary", "float"),
        ("sq:2", None),
        ("pq:8", "asymmetric"),
        (None, None),
        ("int8", "float"),
    ],
)
def test_parted_index_of_one_model_equals_one_index(clustered, spec, rerank):
    """Documents split into parts (interleaved and uneven) that one fitted model encoded: the parted
    search returns exactly what one index over all of them does, ties by row included, with the
    same candidates for a rerank."""
    from embcompress.search import PartedIndex

    D, Q = clustered
    comp = None if spec is None else from_spec(spec).fit(D)
    data = D if comp is None else comp.transform(D)
    ids = [f"d{i}" for i in range(len(D))]
    whole = Index(data, compressor=comp, ids=ids)
    rng = np.random.default_rng(1)
    part = rng.integers(0, 3, len(D)) if spec != "binary" else (np.arange(len(D)) % 7 == 0).astype(int)
    parts = [(np.flatnonzero(part == p), Index(data[part == p], compressor=comp)) for p in np.unique(part)]
    parted = PartedIndex(parts, ids=ids)
    for k in (1, 10, 37):
        kw = {"rerank": rerank, "multiplier": 4, "originals": D if rerank == "float" else None}
        a, b = whole.search(Q, k, **kw), parted.search(Q, k, **kw)
        np.testing.assert_array_equal(b.rows, a.rows)
        np.testing.assert_allclose(b.scores, a.scores, rtol=1e-6, atol=1e-6)
        assert (b.ids == a.ids).all() and b.info["candidates"] == a.info["candidates"]
    if comp is not None:
        np.testing.assert_allclose(parted.decoded(), comp.query_space.last.decode(data), rtol=1e-6)
    with pytest.raises(InputError, match="number the documents 0..n-1, each once"):
        PartedIndex([(parts[0][0], parts[0][1]), (parts[0][0], parts[0][1])])


def test_parted_index_scores_each_document_with_its_own_model(clustered):
    """Two models of one spec, each holding half: a document's score is its own model's."""
    from embcompress.search import PartedIndex

    D, Q = clustered
    halves = [np.arange(0, len(D), 2), np.arange(1, len(D), 2)]
    models = [from_spec("pq:8").fit(D[h]) for h in halves[::-1]]  # each fitted on the other half
    parts = [(h, Index(m.transform(D[h]), compressor=m)) for h, m in zip(halves, models)]
    res = PartedIndex(parts).search(Q, 15)
    for h, (rows, idx) in zip(halves, parts):
        own = idx.search(Q, len(h))
        score_of = {(qi, rows[r]): s for qi in range(len(Q)) for r, s in zip(own.rows[qi], own.scores[qi])}
        mine = np.isin(res.rows, h)
        for qi, j in zip(*np.nonzero(mine)):
            assert abs(score_of[(qi, res.rows[qi, j])] - res.scores[qi, j]) < 1e-5
    assert (np.diff(res.scores, axis=1) <= 1e-7).all()


@pytest.mark.parametrize("rerank", ["asymmetric", "float"])
def test_parted_index_reranks_each_candidate_with_its_own_model(clustered, rerank):
    """A rerank over parts of two models: every returned score is the rerank score of that
    document by its own part's index (its own model's decoding, or its original vector), whatever
    the query block, and the candidates are those of the merged first stage."""
    from embcompress.search import ArrayStore, PartedIndex

    D, Q = clustered
    halves = [np.flatnonzero(np.arange(len(D)) % 3 == 0), np.flatnonzero(np.arange(len(D)) % 3 != 0)]
    models = [from_spec("pq:8").fit(D[h]) for h in halves[::-1]]
    parts = [(h, Index(m.transform(D[h]), compressor=m)) for h, m in zip(halves, models)]
    parted = PartedIndex(parts)
    kw = {"rerank": rerank, "multiplier": 5, "originals": D if rerank == "float" else None}
    res = parted.search(Q, 12, **kw)
    np.testing.assert_array_equal(parted.search(Q, 12, query_block=5, threads=2, **kw).rows, res.rows)
    for p, (rows, idx) in enumerate(parts):
        local = {int(g): i for i, g in enumerate(rows)}
        for qi, j in zip(*np.nonzero(np.isin(res.rows, rows))):
            own = idx.rerank_scores(
                Q[qi : qi + 1],
                np.array([[local[int(res.rows[qi, j])]]]),
                rerank,
                ArrayStore(D[rows]) if rerank == "float" else None,
            )
            assert abs(float(own[0, 0]) - res.scores[qi, j]) < 1e-5
    first = parted.search(Q, 60)  # the first stage alone: the rerank's candidates
    for qi in range(len(Q)):
        assert set(res.rows[qi]) <= set(first.rows[qi])
    assert (np.diff(res.scores, axis=1) <= 1e-7).all()


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
@pytest.mark.parametrize("larger_is_better", [True, False])
def test_merging_blocks_in_row_order_gives_what_the_sort_by_value_and_row_gives(dtype, larger_is_better):
    from embcompress.search.topk import merge_topk

    rng = np.random.default_rng(4)
    values, rows, start = [], [], 0
    for width in (7, 300, 64, 300):  # a scan's blocks: ascending row ranges, each best first, ties by lower row
        v = rng.integers(0, 20, (5, width)).astype(dtype)  # many ties
        r = np.sort(rng.choice(np.arange(start, start + 2 * width), width, replace=False))[None].repeat(5, 0)
        order = np.lexsort((r, -v if larger_is_better else v), axis=1)
        values.append(np.take_along_axis(v, order, 1))
        rows.append(np.take_along_axis(r, order, 1))
        start += 2 * width
    for k in (1, 10, 299, 600):
        fast = merge_topk(values, rows, k, larger_is_better=larger_is_better, ascending=True)
        sort = merge_topk(values, rows, k, larger_is_better=larger_is_better)
        assert np.array_equal(fast[0], sort[0]) and np.array_equal(fast[1], sort[1])
