"""Retention report: grid, Pareto front, budget, HTML, and the analyze/report commands."""

from __future__ import annotations

import importlib.util
import json
import re

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from embcompress import InputError, from_spec
from embcompress.report import build_report, render_html
from embcompress.evaluation.configs import parse_config
from embcompress.report.grid import pareto_front

from conftest import make_vectors, write_parquet
from embcompress.cli.main import app

runner = CliRunner()
FAST_GEOPRES = "batch_size=128,min_steps=10"


def clustered(n=600, d=32, seed=0):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 6, n)
    X = rng.standard_normal((6, d))[labels] * 3 + rng.standard_normal((n, d))
    return (X / np.linalg.norm(X, axis=1, keepdims=True)).astype(np.float32), labels


def test_pareto_front():
    pts = [(100, 0.9), (50, 0.95), (10, 0.5), (10, 0.6), (200, 0.95), (5, 0.4)]
    assert pareto_front(pts) == [5, 3, 1]


def test_label_free_report_grid_and_budget():
    X, _ = clustered()
    rep = build_report(X, widths=[8, 4], methods=["truncate", "pca", "geopres"], budget=4, geopres_params=FAST_GEOPRES)
    rows = {r["config"]: r for r in rep["rows"]}
    assert rows["float32"]["retention"] == 1.0 and rows["float32"]["score"] == 1.0
    for name in (
        "truncate 8",
        "pca 4",
        "pca 4 + binary",
        "geopres 8 + binary",
        "binary",
        "binary + asymmetric rerank",
        "int8",
    ):
        assert name in rows
    assert rows["pca 4 + binary"]["bytes_per_vector"] == 1 and rows["int8"]["bytes_per_vector"] == 32
    assert rows["binary + float rerank"]["extra_storage"] == "original float vectors"
    best = rep["summary"]["best_within_budget"]
    assert rows[best]["bytes_per_vector"] <= 4
    assert all(
        rows[best]["retention"] >= r["retention"]
        for r in rep["rows"]
        if r["bytes_per_vector"] <= 4 and not r["extra_storage"]
    )
    assert any(r.get("pareto") for r in rep["rows"])
    assert -1 <= rep["summary"]["proxy_retention_spearman"] <= 1
    # the proxy runs each row's own search (reranks included): every row but the float reference
    plain = rep["rows"][1:]
    assert rep["summary"]["proxy_retention_configs"] == len(plain)
    assert rep["rows"][0]["rank_proxy"] == 1.0 and all(0 <= r["rank_proxy"] <= 1 for r in plain)
    # the code families at 16x, 32x, 64x (128x would be 1 byte for 32 dims)
    codes = [r for r in rep["rows"] if r["method"].startswith("codes: ")]
    assert {r["method"] for r in codes} == {"codes: binary", "codes: sq", "codes: opq", "codes: rabitq"}
    for ratio, nbytes in ((16, 8), (32, 4), (64, 2)):
        at = [r for r in codes if r["config"].endswith(f"({ratio}x)")]
        assert at and all(r["bytes_per_vector"] <= nbytes for r in at), (ratio, at)
    from scipy.stats import spearmanr

    expected = spearmanr([r["rank_proxy"] for r in plain], [r["retention"] for r in plain]).statistic
    assert rep["summary"]["proxy_retention_spearman"] == pytest.approx(expected)
    assert rep["summary"]["mode"] == "label-free" and len(rep["explained_variance"]) == 32
    page = render_html(rep)
    assert page.count("<svg") == 2 and "<script" not in page and "http" not in page.replace("http-equiv", "")
    assert best in page


def test_rank_proxy_equals_a_direct_computation():
    """The proxy of sign bits, by hand: Hamming similarity over all documents (ties by row), the
    query's own row left out, nDCG@10 against the 10 nearest rows by float cosine."""
    from embcompress.evaluation.configs import parse_config
    from embcompress.evaluation.evaluate import RankProxy
    from embcompress.core.registry import from_spec
    from embcompress.search import Index

    X, _ = clustered(n=300, d=32, seed=3)
    rows = np.array([0, 7, 50, 299])
    comp = from_spec("binary").fit(X)
    got = RankProxy(X, rows)(Index(comp.transform(X), compressor=comp), parse_config("binary"), None)
    U = X / np.linalg.norm(X, axis=1, keepdims=True)
    bits = X > comp.query_space.last.thresholds_
    disc = 1 / np.log2(np.arange(2, 12))
    want = []
    for q in rows:
        others = np.array([j for j in range(len(X)) if j != q])
        cos = U[others] @ U[q]
        near = set(others[np.argsort(-cos, kind="stable")[:10]])
        sim = (bits[others] == bits[q]).sum(1)
        ranked = others[np.lexsort((others, -sim))][:10]
        want.append(sum(d for j, d in zip(ranked, disc) if j in near) / disc.sum())
    assert got == pytest.approx(np.mean(want), abs=1e-12)
    assert 0 < got < 1
    assert RankProxy(X, rows)(Index(X), parse_config("float"), None) == 1.0


def test_fit_cache_encodes_consecutive_configurations_of_a_spec_once():
    """A spec's reranks (and norm powers) reuse one encoding of the same documents; another spec
    or other documents encode again, and only the last encoding is held."""
    from embcompress.evaluation.crossfit import FitCache

    D = np.random.default_rng(0).standard_normal((300, 16)).astype(np.float32)
    cache = FitCache(D)
    first = cache.encode("binary", D)
    assert cache.encode("binary", D) is first
    np.testing.assert_array_equal(first, cache.fit("binary").transform(D))
    other = D.copy()
    assert cache.encode("binary", other) is not first  # other documents, even with equal values
    assert cache.encode("sq:2", D).shape == (300, 4)
    again = cache.encode("binary", D)
    assert again is not first and np.array_equal(again, first)  # one encoding held at a time


