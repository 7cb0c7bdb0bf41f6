"""The MCP round trip of `status`: `autoresearch mcp` over stdio, driven by the SDK's client.

Starts a toy campaign, then calls `status` `--calls` times through one session and prints
the median and 90th percentile in milliseconds (the client's send to its parsed answer).

    python bench/mcp_roundtrip.py [--calls 50]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from gitrepo import commit_all

CONFIG = """\
name = "rt"
scope = ["calc.py"]
harness = ["bench.py"]

[metric]
command = "python3 bench.py"
direction = "minimize"
"""


async def measure(root: Path, calls: int) -> list[float]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "autoresearch", "mcp"],
        cwd=str(root),
        env=dict(os.environ),
    )
    times = []
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        started = await session.call_tool("start", {})
        assert not started.is_error, started.content
        for _ in range(calls):
            began = time.perf_counter()
            result = await session.call_tool("status", {})
            times.append(time.perf_counter() - began)
            assert not result.is_error and result.structured_content, result.content
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ar-mcp-") as tmp:
        root = Path(tmp).resolve()
        (root / "calc.py").write_text("N = 10\n")
        (root / "bench.py").write_text("import calc\nprint(abs(calc.N - 3))\n")
        (root / "autoresearch.toml").write_text(CONFIG)
        commit_all(root, "toy")
        times = sorted(anyio.run(measure, root, args.calls))
    median = 1000 * statistics.median(times)
    p90 = 1000 * times[int(0.9 * (len(times) - 1))]
    print(
        f"MCP `status` round trip over stdio: median {median:.1f} ms, p90 {p90:.1f} ms "
        f"({args.calls} calls)"
    )


if __name__ == "__main__":
    main()
