"""embcompress.serving: plans as data, the tiers apply writes, and search served from them."""

from __future__ import annotations

import json

from types import SimpleNamespace

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

import embcompress
from embcompress.cli.main import app
from embcompress.core.errors import FormatError, InputError, OutputExistsError
from embcompress.search import Index
from embcompress.search.ann import Hnsw
from embcompress.search.stores import ArrayStore, DecodedStore
from embcompress.serving import copies as copies_mod
from embcompress.serving import tiers as tiers_mod
from embcompress.serving.plan import Plan, load_plan, save_plan
from embcompress.serving.copies import DiskCopy, drop_cache
from embcompress.serving.tiers import apply_plan, open_tiers

runner = CliRunner()


def _data(n=3000, d=48, seed=0):
    rng = np.random.default_rng(seed)
    X = (rng.standard_normal((n, 8)) @ rng.standard_normal((8, d)) + 0.5 * rng.standard_normal((n, d))).astype(
        np.float32
    )
    Q = (X[:40] + 0.2 * rng.standard_normal((40, d))).astype(np.float32)
    return X, Q


def _parquet(path, X):
    pq.write_table(
        pa.table(
            {"id": [f"doc{i}" for i in range(len(X))], "embedding": pa.array(list(X), type=pa.list_(pa.float32()))}
        ),
        path,
    )


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("serving")
    X, Q = _data()
    _parquet(tmp / "docs.parquet", X)
    np.save(tmp / "queries.npy", Q)
    return tmp, X, Q


@pytest.mark.parametrize(
    "bad, says",
    [
        ({"structure": "ivf"}, "structure 'ivf'"),
        ({"copy": "int4"}, "copy 'int4'"),
        ({"place": "tape"}, "place 'tape'"),
        ({"k": 0}, "k=0"),
        ({"copy": "int8", "candidates": 5, "k": 10}, "candidates=5 below k=10"),
        ({"candidates": 50}, "without a rescoring copy"),
        ({"structure": "hnsw"}, "graph settings"),
    ],
)
def test_a_plan_refuses_what_it_cannot_serve_and_says_what_is_allowed(bad, says):
    with pytest.raises(InputError, match="allowed") as e:
        Plan(**bad)
    assert says in str(e.value)


def test_a_saved_plan_reads_back_the_same_and_is_validated_on_load(tmp_path):
    X, _ = _data(500, 16)
    first, int8 = embcompress.from_spec("binary").fit(X), embcompress.Int8().fit(X)
    plan = Plan(
        structure="hnsw",
        graph=Hnsw(m=16, ef_construction=40, ef_search=64),
        copy="int8",
        candidates=50,
        k=10,
        measured={"retention": 0.99},
    )
    save_plan(plan, first, tmp_path / "p", copy_model=int8)
    saved = load_plan(tmp_path / "p")
    assert saved.plan == plan and np.array_equal(saved.copy_model.ranges_, int8.ranges_)
    with pytest.raises(OutputExistsError):
        save_plan(plan, first, tmp_path / "p", copy_model=int8)
    doc = json.loads((tmp_path / "p" / "plan.json").read_text())
    for change, says in (
        ({"version": 99}, "version 99"),
        ({"copy": "float16"}, "int8 calibration"),
        ({"extra": 1}, "unknown field"),
        ({"candidates": "many"}, "candidates='many'"),
    ):
        (tmp_path / "p" / "plan.json").write_text(json.dumps({**doc, **change}))
        with pytest.raises(FormatError, match=says):
            load_plan(tmp_path / "p")
    (tmp_path / "p" / "plan.json").write_text("{")
    with pytest.raises(FormatError, match="not valid JSON"):
        load_plan(tmp_path / "p")
    with pytest.raises(InputError, match="not a serving plan directory"):
        load_plan(tmp_path)


@pytest.mark.parametrize("copy", ["int8", "float16", "float32"])
def test_served_tiers_rank_as_the_same_search_over_arrays_in_memory(corpus, tmp_path, copy):
    tmp, X, Q = corpus
    first = embcompress.from_spec("binary").fit(X)
    int8 = embcompress.Int8().fit(X) if copy == "int8" else None
    save_plan(Plan(copy=copy, candidates=60, k=10), first, tmp_path / "plan", copy_model=int8)
    res = apply_plan(tmp_path / "plan", tmp / "docs.parquet", tmp_path / "out")
    assert res["rows"] == len(X) and res["disk_bytes_per_vector"] == {"int8": 1, "float16": 2, "float32": 4}[copy] * 48
    stored = np.load(tmp_path / "out" / "copy.npy")
    expect = int8.transform(X) if int8 else X.astype(stored.dtype)
    assert np.array_equal(stored, expect)  # the copy's rows are the input's, in its order
    served = open_tiers(tmp_path / "out", tmp_path / "plan")
    got = served.search(Q)
    store = DecodedStore(expect, int8) if int8 else ArrayStore(expect)
    want = Index(first.transform(X), compressor=first).search(Q, 10, rerank="float", candidates=60, originals=store)
    assert np.array_equal(got.rows, want.rows) and np.allclose(got.scores, want.scores)
    assert got.ids[0, 0] == f"doc{got.rows[0, 0]}" and got.info["candidates"] == 60
    # rescoring from the copy recovers what the codes alone lose
    exact = Index(X).search(Q, 10).rows
    codes = Index(first.transform(X), compressor=first).search(Q, 10).rows

    def recall(r):
        return np.mean([len(set(a) & set(b)) / 10 for a, b in zip(r, exact)])

    assert recall(got.rows) > recall(codes) + 0.3  # 0.47 -> about 0.9 on these data


def test_a_fast_scan_first_stage_is_served_as_the_same_search_in_memory(corpus, tmp_path):
    tmp, X, Q = corpus
    first = embcompress.from_spec("opq:16:nbits=4").fit(X)  # 8 bytes: the fast scan (search.fastscan)
    int8 = embcompress.Int8().fit(X)
    save_plan(Plan(copy="int8", candidates=80, k=10), first, tmp_path / "plan", copy_model=int8)
    apply_plan(tmp_path / "plan", tmp / "docs.parquet", tmp_path / "out")
    got = open_tiers(tmp_path / "out", tmp_path / "plan").search(Q)
    index = Index(first.transform(X), compressor=first)
    assert index.scorer.fast is not None
    store = DecodedStore(int8.transform(X), int8)
    want = index.search(Q, 10, rerank="float", candidates=80, originals=store)
    assert np.array_equal(got.rows, want.rows) and np.allclose(got.scores, want.scores)
    exact = Index(X).search(Q, 10).rows
    assert np.mean([len(set(a) & set(b)) / 10 for a, b in zip(got.rows, exact)]) > 0.9


