"""A real Ray cluster on this machine for tests and benchmarks: a head and worker node
processes on 127.0.0.1, each in a process group of its own, stopped by those groups."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from autoresearch.testing.executor_suite import Cluster

RAY = str(Path(sys.executable).with_name("ray"))
ENV = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_NODE_IP_ADDRESS": "127.0.0.1"}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _start(*args: str, log: Path) -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:
        return subprocess.Popen(
            [
                RAY,
                "start",
                "--block",
                "--node-ip-address=127.0.0.1",
                "--disable-usage-stats",
                *args,
            ],
            env=ENV,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )


def _alive_nodes(address: str) -> int:
    """The live nodes the cluster counts; 0 while it cannot say (a loaded machine can take
    longer than one probe: the caller's deadline decides)."""
    try:
        out = subprocess.run(
            [sys.executable, "-c", f"import ray; ray.init(address={address!r}, logging_level=40);"
             "print(sum(1 for n in ray.nodes() if n['Alive']))"],
            env=ENV, capture_output=True, text=True, timeout=90,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return 0
    try:
        return int(out.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return 0


@contextmanager
def _node_ip_here() -> Iterator[None]:
    """This process, which connects as a driver, names itself 127.0.0.1 as the nodes do:
    otherwise Ray picks the machine's own address for the driver and looks for a local
    node there that the cluster does not advertise."""
    before = os.environ.get("RAY_NODE_IP_ADDRESS")
    os.environ["RAY_NODE_IP_ADDRESS"] = "127.0.0.1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("RAY_NODE_IP_ADDRESS", None)
        else:
            os.environ["RAY_NODE_IP_ADDRESS"] = before


@contextmanager
def ray_cluster(workers: int = 1, head_cpus: int = 1, cpus: int = 1) -> Iterator[str]:
    """Start the cluster, yield its address, stop every process it started."""
    with _node_ip_here():
        yield from _cluster(workers, head_cpus, cpus)


def _cluster(workers: int, head_cpus: int, cpus: int) -> Iterator[str]:
    temp = Path(tempfile.mkdtemp(prefix="art-ray-", dir="/tmp"))
    port = _free_port()
    address = f"127.0.0.1:{port}"
    nodes = [
        _start(
            "--head",
            f"--port={port}",
            f"--num-cpus={head_cpus}",
            "--include-dashboard=false",
            f"--temp-dir={temp}",
            log=temp / "head.log",
        )
    ]
    try:
        deadline = time.monotonic() + 420
        while _alive_nodes(address) < 1:
            if time.monotonic() > deadline or nodes[0].poll() is not None:
                raise RuntimeError((temp / "head.log").read_text(errors="replace")[-2000:])
            time.sleep(0.5)
        # One node at a time: nodes started together on one machine can time out.
        for k in range(workers):
            nodes.append(
                _start(f"--address={address}", f"--num-cpus={cpus}", log=temp / f"worker{k}.log")
            )
            while _alive_nodes(address) < k + 2:
                if time.monotonic() > deadline or nodes[-1].poll() is not None:
                    log = (temp / f"worker{k}.log").read_text(errors="replace")[-1500:]
                    raise RuntimeError(f"worker node {k} did not join the cluster: {log}")
                time.sleep(0.5)
        yield address
    finally:
        for node in reversed(nodes):
            try:
                os.killpg(node.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            node.wait(timeout=30)
        shutil.rmtree(temp, ignore_errors=True)


def connected_cluster() -> Cluster:
    """The cluster this process is connected to as a driver, as the executor suite's
    attacks aim at it: its GCS, every HTTP server it has (the dashboard's default port
    included, in case one runs), its temp folder and its token file."""
    import ray

    from autoresearch.executors.ray import ray_folders

    context = ray.get_runtime_context()
    ports = {8265}
    for node in ray.nodes():  # type: ignore[no-untyped-call]
        for key in ("DashboardAgentListenPort", "RuntimeEnvAgentPort", "MetricsExportPort"):
            if int(node.get(key) or -1) > 0:
                ports.add(int(node[key]))
    token = Path(os.environ.get("RAY_AUTH_TOKEN_PATH") or Path.home() / ".ray" / "auth_token")
    session = context.get_session_name()
    folders = tuple(Path(p) for p in ray_folders())
    return Cluster(
        address=context.gcs_address,
        http_ports=tuple(sorted(ports)),
        folders=folders,
        session=session,
        token=(token, token.read_text()) if token.is_file() else None,
    )
