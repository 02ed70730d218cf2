"""Exports to faiss, usearch and LanceDB, and approximate search through faiss HNSW: exact indexes
return the same top-k as embcompress search (ties aside), ids map back to the user's ids."""

from __future__ import annotations

import json
import os

import numpy as np
import pyarrow.parquet as pq
import pytest

from embcompress import InputError, OutputExistsError, describe, from_spec, save
from embcompress.serving.export import export
from embcompress.search.files import load_index
from embcompress.engines.local import fit_and_compress

from conftest import write_parquet

faiss = pytest.importorskip("faiss")


def clustered(n: int, d: int, seed: int = 0) -> np.ndarray:
    """Embeddings with structure (40 clusters), as real ones have: HNSW recall means something."""
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((40, d)).astype(np.float32)
    X = centers[rng.integers(0, 40, n)] + 0.6 * rng.standard_normal((n, d)).astype(np.float32)
    return X / np.linalg.norm(X, axis=1, keepdims=True)


@pytest.fixture
def files(tmp_path):
    docs = write_parquet(tmp_path / "docs.parquet", clustered(3000, 128), extra={"lang": ["en", "de", "fr"] * 1000})
    queries = clustered(40, 128, seed=9)
    return tmp_path, docs, queries


def _codes(tmp_path, docs, spec):
    out = tmp_path / f"{spec.replace(':', '_')}.parquet"
    comp = from_spec(spec)
    fit_and_compress(comp, docs, out, keep_columns=["lang"])
    save(comp, tmp_path / f"{spec.replace(':', '_')}-model")
    return out, tmp_path / f"{spec.replace(':', '_')}-model"


def _same_topk(ours_rows, ours_scores, their_rows, their_scores, atol=1e-5):
    np.testing.assert_allclose(np.sort(ours_scores, axis=1), np.sort(their_scores, axis=1), atol=atol)
    for q in range(len(ours_rows)):  # rows agree wherever the score is not tied with a neighbour's
        s = ours_scores[q]
        untied = [
            i for i in range(len(s) - 1) if (i == 0 or abs(s[i] - s[i - 1]) > atol) and abs(s[i] - s[i + 1]) > atol
        ]
        assert set(ours_rows[q][untied]) <= set(their_rows[q]), q


def test_bits_to_faiss_flat_same_topk_and_ids_map_back(files):
    tmp, docs, Q = files
    codes, _ = _codes(tmp, docs, "binary")
    res = export(codes, tmp / "bits.faiss", to="faiss")
    index = load_index(codes)
    ours = index.search(Q, 10)
    fx = faiss.read_index_binary(str(tmp / "bits.faiss"))
    dist, rows = fx.search(index.compressor.transform(Q), 10)
    _same_topk(ours.rows, ours.scores, rows, (index.width - dist).astype(np.float32))
    ids = pq.read_table(tmp / "bits.faiss.ids.parquet").column("id").to_pylist()
    assert [ids[r] for r in rows[0]][:1] == list(ours.ids[0][:1])
    meta = json.loads((tmp / "bits.faiss.embcompress.json").read_text())
    assert (
        meta["compressor"]["name"] == "binary"
        and meta["compressor"]["fingerprint"] == describe(index.compressor)["fingerprint"]
    )
    assert "Hamming" in meta["queries"] and res["rows"] == 3000
    again = export(codes, tmp / "noids.faiss", to="faiss", ids=False)  # the ids kept elsewhere
    assert not (tmp / "noids.faiss.ids.parquet").exists() and len(again["files"]) == 2
    assert json.loads((tmp / "noids.faiss.embcompress.json").read_text())["ids"] is None


def test_floats_to_faiss_flat_and_hnsw(files):
    tmp, docs, Q = files
    index = load_index(docs)
    ours = index.search(Q, 10)
    export(docs, tmp / "f.faiss", to="faiss")
    fx = faiss.read_index(str(tmp / "f.faiss"))
    sims, rows = fx.search(Q / np.linalg.norm(Q, axis=1, keepdims=True), 10)
    _same_topk(ours.rows, ours.scores, rows, sims)
    export(docs, tmp / "h.faiss", to="faiss", structure="hnsw")
    hx = faiss.read_index(str(tmp / "h.faiss"))
    hx.hnsw.efSearch = 128
    _, hrows = hx.search(Q / np.linalg.norm(Q, axis=1, keepdims=True), 10)
    recall = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(ours.rows, hrows)])
    assert recall >= 0.9, recall