@pytest.mark.parametrize("spec", ["opq:16:nbits=4", "pca:24+pq:6", "rq:4"])
@pytest.mark.parametrize("place", ["disk", "ram"])
def test_an_int8_residual_copy_is_written_served_and_scores_the_reconstruction_plus_residual(
    corpus, tmp_path, spec, place
):
    """int8r: the residual of each row after its code, in int8 with a scale a row; a candidate's score is the
    cosine with reconstruction + residual, and it finds more of the exact top 10 than an int8 copy."""
    from embcompress.serving import residual

    tmp, X, Q = corpus
    first = embcompress.from_spec(spec).fit(X)
    save_plan(Plan(copy="int8r", place=place, candidates=40, k=10), first, tmp_path / "plan")
    info = apply_plan(tmp_path / "plan", tmp / "docs.parquet", tmp_path / "out")
    assert info["disk_bytes_per_vector"] == X.shape[1] + 8 and info["copy_bytes"] > len(X) * (X.shape[1] + 8)
    served = open_tiers(tmp_path / "out", tmp_path / "plan")
    got = served.search(Q)
    # the same scores from the vectors the copy stands for, decoded the slow way
    codes = first.transform(X)
    rows = residual.encode(first, X, codes)
    approx = residual.ResidualCopy.of_array(rows, Index(codes, compressor=first)).get(np.arange(len(X)))
    want = Index(codes, compressor=first).search(Q, 10, rerank="float", candidates=40, originals=approx)
    assert np.array_equal(got.rows, want.rows)
    np.testing.assert_allclose(got.scores, want.scores, rtol=1e-4, atol=1e-5)
    # the stored residual is within half a step of the true one in every value
    recon = first.inverse_transform(codes)
    step = np.abs(X - recon).max(axis=1) / 127
    assert (np.abs(approx - X) <= step[:, None] * 0.5001 + 1e-6).all()
    exact = Index(X).search(Q, 10).rows
    int8 = embcompress.Int8().fit(X)
    with_int8 = Index(codes, compressor=first).search(
        Q, 10, rerank="float", candidates=40, originals=DecodedStore(int8.transform(X), int8)
    )

    def recall(r):
        return np.mean([len(set(a) & set(b)) / 10 for a, b in zip(r, exact)])

    assert recall(got.rows) >= recall(with_int8.rows)


def test_an_int8_residual_copy_cut_short_is_refused_and_exported_with_how_to_read_it(corpus, tmp_path):
    from embcompress.serving.plan_export import export_plan

    tmp, X, Q = corpus
    first = embcompress.from_spec("pq:8").fit(X)
    save_plan(Plan(copy="int8r", candidates=40, k=10), first, tmp_path / "plan")
    apply_plan(tmp_path / "plan", tmp / "docs.parquet", tmp_path / "out")
    res = export_plan(tmp_path / "out", tmp_path / "plan", tmp_path / "x.faiss", to="faiss")
    desc = json.loads((tmp_path / "x.faiss.embcompress.json").read_text())["plan"]
    assert desc["copy"] == "int8r" and "scale" in desc["rescore_decode"] and res["note"]
    assert np.load(tmp_path / "x.faiss.rescore.npy").shape == (len(X), X.shape[1] + 8)
    copy = tmp_path / "out" / "copy.npy"
    size = copy.stat().st_size
    with open(copy, "r+b") as f:
        f.truncate(size - 8)  # one row's scale and norm lost
    with pytest.raises(FormatError, match="truncated or not this plan's copy"):
        open_tiers(tmp_path / "out", tmp_path / "plan")


def test_an_int8_residual_copy_needs_codes_scored_by_tables(corpus, tmp_path):
    tmp, X, Q = corpus
    for spec in ("binary", "pca:16", "pca:24+rabitq:1"):
        with pytest.raises(InputError, match="int8r copy .* lookup tables"):
            save_plan(Plan(copy="int8r", candidates=40), embcompress.from_spec(spec).fit(X), tmp_path / spec)
        assert not (tmp_path / spec).exists()


def test_the_copy_on_disk_reads_only_the_candidates_rows_sorted_and_merged(tmp_path, monkeypatch):
    X, _ = _data(1000, 16)
    np.save(tmp_path / "c.npy", X)
    store = DiskCopy(tmp_path / "c.npy", lambda r: np.asarray(r, np.float32), rows=1000, dim=16, kind="float32")
    rows = np.array([[7, 3, 900], [4, 7, 5]])
    if copies_mod._pread is not None:  # the C reader: given the distinct rows once, sorted, and the same vectors
        asked = []
        real_c = copies_mod._pread

        class Spy:
            @staticmethod
            def read_rows(fd, uniq, row_bytes, base, buf, mapped):
                asked.append(uniq.tolist())
                return real_c.read_rows(fd, uniq, row_bytes, base, buf, mapped)

        monkeypatch.setattr(copies_mod, "_pread", Spy)
        assert np.array_equal(store.get(rows.reshape(-1)), X[rows.reshape(-1)])
        assert asked == [[3, 4, 5, 7, 900]]
    monkeypatch.setattr(copies_mod, "_pread", None)  # the reads from Python, one positioned read per run
    reads = []
    real = copies_mod.os.preadv
    monkeypatch.setattr(
        copies_mod.os, "preadv", lambda fd, bufs, off: reads.append((off, len(bufs[0]))) or real(fd, bufs, off)
    )
    assert np.array_equal(store.get(rows.reshape(-1)), X[rows.reshape(-1)])
    assert [o for o, _ in reads] == sorted(o for o, _ in reads)  # by offset
    assert sum(n for _, n in reads) == 5 * 64  # the five distinct rows, once each
    assert len(reads) == 3  # one read per run of neighbouring rows: 3-5, 7 and 900
    store.close()


@pytest.mark.parametrize("reader", ["c", "python"])
def test_a_copy_truncated_while_served_is_a_short_read_not_garbage(tmp_path, monkeypatch, reader):
    if reader == "c" and copies_mod._pread is None:
        pytest.skip("the C reader is not built here")
    if reader == "python":
        monkeypatch.setattr(copies_mod, "_pread", None)
    X, _ = _data(1000, 16)
    np.save(tmp_path / "c.npy", X)
    store = DiskCopy(tmp_path / "c.npy", lambda r: np.asarray(r, np.float32), rows=1000, dim=16, kind="float32")
    with open(tmp_path / "c.npy", "r+b") as f:  # another process cuts the file after it was opened and checked
        f.truncate(store.offset + 500 * 64)
    assert np.array_equal(store.get(np.array([1, 499])), X[[1, 499]])
    with pytest.raises(FormatError, match="short read at row 998"):
        store.get(np.array([2, 998, 999]))
    store.close()