def test_fit_cache_fits_planned_geopres_widths_together_as_each_alone():
    """Planned GeoPres widths (a chain's first stage among them) are fitted together at the first
    that is needed, each to the model it gets alone, and share the time; other specs and a rank
    loss (which samples as it trains) are fitted alone."""
    from embcompress.evaluation.evaluate import run_configs
    from embcompress.evaluation.crossfit import FitCache
    from embcompress.evaluation.tasks import LabelFreeTask

    D = clustered(n=600, d=24)[0]
    g = "batch_size=64,min_steps=30"
    cache = FitCache(D)
    specs = [
        f"geopres:12:{g}",
        f"geopres:6:{g}+binary",
        "pca:4",
        f"geopres:3:loss=rank,{g}",
        f"geopres:4:loss=rank,{g}",
    ]
    cache.prepare(specs)
    assert cache.fit(f"geopres:6:{g}+binary").transform(D).shape == (600, 1)
    assert {f"geopres:12:{g}", f"geopres:6:{g}"} <= set(cache.fit_seconds)  # both, at the first call
    assert cache.fit_seconds[f"geopres:12:{g}"] == cache.fit_seconds[f"geopres:6:{g}"]
    for w in (12, 6):
        np.testing.assert_array_equal(
            cache.fit(f"geopres:{w}:{g}").components_, from_spec(f"geopres:{w}:{g}").fit(D).components_
        )
    assert not any("rank" in s for s in cache.fit_seconds)
    rows = run_configs(D[100:], LabelFreeTask(D[:100]), [f"geopres:12:{g}", f"geopres:6:{g}"], folds=2)
    alone = run_configs(D[100:], LabelFreeTask(D[:100]), [f"geopres:12:{g}"], folds=2)
    assert rows[1]["score"] == alone[1]["score"] and rows[1]["score_in_sample"] == alone[1]["score_in_sample"]


def test_cross_fit_scores_every_document_through_a_model_that_did_not_see_it():
    """2-fold fitting: the two models are fitted on complementary halves; out-of-sample, each
    half is encoded by the model fitted on the other, in-sample by its own; the figures are those
    of a parted index built by hand that way. A code that memorizes (pq with 256 codewords on a
    few hundred rows) keeps more in-sample than out-of-sample, and 3 folds work the same way."""
    from embcompress.evaluation.evaluate import run_configs
    from embcompress.evaluation.crossfit import CrossFit
    from embcompress.evaluation.tasks import LabelFreeTask
    from embcompress.search import Index, PartedIndex

    X, _ = clustered(n=700, d=32)
    docs, Q = X[100:], X[:100]
    fits = CrossFit(docs, 2)
    a, b = fits.parts
    assert len(a) + len(b) == len(docs) and not set(a) & set(b) and abs(len(a) - len(b)) <= 1
    assert [set(p.tolist()) for p in fits.pools] == [set(b.tolist()), set(a.tolist())]
    for cache, pool in zip(fits.caches, fits.pools):
        np.testing.assert_array_equal(cache.docs, docs[pool])
    rows = run_configs(docs, LabelFreeTask(Q), ["pq:8"], folds=2)
    models = [from_spec("pq:8").fit(docs[b]), from_spec("pq:8").fit(docs[a])]
    ref = Index(docs).search(Q, 10).rows

    def recall(assign):
        idx = PartedIndex([(p, Index(m.transform(docs[p]), compressor=m)) for p, m in zip((a, b), assign)])
        found = idx.search(Q, 10).rows
        return np.mean([len(set(f) & set(r)) / 10 for f, r in zip(found, ref)])

    assert rows[1]["fitted"] == "out-of-sample (2-fold)"
    assert rows[1]["score"] == pytest.approx(recall(models))  # a by the model of b, b by the model of a
    assert rows[1]["score_in_sample"] == pytest.approx(recall(models[::-1]))
    assert rows[1]["retention_in_sample"] > rows[1]["retention"] + 0.05
    three = CrossFit(docs, 3, fit_rows=100)
    assert len(three.parts) == 3 and all(len(p) == 100 for p in three.pools)
    assert all(not set(pool.tolist()) & set(part.tolist()) for pool, part in zip(three.pools, three.parts))
    with pytest.raises(InputError, match="3-fold fitting needs at least 6 documents"):
        CrossFit(docs[:5], 3)


def test_in_sample_figure_on_fewer_queries_is_that_of_the_same_queries():
    """``in_sample=N`` measures the in-sample figure on a seeded sample of N queries and divides
    it by float search's score on those same queries: the figures equal those of a run on that
    subset alone. The out-of-sample headline is the same as with every query; float carries no
    count; with no more queries than N every query is used."""
    from embcompress.evaluation.evaluate import run_configs
    from embcompress.evaluation.tasks import LabelFreeTask, QrelsTask
    from embcompress.evaluation.tasks import fewer_queries

    X, _ = clustered(n=700, d=32)
    docs, ids = X[100:], [f"d{i}" for i in range(600)]
    Q = X[:100] + 0.05 * np.random.default_rng(3).standard_normal((100, 32)).astype(np.float32)
    qrels = {f"q{i}": {f"d{(7 * i) % 600}": 1, f"d{(7 * i + 1) % 600}": 1} for i in range(100)}
    tasks = [
        QrelsTask(Q, [f"q{i}" for i in range(100)], qrels, 10),
        LabelFreeTask(Q, 10, reference="top1", source="queries"),
    ]
    for task in tasks:
        configs = ["pq:8", "binary"]
        whole = run_configs(docs, task, configs, doc_ids=ids)
        fewer = run_configs(docs, task, configs, doc_ids=ids, in_sample=30)
        alone = run_configs(docs, fewer_queries(task, 30, seed=1), configs, doc_ids=ids)
        assert [r["in_sample_queries"] for r in fewer] == [None, 30, 30]
        for w, f, a in zip(whole, fewer, alone):
            assert f["score"] == w["score"] and f["retention"] == w["retention"]
            if f["in_sample_queries"]:
                assert f["score_in_sample"] == pytest.approx(a["score_in_sample"])
                assert f["retention_in_sample"] == pytest.approx(a["retention_in_sample"])
                assert f["score_in_sample"] != pytest.approx(w["score_in_sample"])
        every = run_configs(docs, task, configs, doc_ids=ids, in_sample=100)
        assert [r["in_sample_queries"] for r in every] == [None, None, None]
        assert every[1]["retention_in_sample"] == pytest.approx(whole[1]["retention_in_sample"])


