"""The local engine on several threads: row groups decoded and compressed on workers, delivered in
order. The output bytes, the fitted state and the errors must not depend on the thread count."""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from embcompress import InputError, from_spec
from embcompress.core._parallel import ordered_units
from embcompress.io import open_vectors, read_all
from embcompress.io import writers
from embcompress.search.stores import ParquetStore
from embcompress.engines.local import compress_file, fit_and_compress, fit_file

from conftest import make_vectors, write_parquet

N, D = 2000, 32


@pytest.fixture
def multi(tmp_path):
    """2,000 rows in 16 row groups of 128 (the last shorter), string ids and a kept column."""
    X = make_vectors(N, D, seed=3)
    return write_parquet(tmp_path / "multi.parquet", X, extra={"lang": ["en", "de"] * (N // 2)}, row_group_size=128), X


def reader_threads_alive() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("embcompress-reader")]


def wait_for_no_readers(timeout: float = 5.0) -> list[str]:
    """Reader threads still alive after ``timeout``. A reader whose consumer was abandoned without
    closing stops when the generator is collected, so collect first (a traceback that pytest keeps
    can hold a frame, and with it a generator, of an earlier test)."""
    end = time.time() + timeout
    gc.collect()
    while reader_threads_alive() and time.time() < end:
        time.sleep(0.02)
        gc.collect()
    return reader_threads_alive()


# rq:4 and opq:4 encode in faiss, whose OpenMP team each worker thread sizes to its share of the cores
@pytest.mark.parametrize(
    "spec", ["binary", "int8", "truncate:16", "pca:8+binary", "sq:4", "itq+binary", "rq:4:nbits=4", "opq:4:nbits=4"]
)
@pytest.mark.parametrize("suffix", [".parquet", ".npy"])
def test_same_bytes_for_1_2_and_4_threads(tmp_path, multi, spec, suffix):
    path, _ = multi
    outputs = []
    for threads in (1, 2, 4):
        out = tmp_path / f"out{threads}{suffix}"
        fit_and_compress(
            from_spec(spec),
            path,
            out,
            keep_columns=["lang"] if suffix == ".parquet" else (),
            batch_size=50,
            threads=threads,
        )
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1] == outputs[2]
    if suffix == ".parquet":  # and the rows are in file order
        codes, ids = read_all(tmp_path / "out4.parquet", codes=None)
        assert ids == [f"doc{i}" for i in range(N)]


@pytest.mark.parametrize("spec", ["pca:8", "int8", "binary:threshold=mean", "binary", "itq+binary", "pca:12+sq:2"])
def test_fitted_state_does_not_depend_on_threads(multi, spec):
    """Streamed statistics (PCA covariance, int8 ranges, means, 1-bit levels) and reservoir
    samples (ITQ, scalar levels) see the same batches in the same order on any thread count."""
    path, _ = multi
    fits = [fit_file(from_spec(spec), path, batch_size=100, threads=t) for t in (1, 2, 4)]
    for other in fits[1:]:
        (sa, a), (sb, b) = fits[0]._get_state(), other._get_state()
        assert sa == sb and a.keys() == b.keys() and a
        for name in a:
            np.testing.assert_allclose(
                np.asarray(a[name], dtype=np.float64),
                np.asarray(b[name], dtype=np.float64),
                rtol=1e-6,
                atol=1e-7,
                err_msg=f"{spec}: {name}",
            )


@pytest.mark.parametrize("spec", ["int8", "binary:threshold=mean", "rabitq", "binary"])
def test_batch_statistics_on_the_workers_equal_the_sequential_fit(multi, spec, monkeypatch):
    """int8's ranges, the means and binary's level sums are computed per batch on the reader's
    workers and merged in file order: exactly the state of the sequential fit over the same
    batches (binary's levels: over its first fit_rows rows, here cut inside a batch)."""
    from embcompress.compressors import binary

    monkeypatch.setattr(binary, "LEVEL_ROWS", 1234)
    import embcompress.engines.local as stream

    path, X = multi
    used = []
    real = stream._fit_from_batch_stats
    monkeypatch.setattr(stream, "_fit_from_batch_stats", lambda *a: used.append(1) or real(*a))
    want = from_spec(spec).fit_batches([b.vectors for b in open_vectors(path).batches(100, threads=1)])
    for threads in (1, 3):
        got = fit_file(from_spec(spec), path, batch_size=100, threads=threads)
        (sa, a), (sb, b) = want._get_state(), got._get_state()
        assert sa == sb and a.keys() == b.keys()
        for name in a:
            np.testing.assert_array_equal(a[name], b[name], err_msg=f"{spec}: {name}")
    assert len(used) == 2
    bad = X.copy()
    bad[1190, 5] = np.nan  # in the fourth batch of row group 9 (rows 1152..1279), within binary's 1,234 rows
    bad_path = write_parquet(path.parent / "nan.parquet", bad, row_group_size=128)
    with pytest.raises(InputError, match="row group 9: column 'embedding' row 1190 has a non-finite value"):
        fit_file(from_spec(spec), bad_path, batch_size=10, threads=2)


def test_batch_offsets_do_not_depend_on_what_a_transform_returns(multi):
    path, _ = multi
    src = open_vectors(path)
    plain = [b.offset for b in src.batches(50, threads=1)]
    for threads in (1, 3):
        assert [
            b.offset for b in src.batches(50, threads=threads, transform=lambda X, offset: (len(X), offset))
        ] == plain
        assert all(
            b.vectors[1] == b.offset for b in src.batches(50, threads=threads, transform=lambda X, o: (len(X), o))
        )


def test_npy_input_same_codes_for_any_threads(tmp_path, multi):
    _, X = multi
    src = tmp_path / "x.npy"
    np.save(src, X)
    comp = fit_file(from_spec("pca:8+binary"), src, threads=1)
    outs = []
    for threads in (1, 3):
        out = tmp_path / f"o{threads}.npy"
        compress_file(comp, src, out, batch_size=30, threads=threads)
        outs.append(np.load(out))
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_array_equal(outs[0], comp.transform(X))


def test_single_row_group_file_works_on_one_reader(tmp_path):
    X = make_vectors(700, D, seed=5)
    path = write_parquet(tmp_path / "one.parquet", X)  # one row group
    assert open_vectors(path).num_row_groups == 1
    comp = fit_file(from_spec("binary"), path)
    compress_file(comp, path, tmp_path / "a.parquet", batch_size=64, threads=4)
    compress_file(comp, path, tmp_path / "b.parquet", batch_size=64, threads=1)
    assert (tmp_path / "a.parquet").read_bytes() == (tmp_path / "b.parquet").read_bytes()
    codes, _ = read_all(tmp_path / "a.parquet", codes=True)
    np.testing.assert_array_equal(codes, comp.transform(X))


def test_look_ahead_is_bounded_by_the_window():
    started, taken = [], []

    def unit(i):
        def run(local):
            started.append(i)
            yield from range(i * 10, i * 10 + 3)

        return run

    it = ordered_units([unit(i) for i in range(50)], threads=3, window=4)
    for _ in range(7):  # into the third unit
        taken.append(next(it))
    time.sleep(0.2)
    assert taken == [0, 1, 2, 10, 11, 12, 20]
    assert max(started) <= 2 + 4  # never more than `window` units beyond the one being consumed
    assert taken + list(it) == [x for i in range(50) for x in range(i * 10, i * 10 + 3)]
    assert wait_for_no_readers() == []


def test_errors_are_raised_in_unit_order_whatever_the_timing():
    """Unit 3 fails at once; unit 1 fails after a delay, and unit 0 is slow: the consumer still
    gets every item of unit 0 and of unit 1 before its error, and unit 1's error, not unit 3's."""

    def unit(i):
        def run(local):
            if i == 0:
                time.sleep(0.3)
            yield from range(i * 10, i * 10 + 3)
            if i == 1:
                time.sleep(0.2)
                raise ValueError("unit 1")
            if i == 3:
                raise ValueError("unit 3")

        return run

    taken = []
    with pytest.raises(ValueError, match="unit 1"):
        for x in ordered_units([unit(i) for i in range(6)], threads=4, window=6):
            taken.append(x)
    assert taken == [0, 1, 2, 10, 11, 12]
    assert wait_for_no_readers() == []


def test_max_rows_decodes_only_the_row_groups_needed(multi, monkeypatch):
    path, _ = multi
    src = open_vectors(path)
    read = []
    original = type(src)._read_group

    def spy(self, local, *, g, **kw):
        read.append(g)
        return original(self, local, g=g, **kw)

    monkeypatch.setattr(type(src), "_read_group", spy)
    rows = sum(len(b.vectors) for b in src.batches(100, threads=2, max_rows=300))
    assert sorted(read) == [0, 1, 2] and rows == 3 * 128


def test_bad_row_in_a_workers_row_group_names_file_group_and_row(tmp_path):
    X = make_vectors(N, D, seed=4)
    X[1500, 7] = np.nan  # row group 11 (rows 1408..1535)
    path = write_parquet(tmp_path / "bad.parquet", X, row_group_size=128)
    out = tmp_path / "out.parquet"
    comp = fit_file(from_spec("binary"), path, max_rows=100)
    for threads in (1, 4):
        with pytest.raises(InputError) as e:
            compress_file(comp, path, out, threads=threads)
        msg = str(e.value)
        assert str(path) in msg and "row group 11" in msg and "row 1500" in msg, msg
        assert not out.exists() and os.listdir(tmp_path) == ["bad.parquet"]
        assert wait_for_no_readers() == []
    with pytest.raises(InputError, match="row group 11.*row 1500"):
        fit_file(from_spec("int8"), path, threads=4)


@pytest.mark.parametrize("fault", [KeyboardInterrupt, OSError(28, "No space left on device")])
def test_interrupt_or_full_disk_stops_every_worker_and_leaves_nothing(tmp_path, multi, monkeypatch, fault):
    path, _ = multi
    out = tmp_path / "codes.parquet"
    comp = fit_file(from_spec("binary"), path, max_rows=100)
    assert wait_for_no_readers() == []  # a clean start: the workers counted below are this run's
    calls, alive = [], []
    real_write = writers.VectorWriter.write

    def failing_write(self, codes, carried=None):
        calls.append(len(codes))
        if len(calls) == 3:
            alive.extend(reader_threads_alive())
            raise fault
        return real_write(self, codes, carried)

    monkeypatch.setattr(writers.VectorWriter, "write", failing_write)
    expected = KeyboardInterrupt if fault is KeyboardInterrupt else OSError
    with pytest.raises(expected):
        compress_file(comp, path, out, batch_size=20, threads=4)
    assert len(alive) == 4  # the workers were running when the write failed
    assert sorted(os.listdir(tmp_path)) == ["multi.parquet"]  # no output, no temp file
    assert wait_for_no_readers() == []


def test_sigterm_stops_the_cli_with_143_and_removes_the_temp_file(tmp_path):
    X = make_vectors(60_000, 64, seed=6)
    path = write_parquet(tmp_path / "big.parquet", X, ids=False, row_group_size=2000)
    out = tmp_path / "codes.parquet"
    # batches of 1 row make the run long enough to be stopped half-way
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "embcompress.cli",
            "binarize",
            str(path),
            str(out),
            "--batch-size",
            "1",
            "--threads",
            "2",
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.time() + 60
    while time.time() < deadline and not any(n.startswith(".codes.parquet.tmp-") for n in os.listdir(tmp_path)):
        time.sleep(0.05)
    assert any(n.startswith(".codes.parquet.tmp-") for n in os.listdir(tmp_path)), "the run never started writing"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert "terminated" in err and "Traceback" not in err
    assert sorted(os.listdir(tmp_path)) == ["big.parquet"]


def test_parquet_originals_decode_row_groups_on_several_threads(tmp_path, multi):
    path, X = multi
    rng = np.random.default_rng(0)
    rows = rng.integers(0, N, size=(64, 50))
    results = []
    for threads in (1, 4):
        store = ParquetStore(path)
        out = np.empty((64, 50, D), dtype=np.float32)

        def block(i, store=store, out=out):
            out[i] = store.get(rows[i])

        ts = [threading.Thread(target=lambda k=k: [block(i) for i in range(k, 64, threads)]) for k in range(threads)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        results.append(out)
        assert store.decoded_groups == 16  # each row group decoded once, however many threads asked
    np.testing.assert_array_equal(results[0], results[1])
    np.testing.assert_array_equal(results[0], X[rows])


def test_search_with_parquet_originals_same_for_any_threads(tmp_path, multi):
    from embcompress.search.files import search_files

    path, X = multi
    codes = tmp_path / "codes.parquet"
    fit_and_compress(from_spec("binary"), path, codes)
    q = tmp_path / "q.parquet"
    write_parquet(q, make_vectors(40, D, seed=9))
    outs = []
    for threads in (1, 4):
        o = tmp_path / f"r{threads}.parquet"
        search_files(codes, q, o, k=5, rerank="float", originals=path, threads=threads)
        outs.append(o.read_bytes())
    assert outs[0] == outs[1]


def test_threads_must_be_positive(multi):
    path, _ = multi
    with pytest.raises(InputError, match="threads must be at least 1"):
        fit_file(from_spec("int8"), path, threads=0)


def test_output_bytes_do_not_depend_on_the_batch_size(tmp_path, multi, monkeypatch):
    """Row groups of the output are cut by rows from the output's width, not by input batches."""
    from embcompress.io import writers as w

    monkeypatch.setattr(w, "ROW_GROUP_BYTES", 4096)  # several output row groups from 2,000 rows
    path, _ = multi
    comp = fit_file(from_spec("binary"), path)
    outs = []
    for bs in (7, 50, 333, 2000):
        out = tmp_path / f"o{bs}.parquet"
        compress_file(comp, path, out, batch_size=bs, keep_columns=["lang"])
        outs.append(out.read_bytes())
    assert len(set(outs)) == 1
    import pyarrow.parquet as pq

    assert pq.ParquetFile(tmp_path / "o7.parquet").num_row_groups == 2  # 2,000 rows in groups of 1,024


def _blas_threads() -> int:
    """numpy's BLAS (the one numpy's matrix products call)."""
    from threadpoolctl import threadpool_info

    libs = [lib for lib in threadpool_info() if lib["user_api"] == "blas" and "numpy" in lib["filepath"]]
    return libs[0]["num_threads"] if libs else 1


def test_workers_run_blas_on_one_thread_and_the_limit_is_restored(monkeypatch):
    """Inside map_rows' (for a function that calls BLAS) and ordered_units' workers numpy's BLAS
    runs one thread per call, not a team per worker; afterwards the limit is what it was."""
    from threadpoolctl import threadpool_limits

    from embcompress.core import _parallel

    with threadpool_limits(2, user_api="blas"):
        if _blas_threads() < 2:
            pytest.skip("no BLAS with a thread count to set")
        monkeypatch.setattr(_parallel, "num_threads", lambda: 2)
        seen = []

        def fn(part):
            seen.append(_blas_threads())
            return part

        X = np.zeros((2 * _parallel.MIN_ROWS_PER_THREAD, 2), np.float32)
        _parallel.map_rows(fn, X, np.empty_like(X), blas=True)
        untouched = []
        _parallel.map_rows(lambda part: untouched.append(_blas_threads()) or part, X, np.empty_like(X))
        assert untouched == [2, 2]  # a function without BLAS inside: no limit
        units = [lambda local: iter([_blas_threads()]) for _ in range(4)]
        seen += list(ordered_units(units, threads=2, window=2))
        assert seen and set(seen) == {1}, seen
        assert _blas_threads() == 2  # restored
        single = list(ordered_units(units[:1], threads=1, window=1))  # one worker: BLAS keeps its team
        assert single == [2]