def test_apply_keeps_the_codes_reconstruction_norms_so_a_server_decodes_none_of_them(corpus, tmp_path, monkeypatch):
    """The first query of a server used to decode every code for its reconstruction norm (40 s at ten million
    48 B codes); apply now writes them beside the codes, in the same groups of rows, and the server reads them."""
    from embcompress.search import scorers

    tmp, X, Q = corpus
    first = embcompress.from_spec("opq:16:nbits=4").fit(X)
    codes = first.transform(X)
    monkeypatch.setattr(scorers, "NORM_ROWS", 256)  # groups fixed by the row numbers, wherever a piece starts
    whole = scorers.reconstruction_norms(first, codes)
    pieces = [scorers.reconstruction_norms(first, codes[a:b], a) for a, b in ((0, 700), (700, 1901), (1901, 3000))]
    # to float32 rounding: a matrix product's last bits change with its rows and thread (OpenBLAS on AMD EPYC)
    assert np.allclose(np.concatenate(pieces), whole, rtol=1e-6, atol=0)
    assert np.allclose(whole, np.linalg.norm(first.inverse_transform(codes), axis=1), rtol=1e-6)
    save_plan(Plan(copy="int8", candidates=80, k=10), first, tmp_path / "plan", copy_model=embcompress.Int8().fit(X))
    apply_plan(tmp_path / "plan", tmp / "docs.parquet", tmp_path / "out", batch_size=700)
    out = tmp_path / "out"
    assert json.loads((out / "tiers.json").read_text())["norms"] == "norms.npy"
    assert np.allclose(np.load(out / "norms.npy"), whole, rtol=1e-6, atol=0)
    lazy = open_tiers(out, tmp_path / "plan")  # its norms replaced by none: computed at the first query, as before
    lazy.index.scorer._recon = False
    want = lazy.search(Q)
    served = open_tiers(out, tmp_path / "plan")

    def no_decoding(self, Z):
        raise AssertionError("a code was decoded")

    monkeypatch.setattr(type(first), "inverse_transform", no_decoding)
    got = served.search(Q)
    assert np.array_equal(got.rows, want.rows) and np.allclose(got.scores, want.scores, rtol=1e-6, atol=0)
    norms = (out / "norms.npy").read_bytes()
    (out / "norms.npy").write_bytes(norms[:-8])
    with pytest.raises(FormatError, match="reconstruction norms are missing or cut"):
        open_tiers(out, tmp_path / "plan")
    with pytest.raises(FormatError, match="reconstruction norms are missing or cut"):
        tiers_mod.check_tiers(out, load_plan(tmp_path / "plan"))
    (out / "norms.npy").unlink()
    with pytest.raises(FormatError, match="reconstruction norms are missing or cut"):
        open_tiers(out, tmp_path / "plan")
    hamming = embcompress.from_spec("binary").fit(X)  # scanned by Hamming distance and rescored from floats
    save_plan(Plan(copy="float16", candidates=40, k=10), hamming, tmp_path / "bits")
    apply_plan(tmp_path / "bits", tmp / "docs.parquet", tmp_path / "bits-out")
    assert json.loads((tmp_path / "bits-out" / "tiers.json").read_text())["norms"] is None
    assert not (tmp_path / "bits-out" / "norms.npy").exists()


def test_tiers_that_do_not_match_the_plan_are_refused_in_one_line(corpus, tmp_path):
    tmp, X, Q = corpus
    first = embcompress.from_spec("binary").fit(X)
    save_plan(Plan(copy="float16", candidates=40, k=10), first, tmp_path / "plan")
    apply_plan(tmp_path / "plan", tmp / "docs.parquet", tmp_path / "out")
    other = embcompress.from_spec("binary").fit(X[:100] * -1)  # another model: another fingerprint
    save_plan(Plan(copy="float16", candidates=40, k=10), other, tmp_path / "other")
    with pytest.raises(InputError, match="written by another plan"):
        open_tiers(tmp_path / "out", tmp_path / "other")
    copy = tmp_path / "out" / "copy.npy"
    data = copy.read_bytes()
    copy.write_bytes(data[:-10])
    with pytest.raises(FormatError, match="truncated"):
        open_tiers(tmp_path / "out", tmp_path / "plan")
    copy.unlink()
    with pytest.raises(InputError, match="rescoring copy is missing"):
        open_tiers(tmp_path / "out", tmp_path / "plan")
    copy.write_bytes(data)
    tiers = json.loads((tmp_path / "out" / "tiers.json").read_text())
    (tmp_path / "out" / "tiers.json").write_text(json.dumps({**tiers, "rows": 5}))
    with pytest.raises(FormatError, match="holds 3,000 rows, the tiers 5"):
        open_tiers(tmp_path / "out", tmp_path / "plan")
    assert drop_cache(copy) in (True, False)


def test_an_interrupted_apply_leaves_nothing_behind(corpus, tmp_path, monkeypatch):
    tmp, X, _ = corpus
    first = embcompress.from_spec("binary").fit(X)
    save_plan(Plan(copy="float32", candidates=40, k=10), first, tmp_path / "plan")
    calls = []

    def interrupted(saved):
        def encode(rows, codes):
            calls.append(len(rows))
            raise KeyboardInterrupt

        return encode

    monkeypatch.setattr(tiers_mod, "encoder_of", interrupted)
    with pytest.raises(KeyboardInterrupt):
        apply_plan(tmp_path / "plan", tmp / "docs.parquet", tmp_path / "out", batch_size=256)
    assert calls and sorted(p.name for p in tmp_path.iterdir()) == ["plan"]


def cli(*args):
    return runner.invoke(app, [str(a) for a in args])


