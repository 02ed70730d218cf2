"""--engine ray on a real multi-node Ray cluster on this machine (ray.cluster_utils.Cluster: a head
and two worker nodes, each its own raylet and processes), reached by the head's IP address and
port as a user would pass --address. Workers write their own shards; a worker killed in the
middle of a shard (apply rq:24) or of a chain's fit (pca:64+binary) is retried and the output is
still the local engine's bytes, the fit the same state; a node removed in the middle leaves the
job to the other node. Storage that fills up and Ctrl-C on the driver end in one line with
nothing left in the output."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

ray = pytest.importorskip("ray")
psutil = pytest.importorskip("psutil")

from embcompress import from_spec, save  # noqa: E402
from embcompress.engines.ray import MANIFEST  # noqa: E402
from embcompress.engines.local import fit_and_compress, fit_file  # noqa: E402

from conftest import make_vectors, s3_objects, write_parquet  # noqa: E402

SHARDS = 6


@pytest.fixture(scope="module")
def cluster():
    from ray.cluster_utils import Cluster

    if ray.is_initialized():
        ray.shutdown()
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})  # the head schedules, the nodes work
    nodes = [c.add_node(num_cpus=1) for _ in range(2)]
    c.wait_for_nodes()
    yield c, nodes
    ray.shutdown()
    c.shutdown()


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("cluster") / "ds"
    X = make_vectors(SHARDS * 6000, 96, seed=31)
    for i in range(SHARDS):
        (root / f"part={i}").mkdir(parents=True)
        write_parquet(root / f"part={i}" / "0.parquet", X[i * 6000 : (i + 1) * 6000], row_group_size=1000)
    return root


def _cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "embcompress.cli", *map(str, args)], capture_output=True, text=True, timeout=300
    )


def _same_as_local(local, out):
    rels = sorted(p.relative_to(local) for p in local.rglob("*.parquet"))
    assert rels and rels == sorted(p.relative_to(out) for p in out.rglob("*.parquet"))
    for rel in rels:
        assert (local / rel).read_bytes() == (out / rel).read_bytes(), rel


def test_binarize_and_apply_on_two_nodes_by_the_heads_ip_address(cluster, dataset, tmp_path):
    c, _ = cluster
    address = c.address  # "IP:port" of the head, as `ray start --head` prints it, not "auto"
    host, port = address.rsplit(":", 1)
    assert host == ray.util.get_node_ip_address() and port.isdigit()
    r = _cli("binarize", dataset, tmp_path / "bits", "--engine", "ray", "--address", address)
    assert r.returncode == 0, r.stderr
    assert _cli("binarize", dataset, tmp_path / "bits_local").returncode == 0
    _same_as_local(tmp_path / "bits_local", tmp_path / "bits")
    m = json.loads((tmp_path / "bits" / MANIFEST).read_text())
    assert m["rows"] == SHARDS * 6000 and len(m["shards"]) == SHARDS
    # a chain fitted locally, applied on the cluster
    comp = fit_file(from_spec("pca:32+binary"), dataset)
    save(comp, tmp_path / "m")
    r = _cli("apply", tmp_path / "m", dataset, tmp_path / "chain", "--engine", "ray", "--address", address)
    assert r.returncode == 0, r.stderr
    fit_and_compress(comp, dataset, tmp_path / "chain_local", fit=False)
    _same_as_local(tmp_path / "chain_local", tmp_path / "chain")


def _kill_a_shard_task(stop: threading.Event, killed: list) -> None:
    """Kill -9 the first worker process seen running a shard task (its title is ray::compress_shard)."""
    while not stop.is_set() and not killed:
        for p in psutil.process_iter(["pid", "cmdline"]):
            if any("compress_shard" in part for part in (p.info["cmdline"] or [])):
                try:
                    p.kill()
                    killed.append(p.info["pid"])
                except psutil.Error:
                    continue
                return
        time.sleep(0.02)


def test_a_worker_killed_in_the_middle_is_retried_and_the_output_is_identical(cluster, dataset, tmp_path):
    from embcompress.engines.ray import RayEngine

    c, _ = cluster
    comp = fit_file(from_spec("rq:24:max_rows=2000"), dataset, max_rows=2000)  # encode-bound: a shard takes a while
    fit_and_compress(comp, dataset, tmp_path / "local", fit=False)
    stop, killed = threading.Event(), []
    t = threading.Thread(target=_kill_a_shard_task, args=(stop, killed))
    t.start()
    try:
        fit_and_compress(comp, dataset, tmp_path / "ray", fit=False, engine=RayEngine(c.address))
    finally:
        stop.set()
        t.join()
    assert killed, "no shard task was seen running"
    _same_as_local(tmp_path / "local", tmp_path / "ray")
    assert not [p for p in tmp_path.rglob(".*")]  # no temporary file of the killed task left


def _processes(title: str) -> list:
    """The processes whose command line names ``title`` (Ray titles a busy worker ray::<task>)."""
    return [
        p for p in psutil.process_iter(["pid", "cmdline"]) if any(title in part for part in (p.info["cmdline"] or []))
    ]


def _wait_for(title: str, timeout: float = 120, old: frozenset = frozenset()) -> bool:
    """Whether a process titled ``title`` that is not one of the pids ``old`` came up in time."""
    end = time.time() + timeout
    while time.time() < end:
        if any(p.info["pid"] not in old for p in _processes(title)):
            return True
        time.sleep(0.02)
    return False


def _signals(pid: int) -> str:
    """The signal masks of a process (blocked, ignored, caught), for a failure's message."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return " ".join(
                line.split()[0] + line.split()[1] for line in f if line.startswith(("SigBlk", "SigIgn", "SigCgt"))
            )
    except OSError:
        return "gone"


