"""The copy on disk scored as it is read (``DiskCopy.cosines``, the C kernel in ``embcompress.io._pread``):
the same cosines as decoding the rows to float32 and scoring them with numpy, for every kind of copy."""

from __future__ import annotations

import numpy as np
import pytest

import embcompress
from embcompress.core._util import normalize_rows
from embcompress.core.errors import FormatError
from embcompress.search import Index
from embcompress.search.index import float_rerank_scores
from embcompress.serving import copies as copies_mod
from embcompress.serving.copies import DiskCopy, drop_cache

needs_c = pytest.mark.skipif(copies_mod._pread is None, reason="the C reader is not built here")


def _copy(tmp_path, kind, n=700, d=45, seed=0):
    """A copy of ``kind`` on disk, the DiskCopy scoring it in C, and the float32 vectors it decodes to."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)).astype(np.float32)
    X[5] = 0  # a row of zeros scores 0, not nan
    if kind == "int8":
        model = embcompress.from_spec("int8").fit(X)
        rows, decode, affine = model.transform(X), model.decode, model.affine()
    else:
        rows, affine, decode = X.astype(kind), None, embcompress.serving.copies.copy_codec(kind)[1]
    np.save(tmp_path / "c.npy", rows)
    store = DiskCopy(tmp_path / "c.npy", decode, rows=n, dim=d, kind=kind, affine=affine)
    return store, decode(rows), rng


def _numpy_cosines(V, Q, rows):
    X = V[rows]  # (q, c, d)
    dots = np.einsum("qcd,qd->qc", X.astype(np.float64), Q.astype(np.float64))
    norms = np.sqrt(np.einsum("qcd,qcd->qc", X.astype(np.float64), X.astype(np.float64)))
    return np.divide(dots, norms, out=np.zeros_like(dots), where=norms > 0)


@needs_c
@pytest.mark.parametrize("kind", ["float32", "float16", "int8"])
def test_each_kind_of_copy_scores_as_its_decoded_vectors_do(tmp_path, kind, monkeypatch):
    store, V, rng = _copy(tmp_path, kind)
    Q = normalize_rows(rng.standard_normal((3, V.shape[1])).astype(np.float32))
    # any order, repeats, neighbouring runs longer than a read chunk, the zero row, the last row
    rows = np.stack([rng.permutation(700)[:300], np.r_[5, 5, 699, np.arange(0, 297)], rng.integers(0, 700, 300)])
    calls = []
    real = copies_mod._pread.cosines

    def spy(*args):
        calls.append(args[4])
        return real(*args)

    monkeypatch.setattr(copies_mod._pread, "cosines", spy)
    got = store.cosines(Q, rows)
    assert calls == [{"float32": "f", "float16": "h", "int8": "b"}[kind]] * 3  # scored in C, one call per query
    assert got.dtype == np.float32 and got.shape == (3, 300)
    np.testing.assert_allclose(got, _numpy_cosines(V, Q, rows), rtol=0, atol=2e-6)
    if kind != "int8":  # (int8 decodes zeros to the lower edge of their steps, not to zero)
        assert got[1, 0] == 0 and got[1, 1] == 0
    store.close()


@needs_c
def test_an_int8_copy_without_its_calibration_is_scored_from_decoded_rows(tmp_path, monkeypatch):
    store, V, rng = _copy(tmp_path, "int8")
    plain = DiskCopy(store.path, store._decode, rows=700, dim=45, kind="int8")  # no affine: decode, then numpy
    monkeypatch.setattr(copies_mod._pread, "cosines", None)  # would fail if called
    Q = normalize_rows(rng.standard_normal((2, 45)).astype(np.float32))
    rows = rng.integers(0, 700, (2, 50))
    assert plain.cosines(Q, rows) is None  # not scored in C: float_rerank_scores decodes get()'s rows instead
    np.testing.assert_allclose(float_rerank_scores(Q, rows, plain), _numpy_cosines(V, Q, rows), rtol=0, atol=2e-6)
    plain.close()
    store.close()


@needs_c
def test_a_plan_search_rescored_in_c_ranks_as_the_numpy_rescoring(tmp_path):
    store, V, rng = _copy(tmp_path, "int8", n=2000, d=48)
    first = embcompress.from_spec("binary").fit(V)
    index = Index(first.transform(V), compressor=first)
    Q = rng.standard_normal((20, 48)).astype(np.float32)
    got = index.search(Q, 10, rerank="float", candidates=200, originals=store)
    want = index.search(Q, 10, rerank="float", candidates=200, originals=V)  # ArrayStore: get() and numpy
    assert np.mean(got.rows == want.rows) > 0.99  # equal but for ties broken by the last bit
    np.testing.assert_allclose(got.scores, want.scores, atol=2e-6)
    store.close()


@needs_c
def test_a_copy_cut_while_scored_is_a_short_read(tmp_path):
    store, V, rng = _copy(tmp_path, "float32")
    with open(store.path, "r+b") as f:
        f.truncate(store.offset + 400 * store.row_bytes)
    Q = normalize_rows(rng.standard_normal((1, 45)).astype(np.float32))
    assert store.cosines(Q, np.array([[1, 399]])).shape == (1, 2)
    with pytest.raises(FormatError, match="short read at row 650"):
        store.cosines(Q, np.array([[2, 650, 651]]))
    store.close()


@needs_c
def test_the_kernel_refuses_buffers_of_the_wrong_shape(tmp_path):
    store, V, _ = _copy(tmp_path, "float32")
    q, out = np.zeros(45, np.float32), np.empty(2, np.float32)
    rows, empty = np.array([1, 2]), np.empty(0, np.float32)
    cos = copies_mod._pread.cosines
    with pytest.raises(ValueError, match="kind must be"):
        cos(store._fd, rows, store.row_bytes, store.offset, "x", q, empty, empty, out)
    with pytest.raises(ValueError, match="rows int64"):
        cos(store._fd, rows, store.row_bytes, store.offset, "f", q[:44], empty, empty, out)  # width != row
    with pytest.raises(ValueError, match="rows int64"):
        cos(store._fd, rows, store.row_bytes, store.offset, "b", q, empty, empty, out)  # int8 without a, b
    store.close()


@needs_c
def test_rows_read_cold_score_as_rows_read_warm(tmp_path):
    """A copy dropped from the page cache: the runs not in memory are deferred to a second pass (where the
    platform lets a read ask the page cache only); every row is still scored, to the same value."""
    store, V, rng = _copy(tmp_path, "float16", n=5000, d=64)
    Q = normalize_rows(rng.standard_normal((2, 64)).astype(np.float32))
    rows = np.stack([rng.permutation(5000)[:800], rng.permutation(5000)[:800]])
    warm = store.cosines(Q, rows)
    drop_cache(store.path)
    cold = store.cosines(Q, rows)
    assert np.array_equal(cold, warm) and np.isfinite(cold).all()
    np.testing.assert_allclose(cold, _numpy_cosines(V, Q, rows), rtol=0, atol=2e-6)
    store.close()


@needs_c
def test_rows_fetched_cold_are_the_rows_fetched_warm(tmp_path):
    """``get`` (the rows themselves, as an int8r copy and an uncalibrated int8 copy read them) defers the runs
    not in the page cache to a second pass as the scoring does: the same bytes in the asked order, repeats
    included, and a file cut short is still a short read."""
    store, V, rng = _copy(tmp_path, "float32", n=5000, d=64)
    rows = np.r_[rng.permutation(5000)[:900], 17, 17, 4999, 0]
    warm = store.get(rows)
    drop_cache(store.path)
    assert np.array_equal(store.get(rows), warm) and np.array_equal(warm, V[rows])
    with open(store.path, "r+b") as f:
        f.truncate(store.offset + 4000 * store.row_bytes)
    drop_cache(store.path)
    with pytest.raises(FormatError, match="short read at row 4"):
        store.get(np.r_[3, 10, 4500, 4999])
    store.close()


def _spy_maps(monkeypatch, name):
    """The map argument of each call of the C reader's ``name`` (None, or the mapped file), as booleans."""
    maps, real = [], getattr(copies_mod._pread, name)
    at = {"cosines": 9, "read_rows": 5}[name]

    def spy(*args):
        maps.append(args[at] is not None)
        return real(*args)

    monkeypatch.setattr(copies_mod._pread, name, spy)
    return maps