def test_labels_and_qrels_modes():
    X, labels = clustered()
    rep = build_report(X, labels=labels, widths=[8], methods=["pca"], code_families=["sq"])
    assert rep["summary"]["metric"].startswith("kNN accuracy") and rep["rows"][0]["score"] > 0.9
    ids = [f"d{i}" for i in range(len(X))]
    Q = X[:50] + 0.05
    qrels = {f"q{i}": {f"d{i}": 1} for i in range(50)}
    rep = build_report(
        X,
        doc_ids=ids,
        queries=Q,
        query_ids=[f"q{i}" for i in range(50)],
        qrels=qrels,
        widths=[8],
        methods=["pca"],
        code_families=(),
    )
    assert rep["summary"]["metric"] == "nDCG@10" and rep["rows"][0]["score"] > 0.5


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"widths": [32]}, "allowed is 1..31"),
        ({"methods": ["pq"]}, "unknown report method"),
        ({"labels": [1, 2]}, "2 labels for 600 vectors"),
        ({"qrels": {"q": {"d": 1}}}, "give the queries too"),
        ({"reference": "top3"}, "reference must be one of top1, graded, recall"),
    ],
)
def test_report_bad_input(kwargs, message):
    X, _ = clustered()
    with pytest.raises(InputError, match=message):
        build_report(X, **kwargs)


def test_qrels_without_matching_queries():
    X, _ = clustered()
    with pytest.raises(InputError, match="none of the 1 queries in the qrels"):
        build_report(X, queries=X[:3], query_ids=["a", "b", "c"], qrels={"zzz": {"0": 1}}, widths=[8], methods=["pca"])


def _write(path, X, labels=None):
    cols = {
        "id": [f"d{i}" for i in range(len(X))],
        "embedding": pa.FixedSizeListArray.from_arrays(pa.array(X.reshape(-1)), X.shape[1]),
    }
    if labels is not None:
        cols["topic"] = pa.array(labels)
    pq.write_table(pa.table(cols), path)