def test_a_chain_fitted_on_the_cluster_with_a_worker_killed_fits_the_same(cluster, dataset):
    """fit pca:64+binary: the Ray Data worker that computes PCA's block statistics is killed in the
    middle; Ray restarts it and reruns its row groups, and the fitted state is that of a run
    without the kill (PCA's statistics combine exactly as in the local fit: within 1e-5)."""
    from embcompress.engines.ray import RayEngine
    from embcompress.core.persist import to_config

    c, _ = cluster
    engine = RayEngine(c.address)
    ref = engine.fit_file(from_spec("pca:64+binary"), dataset)
    killed: list = []

    def kill_a_map_worker():
        if _wait_for("MapWorker", 60):
            for p in _processes("MapWorker")[:1]:
                p.kill()
                killed.append(p.info["pid"])

    t = threading.Thread(target=kill_a_map_worker)
    t.start()
    try:
        got = engine.fit_file(from_spec("pca:64+binary"), dataset)
    finally:
        t.join()
    assert killed, "no Ray Data worker was seen running"
    (ref_config, ref_arrays), (config, arrays) = to_config(ref), to_config(got)
    assert ref_config == config and sorted(ref_arrays) == sorted(arrays)
    for name in ref_arrays:
        np.testing.assert_allclose(arrays[name], ref_arrays[name], rtol=1e-5, atol=1e-5, err_msg=name)
    local = fit_file(from_spec("pca:64+binary"), dataset)
    np.testing.assert_allclose(np.abs(got.stages_[0].components_), np.abs(local.stages_[0].components_), atol=1e-4)


def test_output_storage_that_fills_up_fails_in_one_line_and_leaves_nothing(cluster, dataset, tmp_path):
    """The workers' files stop growing at 64 KiB (RLIMIT_FSIZE in every worker process of the job,
    which the kernel enforces as it would a full disk: the write fails); each shard's output is
    larger. The run fails with one line that says so, and neither the output nor the staging
    directory is left."""
    from embcompress.engines.ray import ray_compress
    from embcompress.core._fs import StorageError

    c, _ = cluster

    def small_files():  # runs in each worker process as it starts; Python ignores SIGXFSZ, so writes fail with EFBIG
        import resource

        resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))

    comp = fit_file(from_spec("int8"), dataset)  # a shard's output: 6000 x 96 B
    ray.shutdown()
    ray.init(
        address=c.address,
        runtime_env={"worker_process_setup_hook": small_files},
        log_to_driver=False,
        logging_level="ERROR",
    )
    try:
        with pytest.raises(
            StorageError, match=r"^file too large for the output storage .* writing \S+part=\d/0\.parquet$"
        ):
            ray_compress(comp, dataset, tmp_path / "out")
    finally:
        ray.shutdown()
    assert list(tmp_path.iterdir()) == []