def test_the_cli_applies_a_plan_and_searches_with_it(corpus, tmp_path):
    tmp, X, Q = corpus
    first = embcompress.from_spec("pca:24+binary").fit(X)
    save_plan(Plan(copy="int8", candidates=50, k=5), first, tmp_path / "plan", copy_model=embcompress.Int8().fit(X))
    r = cli("apply", tmp_path / "plan", tmp / "docs.parquet", tmp_path / "out", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["disk_bytes_per_vector"] == 48
    r = cli(
        "search", tmp_path / "out", tmp / "queries.npy", tmp_path / "res.parquet", "--plan", tmp_path / "plan", "--json"
    )
    assert r.exit_code == 0, r.output
    res = pq.read_table(tmp_path / "res.parquet")
    assert res.num_rows == 40 * 5 and json.loads(r.stdout)["candidates"] == 50
    out = tmp_path / "unmapped.parquet"  # every candidate's row read with a system call: the same results
    r = cli("search", tmp_path / "out", tmp / "queries.npy", out, "--plan", tmp_path / "plan", "--map-limit", "0")
    assert r.exit_code == 0, r.output
    assert pq.read_table(out).equals(res)
    r = cli("search", tmp_path / "out", tmp / "queries.npy", tmp_path / "x.parquet", "--map-limit", "0")
    assert r.exit_code == 2 and "add --plan" in r.output and not (tmp_path / "x.parquet").exists()
    r = cli("apply", tmp_path / "plan", tmp / "docs.parquet", tmp_path / "out")
    assert r.exit_code == 1 and "already exists" in r.output
    r = cli("search", tmp / "docs.parquet", tmp / "queries.npy", tmp_path / "r2.parquet", "--plan", tmp_path / "plan")
    assert r.exit_code == 1 and "holds no serving tiers" in r.output


def test_recommend_ranks_plans_and_saves_one_that_apply_and_search_serve(tmp_path):
    X, _ = _data(1000, 16, seed=3)
    docs = tmp_path / "docs.parquet"
    _parquet(docs, X)
    r = cli("recommend", docs, tmp_path / "plan", "--ram-budget", "2", "--disk-budget", "40", "--json")
    assert r.exit_code == 0, r.output
    res = json.loads(r.stdout)
    copies = {p["copy"] for p in res["ranking"]}
    # float32 (64 B) is over the disk budget; the int8 residual (16 + 8 B) is not, for the table codes
    assert copies <= {"none", "decoded", "int8", "int8r", "float16"} and {"int8", "int8r"} <= copies
    assert all(p["disk_bytes"] == 24 for p in res["ranking"] if p["copy"] == "int8r")
    assert all(p["ram_bytes"] <= 2 and p["disk_bytes"] <= 40 for p in res["ranking"])
    w, c = res["winner"], res["code_only"]
    assert w["retention"] == max(p["retention"] for p in res["ranking"]) and w["retention"] > c["retention"]
    assert w["latency_ms"] > 0 and w["batch_ms"] > 0
    assert [n for n, _ in res["ranking"][0]["sweep"]] == [20, 40, 100, 200, 500][: len(res["ranking"][0]["sweep"])]
    saved = load_plan(tmp_path / "plan")
    assert saved.plan.copy == w["copy"] and saved.plan.candidates == w["candidates"]
    assert cli("apply", tmp_path / "plan", docs, tmp_path / "out").exit_code == 0
    np.save(tmp_path / "q.npy", X[:7])
    r = cli("search", tmp_path / "out", tmp_path / "q.npy", tmp_path / "r.parquet", "--plan", tmp_path / "plan")
    assert r.exit_code == 0, r.output
    assert pq.read_table(tmp_path / "r.parquet").column("row").to_pylist()[::10] == list(range(7))  # each finds itself
    # with a target, the plan with the least RAM (then disk) that reaches it
    r = cli("recommend", docs, tmp_path / "pt", "--ram-budget", "2", "--disk-budget", "40", "--target", "0.9", "--json")
    assert r.exit_code == 0, r.output
    res = json.loads(r.stdout)
    reach = [p for p in res["ranking"] if p["retention"] >= 0.9]
    assert res["target_reached"] and res["winner"]["retention"] >= 0.9
    assert (res["winner"]["ram_bytes"], res["winner"]["disk_bytes"]) == min(
        (p["ram_bytes"], p["disk_bytes"]) for p in reach
    )
    # no copy at all with a disk budget of 0
    r = cli("recommend", docs, tmp_path / "p0", "--ram-budget", "2", "--disk-budget", "0", "--json")
    assert r.exit_code == 0, r.output
    assert {p["copy"] for p in json.loads(r.stdout)["ranking"]} <= {"none", "decoded"}
    r = cli("recommend", docs, tmp_path / "p1", "--ram-budget", "2", "--budget", "2")
    assert r.exit_code == 2 and "one of them" in r.output
    r = cli("recommend", docs, tmp_path / "p2", "--ram-budget", "2", "--max-latency-ms", "0.000001")
    assert r.exit_code == 1 and "no plan answers within" in r.output and not (tmp_path / "p2").exists()


def test_the_candidate_count_stops_where_the_gain_is_within_its_uncertainty():
    from embcompress.report.sweep import choose_count

    noise = np.random.default_rng(0).normal(0, 0.3, (4, 400))  # each count's own per-query noise
    sweep = [SimpleNamespace(retention=r, per_query=0.5 * r + e) for r, e in zip((0.80, 0.90, 0.9001, 0.99), noise)]
    assert choose_count(sweep, 0.5, None) is sweep[1]  # 0.90 -> 0.9001 is noise
    assert choose_count(sweep, 0.5, 0.85) is sweep[1]  # the first to reach the target
    assert choose_count(sweep, 0.5, 0.995) is sweep[1]  # none reaches it: where the gain stops


def test_export_of_a_plan_writes_what_each_target_holds_and_says_what_it_does_not(corpus, tmp_path):
    import faiss

    tmp, X, Q = corpus
    first = embcompress.from_spec("binary").fit(X)
    save_plan(Plan(copy="float16", candidates=40, k=10), first, tmp_path / "plan")
    apply_plan(tmp_path / "plan", tmp / "docs.parquet", tmp_path / "tiers")

    def export_to_faiss():
        return runner.invoke(
            app,
            [
                "export",
                str(tmp_path / "tiers"),
                str(tmp_path / "x.faiss"),
                "--to",
                "faiss",
                "--plan",
                str(tmp_path / "plan"),
            ],
        )

    r = export_to_faiss()
    assert r.exit_code == 0, r.output
    assert "note: faiss holds the first stage" in r.stderr
    assert np.array_equal(np.load(tmp_path / "x.faiss.rescore.npy"), np.load(tmp_path / "tiers" / "copy.npy"))
    doc = json.loads((tmp_path / "x.faiss.embcompress.json").read_text())
    assert doc["plan"]["copy"] == "float16" and doc["plan"]["candidates"] == 40
    # the exported first stage plus the rescoring file serve what the plan serves
    index = faiss.read_index_binary(str(tmp_path / "x.faiss"))
    _, cand = index.search(first.transform(Q), 40)
    copy = np.load(tmp_path / "x.faiss.rescore.npy").astype(np.float32)
    scores = np.einsum("qd,qcd->qc", Q / np.linalg.norm(Q, axis=1, keepdims=True), copy[cand]) / np.linalg.norm(
        copy[cand], axis=2
    )
    mine = np.take_along_axis(cand, np.argsort(-scores, axis=1, kind="stable"), 1)[:, :10]
    served = open_tiers(tmp_path / "tiers", tmp_path / "plan").search(Q)
    assert np.mean([len(set(a) & set(b)) / 10 for a, b in zip(mine, served.rows)]) > 0.95  # Hamming ties aside
    r = export_to_faiss()
    assert r.exit_code == 1 and "already exists" in r.output
    r = runner.invoke(
        app,
        ["export", str(tmp_path / "tiers"), str(tmp_path / "db"), "--to", "lancedb", "--plan", str(tmp_path / "plan")],
    )
    assert r.exit_code == 0 and "refine_factor rescores from the table's own vectors" in r.stderr
    copy = tmp_path / "tiers" / "copy.npy"
    copy.write_bytes(copy.read_bytes()[:-10])  # a truncated copy is refused before anything is written
    r = cli("export", tmp_path / "tiers", tmp_path / "y.faiss", "--to", "faiss", "--plan", tmp_path / "plan")
    assert r.exit_code == 1 and "truncated" in r.output and not list(tmp_path.glob("y.faiss*"))


def test_cheaper_plans_within_the_winners_uncertainty_are_named():
    from embcompress.report.plans import PlanRow, near_ties

    rng = np.random.default_rng(1)
    base = rng.uniform(0, 1, 500)

    def row(config, ram, disk, cand, shift):
        return PlanRow(config, "s", config, "int8", cand, ram, disk, 0.5 + shift, ()), base + shift + rng.normal(
            0, 0.2, 500
        )

    rows = [
        row("win", 8, 64, 100, 0.0),
        row("close-cheaper", 8, 64, 40, -0.005),
        row("far-cheaper", 4, 0, 10, -0.3),
        row("close-dearer", 16, 64, 100, -0.001),
    ]
    per = {r.config: q for r, q in rows}
    tied = near_ties(rows[0][0], [r for r, _ in rows], per, 1.0)
    assert [p.config for p in tied] == ["close-cheaper"]


def test_ctrl_c_during_apply_of_a_plan_exits_130_and_leaves_nothing(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    X, _ = _data(60_000, 32, seed=7)
    pq.write_table(
        pa.table({"embedding": pa.array(list(X), type=pa.list_(pa.float32()))}),
        tmp_path / "big.parquet",
        row_group_size=2000,
    )
    save_plan(
        Plan(copy="float32", candidates=40, k=10), embcompress.from_spec("binary").fit(X[:1000]), tmp_path / "plan"
    )
    # the command as a user runs it, with each batch's copy slowed to 50 ms so that the run is still
    # going when the signal comes, however fast the machine
    slow = (
        "import sys, time; import embcompress.serving.tiers as t; real = t.encoder_of; "
        "t.encoder_of = lambda saved: (lambda X, e=real(saved): (time.sleep(0.05), e(X))[1]); "
        "from embcompress.cli.main import main; sys.argv[0] = 'embcompress'; main()"
    )
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            slow,
            "apply",
            str(tmp_path / "plan"),
            str(tmp_path / "big.parquet"),
            str(tmp_path / "tiers"),
            "--batch-size",
            "1000",
        ],
        stderr=subprocess.PIPE,
        text=True,
        # Ctrl-C reaches it even when these tests run in a background job (which ignores SIGINT)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.time() + 60
    while time.time() < deadline and not any(n.startswith(".tiers.tmp-") for n in os.listdir(tmp_path)):
        time.sleep(0.05)  # the event: the run's temporary directory appears
    assert any(n.startswith(".tiers.tmp-") for n in os.listdir(tmp_path)), "the run never started writing"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert sorted(os.listdir(tmp_path)) == ["big.parquet", "plan"]


def test_pick_measures_each_plan_once():
    from embcompress.report.plans import PlanRow, pick

    plans = [PlanRow(f"c{i}", "s", f"c{i}", "int8", 10, 8, 64, 0.9 - i / 100, ()) for i in range(8)]
    calls = []

    def measure(p):
        calls.append(p.config)
        return PlanRow(**{**p.__dict__, "latency_ms": 5.0 if p.config != "c0" else 50.0})

    winner, ranked = pick(plans, None, 10.0, measure)
    assert winner.config == "c1" and sorted(calls) == sorted(set(calls))  # c0 too slow; nothing measured twice
    assert len(calls) == 6 and all(r.latency_ms is not None for r in ranked[:6])


def test_with_a_target_the_fastest_of_the_plans_reaching_it_at_the_least_ram_wins():
    from embcompress.report.plans import PlanRow, pick

    rows = [  # (config, RAM, retention, latency): c0-c2 reach 0.99 at 12 B, c3 at 6 B is short of it
        ("c0", 12, 0.999, 9.0),
        ("c1", 12, 0.998, 3.0),
        ("c2", 12, 0.995, 3.0),
        ("c3", 6, 0.98, 1.0),
        ("c4", 24, 0.9999, 1.0),
    ]
    plans = [PlanRow(c, "s", c, "int8", 100, ram, 384, r, ()) for c, ram, r, _ in rows]
    times = {c: t for c, _, _, t in rows}
    calls = []

    def measure(p):
        calls.append(p.config)
        return PlanRow(**{**p.__dict__, "latency_ms": times[p.config]})

    winner, ranked = pick(plans, 0.99, None, measure)
    assert winner.config == "c1"  # as fast as c2 and ahead of it by retention; c4 needs more RAM
    assert [r.config for r in ranked[:3]] == ["c0", "c1", "c2"]  # the ranking keeps its order of preference
    assert all(r.latency_ms is not None for r in ranked[:3]) and len(calls) == len(set(calls))
    assert pick(plans, 0.99, 2.0, measure)[0].config == "c4"  # none of the 12 B plans within 2 ms
    assert pick(plans, None, None, measure)[0].config == "c4"  # without a target: the best quality


def test_the_candidate_count_rule_skips_queries_without_judgments():
    from embcompress.report.sweep import choose_count

    noise = np.random.default_rng(0).normal(0, 0.3, (4, 400))
    sweep = [SimpleNamespace(retention=r, per_query=0.5 * r + e) for r, e in zip((0.80, 0.90, 0.9001, 0.99), noise)]
    for s in sweep:  # a judged task leaves its unjudged queries NaN
        s.per_query[::7] = np.nan
    assert choose_count(sweep, 0.5, None) is sweep[1]


def test_the_report_opens_with_the_best_plan_per_ram_budget(tmp_path):
    X, _ = _data(800, 16, seed=5)
    _parquet(tmp_path / "docs.parquet", X)
    r = cli(
        "report",
        tmp_path / "docs.parquet",
        tmp_path / "rep",
        "--methods",
        "pca",
        "--widths",
        "4",
        "--codes",
        "none",
        "--ram-budgets",
        "2,4",
        "--json",
    )
    assert r.exit_code == 0, r.output
    plans = json.loads((tmp_path / "rep" / "report.json").read_text())["plans"]
    assert sorted(plans) == ["2", "4"] and all(p["winner"]["ram_bytes"] <= int(b) for b, p in plans.items())
    page = (tmp_path / "rep" / "report.html").read_text()
    assert page.index("Serving plans: the best per RAM budget") < page.index("Retention against size")
    assert "one curve per rescoring copy" in page and "candidates rescored per query" in page


def test_apply_of_a_plan_carries_the_ids_and_kept_columns(tmp_path):
    X, _ = _data(300, 16, seed=9)
    pq.write_table(
        pa.table(
            {
                "id": [f"d{i}" for i in range(300)],
                "title": [f"t{i}" for i in range(300)],
                "embedding": pa.array(list(X), type=pa.list_(pa.float32())),
            }
        ),
        tmp_path / "docs.parquet",
    )
    save_plan(
        Plan(copy="int8", candidates=20, k=10),
        embcompress.from_spec("binary").fit(X),
        tmp_path / "plan",
        copy_model=embcompress.Int8().fit(X),
    )
    r = cli("apply", tmp_path / "plan", tmp_path / "docs.parquet", tmp_path / "tiers", "--keep", "title")
    assert r.exit_code == 0, r.output
    first = pq.read_table(tmp_path / "tiers" / "first.parquet")
    assert first.column("title").to_pylist() == [f"t{i}" for i in range(300)] and first.column("id")[0].as_py() == "d0"


def _sweep_rows(spec, copy, retentions, seed=0):
    """Result rows of one (code, copy) sweep, each query's score around its retention (float scores 0.5)."""
    from embcompress.report.sweep import FURTHER_MULTIPLIERS, MULTIPLIERS

    noise = np.random.default_rng(seed).normal(0, 0.05, (len(retentions), 400))
    return [
        SimpleNamespace(config=f"{spec}@{copy}x{m}", candidates=10 * m, retention=r, per_query=0.5 * r + e)
        for m, r, e in zip((*MULTIPLIERS, *FURTHER_MULTIPLIERS), retentions, noise)
    ]


def test_a_candidate_sweep_still_rising_at_its_end_goes_on_one_count_at_a_time():
    from embcompress.report.sweep import further, still_rising

    rising = _sweep_rows("rq:2", "int8", (0.80, 0.86, 0.90, 0.93, 0.96))
    flat = _sweep_rows("pca:4+sq:4", "int8", (0.80, 0.86, 0.89, 0.895, 0.8951))  # behind: not a rival
    assert still_rising(rising, 0.5, None) and not still_rising(flat, 0.5, None)
    assert not still_rising(rising, 0.5, 0.95)  # the target is reached at 500: no further count
    assert still_rising(rising, 0.5, 0.99)  # short of the target and rising
    float_row = SimpleNamespace(config="float", score=0.5)
    cands = {"rq:2": "rq", "pca:4+sq:4": "pca"}
    extend = further(cands, ("int8",), None, 100_000)
    assert extend([float_row, *rising, *flat]) == ["rq:2@int8x100"]
    longer = _sweep_rows("rq:2", "int8", (0.80, 0.86, 0.90, 0.93, 0.96, 0.99))
    assert extend([float_row, *longer, *flat]) == ["rq:2@int8x200"]  # 1,000 still gained: 2,000 next
    stalled = _sweep_rows("rq:2", "int8", (0.80, 0.86, 0.90, 0.93, 0.96, 0.9601))
    assert not still_rising(stalled, 0.5, None) and extend([float_row, *stalled, *flat]) == []
    at_2000 = _sweep_rows("rq:2", "int8", (0.80, 0.86, 0.90, 0.93, 0.96, 0.98, 1.00))
    assert extend([float_row, *at_2000, *flat]) == ["rq:2@int8x500"]  # 2,000 still gained: 5,000 next
    to_the_end = _sweep_rows("rq:2", "int8", (0.80, 0.86, 0.90, 0.93, 0.96, 0.98, 1.00, 1.02, 1.04))
    assert still_rising(to_the_end, 0.5, None) and extend([float_row, *to_the_end, *flat]) == []  # 10,000: the end
    assert further(cands, ("int8",), None, 1_000)([float_row, *rising, *flat]) == []  # 1,000 of 1,000 documents
    assert further(cands, ("int8",), None, 5_000)([float_row, *at_2000, *flat]) == []  # 5,000 of 5,000 documents


def test_a_rising_sweep_that_cannot_be_the_pick_does_not_go_on():
    from embcompress.report.sweep import further

    float_row = SimpleNamespace(config="float", score=0.5)
    codes = [
        SimpleNamespace(config="rq:2", bytes_per_vector=2),
        SimpleNamespace(config="pq:1", bytes_per_vector=1),
        SimpleNamespace(config="rq:1", bytes_per_vector=2),
    ]
    cands = {"rq:2": "rq", "pq:1": "pq", "rq:1": "rq1"}
    strong = _sweep_rows("rq:2", "int8", (0.80, 0.86, 0.90, 0.93, 0.96))
    weak = _sweep_rows("pq:1", "int8", (0.50, 0.55, 0.60, 0.65, 0.70), seed=1)  # rising, 26 points behind
    close = _sweep_rows("rq:1", "int8", (0.80, 0.86, 0.90, 0.93, 0.955), seed=2)  # rising, within the noise
    rows = [float_row, *codes, *strong, *weak, *close]
    # without a target only quality counts: the weak sweep cannot win, the close one might
    assert further(cands, ("int8",), None, 100_000)(rows) == ["rq:2@int8x100", "rq:1@int8x100"]
    # with a target the weak one needs less RAM than the leader: it could reach the target first, so it goes on
    assert further(cands, ("int8",), 0.99, 100_000)(rows) == ["rq:2@int8x100", "pq:1@int8x100", "rq:1@int8x100"]
    # a rival compared where it ended: the leader at 1,000 against the weak one's 2,000
    strong_1000 = _sweep_rows("rq:2", "int8", (0.80, 0.86, 0.90, 0.93, 0.96, 0.97))
    weak_2000 = _sweep_rows("pq:1", "int8", (0.50, 0.55, 0.60, 0.65, 0.70, 0.75, 0.80), seed=1)
    extend = further(cands, ("int8",), None, 100_000)
    assert "pq:1@int8x500" not in extend([float_row, *codes, *strong_1000, *weak_2000])


def test_run_configs_scores_what_extend_adds_with_the_models_it_fitted(monkeypatch):
    from embcompress.evaluation import crossfit
    from embcompress.evaluation.evaluate import run_configs
    from embcompress.evaluation.tasks import LabelFreeTask

    X, _ = _data(600, 16, seed=5)
    task = LabelFreeTask(X[:20] + 0.01, 10)
    built = []
    real = crossfit.from_spec
    monkeypatch.setattr(crossfit, "from_spec", lambda s: built.append(s) or real(s))
    asked = []

    def extend(rows):
        asked.append([r.config for r in rows])
        return ["pca:8+sq:4@int8x4"]  # the second time it is scored already: nothing new, the run ends

    rows = run_configs(X, task, ["pca:8+sq:4", "pca:8+sq:4@int8x2"], extend=extend)
    assert [r.config for r in rows] == ["float", "pca:8+sq:4", "pca:8+sq:4@int8x2", "pca:8+sq:4@int8x4"]
    assert asked == [["float", "pca:8+sq:4", "pca:8+sq:4@int8x2"], [r.config for r in rows]]
    fitted = len(built)
    alone = run_configs(X, task, ["pca:8+sq:4@int8x4"])
    assert rows[-1].score == alone[1].score and len(built) == 2 * fitted  # the same models, fitted once per run


def test_an_hnsw_plan_writes_its_graph_once_and_the_server_maps_it_instead_of_building_it(
    corpus, tmp_path, monkeypatch
):
    from embcompress.search import index as index_mod

    tmp, X, Q = corpus
    first = embcompress.from_spec("binary").fit(X)
    graph = Hnsw(m=8, ef_construction=40, ef_search=200)
    save_plan(Plan(structure="hnsw", graph=graph, copy="float16", candidates=60, k=10), first, tmp_path / "plan")
    res = apply_plan(tmp_path / "plan", tmp / "docs.parquet", tmp_path / "out")
    assert res["graph_bytes"] > 8 * 4 * len(X)  # level 0 alone holds 2 m links of 4 bytes per document
    assert json.loads((tmp_path / "out" / "tiers.json").read_text())["graph"] == "graph.faiss"
    monkeypatch.setattr(index_mod.ann, "faiss_index", lambda *a, **k: pytest.fail("the graph was built again"))
    served = open_tiers(tmp_path / "out", tmp_path / "plan")
    got = served.search(Q)
    assert served.index.structure == "hnsw" and served.index.hnsw.ef_search == 200
    exact = Index(first.transform(X), compressor=first).search(
        Q, 10, rerank="float", candidates=60, originals=ArrayStore(X.astype(np.float16))
    )
    overlap = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(got.rows, exact.rows)])
    assert overlap > 0.9  # the graph finds (nearly) the exact scan's candidates at ef 200 over 3,000 documents
    graph_file = tmp_path / "out" / "graph.faiss"
    from embcompress.serving.plan_export import export_plan

    assert not (tmp_path / "out" / "graph.faiss.ids.parquet").exists()  # the ids are kept once, with the codes
    res = export_plan(tmp_path / "out", tmp_path / "plan", tmp_path / "x.faiss", to="faiss")  # copied, not built
    assert res["structure"] == "hnsw" and res["graph"]["m"] == 8 and res["rows"] == len(X)
    ids = pq.read_table(tmp_path / "x.faiss.ids.parquet")  # beside the exported graph, from the codes
    assert ids.column("row").to_pylist() == list(range(len(X)))
    assert ids.column("id").to_pylist() == pq.read_table(tmp / "docs.parquet").column("id").to_pylist()
    assert str(tmp_path / "x.faiss.ids.parquet") in res["files"]
    assert (tmp_path / "x.faiss").read_bytes() == graph_file.read_bytes()
    assert np.array_equal(np.load(tmp_path / "x.faiss.rescore.npy"), np.load(tmp_path / "out" / "copy.npy"))
    again = Index(first.transform(X), compressor=first, structure="hnsw")
    again.load_graph(tmp_path / "x.faiss")  # the exported graph's description names these documents
    data = graph_file.read_bytes()
    graph_file.write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError, match="not a faiss index faiss can read"):
        open_tiers(tmp_path / "out", tmp_path / "plan")
    graph_file.unlink()
    with pytest.raises(InputError, match="HNSW graph is missing; write the tiers again"):
        open_tiers(tmp_path / "out", tmp_path / "plan")