@needs_c
@pytest.mark.parametrize("kind", ["float32", "float16", "int8"])
def test_a_copy_found_in_memory_is_read_from_its_map_next_to_the_same_scores(tmp_path, kind, monkeypatch):
    """Once a query found all its rows in the page cache, the next reads them through the memory map (no system
    call a row): the same scores and rows. drop_cache lets the map go and the next query reads again."""
    store, V, rng = _copy(tmp_path, kind, n=3000, d=40)
    assert store._map is not None  # 3000 rows: well under MAP_LIMIT
    Q = normalize_rows(rng.standard_normal((2, 40)).astype(np.float32))
    rows = np.stack([rng.permutation(3000)[:500], np.r_[2999, 5, 5, rng.integers(0, 3000, 497)]])
    maps = _spy_maps(monkeypatch, "cosines")
    first, second = store.cosines(Q, rows), store.cosines(Q, rows)
    assert maps == [False, True, True, True]  # the first query read its rows; it found them all in memory
    assert np.array_equal(first, second)
    np.testing.assert_allclose(second, _numpy_cosines(V, Q, rows), rtol=0, atol=2e-6)
    got = _spy_maps(monkeypatch, "read_rows")
    assert np.array_equal(store.get(rows[1]), V[rows[1]]) and got == [True]
    store.drop_cache()
    assert np.array_equal(store.cosines(Q[:1], rows[:1]), first[:1]) and maps[-1] is False
    store.close()


