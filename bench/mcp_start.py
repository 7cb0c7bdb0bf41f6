"""How long `autoresearch mcp` takes from launch to its answer to `initialize`, and to its
answer to the first `tools/list` (when the SDK serves; see `agent/mcp_handshake.py`).

    python bench/mcp_start.py [--runs N] [--src DIR]

Run from inside a git repository (the server looks for its checkout). Prints the median
wall times and the median CPU time of the server process over its whole life (user +
system, which a loaded machine inflates less than the wall time); `--src` puts another
source tree first on PYTHONPATH, to compare two versions on the same machine. The first
run of a version fills the cache the later runs answer `initialize` from.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "bench", "version": "1"},
    },
}


INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
LIST_TOOLS = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}


def send(proc: subprocess.Popen[bytes], message: dict[str, object]) -> None:
    assert proc.stdin is not None
    proc.stdin.write((json.dumps(message) + "\n").encode())
    proc.stdin.flush()


def once(env: dict[str, str]) -> tuple[float, float, float]:
    start = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "autoresearch", "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    assert proc.stdin is not None and proc.stdout is not None
    send(proc, INITIALIZE)
    answer = json.loads(proc.stdout.readline())
    wall = time.monotonic() - start
    assert "result" in answer, answer
    send(proc, INITIALIZED)
    send(proc, LIST_TOOLS)
    tools = json.loads(proc.stdout.readline())
    ready = time.monotonic() - start
    assert tools.get("id") == 2 and "result" in tools, tools
    proc.stdin.close()
    _, _, usage = os.wait4(proc.pid, 0)
    proc.returncode = 0
    return wall, ready, usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--src", default=None)
    args = parser.parse_args()
    env = dict(os.environ)
    if args.src:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (args.src, env.get("PYTHONPATH")) if p)
    runs = [once(env) for _ in range(args.runs)]
    wall = statistics.median(r[0] for r in runs)
    ready = statistics.median(r[1] for r in runs)
    cpu = statistics.median(r[2] for r in runs)
    print(
        f"autoresearch mcp, launch to initialize answer: median wall {wall:.2f} s; "
        f"to the tools/list answer {ready:.2f} s; median CPU {cpu:.2f} s of the server "
        f"process ({args.runs} runs)"
    )


if __name__ == "__main__":
    main()