def test_int8_and_pq_codes_become_faiss_code_indexes(files):
    tmp, docs, Q = files
    codes, _ = _codes(tmp, docs, "int8")
    export(codes, tmp / "i8.faiss", to="faiss")
    fx = faiss.read_index(str(tmp / "i8.faiss"))
    index = load_index(codes)
    comp = index.compressor
    step = (comp.ranges_[1] - comp.ranges_[0]) / 255
    np.testing.assert_allclose(fx.reconstruct_n(0, 50), comp.decode(index.data[:50]) + step / 2, atol=1e-5)
    pq_codes, model = _codes(tmp, docs, "pq:16")
    export(pq_codes, tmp / "pq.faiss", to="faiss", model=model)
    px = faiss.read_index(str(tmp / "pq.faiss"))
    pindex = load_index(pq_codes, model=model)
    np.testing.assert_allclose(px.reconstruct_n(0, 50), pindex.compressor.decode(pindex.data[:50]), atol=1e-6)
    sims, rows = px.search(Q, 10)
    ours = pindex.search(Q, 10)
    recall = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(ours.rows, rows)])
    assert recall >= 0.7, recall  # faiss ranks by inner product, embcompress by cosine with the reconstruction
    fast_codes, fast_model = _codes(tmp, docs, "opq:32:nbits=4")  # 4-bit: faiss's fast scan of the same codes
    export(fast_codes, tmp / "fast.faiss", to="faiss", model=fast_model)
    fx = faiss.read_index(str(tmp / "fast.faiss"))
    assert isinstance(faiss.downcast_index(fx.index), faiss.IndexPQFastScan)
    findex = load_index(fast_codes, model=fast_model)
    np.testing.assert_allclose(fx.reconstruct_n(0, 50), findex.compressor.decode(findex.data[:50]), atol=1e-5)
    _, rows = fx.search(Q, 10)
    recall = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(findex.search(Q, 10).rows, rows)])
    assert recall >= 0.7, recall


def test_usearch_exact_search_matches_and_keys_are_rows(files):
    usearch = pytest.importorskip("usearch.index")
    tmp, docs, Q = files
    codes, _ = _codes(tmp, docs, "binary")
    export(codes, tmp / "bits.usearch", to="usearch")
    ux = usearch.Index.restore(str(tmp / "bits.usearch"))
    index = load_index(codes)
    ours = index.search(Q, 10)
    m = ux.search(index.compressor.transform(Q), 10, exact=True)
    keys, dist = np.asarray(m.keys, dtype=np.int64), np.asarray(m.distances)  # distances: differing bits
    _same_topk(ours.rows, ours.scores, keys, (index.width - dist).astype(np.float32))


def test_lancedb_table_keeps_ids_columns_and_description(files):
    lancedb = pytest.importorskip("lancedb")
    tmp, docs, Q = files
    codes, _ = _codes(tmp, docs, "binary")
    export(codes, tmp / "db", to="lancedb", table="docs")
    t = lancedb.connect(str(tmp / "db")).open_table("docs")
    data = t.to_arrow()
    assert data.column_names == ["id", "lang", "vector"] and data.num_rows == 3000
    assert data.column("id").to_pylist()[:3] == ["doc0", "doc1", "doc2"]
    assert json.loads(t.schema.metadata[b"embcompress"])["compressor"]["name"] == "binary"
    index = load_index(codes)
    q = index.compressor.transform(Q[:1])[0]
    hits = t.search(q).distance_type("hamming").limit(10).to_arrow()
    ours = index.search(Q[:1], 10)
    _same_topk(
        ours.rows,
        ours.scores,
        np.array([[int(i[3:]) for i in hits.column("id").to_pylist()]]),
        (index.width - np.array([hits.column("_distance").to_pylist()])).astype(np.float32),
    )


