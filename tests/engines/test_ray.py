"""--engine ray: Ray Data reads and compresses on a local Ray of 2 workers; the output must be
byte-identical to the local engine's, and a fit's state identical."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

ray = pytest.importorskip("ray")

from embcompress import InputError, from_spec  # noqa: E402
from embcompress.engines.ray import RayEngine, connect  # noqa: E402
from embcompress.engines.local import fit_and_compress, fit_file  # noqa: E402

from conftest import make_vectors, s3_objects, write_parquet  # noqa: E402

RELS = ["part=a/0.parquet", "part=b/0.parquet", "part=b/1.parquet"]


@pytest.fixture(scope="module")
def local_ray():
    connect(num_cpus=2)  # a local Ray with 2 worker processes' worth of CPUs
    yield RayEngine()
    ray.shutdown()


@pytest.fixture
def shards(tmp_path):
    X = make_vectors(1500, 48, seed=21)
    root = tmp_path / "ds"
    for rel, (a, b) in zip(RELS, [(0, 400), (400, 1000), (1000, 1500)]):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        write_parquet(root / rel, X[a:b], extra={"tag": [f"t{i}" for i in range(a, b)]}, row_group_size=128)
    return root


@pytest.mark.parametrize("spec", ["pca:16+binary", "int8", "truncate:24"])
def test_ray_output_is_byte_identical_to_the_local_engine(tmp_path, shards, local_ray, spec):
    """The same fitted compressor writes the same bytes on either engine (a chain fitted on the
    cluster has the local fit's state to float tolerance, not bit for bit: see below)."""
    comp = fit_file(from_spec(spec), shards)
    fit_and_compress(comp, shards, tmp_path / "local", keep_columns=["tag"], fit=False)
    fit_and_compress(comp, shards, tmp_path / "ray", keep_columns=["tag"], engine=local_ray, fit=False)
    for rel in RELS:
        assert (tmp_path / "local" / rel).read_bytes() == (tmp_path / "ray" / rel).read_bytes(), rel


def test_workers_write_their_shards_and_the_driver_only_commits(tmp_path, shards, local_ray):
    """Each shard is written by a worker; the driver receives a few bytes per shard (no codes),
    writes the manifest and renames the staging directory."""
    import json

    from embcompress import describe
    from embcompress.engines.ray import MANIFEST, ray_compress

    comp = fit_file(from_spec("pca:16+binary"), shards)
    got: dict = {}
    res = ray_compress(comp, shards, tmp_path / "out", keep_columns=["tag"], received=got)
    m = json.loads((tmp_path / "out" / MANIFEST).read_text())
    assert m["fingerprint"] == describe(comp)["fingerprint"] and sorted(m["shards"]) == sorted(RELS)
    assert m["rows"] == 1500 and [m["shards"][r]["rows"] for r in RELS] == [400, 600, 500]
    assert m["bytes"] == sum((tmp_path / "out" / r).stat().st_size for r in RELS) == res.output_bytes
    # a shard's name, rows, size and seconds: under 100 bytes whatever the shard holds (bench_ray.py
    # prints the share of a realistic output: here the shards are tiny)
    assert got["messages"] == 3 and 0 < got["bytes"] <= 100 * got["messages"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds", "out"]  # no staging left beside it


def test_a_failed_shard_leaves_nothing_and_resume_skips_the_finished_ones(tmp_path, shards, local_ray):
    from embcompress.engines.ray import MANIFEST

    bad = shards / RELS[1]
    good = bad.read_bytes()
    bad.write_bytes(
        good[: len(good) // 3] + good[-3000:]
    )  # pages cut out, footer kept: opens, but no worker can read it
    comp = fit_file(from_spec("int8"), shards / RELS[0])
    with pytest.raises(Exception, match=r"part=b/0\.parquet"):
        fit_and_compress(comp, shards, tmp_path / "out", fit=False, engine=local_ray)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds"]  # neither output nor staging
    resumable = RayEngine(resume=True)
    with pytest.raises(Exception, match=r"part=b/0\.parquet"):
        fit_and_compress(comp, shards, tmp_path / "out", fit=False, engine=resumable)
    assert not (tmp_path / "out").exists()
    staged = tmp_path / ".out.partial"
    # the shards that finished (the first surely: it ran beside the bad one) are kept with the manifest
    done = sorted(__import__("json").loads((staged / MANIFEST).read_text())["shards"])
    assert RELS[0] in done and RELS[1] not in done and not list(staged.rglob(".*"))
    inodes = {r: (staged / r).stat().st_ino for r in done}
    bad.write_bytes(good)
    fit_and_compress(comp, shards, tmp_path / "out", fit=False, engine=resumable)
    assert {r: (tmp_path / "out" / r).stat().st_ino for r in done} == inodes  # kept, not rewritten
    fit_and_compress(comp, shards, tmp_path / "local", fit=False)
    for rel in RELS:
        assert (tmp_path / "local" / rel).read_bytes() == (tmp_path / "out" / rel).read_bytes(), rel
    assert not staged.exists()
    # another compressor's staged shards are refused, not mixed in
    (tmp_path / ".again.partial").mkdir()
    (tmp_path / ".again.partial" / MANIFEST).write_text('{"fingerprint": "0000", "shards": {}}')
    with pytest.raises(InputError, match="holds shards of another compressor"):
        fit_and_compress(comp, shards, tmp_path / "again", fit=False, engine=resumable)


@pytest.mark.parametrize("spec", ["pca:16+binary", "pca:16+int8", "pca:24+itq+binary", "rotate:center=true+sq:2"])
def test_a_chain_fits_stage_by_stage_on_the_cluster(shards, local_ray, spec, monkeypatch):
    """Each stage is fitted from what the workers send after mapping their rows through the stages
    fitted so far: statistics (pca, int8; binary's levels read the first rows only) or a uniform
    sample drawn on the cluster (itq, sq), never the chain's rows streamed in order. Stages fitted
    from statistics equal the local fit's to float tolerance; a sampled stage is fitted on a
    sample of rows already mapped by the stages before it (all 1,500 here, as max_rows is larger;
    ITQ's iterations amplify the last bits of the PCA before it, so its codes are compared)."""
    from embcompress.engines.ray import blocks as engine_ray, fit as ray_fit_module

    streamed, sampled = [], []
    real_rows, real_sample = engine_ray.row_batches, engine_ray.cluster_sample
    monkeypatch.setattr(ray_fit_module, "row_batches", lambda *a, **k: streamed.append(a[4]) or real_rows(*a, **k))
    monkeypatch.setattr(
        ray_fit_module, "cluster_sample", lambda *a, **k: sampled.append(a[2].width) or real_sample(*a, **k)
    )
    a = fit_file(from_spec(spec), shards)
    b = local_ray.fit_file(from_spec(spec), shards)
    assert all(limit is not None and (limit <= 1 or limit == 65536) for limit in streamed), streamed
    samplers = [i for i, s in enumerate(a.stages_) if hasattr(s, "max_rows")]
    assert sampled == [a.stages_[i - 1].output_spec.width if i else None for i in samplers]
    assert [s.name for s in b.stages_] == [s.name for s in a.stages_]
    for i, (sa, sb) in enumerate(zip(a.stages_, b.stages_)):
        (ca, xa), (cb, xb) = sa._get_state(), sb._get_state()
        assert ca == cb and xa.keys() == xb.keys()
        if sa.name == "itq":  # it and the stages after it: their codes are compared below
            break
        for k in xa:
            np.testing.assert_allclose(xa[k], xb[k], rtol=1e-4, atol=1e-5, err_msg=f"{sa.name}.{k}")
    X = make_vectors(200, 48, seed=9)
    ca, cb = a.transform(X), b.transform(X)
    same = np.mean(np.unpackbits(ca) == np.unpackbits(cb)) if a.output_spec.kind == "bits" else np.mean(ca == cb)
    assert same >= (0.95 if "itq" in spec else 0.99)


@pytest.mark.parametrize("spec", ["pca:16", "int8", "rabitq:2", "binary:threshold=mean", "itq+binary"])
def test_ray_fit_state_equals_the_local_fit(shards, local_ray, spec):
    """pca, int8, rabitq and the mean threshold combine per-row-group statistics computed on the
    workers (count, mean and centred scatter; ranges; sums): equal to float tolerance; a chain
    (itq+binary) streams the rows to the driver in order: exactly equal."""
    a = fit_file(from_spec(spec), shards)
    b = local_ray.fit_file(from_spec(spec), shards)
    assert from_spec(spec).traits.fit.block_stats == (spec != "itq+binary")
    (sa, xa), (sb, xb) = a._get_state(), b._get_state()
    assert sa == sb and xa.keys() == xb.keys()
    for k in xa:
        if spec == "itq+binary":
            np.testing.assert_array_equal(xa[k], xb[k], err_msg=k)
        else:  # sums in another order
            np.testing.assert_allclose(xa[k], xb[k], rtol=1e-4, atol=1e-5, err_msg=k)


def test_ray_refuses_npy_and_an_address_that_does_not_answer(tmp_path, local_ray):
    np.save(tmp_path / "x.npy", make_vectors(10, 8))
    with pytest.raises(InputError, match="--engine ray reads parquet"):
        fit_and_compress(from_spec("binary"), tmp_path / "x.npy", tmp_path / "o.npy", engine=local_ray)
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "embcompress.cli",
            "binarize",
            str(tmp_path / "x.npy"),
            str(tmp_path / "o.npy"),
            "--engine",
            "ray",
            "--address",
            "127.0.0.1:1",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 1 and "cannot connect to a Ray cluster at '127.0.0.1:1'" in r.stderr, r.stderr
    assert not (tmp_path / "o.npy").exists()


def test_units_are_handed_on_in_order_whatever_order_the_cluster_finishes_them_in():
    import pyarrow as pa

    from embcompress.engines.ray import blocks as engine_ray

    units = [{"seq": k, "shard": k // 4, "path": "p", "group": k % 4} for k in range(12)]
    finished = [7, 0, 3, 1, 2, 11, 4, 6, 5, 9, 8, 10]  # as a cluster might return them

    class FakeDataset:
        def map_batches(self, *a, **kw):
            return self

        def iter_batches(self, **kw):
            for k in finished[:6]:
                yield pa.table({"x": [k, k], engine_ray.SEQ: [k, k]})
            yield pa.table({"x": finished[6:], engine_ray.SEQ: finished[6:]})  # several units in one block

    class FakeRay:
        class data:
            @staticmethod
            def from_items(items, **kw):
                return FakeDataset()

        @staticmethod
        def cluster_resources():
            return {"CPU": 2}

    order = [u["seq"] for u, t in engine_ray.in_order(FakeRay, units, {}, None)]
    assert order == list(range(12))


def test_ray_fit_on_a_sample_drawn_on_the_cluster(shards, local_ray):
    """itq fits on a sample: with fewer rows than max_rows the sample is every row (state equal to
    the local fit to float tolerance); with more, exactly max_rows distinct rows of the data, drawn
    from every shard, are sent, not the data."""
    import pyarrow.parquet as pq

    from embcompress.engines.ray import blocks as engine_ray
    from embcompress.io import open_vectors, read_all

    a = fit_file(from_spec("itq"), shards)
    b = local_ray.fit_file(from_spec("itq"), shards)
    np.testing.assert_allclose(a.rotation_, b.rotation_, atol=1e-4)
    np.testing.assert_allclose(a.mean_, b.mean_, atol=1e-6)
    X, _ = read_all(shards)
    src = open_vectors(shards)
    units = engine_ray.units_of(src)
    task = engine_ray.UnitTask(config=None, arrays=None, column="embedding", carried=[], dim=48, spec=None)
    S = engine_ray.cluster_sample(ray, units, task, 500, from_spec("sq:2:max_rows=500"), None, None)
    assert S.shape == (500, 48) and len(np.unique(S, axis=0)) == 500
    rows = {r.tobytes(): i for i, r in enumerate(X)}
    picked = np.array([rows[r.tobytes()] for r in S])  # every sampled row is a row of the data
    assert (picked < 400).sum() > 50 and ((picked >= 400) & (picked < 1000)).sum() > 100 and (picked >= 1000).sum() > 80
    sq = local_ray.fit_file(from_spec("sq:2:max_rows=500"), shards)
    assert sq.levels_.shape == (48, 4) and pq.read_metadata(shards / RELS[0]).num_rows == 400


# ---- an output on a pyarrow filesystem: an S3 server (moto's, on this machine) and file:// ------------
def test_workers_upload_their_shards_to_s3_and_the_bytes_are_the_local_engines(tmp_path, shards, local_ray, s3):
    import json

    from embcompress import OutputExistsError
    from embcompress.engines.ray import MANIFEST, ray_compress

    uri, fs = s3
    comp = fit_file(from_spec("pca:16+binary"), shards)
    fit_and_compress(comp, shards, tmp_path / "local", keep_columns=["tag"], fit=False)
    got: dict = {}
    res = ray_compress(comp, shards, uri("codes"), keep_columns=["tag"], received=got)
    assert s3_objects(fs) == sorted([f"bkt/codes/{r}" for r in RELS] + [f"bkt/codes/{MANIFEST}"])  # no staging left
    for rel in RELS:
        with fs.open_input_stream(f"bkt/codes/{rel}") as f:
            assert f.read() == (tmp_path / "local" / rel).read_bytes(), rel
    with fs.open_input_stream(f"bkt/codes/{MANIFEST}") as f:
        m = json.loads(f.read())
    assert m["rows"] == 1500 and sorted(m["shards"]) == sorted(RELS) and m["bytes"] == res.output_bytes
    assert got["messages"] == 3 and got["bytes"] <= 300  # no codes through the driver
    assert res.output == "s3://bkt/codes"  # no credentials or options in what is shown
    with pytest.raises(OutputExistsError, match=r"s3://bkt/codes already exists and is not empty; pass --overwrite"):
        ray_compress(comp, shards, uri("codes"))
    ray_compress(from_spec("int8").fit(np.ones((2, 48), np.float32)), shards, uri("codes"), overwrite=True)
    with fs.open_input_stream(f"bkt/codes/{MANIFEST}") as f:
        assert json.loads(f.read())["compressor"] == "int8"
    assert len(s3_objects(fs, "bkt/codes")) == len(RELS) + 1


def test_a_failed_shard_leaves_nothing_on_s3_and_remote_outputs_are_refused_where_they_cannot_be_written(
    tmp_path, shards, local_ray, s3
):
    uri, fs = s3
    comp = fit_file(from_spec("int8"), shards / RELS[0])
    before = s3_objects(fs)
    bad = shards / RELS[2]
    good = bad.read_bytes()
    bad.write_bytes(good[: len(good) // 3] + good[-3000:])  # opens, but no worker can read its pages
    with pytest.raises(Exception, match=r"part=b/1\.parquet"):
        fit_and_compress(comp, shards, uri("failed"), fit=False, engine=local_ray)
    assert s3_objects(fs) == before  # neither staging nor output
    bad.write_bytes(good)
    with pytest.raises(InputError, match=r"s3://bkt/x is on a remote filesystem; the Ray engine's workers write"):
        fit_and_compress(comp, shards, uri("x"), fit=False)  # the local engine
    with pytest.raises(InputError, match=r"which takes a dataset's shards; .* is one file"):
        fit_and_compress(comp, shards / RELS[0], uri("x"), fit=False, engine=local_ray)
    with pytest.raises(InputError, match="--resume needs an output on a local or shared file system"):
        fit_and_compress(comp, shards, uri("x"), fit=False, engine=RayEngine(resume=True))
    with pytest.raises(InputError, match=r"name a directory inside the bucket"):
        fit_and_compress(comp, shards, uri("").replace("bkt/?", "bkt?"), fit=False, engine=local_ray)
    assert s3_objects(fs) == before


def test_cli_writes_a_file_uri_through_pyarrows_local_filesystem(tmp_path, shards, local_ray):
    from typer.testing import CliRunner

    from embcompress.cli.main import app

    r = CliRunner().invoke(app, ["binarize", str(shards), f"file://{tmp_path}/bits", "--engine", "ray"])
    assert r.exit_code == 0, r.output
    assert CliRunner().invoke(app, ["binarize", str(shards), str(tmp_path / "local")]).exit_code == 0
    for rel in RELS:
        assert (tmp_path / "bits" / rel).read_bytes() == (tmp_path / "local" / rel).read_bytes(), rel
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bits", "ds", "local"]
    r = CliRunner().invoke(app, ["binarize", str(shards), f"file://{tmp_path}/bits", "--engine", "ray"])
    assert r.exit_code == 1 and "already exists and is not empty; pass --overwrite" in r.stderr


def test_stopping_the_shards_interrupts_the_tasks_first_and_kills_only_those_that_stay(tmp_path, local_ray):
    """Ctrl-C on the driver cancels the running shard tasks as Ctrl-C would (KeyboardInterrupt in
    the task: its cleanup runs, its worker lives on); only a task still running after the grace is
    killed with its worker. Killing first made the driver abort inside Ray now and then."""
    import time

    import psutil

    from embcompress.engines.ray.shards import _cancel

    def busy(flag_dir: str, ignore_interrupt: bool) -> int:  # defined here: Ray sends it by value
        """A task that loops in Python until stopped; it says it started, and whether its cleanup ran."""
        import os
        import signal
        import time
        from pathlib import Path

        if ignore_interrupt:  # as a task stuck in native code would: Ctrl-C never reaches it
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        else:  # as a worker started from a terminal has it (a worker started by a background job inherits
            signal.signal(signal.SIGINT, signal.default_int_handler)  # SIGINT ignored, and Ray could not interrupt it)
        (Path(flag_dir) / f"started-{os.getpid()}-{int(ignore_interrupt)}").touch()
        try:
            end = time.time() + 120
            while time.time() < end:
                try:
                    time.sleep(0.01)
                except KeyboardInterrupt:
                    if ignore_interrupt:
                        continue
                    raise
            return os.getpid()
        finally:
            (Path(flag_dir) / f"cleaned-{os.getpid()}").touch()

    def wait_for(event, what: str, bound: float = 60.0) -> None:
        """Wait until ``event()`` holds (the bound only turns a hang into a failure)."""
        end = time.monotonic() + bound
        while not event():
            assert time.monotonic() < end, f"timed out waiting for {what}"
            time.sleep(0.02)

    task = ray.remote(num_cpus=1, max_retries=3)(busy)
    polite, stuck = task.remote(str(tmp_path), False), task.remote(str(tmp_path), True)
    wait_for(lambda: len(list(tmp_path.glob("started-*"))) == 2, "the two tasks to start")
    started = {int(p.name.split("-")[2]): int(p.name.split("-")[1]) for p in tmp_path.glob("started-*")}
    kept, killed = started[0], started[1]
    t0 = time.monotonic()
    _cancel(ray, [polite, stuck], grace=10.0)  # long enough for the polite task's cleanup on a loaded machine
    waited = time.monotonic() - t0
    for ref in (polite, stuck):
        with pytest.raises((ray.exceptions.TaskCancelledError, ray.exceptions.WorkerCrashedError)):
            ray.get(ref, timeout=10)

    def gone(pid: int) -> bool:
        return not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE

    # the events, not a time: the interrupted task's cleanup ran (it may end after ray.get has raised), and
    # the stuck task's worker is gone (so its cleanup can no longer run)
    wait_for(lambda: (tmp_path / f"cleaned-{kept}").exists(), "the interrupted task's cleanup")
    wait_for(lambda: gone(killed), "the stuck task's worker to be killed")
    cleaned = {int(p.name.split("-")[1]) for p in tmp_path.glob("cleaned-*")}
    assert cleaned == {kept}, cleaned  # the interrupted task cleaned up; the killed one could not
    assert not gone(kept)  # the interrupted task's worker lives on
    assert waited >= 9.5  # the stuck task was given (about) its 10 s of grace before it was killed