def test_ctrl_c_on_the_driver_stops_the_workers_and_leaves_no_temporary_shard(cluster, dataset, tmp_path):
    c, _ = cluster
    comp = fit_file(from_spec("rq:16:beam=8,max_rows=500"), dataset, max_rows=500)  # a shard takes seconds
    save(comp, tmp_path / "m")
    before = set(tmp_path.iterdir())
    old = frozenset(q.info["pid"] for q in _processes("compress_shard"))  # another job's, if any
    # The driver as a terminal starts it: SIGINT at its default. A test run started in the background
    # by a shell without job control (`cmd &` in a script, nohup) inherits SIGINT ignored, and Python
    # keeps an inherited SIG_IGN: the CLI then never sees the Ctrl-C and runs to the end (exit 0).
    p = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "embcompress.cli",
            "apply",
            str(tmp_path / "m"),
            str(dataset),
            str(tmp_path / "out"),
            "--engine",
            "ray",
            "--address",
            c.address,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        assert _wait_for("compress_shard", old=old), "no shard task was seen running"
        time.sleep(0.2)
        masks = _signals(p.pid)  # SigIgn with bit 2 (SIGINT ignored) explained the exit 0 seen before
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=120)
    finally:
        p.kill()
    assert p.returncode == 130, f"{err!r}; the driver's signal masks when SIGINT was sent: {masks}"
    assert err.strip().endswith("interrupted; no output was written") and len(err.strip().splitlines()) == 1, err
    assert set(tmp_path.iterdir()) == before  # no output, no staging directory, no temporary shard
    end = time.time() + 2  # the workers were stopped, not left to finish their shards
    while _processes("compress_shard") and time.time() < end:
        time.sleep(0.1)
    assert not _processes("compress_shard")


def test_apply_on_two_nodes_uploads_each_shard_to_s3_from_its_worker(cluster, dataset, tmp_path, s3):
    """apply rq:16 by the head's IP address to an s3:// output (an S3 server on this machine): the
    workers of both nodes upload their shards, the objects are the local engine's bytes."""
    c, _ = cluster
    uri, fs = s3
    comp = fit_file(from_spec("rq:16,max_rows=2000"), dataset, max_rows=2000)
    save(comp, tmp_path / "m")
    r = _cli("apply", tmp_path / "m", dataset, uri("cluster-codes"), "--engine", "ray", "--address", c.address)
    assert r.returncode == 0, r.stderr
    assert _cli("apply", tmp_path / "m", dataset, tmp_path / "local").returncode == 0
    rels = sorted(str(p.relative_to(tmp_path / "local")) for p in (tmp_path / "local").rglob("*.parquet"))
    assert s3_objects(fs, "bkt/cluster-codes") == sorted(
        [f"bkt/cluster-codes/{r}" for r in rels] + [f"bkt/cluster-codes/{MANIFEST}"]
    )
    for rel in rels:
        with fs.open_input_stream(f"bkt/cluster-codes/{rel}") as f:
            assert f.read() == (tmp_path / "local" / rel).read_bytes(), rel
    assert not [o for o in s3_objects(fs) if ".cluster-codes.tmp-" in o]  # the staging prefix is gone


def test_a_node_removed_in_the_middle_leaves_the_work_to_the_other(cluster, dataset, tmp_path):
    from embcompress.engines.ray import RayEngine

    c, nodes = cluster
    comp = fit_file(from_spec("rq:4:nbits=4,max_rows=2000"), dataset, max_rows=2000)
    fit_and_compress(comp, dataset, tmp_path / "local", fit=False)
    done: list = []

    def remove_when_started():
        deadline = time.time() + 60
        while time.time() < deadline:
            if any("compress_shard" in " ".join(p.info["cmdline"] or []) for p in psutil.process_iter(["cmdline"])):
                c.remove_node(nodes[1])
                done.append(True)
                return
            time.sleep(0.02)

    t = threading.Thread(target=remove_when_started)
    t.start()
    try:
        fit_and_compress(comp, dataset, tmp_path / "ray", fit=False, engine=RayEngine(c.address))
    finally:
        t.join()
    assert done
    _same_as_local(tmp_path / "local", tmp_path / "ray")
    alive = [n for n in ray.nodes() if n["Alive"] and n["Resources"].get("CPU", 0) > 0]
    assert len(alive) == 1