def test_search_index_hnsw_recall_against_the_exact_scan(files):
    from embcompress.search.files import search_files

    tmp, docs, Q = files
    codes, _ = _codes(tmp, docs, "binary")
    write_parquet(tmp / "q.parquet", Q)
    search_files(codes, tmp / "q.parquet", tmp / "exact.parquet", k=10)
    s = search_files(codes, tmp / "q.parquet", tmp / "hnsw.parquet", k=10, index="hnsw")
    assert s["structure"] == "hnsw"
    a = pq.read_table(tmp / "exact.parquet").column("row").to_numpy().reshape(-1, 10)
    b = pq.read_table(tmp / "hnsw.parquet").column("row").to_numpy().reshape(-1, 10)
    recall = np.mean([len(set(x) & set(y)) / 10 for x, y in zip(a, b)])
    assert recall >= 0.9, recall


def test_bad_exports_are_one_error_and_leave_nothing(files):
    tmp, docs, Q = files
    codes, _ = _codes(tmp, docs, "int8")
    before = sorted(os.listdir(tmp))
    with pytest.raises(InputError, match="no LanceDB vector type"):
        export(codes, tmp / "db", to="lancedb")
    with pytest.raises(InputError, match="HNSW graph is built over bits or float"):
        export(codes, tmp / "x.faiss", to="faiss", structure="hnsw")
    with pytest.raises(InputError, match="export target must be one of faiss, usearch, lancedb"):
        export(codes, tmp / "x", to="milvus")
    rq_codes, model = _codes(tmp, docs, "sq:2")
    before = sorted(os.listdir(tmp))
    with pytest.raises(InputError, match="no faiss index type"):
        export(rq_codes, tmp / "x.faiss", to="faiss", model=model)
    assert sorted(os.listdir(tmp)) == before
    (tmp / "taken.faiss").write_text("mine")
    with pytest.raises(OutputExistsError):
        export(codes, tmp / "taken.faiss", to="faiss")
    assert (tmp / "taken.faiss").read_text() == "mine"
    with pytest.raises(InputError, match="HNSW graph is built over bits or float"):
        load_index(codes, structure="hnsw")


def test_graph_settings_reach_faiss_and_usearch_and_are_refused_where_there_is_no_graph(files):
    from embcompress.search.ann import Hnsw
    from embcompress.search.files import search_files

    usearch = pytest.importorskip("usearch.index")
    tmp, docs, Q = files
    codes, _ = _codes(tmp, docs, "binary")
    res = export(
        codes, tmp / "h8.faiss", to="faiss", structure="hnsw", hnsw=Hnsw(m=8, ef_construction=20, ef_search=30)
    )
    assert res["graph"] == {"m": 8, "ef_construction": 20, "ef_search": 30}
    hx = faiss.read_index_binary(str(tmp / "h8.faiss"))
    assert (
        hx.hnsw.nb_neighbors(0) == 16 and hx.hnsw.efConstruction == 20 and hx.hnsw.efSearch == 30
    )  # level 0: 2 M links
    assert json.loads((tmp / "h8.faiss.embcompress.json").read_text())["graph"]["m"] == 8
    export(codes, tmp / "b.usearch", to="usearch", hnsw=Hnsw(m=8))
    ux = usearch.Index.restore(str(tmp / "b.usearch"))
    assert ux.connectivity == 8
    with pytest.raises(InputError, match="apply to a graph"):
        export(codes, tmp / "flat.faiss", to="faiss", hnsw=Hnsw(m=8))
    assert not (tmp / "flat.faiss").exists()
    with pytest.raises(InputError, match="HNSW m must be a whole number from 2"):
        Hnsw(m=1)
    write_parquet(tmp / "q.parquet", Q)
    with pytest.raises(InputError, match="only an index with structure 'hnsw' has a graph"):
        load_index(codes).build_graph()
    index = load_index(codes, structure="hnsw", hnsw=Hnsw(m=4, ef_construction=8, ef_search=10))
    assert index.build_graph() > 0 and index.build_graph() == 0.0  # built once
    index.search(Q, 10)
    assert index._graph.hnsw.nb_neighbors(0) == 8 and index._graph.hnsw.efSearch == 10
    # fewer links and candidates than the defaults find fewer of the exact neighbours on these clusters
    search_files(codes, tmp / "q.parquet", tmp / "exact.parquet", k=10)
    exact = pq.read_table(tmp / "exact.parquet").column("row").to_numpy().reshape(-1, 10)
    small = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(exact, index.search(Q, 10).rows)])
    full = np.mean(
        [len(set(a) & set(b)) / 10 for a, b in zip(exact, load_index(codes, structure="hnsw").search(Q, 10).rows)]
    )
    assert small <= full and full >= 0.9, (small, full)