def test_recommend_ranks_plans_searched_through_an_hnsw_graph_and_counts_its_links_in_ram(tmp_path):
    from embcompress.report.plans import GRAPH

    X, _ = _data(1200, 16, seed=4)
    docs = tmp_path / "docs.parquet"
    _parquet(docs, X)
    r = cli("recommend", docs, tmp_path / "small", "--ram-budget", "48", "--index", "hnsw")
    assert r.exit_code == 1 and "links take 272 B per vector" in r.output and not (tmp_path / "small").exists()
    budget = int(GRAPH.graph_bytes) + 4
    r = cli("recommend", docs, tmp_path / "plan", "--ram-budget", str(budget), "--index", "hnsw", "--disk-budget", "32")
    assert r.exit_code == 0, r.output
    res = json.loads(
        cli(
            "recommend",
            docs,
            tmp_path / "again",
            "--ram-budget",
            str(budget),
            "--index",
            "hnsw",
            "--disk-budget",
            "32",
            "--json",
        ).stdout
    )
    assert res["ranking"] and all(p["structure"] == "hnsw" and p["config"].startswith("hnsw/") for p in res["ranking"])
    assert all(GRAPH.graph_bytes < p["ram_bytes"] <= budget for p in res["ranking"])  # the links are counted
    saved = load_plan(tmp_path / "plan")
    assert saved.plan.structure == "hnsw" and saved.plan.graph == GRAPH
    assert cli("apply", tmp_path / "plan", docs, tmp_path / "out").exit_code == 0
    assert (tmp_path / "out" / "graph.faiss").is_file()
    np.save(tmp_path / "q.npy", X[:5])
    r = cli("search", tmp_path / "out", tmp_path / "q.npy", tmp_path / "r.parquet", "--plan", tmp_path / "plan")
    assert r.exit_code == 0, r.output
    assert pq.read_table(tmp_path / "r.parquet").column("row").to_pylist()[::10] == list(range(5))
    r = cli("recommend", docs, tmp_path / "b", "--budget", "4", "--index", "hnsw")
    assert r.exit_code == 2 and "with --ram-budget" in r.output