@needs_c
def test_a_copy_is_mapped_only_within_its_limit(tmp_path):
    """The map is what a copy may add to the server's resident memory: none over ``map_limit``."""
    store, V, _ = _copy(tmp_path, "float32", n=1000, d=16)
    size = store.path.stat().st_size
    for limit, mapped in ((0, False), (size - 1, False), (size, True)):
        other = DiskCopy(store.path, store._decode, rows=1000, dim=16, kind="float32", map_limit=limit)
        assert (other._map is not None) is mapped
        assert np.array_equal(other.get(np.arange(0, 1000, 7)), V[::7]) and np.array_equal(
            other.get(np.arange(0, 1000, 7)), V[::7]
        )  # twice: the second read is the mapped one, where there is a map
        other.close()
    store.close()


@needs_c
def test_the_kernel_reads_from_the_map_given_only_where_it_holds_every_row(tmp_path):
    """A map that holds the rows asked for is what is scored (here one of other rows than the file's, to see
    which was read); one too short for the last row asked is not used, and the file is read."""
    store, V, rng = _copy(tmp_path, "float32", n=200, d=8)
    W = rng.standard_normal((200, 8)).astype(np.float32)
    header = store.path.read_bytes()[: store.offset]
    fake = header + W.tobytes()
    q, e = normalize_rows(rng.standard_normal((1, 8)).astype(np.float32))[0], np.empty(0, np.float32)
    rows = np.array([0, 3, 4, 199])
    want = {id(W): _numpy_cosines(W, q[None], rows[None])[0], id(V): _numpy_cosines(V, q[None], rows[None])[0]}
    cos = copies_mod._pread.cosines
    for given, source in ((fake, W), (fake[:-4], V), (None, V)):
        out = np.empty(4, np.float32)
        assert cos(store._fd, rows, store.row_bytes, store.offset, "f", q, e, e, out, given) == (-1, False)
        np.testing.assert_allclose(out, want[id(source)], rtol=0, atol=2e-6)
        buf = np.empty((4, 8), np.float32)
        assert copies_mod._pread.read_rows(store._fd, rows, store.row_bytes, store.offset, buf, given)[0] == -1
        assert np.array_equal(buf, source[rows])
    store.close()