def test_graph_builds_in_steps_report_progress_stop_between_steps_and_keep_recall(files, monkeypatch):
    """Graphs are built GRAPH_ADD_ROWS documents at a time: progress after each step, an error
    (Ctrl-C) raised in the callback stops the build there and leaves no file, and a graph built in
    many steps finds the exact neighbours as well as the defaults' test asks."""
    from embcompress.search import ann
    from embcompress.search.files import search_files

    usearch = pytest.importorskip("usearch.index")
    tmp, docs, Q = files
    codes, _ = _codes(tmp, docs, "binary")
    monkeypatch.setattr(ann, "GRAPH_ADD_ROWS", 700)
    write_parquet(tmp / "q.parquet", Q)
    for target in ("faiss", "usearch"):
        steps: list[tuple[str, int]] = []

        def stage(description, total):
            steps.append((description, total))
            return lambda n: steps.append(("step", n))

        export(codes, tmp / f"g.{target}", to=target, structure="hnsw" if target == "faiss" else "flat", stage=stage)
        assert steps[0] == (f"building the {target} HNSW graph", 3000)
        assert [n for what, n in steps[1:]] == [700, 700, 700, 700, 200], target
    built = faiss.read_index_binary(str(tmp / "g.faiss"))
    assert built.ntotal == 3000 and usearch.Index.restore(str(tmp / "g.usearch")).size == 3000
    calls = []

    def interrupt(description, total):
        def advance(n):
            calls.append(n)
            if len(calls) == 2:
                raise KeyboardInterrupt

        return advance

    before = sorted(os.listdir(tmp))
    with pytest.raises(KeyboardInterrupt):
        export(codes, tmp / "stopped.faiss", to="faiss", structure="hnsw", stage=interrupt)
    assert calls == [700, 700] and sorted(os.listdir(tmp)) == before
    # a flat index takes its documents in one call, with no graph stage
    export(codes, tmp / "flat.faiss", to="faiss", stage=lambda d, t: pytest.fail("a flat index has no graph to build"))
    stages = []
    s = search_files(
        codes,
        tmp / "q.parquet",
        tmp / "hnsw.parquet",
        k=10,
        index="hnsw",
        stage=lambda d, t: stages.append((d, t)) or (lambda n: stages.append(n)),
    )
    assert stages == [("building the HNSW graph", 3000), 700, 700, 700, 700, 200] and s["graph_seconds"] > 0
    search_files(codes, tmp / "q.parquet", tmp / "exact.parquet", k=10)
    a = pq.read_table(tmp / "exact.parquet").column("row").to_numpy().reshape(-1, 10)
    b = pq.read_table(tmp / "hnsw.parquet").column("row").to_numpy().reshape(-1, 10)
    assert np.mean([len(set(x) & set(y)) / 10 for x, y in zip(a, b)]) >= 0.9