def test_an_hnsw_configuration_is_scored_through_each_folds_graph_built_once_per_spec(monkeypatch):
    from embcompress.evaluation.evaluate import run_configs
    from embcompress.evaluation.tasks import LabelFreeTask
    from embcompress.search import ann

    X, _ = _data(1500, 16, seed=6)
    task = LabelFreeTask(X[:30] + 0.01, 10)
    built = []
    real = ann.faiss_index
    monkeypatch.setattr(ann, "faiss_index", lambda *a, **k: built.append(a[1]) or real(*a, **k))
    configs = ["binary", "hnsw/binary", "hnsw/binary@float16x4", "hnsw/binary@float16x10"]
    rows = run_configs(X, task, configs, in_sample=False)  # as a plan ranking scores them
    assert built == ["hnsw", "hnsw"]  # one graph per fold, kept for the spec's other configurations
    exact, graph = rows[1], rows[2]
    assert graph.retention > 0.8 * exact.retention  # the graph finds most of what the scan finds (ties: 16 bits)
    assert rows[4].retention >= rows[2].retention  # rescoring the graph's candidates gets back what the codes lose
    with pytest.raises(InputError, match="HNSW graph is built over bits or float"):
        run_configs(X, task, ["hnsw/pq:4"])


@pytest.mark.parametrize("spec", ["binary", "sq:4", "pq:8", "pq:8:nbits=4", "rabitq:1", "pca:8+sq:4"])
def test_a_reused_first_stage_gives_what_a_fresh_scan_of_fewer_candidates_gives(spec, monkeypatch):
    import inspect

    from embcompress.evaluation.evaluate import run_configs
    from embcompress.evaluation.tasks import LabelFreeTask
    from embcompress.search import scorers

    scans = []
    for _, cls in inspect.getmembers(scorers, inspect.isclass):
        if "first_stage" in vars(cls):
            real = vars(cls)["first_stage"]
            monkeypatch.setattr(cls, "first_stage", lambda self, Q, k, real=real: scans.append(k) or real(self, Q, k))
    X, _ = _data(1500, 16, seed=7)
    X[700:720] = X[0]  # exact ties among the documents
    task = LabelFreeTask(X[:40] + 0.01, 10)
    configs = [f"{spec}@int8x50", f"{spec}@float16x20", f"{spec}@int8x4", f"{spec}@asym", spec]
    reused = run_configs(X, task, configs, in_sample=False, per_query=True, reuse_first_stage=True)
    assert scans == [10, 500, 500]  # float search, then one scan per fold of the most candidates: it answers the rest
    fresh = [run_configs(X, task, [c], in_sample=False, per_query=True)[1] for c in configs]
    for a, b in zip(reused[1:], fresh):
        assert a.config == b.config and a.score == b.score and np.array_equal(a.per_query, b.per_query)


