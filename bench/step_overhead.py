"""The engine's own time per `step` of the agent-driven mode, apart from the measurement.

Starts a campaign on a generated repository, then makes `--steps` hand edits in the
workspace, each judged by `agent_mode.step` in this process (what the MCP server does), and
a few by the `autoresearch step` command in a process of its own. Prints, per step:

- engine ms: the whole `step` call (opening the campaign, holding the edits, the attempt,
  the ledger) minus the metric and guard runs' own seconds;
- attempt ms: `engine_seconds` of the ledger record (the attempt's steps alone);
- cli ms: the `autoresearch step` command's wall time minus the measurement (includes
  starting Python and importing the package).

    python bench/step_overhead.py [--steps 30] [--sizes 100,2000] [--cli 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from autoresearch.agent import mode as agent_mode
from autoresearch.config import load_campaign
from gitrepo import commit_all

CONFIG = """\
name = "bench"
scope = ["pkg/mod_0000.py"]
harness = ["bench.py"]

[metric]
command = "python3 bench.py"
direction = "minimize"

[stop]
max_iterations = 100000
"""


def make_repo(root: Path, files: int) -> None:
    for i in range(files):
        folder = root / "pkg" if i == 0 else root / "pkg" / f"d{i // 100:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        name = "mod_0000.py" if i == 0 else f"mod_{i:05d}.py"
        (folder / name).write_text(f"X = {i}\n" + "# filler line\n" * 20)
    (root / "bench.py").write_text(
        "import re\nprint(re.search(r'X = (\\d+)', open('pkg/mod_0000.py').read()).group(1))\n"
    )
    (root / "autoresearch.toml").write_text(CONFIG)
    commit_all(root, "files")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[int(q * (len(ordered) - 1))]


def measure(files: int, steps: int, cli: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="ar-step-") as tmp:
        root = Path(tmp).resolve()
        make_repo(root, files)
        campaign = load_campaign(root)
        agent_mode.start(campaign)
        target = agent_mode.workspace_path(campaign) / "pkg" / "mod_0000.py"
        engine, attempt = [], []
        for k in range(steps):
            # Every other edit is better (kept), the rest worse (rolled back).
            value = 100000 - k if k % 2 == 0 else 200000 + k
            target.write_text(f"X = {value}\n")
            began = time.monotonic()
            report = agent_mode.step(campaign, f"X = {value}")
            wall = time.monotonic() - began
            a = report.attempt
            assert a is not None and a["status"] in ("keep", "discard"), a
            record = json.loads((campaign.state_dir / "ledger.jsonl").read_text().splitlines()[-1])
            measured = record.get("measure_seconds", 0.0) + record.get("guard_seconds", 0.0)
            engine.append(wall - measured)
            attempt.append(record["engine_seconds"])
        cli_ms = []
        for k in range(cli):
            target.write_text(f"X = {300000 + k}\n")
            began = time.monotonic()
            proc = subprocess.run(
                [sys.executable, "-m", "autoresearch", "step", "--json"],
                cwd=root,
                capture_output=True,
                text=True,
                env={**os.environ},
            )
            wall = time.monotonic() - began
            assert proc.returncode == 0, proc.stderr
            record = json.loads((campaign.state_dir / "ledger.jsonl").read_text().splitlines()[-1])
            cli_ms.append(wall - record.get("measure_seconds", 0.0))
        return {
            "files": files,
            "engine_median_ms": 1000 * statistics.median(engine),
            "engine_p90_ms": 1000 * pct(engine, 0.9),
            "attempt_median_ms": 1000 * statistics.median(attempt),
            "cli_median_ms": 1000 * statistics.median(cli_ms) if cli_ms else float("nan"),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--sizes", default="100,2000")
    parser.add_argument("--cli", type=int, default=5)
    args = parser.parse_args()
    print(f"engine time per step (median of {args.steps} steps; excludes metric and guard)")
    print(
        f"{'files':>8} {'engine ms':>10} {'p90 ms':>8} {'attempt ms':>11} {'cli ms (process)':>17}"
    )
    for size in (int(s) for s in args.sizes.split(",")):
        row = measure(size, args.steps, args.cli)
        print(
            f"{row['files']:>8} {row['engine_median_ms']:>10.1f} {row['engine_p90_ms']:>8.1f} "
            f"{row['attempt_median_ms']:>11.1f} {row['cli_median_ms']:>17.1f}"
        )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
