"""--engine ray against a cluster started the way Ray's documentation says, `ray start --head` in
another process, reached by the head's IP address and port. With Ray 2.60, `ray start --head`
turns token authentication on wherever a token exists in ~/.ray/auth_token (`ray get-auth-token
--generate` writes one, and so does the first local `ray.init()`), and ray.init sends it to an
explicit address only when RAY_AUTH_MODE=token is set (to `auto`, always): without it the CLI must
say so in one line, at once, and leave nothing; with it the output is the local engine's."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile

import pytest

ray = pytest.importorskip("ray")
psutil = pytest.importorskip("psutil")

from conftest import make_vectors, write_parquet  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def head(tmp_path_factory):
    if ray.is_initialized():
        ray.shutdown()
    home = tmp_path_factory.mktemp("home")  # the token goes to $HOME/.ray, not the user's
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")} | {"HOME": str(home)}
    temp = tempfile.mkdtemp(prefix="rs", dir="/tmp")  # short: Ray's socket paths live under it
    port = _free_port()
    ray_bin = os.path.join(os.path.dirname(sys.executable), "ray")
    gen = subprocess.run([ray_bin, "get-auth-token", "--generate"], env=env, capture_output=True, text=True, timeout=60)
    start = subprocess.run(
        [
            ray_bin,
            "start",
            "--head",
            f"--port={port}",
            "--num-cpus=2",
            "--include-dashboard=false",
            "--disable-usage-stats",
            f"--temp-dir={temp}",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    try:
        assert gen.returncode == 0 and start.returncode == 0, gen.stderr + start.stderr
        yield f"{ray.util.get_node_ip_address()}:{port}", env, home
    finally:
        _stop_head(temp)
        shutil.rmtree(temp, ignore_errors=True)


def _stop_head(temp: str) -> None:
    """Stop this head's processes only (their command lines name its temp dir; workers and agents
    are their children), not every Ray process of the machine as `ray stop --force` would."""
    heads = [p for p in psutil.process_iter(["cmdline"]) if temp in " ".join(p.info["cmdline"] or [])]
    procs = {p.pid: p for p in heads}
    for p in heads:
        with contextlib.suppress(psutil.Error):
            procs.update((c.pid, c) for c in p.children(recursive=True))
    for p in procs.values():
        with contextlib.suppress(psutil.Error):
            p.kill()
    psutil.wait_procs(list(procs.values()), timeout=30)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("started") / "ds"
    X = make_vectors(3 * 2000, 64, seed=5)
    for i in range(3):
        (root / f"part={i}").mkdir(parents=True)
        write_parquet(root / f"part={i}" / "0.parquet", X[i * 2000 : (i + 1) * 2000], row_group_size=500)
    return root


def _cli(env, *args):
    return subprocess.run(
        [sys.executable, "-m", "embcompress.cli", *map(str, args)], capture_output=True, text=True, timeout=300, env=env
    )


def test_a_head_started_by_ray_start_is_reached_by_its_ip_and_port(head, dataset, tmp_path):
    address, env, home = head
    if not (home / ".ray" / "auth_token").exists():
        pytest.skip("this Ray has no token authentication (`ray get-auth-token --generate` wrote no token)")
    r = _cli(env, "binarize", dataset, tmp_path / "bits", "--engine", "ray", "--address", address)
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert "requires token authentication" in lines[0] and "RAY_AUTH_MODE=token" in lines[0], lines[0]
    assert not (tmp_path / "bits").exists() and list(tmp_path.iterdir()) == []

    r = _cli(
        env | {"RAY_AUTH_MODE": "token"},
        "binarize",
        dataset,
        tmp_path / "bits",
        "--engine",
        "ray",
        "--address",
        address,
    )
    assert r.returncode == 0, r.stderr
    assert _cli(env, "binarize", dataset, tmp_path / "local").returncode == 0
    rels = sorted(p.relative_to(tmp_path / "local") for p in (tmp_path / "local").rglob("*.parquet"))
    assert len(rels) == 3 and rels == sorted(
        p.relative_to(tmp_path / "bits") for p in (tmp_path / "bits").rglob("*.parquet")
    )
    for rel in rels:
        assert (tmp_path / "local" / rel).read_bytes() == (tmp_path / "bits" / rel).read_bytes(), rel