def test_an_asymmetric_rerank_of_float_outputs_is_refused_in_one_line():
    from embcompress.evaluation.evaluate import run_configs
    from embcompress.evaluation.tasks import LabelFreeTask

    X, _ = _data(600, 16, seed=8)
    comp = embcompress.from_spec("pca:8").fit(X)
    with pytest.raises(InputError, match="outputs float vectors, which its own search scores exactly"):
        Index(comp.transform(X), compressor=comp).search(X[:3], 5, rerank="asymmetric")
    with pytest.raises(InputError, match="outputs float vectors"):  # out-of-sample (a parted index) as well
        run_configs(X, LabelFreeTask(X[:5] + 0.01, 10), ["pca:8@asym"], in_sample=False)


def test_without_the_in_sample_figure_each_fold_is_encoded_once(monkeypatch):
    from embcompress.evaluation import crossfit
    from embcompress.evaluation.evaluate import run_configs
    from embcompress.evaluation.tasks import LabelFreeTask

    X, _ = _data(800, 16, seed=9)
    task = LabelFreeTask(X[:10] + 0.01, 10)
    encoded = []
    real = crossfit.FitCache.encode
    monkeypatch.setattr(
        crossfit.FitCache, "encode", lambda self, spec, docs: encoded.append(len(docs)) or real(self, spec, docs)
    )
    out = run_configs(X, task, ["sq:4"], in_sample=False)
    assert len(encoded) == 2 and out[1].score_in_sample is None  # each fold by the model fitted on the other
    encoded.clear()
    both = run_configs(X, task, ["sq:4"])
    assert len(encoded) == 4 and both[1].score_in_sample is not None and both[1].score == out[1].score