@needs_c
def test_a_copy_cut_while_read_through_its_map_is_a_short_read_not_a_crash(tmp_path):
    store, V, rng = _copy(tmp_path, "float32", n=1000, d=16)
    rows = np.arange(0, 1000, 3)
    store.get(rows), store.get(rows)  # found in memory: the next read would be through the map
    assert store._warm
    with open(store.path, "r+b") as f:
        f.truncate(store.offset + 400 * store.row_bytes)
    assert np.array_equal(store.get(np.array([1, 399])), V[[1, 399]])  # read, not mapped: the file is not whole
    with pytest.raises(FormatError, match="short read at row 650"):
        store.get(np.array([2, 650, 651]))
    Q = normalize_rows(rng.standard_normal((1, 16)).astype(np.float32))
    with pytest.raises(FormatError, match="short read at row 999"):
        store.cosines(Q, np.array([[999, 3]]))
    store.close()


@needs_c
def test_an_int8_residual_copy_on_disk_is_scored_in_c_as_numpy_scores_it(tmp_path, monkeypatch):
    """An int8r copy's rows scored by the kernel ('r': the first stage's reconstruction dots plus each row's
    scale times its int8 values, over its norm) give numpy's cosines, through the reads and through the map."""
    from embcompress.serving import residual
    from embcompress.serving.copies import open_copy

    rng = np.random.default_rng(3)
    X = normalize_rows(rng.standard_normal((1500, 32)).astype(np.float32))
    first = embcompress.from_spec("pq:8:nbits=4").fit(X)
    index = Index(first.transform(X), compressor=first)
    stored = residual.encode_index(index, X)
    stored[7, :32] = 0
    stored[7, 32:] = np.zeros(2, np.float32).view(np.int8)  # a row of norm 0 scores 0
    np.save(tmp_path / "r.npy", stored)
    disk = open_copy(tmp_path / "r.npy", "int8r", rows=1500, dim=32)
    fused, plain = residual.ResidualCopy(disk.get, index, source=disk), residual.ResidualCopy.of_array(stored, index)
    Q = normalize_rows(rng.standard_normal((3, 32)).astype(np.float32))
    rows = np.stack([rng.permutation(1500)[:400], np.r_[7, 7, 1499, rng.integers(0, 1500, 397)], np.arange(400)])
    kinds = []
    real = copies_mod._pread.cosines
    monkeypatch.setattr(copies_mod._pread, "cosines", lambda *a: kinds.append(a[4]) or real(*a))
    want = plain.cosines(Q, rows)
    for _ in range(2):  # read, then mapped
        np.testing.assert_allclose(fused.cosines(Q, rows), want, rtol=0, atol=3e-6)
    assert kinds == ["r"] * 6 and want[1, 0] == 0
    got = index.search(Q, 10, rerank="float", candidates=300, originals=fused)
    assert np.array_equal(got.rows, index.search(Q, 10, rerank="float", candidates=300, originals=plain).rows)
    disk.close()


@needs_c
def test_recommends_latency_maps_the_samples_copy_only_where_the_whole_inputs_would_be(tmp_path):
    """The rescoring time recommend reports is measured on the sample's copy as the whole input's copy would be
    read: through the map where that copy is within MAP_LIMIT, with a system call a row where it is not."""
    from embcompress.report.latency import LatencyBench

    rng = np.random.default_rng(0)
    docs = normalize_rows(rng.standard_normal((300, 16)).astype(np.float32))
    for total, mapped in ((300, True), (10**9, False)):
        bench = LatencyBench(docs, docs[:5], total, 10, tmp_path)
        store = bench.store("int8", "pq:4")
        assert (store._map is not None) is mapped
        bench.close()
