"""Connecting to a Ray cluster: a local one, or a running one by address, probed first so that a
wrong address or a missing token fails in seconds with one line."""

from __future__ import annotations

import os
from dataclasses import dataclass

from ...core._util import require
from ...core.errors import InputError


@dataclass(frozen=True)
class ClusterOptions:
    """Where and how wide a Ray job runs: a running cluster's ``address`` (None: Ray started here, on
    ``num_cpus`` CPUs), at most ``workers`` tasks at once (None: one per CPU of the cluster), and whether a
    dataset's finished shards are kept for a rerun (``resume``)."""

    address: str | None = None
    num_cpus: int | None = None
    workers: int | None = None
    resume: bool = False


def connect(address: str | None = None, num_cpus: int | None = None):
    """Ray, started locally (``address`` None) or connected to a running cluster; an address
    that does not answer is an InputError."""
    ray = require("ray", "ray", "--engine ray")
    if ray.is_initialized():
        return ray
    if address and address != "auto":
        _probe(address)
        _probe_auth(ray, address)
    try:
        quiet = {"log_to_driver": False, "include_dashboard": False, "logging_level": "ERROR"}
        if address:
            ray.init(address=address, **quiet)
        else:
            ray.init(num_cpus=num_cpus, **quiet)
    except (ConnectionError, TimeoutError, RuntimeError, ValueError) as exc:
        raise InputError(
            f"cannot connect to a Ray cluster at {address!r}: "
            f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
        ) from None
    ctx = ray.data.DataContext.get_current()
    ctx.execution_options.preserve_order = True
    ctx.enable_progress_bars = False
    return ray


def _probe(address: str, timeout: float = 5.0) -> None:
    """Fail in seconds, not minutes, when nothing answers at ``address`` (``host:port`` or
    ``ray://host:port``)."""
    import socket

    hostport = address.split("://", 1)[-1].rstrip("/")
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise InputError(f"Ray address {address!r} is not host:port or ray://host:port")
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as exc:
        raise InputError(
            f"cannot connect to a Ray cluster at {address!r}: nothing answers there "
            f"({exc.strerror or exc}); start one with `ray start --head` or leave --address out"
        ) from None


def _probe_auth(ray, address: str) -> None:
    """Fail at once, in one line, where the cluster at ``address`` asks for a token that this
    process will not send. Since Ray 2.5x, ``ray start --head`` turns token authentication on
    (writing ``~/.ray/auth_token``), and ``ray.init`` sends the token only to an address found
    by itself (none or ``auto``), not to an explicit ``host:port``, unless ``RAY_AUTH_MODE=token``:
    an explicit address otherwise fails after 20 s of retries with a generic message."""
    if address.startswith("ray://"):
        return  # Ray Client: its server checks its own way
    try:
        from ray._raylet import GcsClient
        from ray.exceptions import AuthenticationError
    except ImportError:  # a Ray without token authentication or with another layout: nothing to probe
        return
    refused = False
    saved = os.dup(2)  # the probe's C++ client logs each refused call on stderr itself
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            try:
                GcsClient(address=address)
            except AuthenticationError:
                refused = True
            except Exception:  # noqa: BLE001 - anything else is left to ray.init, which reports it
                pass
    finally:
        os.dup2(saved, 2)
        os.close(saved)
    if refused:
        mode = os.environ.get("RAY_AUTH_MODE")
        how = (
            "its token is not the one this process has (~/.ray/auth_token, RAY_AUTH_TOKEN or RAY_AUTH_TOKEN_PATH)"
            if mode == "token"
            else "set RAY_AUTH_MODE=token with the cluster's token in ~/.ray/auth_token or RAY_AUTH_TOKEN "
            "(Ray sends it to an explicit address only then), or use --address auto on a node of the cluster"
        )
        raise InputError(f"cannot connect to a Ray cluster at {address!r}: it requires token authentication; {how}")