def test_a_plan_whose_sweep_ended_still_rising_says_so():
    from embcompress.report.plans import _plans

    float_row = SimpleNamespace(config="float", score=0.5)
    code = SimpleNamespace(config="rq:2", rerank=None, bytes_per_vector=2, candidates=10, retention=0.5)
    rising = _sweep_rows("rq:2", "int8", (0.80, 0.86, 0.90, 0.93, 0.96, 0.98, 1.00))  # up to 2,000: still gaining
    flat = _sweep_rows("rq:2", "float16", (0.90, 0.96, 0.99, 0.995, 0.9951))
    plans = {p.copy: p for p in _plans([float_row, code, *rising, *flat], {"rq:2": "rq"}, 16, None)}
    assert plans["int8"].rising and plans["int8"].candidates == 2000
    assert not plans["float16"].rising and plans["float16"].candidates < 500
    assert not plans["none"].rising
    reached = {p.copy: p for p in _plans([float_row, code, *rising], {"rq:2": "rq"}, 16, 0.95)}["int8"]
    assert not reached.rising and reached.candidates == 500  # the target stops the sweep: nothing left rising


def test_the_candidate_sweep_stops_below_a_tenth_of_the_documents_searched(tmp_path, monkeypatch):
    import embcompress.report.plans as plans

    limits, further = [], plans.further
    monkeypatch.setattr(plans, "further", lambda *a: limits.append(a[3]) or further(*a))
    X, _ = _data(1000, 16, seed=3)
    _parquet(tmp_path / "docs.parquet", X)
    r = cli("recommend", tmp_path / "docs.parquet", tmp_path / "plan", "--ram-budget", "2", "--disk-budget", "40")
    assert r.exit_code == 0, r.output
    # about 900 documents searched (the rest of the 1,000 stand in for queries): counts stay below 90
    assert limits == [900 // plans.SEARCHED_PER_CANDIDATE]  # rescoring most documents would be exact search


def test_the_plan_plot_keeps_curves_that_lie_on_each_other_apart():
    """Copies that keep the same retention draw over one another: each has its own dash and marker size, and
    their candidate counts are not printed on top of each other."""
    import re

    from embcompress.report.plans_html import plans_plot

    def row(copy, r, n=500):
        return {"copy": copy, "retention": r, "candidates": n, "label": "rq:12", "ram_bytes": 12, "disk_bytes": 384}

    ranking = [row(c, 0.999) for c in ("int8", "float16", "float32")] + [row("none", 0.6, 10)]
    plans = {b: {"ranking": ranking} for b in ("6", "12")}
    svg = plans_plot(plans)
    lines = re.findall(r'<polyline[^>]*stroke-width="([\d.]+)"(?: stroke-dasharray="([^"]+)")?', svg)
    assert len(lines) == 4 and len(set(lines)) == 4  # codes only, int8, float16, float32: four different strokes
    radii = re.findall(r'<circle[^>]* r="([\d.]+)"', svg)
    assert len(set(radii)) == 4
    counts = re.findall(r'<text x="([\d.]+)" y="([\d.]+)" font-size="10"[^>]*>500</text>', svg)
    assert len(counts) == 6
    for x in {cx for cx, _ in counts}:  # at each budget, the three counts at least a line apart
        ys = sorted(float(cy) for cx, cy in counts if cx == x)
        assert all(b - a >= 10 for a, b in zip(ys, ys[1:]))
