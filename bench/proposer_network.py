"""What `[proposer] network` costs: a confined command's start under "on", "off" and
"allow" (the relay and the proxy), and the bytes per second through the proxy.

    python bench/proposer_network.py [--runs 10] [--megabytes 64]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from autoresearch.isolation.confinement import confinement_for
from autoresearch.isolation.process import run_command
from autoresearch.isolation.proxy import Proxy, network_of
from autoresearch.isolation.relay import connect_unix
from autoresearch.isolation.sandbox import bwrap_problem
from autoresearch.testing.repo import make_repo


def start_seconds(root: Path, mode: str, runs: int) -> list[float]:
    checkout = make_repo(root / f"repo-{mode}", {"a.txt": "a\n"})
    state = checkout / ".autoresearch" / "c"
    workspace = state / "workspace"
    workspace.mkdir(parents=True)
    confinement = confinement_for(
        "bwrap", "autoresearch.toml", state_dir=state, root=checkout, objects=None
    )
    hosts = ["127.0.0.1:9"] if mode == "allow" else []
    network = network_of(mode, hosts)  # type: ignore[arg-type]
    found = []
    for _ in range(runs):
        began = time.monotonic()
        with confinement.prepare(workspace, dict(os.environ), network=network) as confined:
            run_command(
                "true",
                cwd=workspace,
                env=confined.env,
                timeout=30,
                stdout_path=root / "out",
                stderr_path=root / "err",
                wrap=confined.wrap,
                child_setup=confined.child_setup,
            )
        found.append(time.monotonic() - began)
    return found


def throughput(root: Path, megabytes: int) -> float:
    sink = socket.socket()
    sink.bind(("127.0.0.1", 0))
    sink.listen()
    port = sink.getsockname()[1]

    def drain() -> None:
        conn, _ = sink.accept()
        with conn:
            while conn.recv(1 << 16):
                pass

    threading.Thread(target=drain, daemon=True).start()
    with Proxy(root / "p.sock", network_of("allow", [f"127.0.0.1:{port}"])) as proxy:
        client = connect_unix(str(proxy.path), 5)
        client.sendall(f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n".encode())
        client.recv(1000)
        block = b"x" * (1 << 20)
        began = time.monotonic()
        for _ in range(megabytes):
            client.sendall(block)
        client.shutdown(socket.SHUT_WR)
        client.recv(10)  # the proxy passes the end on once all is sent
        seconds = time.monotonic() - began
        client.close()
    sink.close()
    return megabytes / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--megabytes", type=int, default=64)
    args = parser.parse_args()
    if bwrap_problem() is not None:
        sys.exit(f"needs bubblewrap: {bwrap_problem()}")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for mode in ("on", "off", "allow"):
            times = [t * 1000 for t in start_seconds(root, mode, args.runs)]
            print(
                f"network = {mode!r:8} a confined `true`: median "
                f"{statistics.median(times):.0f} ms, max {max(times):.0f} ms ({args.runs} runs)"
            )
        print(f"through the proxy: {throughput(root, args.megabytes):.0f} MB/s (CONNECT tunnel)")


if __name__ == "__main__":
    main()