def test_search_reads_an_exported_graph_and_refuses_one_of_other_documents(files):
    """search --graph: the graph export wrote is searched as faiss searches it, at the --ef asked;
    a flat index, a graph of other documents, a missing description and graph settings that only
    a build can use are one-line errors that write nothing."""
    from typer.testing import CliRunner

    from embcompress.search.ann import Hnsw
    from embcompress.search.files import search_files
    from embcompress.cli.main import app

    tmp, docs, Q = files
    codes, _ = _codes(tmp, docs, "binary")
    write_parquet(tmp / "q.parquet", Q)
    export(codes, tmp / "g.faiss", to="faiss", structure="hnsw", hnsw=Hnsw(m=12, ef_construction=40, ef_search=16))
    s = search_files(codes, tmp / "q.parquet", tmp / "r.parquet", k=10, graph=tmp / "g.faiss", hnsw=Hnsw(ef_search=64))
    assert s["structure"] == "hnsw" and s["graph"] == {"m": 12, "ef_construction": 40, "ef_search": 64}
    assert s["graph_file"] == str(tmp / "g.faiss")
    fx = faiss.read_index_binary(str(tmp / "g.faiss"))
    fx.hnsw.efSearch = 64
    index = load_index(codes)
    _, theirs = fx.search(index.compressor.transform(Q), 10)
    ours = pq.read_table(tmp / "r.parquet").column("row").to_numpy().reshape(-1, 10)
    assert (np.sort(ours, axis=1) == np.sort(theirs, axis=1)).all()
    res = CliRunner().invoke(
        app,
        [
            "search",
            str(codes),
            str(tmp / "q.parquet"),
            str(tmp / "c.parquet"),
            "--graph",
            str(tmp / "g.faiss"),
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["graph"]["ef_search"] == 16  # the graph's own
    # refused: a flat index, a graph over other rows, no description, build settings
    export(codes, tmp / "flat.faiss", to="faiss")
    other = tmp / "other.parquet"
    fit_and_compress(from_spec("binary"), write_parquet(tmp / "d2.parquet", clustered(500, 128, seed=3)), other)
    export(other, tmp / "other.faiss", to="faiss", structure="hnsw")
    (tmp / "bare.faiss").write_bytes((tmp / "g.faiss").read_bytes())
    (tmp / "odd.faiss").write_bytes((tmp / "g.faiss").read_bytes())
    (tmp / "odd.faiss.embcompress.json").write_text("[1, 2]")
    before = sorted(os.listdir(tmp))
    for graph, match in (
        ("flat.faiss", "is not an HNSW graph"),
        ("odd.faiss", "is not an HNSW graph"),
        ("other.faiss", "was built over other documents: 500 bits"),
        ("bare.faiss", "has no readable description"),
        ("none.faiss", "does not exist"),
    ):
        with pytest.raises(InputError, match=match):
            search_files(codes, tmp / "q.parquet", tmp / "x.parquet", graph=tmp / graph)
    with pytest.raises(InputError, match="only ef"):
        search_files(codes, tmp / "q.parquet", tmp / "x.parquet", graph=tmp / "g.faiss", hnsw=Hnsw(m=8))
    res = CliRunner().invoke(
        app, ["search", str(codes), str(tmp / "q.parquet"), str(tmp / "x.parquet"), "--graph", str(tmp / "other.faiss")]
    )
    assert res.exit_code == 1 and "built over other documents" in res.stderr and "\n" not in res.stderr.strip()
    assert sorted(os.listdir(tmp)) == before


def test_search_reads_a_usearch_export_as_usearch_searches_it(files):
    """search --graph on a usearch export (bits and floats): the rows usearch's own search finds at
    the same ef, scored as the exact scan scores them; --ef reaches it (usearch's file does not
    keep it); fewer found than k are row -1; a file usearch cannot read is a one-line error."""
    from typer.testing import CliRunner

    from embcompress.search.ann import Hnsw, UsearchGraph
    from embcompress.search.files import search_files
    from embcompress.cli.main import app

    usearch = pytest.importorskip("usearch.index")
    tmp, docs, Q = files
    codes, _ = _codes(tmp, docs, "binary")
    write_parquet(tmp / "q.parquet", Q)
    for path, graph in ((codes, tmp / "bits.usearch"), (docs, tmp / "floats.usearch")):
        export(path, graph, to="usearch", hnsw=Hnsw(m=6, ef_construction=16, ef_search=12))
        assert "view=True" in json.loads((tmp / f"{graph.name}.embcompress.json").read_text())["load"]
        s = search_files(
            path, tmp / "q.parquet", tmp / "r.parquet", k=10, graph=graph, hnsw=Hnsw(ef_search=24), overwrite=True
        )
        assert s["graph"] == {"m": 6, "ef_construction": 16, "ef_search": 24}
        index = load_index(path)
        ux = usearch.Index.restore(str(graph))
        ux.expansion_search = 24
        queries = (
            index.compressor.transform(Q) if index.kind == "bits" else Q / np.linalg.norm(Q, axis=1, keepdims=True)
        )
        theirs = np.asarray(ux.search(queries, 10).keys, dtype=np.int64)
        got = pq.read_table(tmp / "r.parquet")
        rows = got.column("row").to_numpy().reshape(-1, 10)
        assert (np.sort(rows, axis=1) == np.sort(theirs, axis=1)).all()
        if index.kind == "bits":
            differ = np.unpackbits(queries[:, None, :] ^ index.data[rows], axis=2).sum(axis=2)
            want = index.width - differ
        else:
            want = np.einsum(
                "qd,qkd->qk", queries, index.data[rows] / np.linalg.norm(index.data[rows], axis=2, keepdims=True)
            )
        np.testing.assert_allclose(got.column("score").to_numpy().reshape(-1, 10), want, atol=1e-5)
    small = UsearchGraph(usearch.Index.restore(str(tmp / "floats.usearch"), view=True), cosine=True)
    dist, rows = small.search(queries[:2], 3001, 64)  # more than the 3,000 documents: the last are missing
    counts = np.asarray(small.ux.search(queries[:2], 3001).counts)
    for q in range(2):
        assert (rows[q, counts[q] :] == -1).all() and len(set(rows[q, : counts[q]])) == counts[q] and rows[q, 0] >= 0
    assert np.isfinite(dist).all()
    (tmp / "junk.usearch").write_bytes(b"not an index" * 100)
    (tmp / "junk.usearch.embcompress.json").write_text((tmp / "bits.usearch.embcompress.json").read_text())
    res = CliRunner().invoke(
        app,
        ["search", str(codes), str(tmp / "q.parquet"), str(tmp / "x.parquet"), "--graph", str(tmp / "junk.usearch")],
    )
    assert res.exit_code == 1 and "is not a usearch index usearch can read" in res.stderr, res.output
    assert "\n" not in res.stderr.strip() and not (tmp / "x.parquet").exists()


@pytest.mark.skipif(not hasattr(faiss, "IO_FLAG_MMAP_IFC"), reason="this faiss reads indexes into memory only")
def test_a_read_graph_is_mapped_from_its_file_and_searches_as_one_read_into_memory(files):
    """search --graph maps the graph's links and codes from the file (page cache, not the process's
    own memory; faiss's is_owned says which) for bits and float documents, and finds what faiss
    finds with the same graph read into memory."""
    from embcompress.search.ann import Hnsw

    tmp, docs, Q = files
    codes, _ = _codes(tmp, docs, "binary")
    for path, graph in ((codes, tmp / "bits.faiss"), (docs, tmp / "floats.faiss")):
        export(path, graph, to="faiss", structure="hnsw", hnsw=Hnsw(m=12, ef_construction=40))
        assert "IO_FLAG_MMAP_IFC" in json.loads((tmp / f"{graph.name}.embcompress.json").read_text())["load"]
        index = load_index(path, structure="hnsw")
        index.load_graph(graph, ef_search=48)
        mapped = index._graph
        links = mapped.hnsw.neighbors
        stored = (faiss.downcast_IndexBinary if index.kind == "bits" else faiss.downcast_index)(mapped.storage)
        assert not links.is_owned
        assert not (stored.xb if index.kind == "bits" else stored.codes).is_owned
        read = (faiss.read_index_binary if index.kind == "bits" else faiss.read_index)(str(graph))
        assert read.hnsw.neighbors.is_owned  # the same call without the flag copies: the check can tell them apart
        read.hnsw.efSearch = 48
        queries = (
            index.compressor.transform(Q) if index.kind == "bits" else Q / np.linalg.norm(Q, axis=1, keepdims=True)
        )
        _, theirs = read.search(queries, 10)
        ours = index.search(Q, 10).rows
        assert (np.sort(ours, axis=1) == np.sort(theirs, axis=1)).all()