def test_cli_analyze_and_report(tmp_path):
    X, labels = clustered()
    _write(tmp_path / "v.parquet", X, labels)
    res = runner.invoke(app, ["analyze", str(tmp_path / "v.parquet"), "--curve", str(tmp_path / "c.csv"), "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert 1 <= d["intrinsic_dimensionality"] <= 32 and (tmp_path / "c.csv").read_text().startswith("component,")
    res = runner.invoke(
        app,
        [
            "report",
            str(tmp_path / "v.parquet"),
            str(tmp_path / "r"),
            "--labels",
            "topic",
            "--widths",
            "8,4",
            "--methods",
            "pca,geopres",
            "--geopres-params",
            FAST_GEOPRES,
            "--budget",
            "8",
            "--codes",
            "binary,sq",
        ],
    )
    assert res.exit_code == 0, res.output
    assert "best within budget" in res.stdout
    took = re.search(r"report\.json in ([\d,.]+) s", " ".join(res.stdout.split()))
    assert took and float(took.group(1).replace(",", "")) > 0  # the wall time, printed
    rep = json.loads((tmp_path / "r" / "report.json").read_text())
    assert rep["summary"]["mode"] == "labels" and (tmp_path / "r" / "report.html").exists()
    assert {r["method"] for r in rep["rows"]} >= {"codes: binary", "codes: sq"}
    res = runner.invoke(app, ["report", str(tmp_path / "v.parquet"), str(tmp_path / "r3"), "--codes", "lsh"])
    assert res.exit_code == 1 and "unknown code family ['lsh']; known: binary, sq, pq, opq, rq, rabitq" in res.stderr
    res = runner.invoke(app, ["report", str(tmp_path / "v.parquet"), str(tmp_path / "r")])
    assert res.exit_code == 1 and "already exists" in res.stderr
    res = runner.invoke(app, ["report", str(tmp_path / "v.parquet"), str(tmp_path / "r2"), "--labels", "nope"])
    assert res.exit_code == 1 and "no column(s) 'nope'" in res.stderr
    res = runner.invoke(app, ["report", str(tmp_path / "v.parquet"), str(tmp_path / "r2"), "--widths", "64"])
    assert res.exit_code == 1 and "allowed is 1..31" in res.stderr
    assert not (tmp_path / "r2").exists()


def test_judged_subset_keeps_every_kept_querys_relevant_documents_and_random_others():
    from embcompress.report.task_files import judged_subset

    ids = [f"d{i}" for i in range(1000)]
    qids = [f"q{i}" for i in range(400)]
    # query i: documents 2i and 2i+1 relevant, 2i+2 judged not relevant; q399 names an unknown document only
    qrels = {f"q{i}": {f"d{2 * i}": 1, f"d{2 * i + 1}": 2, f"d{2 * i + 2}": 0} for i in range(399)} | {
        "q399": {"zz": 1}
    }
    rows, q_rows, sub, counts = judged_subset(ids, qids, qrels, 300)
    assert len(rows) == 300 and len(set(rows.tolist())) == 300 and list(rows) == sorted(rows)
    kept = {ids[i] for i in rows}
    assert list(sub) == [qids[q] for q in q_rows]  # in file order
    relevant = {d for q in sub for d, g in qrels[q].items() if g > 0}
    assert relevant <= kept and len(relevant) <= 150  # at most half of the sample is judged relevant
    assert counts["judged_documents"] == len(relevant) and counts["kept_queries"] == len(q_rows) > 50
    assert "q399" not in sub and all(set(sub[q]) <= kept for q in sub)
    assert all(g == qrels[q][d] for q in sub for d, g in sub[q].items())
    again = judged_subset(ids, qids, qrels, 300)
    assert np.array_equal(again[0], rows) and np.array_equal(again[1], q_rows)  # seeded
    assert not np.array_equal(judged_subset(ids, qids, qrels, 300, seed=1)[0], rows)
    with pytest.raises(InputError, match="too small for these qrels"):
        judged_subset(ids, qids, {"q0": {f"d{i}": 1 for i in range(40)}}, 60)


def test_report_with_qrels_and_sample_runs_on_a_judged_sample(tmp_path):
    X, _ = clustered(n=600)
    _write(tmp_path / "v.parquet", X)
    Q = X[:120] + 0.05 * np.random.default_rng(1).standard_normal((120, X.shape[1])).astype(np.float32)
    pq.write_table(
        pa.table(
            {
                "id": [f"q{i}" for i in range(120)],
                "embedding": pa.FixedSizeListArray.from_arrays(pa.array(Q.reshape(-1)), Q.shape[1]),
            }
        ),
        tmp_path / "q.parquet",
    )
    (tmp_path / "qrels.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"q{i}\td{i}\t1\n" for i in range(120))
    )
    args = [
        "report",
        str(tmp_path / "v.parquet"),
        str(tmp_path / "r"),
        "--queries",
        str(tmp_path / "q.parquet"),
        "--qrels",
        str(tmp_path / "qrels.tsv"),
        "--widths",
        "8",
        "--methods",
        "pca",
        "--codes",
        "none",
    ]
    res = runner.invoke(app, [*args, "--sample", "200"])
    assert res.exit_code == 0, res.output
    rep = json.loads((tmp_path / "r" / "report.json").read_text())
    s = rep["summary"]
    assert s["vectors"] == 200 and s["queries"] == 100 and s["sampled_from"]["documents"] == 600
    assert "sampled 200 of 600 documents: the 100 judged relevant to 100 of 120 queries" in " ".join(res.stdout.split())
    assert "sampled 200 of 600 documents" in (tmp_path / "r" / "report.html").read_text()
    res = runner.invoke(app, [*args[:2], str(tmp_path / "all"), *args[3:]])  # without --sample: every document
    assert res.exit_code == 0, res.output
    full = json.loads((tmp_path / "all" / "report.json").read_text())["summary"]
    assert full["vectors"] == 600 and full["queries"] == 120 and full["sampled_from"] is None


def test_recommend_ranks_within_budget_and_saves_the_winner(tmp_path, monkeypatch):
    from embcompress import load
    from embcompress.report.recommend import rank_candidates

    X, labels = clustered(n=800, d=32)
    res = rank_candidates(X, 8)
    assert res["mode"] == "label-free" and res["ranking"]
    # two models, each fitted on half of the 720 indexed rows (80 are the label-free queries) and
    # encoding the other half: ranked out-of-sample, the in-sample figure of the same fits beside it
    assert res["sample"] == 720 and res["fit_rows"] == 360 and res["fitted"] == "out-of-sample (2-fold)"
    assert all(
        r["retention_in_sample"] is not None and r["fit_seconds"] >= 0 and r["encode_rows_per_second"] > 0
        for r in res["ranking"]
    )
    assert any(r["retention_in_sample"] != r["retention"] for r in res["ranking"])  # the fits memorize something
    one = rank_candidates(X, 8, folds=1, configs=["sq:2"])
    assert one["fit_rows"] == 720 and one["winner"]["retention"] == one["winner"]["retention_in_sample"]
    with pytest.raises(InputError, match="folds must be a whole number of at least 1"):
        rank_candidates(X, 8, folds=0)
    assert all(r["bytes_per_vector"] <= 8 for r in res["ranking"])
    if importlib.util.find_spec("faiss"):  # rq with a beam is measured; without one it could win only on cost
        assert "rq:8:beam=4" in {r["config"] for r in res["ranking"]} and "rq:8" not in {
            r["config"] for r in res["ranking"]
        }
        from embcompress.report.candidates import candidates

        with_costs = {c.config for c in candidates(32, 8)}  # with a cost limit both are ranked
        assert {"rq:8", "rq:8:beam=4"} <= with_costs and with_costs - {
            c.config for c in candidates(32, 8, by_quality=True)
        } == {"rq:8"}
    rets = [r["retention"] for r in res["ranking"]]
    assert rets == sorted(rets, reverse=True)
    # label-free: the leader's lead is tested on resampled queries; the candidates it does not
    # significantly beat are named, and the leader wins
    tied = [r for r in res["ranking"] if r["within_uncertainty"]]
    assert res["ranking"][0] in tied and res["winner"] is res["ranking"][0]
    assert (res["within_uncertainty"] is None) == (len(tied) == 1)
    assert res["within_uncertainty"] is None or res["within_uncertainty"] == [r["config"] for r in tied]
    # costs decide when asked: a slow winner is marked and passed over, and nothing fast enough is an error
    if importlib.util.find_spec(
        "faiss"
    ):  # (two codes that encode orders of magnitude apart: sign bits and a residual code with a beam)
        pair = ["binary@asym", "rq:8:beam=4"]
        both = {r["config"]: r for r in res["ranking"]}
        assert both["rq:8:beam=4"]["retention"] > both["binary@asym"]["retention"]
        assert both["binary@asym"]["encode_rows_per_second"] > 3 * both["rq:8:beam=4"]["encode_rows_per_second"]
        # the rule on rates fixed for the test (measured ones of a few hundred rows swing by orders
        # of magnitude on a loaded machine): a floor between them marks the residual code slow,
        # passes it over for the sign bits, and says why
        from embcompress.evaluation.crossfit import CrossFit

        measured = CrossFit.costs
        monkeypatch.setattr(
            CrossFit,
            "costs",
            lambda self, spec: {
                **measured(self, spec),
                "encode_rows_per_second": 1e3 if spec.startswith("rq") else 1e6,
            },
        )
        rate = 3e4
        fast = rank_candidates(X, 8, configs=pair, min_encode_rate=rate)
        assert [r["config"] for r in fast["ranking"]] == ["rq:8:beam=4", "binary@asym"]
        assert (
            "encodes 1,000 rows/s < 30,000" in fast["ranking"][0]["too_slow"] and fast["ranking"][1]["too_slow"] is None
        )
        assert fast["winner"]["config"] == "binary@asym"
    with pytest.raises(InputError, match="no candidate within 8 bytes per vector is fast enough.*--max-fit-seconds"):
        rank_candidates(X, 8, configs=["sq:2", "binary@asym"], max_fit_seconds=1e-9)
    # a target picks the smallest candidate that reaches it
    low = min(rets)
    res_t = rank_candidates(
        X, 8, target=low, configs=[r["config"] for r in res["ranking"] if not r["config"].startswith(("rq", "opq"))]
    )
    assert res_t["target_reached"] and res_t["winner"]["bytes_per_vector"] == min(
        r["bytes_per_vector"] for r in res_t["ranking"]
    )
    write_parquet(tmp_path / "v.parquet", X, extra={"topic": [str(t) for t in labels]})
    res = runner.invoke(
        app,
        ["recommend", str(tmp_path / "v.parquet"), str(tmp_path / "m"), "--budget", "4", "--labels", "topic", "--json"],
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["mode"] == "labels" and out["winner"]["bytes_per_vector"] <= 4
    # the winner's configuration is one that evaluate --config takes, its retention the out-of-sample one
    assert parse_config(out["winner"]["config"]).spec == out["spec"] and out["fitted"] == "out-of-sample (2-fold)"
    assert {"retention", "retention_in_sample", "fit_seconds", "encode_rows_per_second"} <= set(out["winner"])
    assert load(tmp_path / "m").output_spec.nbytes <= 4
    res = runner.invoke(app, ["recommend", str(tmp_path / "v.parquet"), str(tmp_path / "m"), "--budget", "4"])
    assert res.exit_code == 1 and "already exists" in res.stderr
    res = runner.invoke(
        app, ["recommend", str(tmp_path / "v.parquet"), str(tmp_path / "m2"), "--budget", "4", "--target", "2"]
    )
    assert res.exit_code == 2  # a usage error: the target is a retention in (0, 1]


def _two_regimes(n: int = 2000, d: int = 32, seed: int = 0) -> np.ndarray:
    """Half the rows vary in their first 8 dimensions, half in their last 8: truncation to 8 keeps
    the first half whole and loses the second."""
    rng = np.random.default_rng(seed)
    X = 0.05 * rng.standard_normal((n, d)).astype(np.float32)
    X[: n // 2, :8] += rng.standard_normal((n // 2, 8)).astype(np.float32)
    X[n // 2 :, -8:] += rng.standard_normal((n - n // 2, 8)).astype(np.float32)
    return X / np.linalg.norm(X, axis=1, keepdims=True)


def test_a_sorted_file_ranks_as_the_same_file_shuffled(tmp_path):
    from embcompress.report.task_files import load_task_files
    from embcompress.report.recommend import rank_candidates

    X = _two_regimes()
    perm = np.random.default_rng(1).permutation(len(X))
    write_parquet(tmp_path / "sorted.parquet", X, row_group_size=250)
    write_parquet(tmp_path / "shuffled.parquet", X[perm], row_group_size=250)
    configs = ["truncate:8", "sq:2"]
    rankings = {}
    for name in ("sorted", "shuffled"):
        data = load_task_files(tmp_path / f"{name}.parquet", sample=400)
        assert len(data["docs"]) == 400
        assert data["sampled"] == {"documents": 2000, "kept_documents": 400, "seed": 0}
        rankings[name] = [r["config"] for r in rank_candidates(data.pop("docs"), 32, configs=configs)["ranking"]]
    assert rankings["sorted"] == rankings["shuffled"] == ["sq:2", "truncate:8"]
    # what the first 400 rows of the sorted file (one regime only) would have said
    first = [r["config"] for r in rank_candidates(X[:400], 32, configs=configs)["ranking"]]
    assert first == ["truncate:8", "sq:2"]


def test_read_sample_draws_across_row_groups_in_file_order(tmp_path):
    from embcompress.io import read_sample

    X = make_vectors(1000, 8)
    write_parquet(tmp_path / "v.parquet", X, row_group_size=100)
    S, ids, _ = read_sample(tmp_path / "v.parquet", limit=50)
    rows = [int(i[3:]) for i in ids]
    assert rows == sorted(rows) and len(set(rows)) == 50
    assert len({r // 100 for r in rows}) >= 8  # from (nearly) every row group, not the first
    np.testing.assert_array_equal(S, X[rows])
    again, ids2, _ = read_sample(tmp_path / "v.parquet", limit=50)
    assert ids2 == ids
    assert read_sample(tmp_path / "v.parquet", limit=50, seed=1)[1] != ids
    assert len(read_sample(tmp_path / "v.parquet", limit=5000)[0]) == 1000


def test_fit_sample_is_drawn_across_the_pool():
    from embcompress.evaluation.evaluate import evaluate
    from embcompress.evaluation.crossfit import CrossFit

    X = make_vectors(400, 16)
    fits = CrossFit(X, 2, fit_rows=50)
    for pool, part in zip(fits.pools, fits.parts):
        assert len(pool) == 50 and not set(pool) & set(part)
        assert pool.max() > 300  # not the first 50 of the pool
    one = CrossFit(X, 1, fit_rows=50)
    assert len(one.pools[0]) == 50 and one.pools[0].max() > 100
    res = evaluate(X, X[:20], configs=["binary"], fit_sample=50)
    assert res["summary"]["fit_sample"] == {"rows": 50, "drawn_from": 200, "uniform": True}


def test_pseudo_relevance_ndcg_equals_ndcg_against_float_judgments():
    from embcompress.analysis import ndcg_at_k, pseudo_relevance_ndcg

    rng = np.random.default_rng(0)
    ref = np.stack([rng.permutation(50)[:10] for _ in range(30)])
    found = np.stack([rng.permutation(50)[:10] for _ in range(30)])
    found[:5] = ref[:5]  # some identical rankings: nDCG 1
    for depth in (1, 10):
        got = pseudo_relevance_ndcg(ref, found, 10, depth)
        want = [
            ndcg_at_k([str(d) for d in f], {str(d): depth - j for j, d in enumerate(r[:depth])}, 10)
            for r, f in zip(ref, found)
        ]
        np.testing.assert_allclose(got, want)
        assert np.all(got[:5] == 1.0)


def test_recommend_with_unjudged_queries_scores_them_against_float_search():
    from embcompress.report.recommend import rank_candidates

    X, _ = clustered()
    Q = X[:40] + 0.05 * np.random.default_rng(3).standard_normal(X[:40].shape).astype(np.float32)
    res = rank_candidates(X, 8, queries=Q, configs=["sq:2", "binary@asym", "truncate:2"])
    assert res["mode"] == "label-free" and "your queries" in res["metric"] and "top-1" in res["metric"]
    assert "not judged" in res["queries_note"]
    for r in res["ranking"]:
        lo, hi = r["retention_ci95"]
        assert lo <= r["retention"] <= hi
    assert res["ranking"][-1]["within_uncertainty"] is False  # truncation to 2 dims is far behind
    assert res["winner"] is res["ranking"][0]
    graded = rank_candidates(X, 8, queries=Q, configs=["sq:2"], reference="graded")
    assert "graded" in graded["metric"]
    none = rank_candidates(X, 8, configs=["sq:2"])
    assert "documents stand in" in none["queries_note"]


def test_cli_recommend_with_queries_and_no_qrels(tmp_path):
    from embcompress.cli.main import app

    X, _ = clustered()
    write_parquet(tmp_path / "docs.parquet", X)
    write_parquet(tmp_path / "queries.parquet", X[:30])
    r = CliRunner().invoke(
        app,
        [
            "recommend",
            str(tmp_path / "docs.parquet"),
            str(tmp_path / "model"),
            "--budget",
            "8",
            "--queries",
            str(tmp_path / "queries.parquet"),
        ],
    )
    assert r.exit_code == 0, r.output
    assert "not judged" in r.output and (tmp_path / "model" / "config.json").exists()
    assert f"applying it to the input's {len(X):,} rows takes about" in r.output
    bad = CliRunner().invoke(
        app,
        [
            "recommend",
            str(tmp_path / "docs.parquet"),
            str(tmp_path / "m2"),
            "--budget",
            "8",
            "--queries",
            str(tmp_path / "queries.parquet"),
            "--reference",
            "best",
        ],
    )
    assert bad.exit_code == 1 and "reference must be one of top1, graded, recall" in bad.output
    assert not (tmp_path / "m2").exists()


def test_without_qrels_codes_are_ranked_by_float_search_top_result_and_plans_by_its_top_ten(tmp_path):
    """The default references (docs/decisions/0007, 0010): top1 for recommend --budget, the top 10 graded for
    recommend --ram-budget; --reference overrides either."""
    import json

    from embcompress.cli.main import app

    X, _ = clustered()
    write_parquet(tmp_path / "docs.parquet", X)
    write_parquet(tmp_path / "queries.parquet", X[:30])
    common = [str(tmp_path / "docs.parquet"), "--queries", str(tmp_path / "queries.parquet"), "--json"]

    def metric(out, *args):
        r = CliRunner().invoke(app, ["recommend", common[0], str(tmp_path / out), *common[1:], *args])
        assert r.exit_code == 0, r.output
        return json.loads(r.output[r.output.index("{") :])["metric"]

    assert "top-1" in metric("codes", "--budget", "8")
    assert "graded" in metric("plan", "--ram-budget", "8", "--disk-budget", "32")
    assert "top-1" in metric("plan-top1", "--ram-budget", "8", "--disk-budget", "32", "--reference", "top1")


def test_recommend_estimates_the_apply_and_names_a_much_faster_code_close_behind():
    from embcompress.report.recommend import apply_estimate

    def row(config, retention, rate, **marks):
        return {
            "config": config,
            "label": config,
            "retention": retention,
            "encode_rows_per_second": rate,
            "too_slow": None,
            "not_servable": None,
            "screened_out": None,
            **marks,
        }

    win = row("rq:48:beam=4", 0.960, 2_500.0)
    ranking = [
        win,
        row("sq:1", 0.955, 400_000.0),
        row("binary", 0.949, 900_000.0),
        row("opq:48", 0.958, 5_000.0),
        row("itq", 0.957, 800_000.0, not_servable="usearch cannot hold it"),
    ]
    est = apply_estimate({"winner": win, "ranking": ranking}, 10_000_000)
    assert est["rows"] == 10_000_000 and est["seconds"] == pytest.approx(4_000.0)
    # binary is 1.1 points behind, opq only 2x faster, itq cannot win: sq:1 is named
    assert est["faster"]["config"] == "sq:1" and est["faster"]["seconds"] == pytest.approx(25.0)
    assert apply_estimate({"winner": win, "ranking": [win, ranking[2], ranking[3]]}, 100)["faster"] is None


def test_recommend_serve_ranks_every_candidate_but_only_a_servable_one_wins():
    from embcompress.report.recommend import rank_candidates
    from embcompress.search.ann import serve_targets

    X, _ = clustered()
    configs = ["sq:2", "rabitq:2", "binary@asym", "pca:16+int8"]
    free = rank_candidates(X, 16, configs=configs, folds=1)
    served = rank_candidates(X, 16, configs=configs, folds=1, serve="usearch")
    assert [r["config"] for r in served["ranking"]] == [r["config"] for r in free["ranking"]]
    by = {r["config"]: r for r in served["ranking"]}
    assert by["sq:2"]["not_servable"] == "usearch cannot hold sq:2 codes" and by["rabitq:2"]["serves"] == []
    assert by["binary@asym"]["not_servable"] is None and "usearch" in by["binary@asym"]["serves"]
    assert served["winner"]["config"] in ("binary@asym", "pca:16+int8")
    assert serve_targets(from_spec("opq:8"), "codes") == ("faiss",)
    assert serve_targets(from_spec("pca:16+pq:8"), "codes") == ()  # a chain's codes: no faiss type holds them
    with pytest.raises(InputError, match="serve must be one of faiss, usearch, lancedb"):
        rank_candidates(X, 16, configs=configs, serve="milvus")
    with pytest.raises(InputError, match="servable by lancedb"):
        rank_candidates(X, 16, configs=["sq:2", "pca:16+int8"], folds=1, serve="lancedb")


def test_report_opens_with_the_best_code_per_ratio_and_labels_name_their_own_size():
    X, _ = clustered(n=400, d=32)
    rep = build_report(X, widths=[8], methods=["pca"], code_families=["sq", "binary"])
    codes = [r for r in rep["rows"] if r.get("ratio")]
    assert codes and {r["ratio"] for r in codes} <= {16, 32, 64, 128}
    for r in codes:  # the label says the code's own size, not the budget's
        assert r["config"].endswith(f"({4 * 32 / r['bytes_per_vector']:.0f}x)"), r["config"]
    best = rep["summary"]["best_per_ratio"]
    assert [b["ratio"] for b in best] == sorted({r["ratio"] for r in codes})
    for b in best:
        group = [r for r in codes if r["ratio"] == b["ratio"]]
        assert b["retention"] == max(r["retention"] for r in group)
        assert {"fit_seconds", "encode_rows_per_second", "retention_in_sample"} <= set(b)
        lo, hi = b["retention_ci95"]
        assert lo <= b["retention"] <= hi
    assert not any("per_query" in r for r in rep["rows"])  # used for the intervals, not written out
    page = render_html(rep)
    assert page.index("The answer: the best code per size") < page.index("All configurations")
    assert page.count('<tr class="group">') == len(best)


def test_best_per_ratio_names_the_codes_within_the_queries_noise():
    """A code whose per-query figures are the leader's up to noise is named beside it; one far
    behind is not; each code of the ratio gets its bootstrap interval; kNN accuracy (no per-query
    figures) names none."""
    from embcompress.report.grid import best_per_ratio
    from embcompress.report.html import _answer

    rng = np.random.default_rng(0)
    lead = rng.uniform(0, 1, 2000)

    def row(config, per, ratio=32):
        return {
            "config": config,
            "ratio": ratio,
            "retention": 0.9 if per is None else float(per.mean()) / 0.5,
            "bytes_per_vector": 48,
            "retention_in_sample": None,
            "fit_seconds": 1.0,
            "encode_rows_per_second": 1e5,
        }

    near = np.clip(lead + rng.normal(0, 0.05, 2000) - 0.001, 0, 1)
    far = lead * 0.8
    per = {"float32": None, "a": lead, "b": near, "c": far, "d": lead * 0.5}
    rows = [
        {"config": "float32", "ratio": None, "retention": 1.0},
        *(row(c, per[c]) for c in "abc"),
        row("d", per["d"], ratio=64),
    ]
    before = [dict(r) for r in rows]
    best, notes = best_per_ratio(rows, per, 0.5)
    assert [(b["ratio"], b["config"], b["within_uncertainty"]) for b in best] == [(32, "a", ["b"]), (64, "d", None)]
    assert all(len(notes[c]["retention_ci95"]) == 2 for c in "abcd") and "float32" not in notes
    assert notes["b"]["within_uncertainty"] and not notes["c"]["within_uncertainty"]
    assert rows == before  # the rows it read are left as they were
    assert "as good within the queries' noise" in _answer({"best_per_ratio": best})
    knn = [row("a", None), row("b", None)]
    assert best_per_ratio(knn, {}, 0.5)[0][0]["within_uncertainty"] is None


def test_recommend_screens_in_two_rounds_and_only_the_second_can_win(monkeypatch):
    from embcompress.report import recommend as rec

    X, _ = clustered(n=800, d=32)
    configs = ["sq:4", "sq:2", "binary@asym", "pca:16+sq:4", "pca:8+sq:4", "pca:4+sq:4", "pca:16+sq:2"]
    monkeypatch.setattr(rec, "SCREEN_MIN_ROWS", 50)  # the default (2,000 rows) needs a 16,000-row sample
    res = rec.rank_candidates(X, 16, configs=configs, screen=True)
    sc = res["screen"]
    assert sc["first_round_fit_rows"] == int(res["fit_rows"] * rec.SCREEN_SHARE) == 90
    assert sorted(sc["first_round"]) == sorted(configs) and len(sc["kept"]) == 3 and len(sc["cut"]) == 4
    assert set(sc["kept"]) | set(sc["cut"]) == set(configs)
    rows = {r["config"]: r for r in res["ranking"]}
    assert all(
        rows[c]["screened_out"].startswith("cut after the first round")
        and "fitted on 90 rows" in rows[c]["screened_out"]
        for c in sc["cut"]
    )
    assert all(rows[c]["screened_out"] is None for c in sc["kept"])
    # the first round measures unseen documents only; the second both
    assert all(rows[c]["retention_in_sample"] is None for c in sc["cut"])
    assert all(rows[c]["retention_in_sample"] is not None for c in sc["kept"])
    assert [r["config"] for r in res["ranking"]][: len(sc["kept"])] == sorted(
        sc["kept"], key=lambda c: -rows[c]["retention"]
    )
    assert res["winner"]["config"] in sc["kept"]
    assert sc["first_round_queries"] == 80  # the label-free queries (documents standing in), fewer than SCREEN_QUERIES
    monkeypatch.setattr(rec, "SCREEN_QUERIES", 30)
    fewer = rec.rank_candidates(X, 16, configs=configs, screen=True)
    assert fewer["screen"]["first_round_queries"] == 30 and fewer["winner"]["config"] == res["winner"]["config"]
    full = rec.rank_candidates(X, 16, configs=configs)  # the default: every candidate on all the rows
    assert full["screen"] is None and all(r["screened_out"] is None for r in full["ranking"])
    assert full["winner"]["config"] == res["winner"]["config"]  # a clear leader survives the first round
    assert rows[res["winner"]["config"]]["retention"] == pytest.approx(
        {r["config"]: r for r in full["ranking"]}[res["winner"]["config"]]["retention"]
    )


def test_recommend_stops_a_code_slow_to_fit_after_one_model_when_it_cannot_lead(monkeypatch):
    import embcompress.evaluation.race as race
    from embcompress.report import recommend as rec

    X, _ = clustered(n=800, d=32)
    configs = ["sq:4", "pca:2+sq:4", "pca:24+sq:4"]
    monkeypatch.setattr(race, "RACE_MIN_FIT_SECONDS", 0.0)  # every code counts as slow to fit
    fits = []
    from embcompress.evaluation.crossfit import FitCache

    real_fit = FitCache.fit
    monkeypatch.setattr(FitCache, "fit", lambda self, spec: fits.append((id(self), spec)) or real_fit(self, spec))
    res = rec.rank_candidates(X, 16, configs=configs)
    rows = {r["config"]: r for r in res["ranking"]}
    stopped = rows["pca:2+sq:4"]  # 2 of 32 dimensions: far below sq:4, the leader by then
    assert (
        stopped["screened_out"].startswith("stopped after one of its models (")
        and "below the leader" in stopped["screened_out"]
    )
    assert stopped["retention_in_sample"] is None and stopped["fitted"] == "one model of out-of-sample (2-fold)"
    assert len({cache for cache, spec in fits if spec == "pca:2+sq:4"}) == 1  # one model fitted, not two
    assert len({cache for cache, spec in fits if spec == "sq:4"}) == 2
    assert rows["sq:4"]["screened_out"] is None and res["winner"]["config"] != "pca:2+sq:4"
    assert res["ranking"][-1] is stopped  # cut rows rank last
    # a cost limit (or a target, or --serve) turns it off, as the leader may then be ineligible:
    # every code fitted twice and scored out-of-sample; the stopped ones were behind, and lower
    # out-of-sample than the one model's figure that stopped them
    full = rec.rank_candidates(X, 16, configs=configs, max_fit_seconds=1e6)
    both = {r["config"]: r for r in full["ranking"]}
    assert all(r["screened_out"] is None and r["retention_in_sample"] is not None for r in full["ranking"])
    assert full["winner"]["config"] == res["winner"]["config"] == "sq:4"
    cut = [c for c in configs if rows[c]["screened_out"]]
    assert cut and all(both[c]["retention"] <= rows[c]["retention"] < full["winner"]["retention"] for c in cut)


def test_race_stops_a_code_that_leads_only_on_its_fit_rows(monkeypatch):
    """A code that memorizes its fit rows (``pq:4``: 256 centroids per 8-dimensional slice, fitted
    on 600 rows) scores above the leader with half the documents its fit rows, and below it on
    documents new to it: the race's second test, on the first fold alone, stops it."""
    import embcompress.evaluation.race as race
    from embcompress.evaluation.configs import parse_config
    from embcompress.evaluation.crossfit import CrossFit
    from embcompress.evaluation.evaluate import run_configs
    from embcompress.evaluation.tasks import LabelFreeTask, QrelsTask
    from embcompress.report.recommend import _stopped_note

    X, _ = clustered(n=1200, d=32)
    rng = np.random.default_rng(1)
    Q = X + 0.3 * rng.standard_normal(X.shape).astype(np.float32) / np.sqrt(32)
    Q /= np.linalg.norm(Q, axis=1, keepdims=True)
    task = QrelsTask(Q, [f"q{i}" for i in range(len(X))], {f"q{i}": {str(i): 1} for i in range(len(X))})
    ids = [str(i) for i in range(len(X))]
    monkeypatch.setattr(race, "RACE_MIN_FIT_SECONDS", 0.0)  # every code counts as slow to fit
    full = {r["config"]: r for r in run_configs(X, task, ["sq:2", "pq:4"], doc_ids=ids)}
    raced = {r["config"]: r for r in run_configs(X, task, ["sq:2", "pq:4"], doc_ids=ids, race=True)}
    assert full["pq:4"]["score"] < full["sq:2"]["score"] < full["pq:4"]["score_in_sample"]  # out-of-sample it loses
    stopped = raced["pq:4"]
    assert stopped["stopped_early"] and stopped["race"]["test"] == "first fold"
    assert stopped["score"] >= raced["sq:2"]["score"]  # the first test alone would have let it go on
    assert (
        stopped["race"]["queries"] == 600 and stopped["race"]["difference"] + 2 * stopped["race"]["standard_error"] < 0
    )
    assert "on the documents that model had not seen" in _stopped_note(stopped)
    assert not raced["sq:2"]["stopped_early"] and raced["sq:2"]["race"] is None
    # without judgments the first fold's float search is the reference: every query is kept
    lf = race.gap_on_first_fold(
        parse_config("pq:4"), parse_config("sq:2"), LabelFreeTask(Q, 10, reference="top1"), ids, CrossFit(X, 2), 1.0
    )
    assert lf["queries"] == len(Q) and lf["difference"] < 0 < lf["standard_error"]
    # a code behind on its fit rows too is stopped by the first test, as before
    monkeypatch.setattr(race, "RACE_Z", 1e9)  # the second test can no longer stop anything
    again = {r["config"]: r for r in run_configs(X, task, ["sq:2", "pq:4"], doc_ids=ids, race=True)}
    assert not again["pq:4"]["stopped_early"] and again["pq:4"]["score"] == pytest.approx(full["pq:4"]["score"])


def test_task_on_part_keeps_the_queries_with_relevant_documents_there():
    from embcompress.evaluation.tasks import LabelFreeTask, QrelsTask

    Q = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)
    qrels = {"a": {"d0": 1}, "b": {"d1": 1, "d2": 2}, "c": {"d3": 0, "d1": 1}, "d": {"d3": 0}}
    sub = QrelsTask(Q, list("abcd"), qrels).on_part([f"d{i}" for i in range(4)], np.array([0, 2, 3]))
    assert sub.query_ids == ["a", "b"] and sub.qrels == {"a": {"d0": 1}, "b": {"d1": 1, "d2": 2}}
    np.testing.assert_array_equal(sub.queries, Q[:2])
    lf = LabelFreeTask(Q, 3, reference="top1").on_part(None, np.array([0]))
    assert lf is not None and len(lf.queries) == 4 and lf._reference is None  # its reference is searched anew


def test_fewer_queries_keeps_each_kept_querys_judgments():
    from embcompress.evaluation.tasks import LabelFreeTask, LabelTask, QrelsTask
    from embcompress.evaluation.tasks import fewer_queries

    Q = np.random.default_rng(0).standard_normal((50, 8)).astype(np.float32)
    qrels = {f"q{i}": {f"d{i}": 1, f"d{i + 1}": 2} for i in range(50)}
    sub = fewer_queries(QrelsTask(Q, [f"q{i}" for i in range(50)], qrels, 10), 20)
    assert len(sub.queries) == 20 and len(set(sub.query_ids)) == 20
    for q, row in zip(sub.query_ids, sub.queries):
        i = int(q[1:])
        np.testing.assert_array_equal(row, Q[i])
        assert sub.qrels[q] == qrels[q]
    assert set(sub.qrels) == set(sub.query_ids)
    free = fewer_queries(LabelFreeTask(Q, 10, reference="top1", source="queries"), 7)
    assert len(free.queries) == 7 and free.reference == "top1" and free.source == "queries"
    labels = LabelTask(np.arange(50) % 3)
    assert fewer_queries(labels, 5) is labels
    whole = QrelsTask(Q[:10], [f"q{i}" for i in range(10)], qrels)
    assert fewer_queries(whole, 20) is whole


def test_cli_recommend_prints_what_the_screen_cut_and_the_time(tmp_path, monkeypatch):
    from embcompress.report import recommend as rec
    from embcompress.cli.main import app

    monkeypatch.setattr(rec, "SCREEN_MIN_ROWS", 50)
    X, _ = clustered(n=800, d=32)
    write_parquet(tmp_path / "docs.parquet", X)
    r = CliRunner(env={"COLUMNS": "250"}).invoke(
        app, ["recommend", str(tmp_path / "docs.parquet"), str(tmp_path / "model"), "--budget", "8", "--screen"]
    )
    assert r.exit_code == 0, r.output
    out = " ".join(r.output.split())
    assert (
        "screened:" in out
        and "candidates fitted on 90 rows first; cut" in out
        and "(without --screen every candidate is)" in out
    )
    assert "cut after the first" in r.output and "ranked in" in out and "the winner fitted on all rows in" in out
    full = CliRunner(env={"COLUMNS": "250"}).invoke(
        app, ["recommend", str(tmp_path / "docs.parquet"), str(tmp_path / "m2"), "--budget", "8"]
    )
    assert full.exit_code == 0 and "screened:" not in full.output and "cut after" not in full.output
    # the ranking's note column is there where a candidate has a note (what the screen cut), and not otherwise
    assert (
        re.search(r"┃\s*note\s*┃", r.output)
        and not re.search(r"┃\s*note\s*┃", full.output)
        and "┃  ┃" not in full.output
    )
