"""The engine's own time per attempt, apart from the proposer and the metric/guard commands.

Runs a real campaign of 50 attempts on generated repositories of 100 and 10,000 files and
prints the median and 90th percentile of `engine_seconds` (git bookkeeping, scope checks,
fingerprints, ledger writes), read back from the ledger.

    python bench/overhead.py [--attempts 50] [--sizes 100,10000]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from autoresearch.attempt import Status
from autoresearch.config import load_campaign
from autoresearch.engine import Engine
from autoresearch.isolation.sandbox import bwrap_problem
from autoresearch.store.ledger import Ledger
from gitrepo import commit_all

CONFIG = """\
name = "bench"
scope = ["pkg/mod_0000.py"]
harness = ["bench.py"]

[metric]
command = "echo $(( 1000 - (AUTORESEARCH_ITERATION % 2) * AUTORESEARCH_ITERATION ))"
direction = "minimize"

[stop]
max_iterations = {attempts}

[sandbox]
isolation = "{isolation}"

[proposer]
kind = "command"
command = "echo \\"X = $AUTORESEARCH_ITERATION\\" > pkg/mod_0000.py"
"""


def make_repo(root: Path, files: int, attempts: int, isolation: str = "bwrap") -> None:
    per_dir = 100
    for i in range(files):
        folder = root / "pkg" if i == 0 else root / "pkg" / f"d{i // per_dir:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        name = "mod_0000.py" if i == 0 else f"mod_{i:05d}.py"
        (folder / name).write_text(f"X = {i}\n" + "# filler line\n" * 20)
    (root / "bench.py").write_text("print(1)\n")
    config = CONFIG.format(attempts=attempts, isolation=isolation)
    (root / "autoresearch.toml").write_text(config)
    commit_all(root, "files")


def measure(files: int, attempts: int, isolation: str) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="ar-overhead-") as tmp:
        root = Path(tmp).resolve()
        make_repo(root, files, attempts, isolation)
        campaign = load_campaign(root)
        started = time.monotonic()
        result = Engine(campaign).run()
        wall = time.monotonic() - started
        assert result.stop_reason == "max_iterations", result
        records = [r for r in Ledger(campaign.state_dir).read() if r.iteration > 0]
        engine = sorted(r.timings.engine for r in records if r.timings is not None)
        statuses = {r.status for r in records}
        assert statuses == {Status.KEEP, Status.DISCARD}, statuses
        return {
            "files": files,
            "attempts": len(records),
            "median_ms": 1000 * statistics.median(engine),
            "p90_ms": 1000 * engine[int(0.9 * (len(engine) - 1))],
            "wall_s_per_attempt": wall / len(records),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attempts", type=int, default=50)
    parser.add_argument("--sizes", default="100,10000")
    args = parser.parse_args()
    print(
        f"engine overhead per attempt (median of {args.attempts} attempts; "
        "excludes proposer, metric and guard)"
    )
    print(
        "isolation bwrap: proposer, metric and guard sandboxed (the checkout is not mounted, "
        "so it is not watched); none: the checkout is scanned before and after each proposer run"
    )
    modes = ["none"] if bwrap_problem() else ["bwrap", "none"]
    print(f"{'files':>8} {'isolation':>10} {'median ms':>10} {'p90 ms':>8} {'wall s/attempt':>15}")
    for size in (int(s) for s in args.sizes.split(",")):
        for isolation in modes:
            row = measure(size, args.attempts, isolation)
            print(
                f"{row['files']:>8} {isolation:>10} {row['median_ms']:>10.1f} "
                f"{row['p90_ms']:>8.1f} {row['wall_s_per_attempt']:>15.3f}"
            )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
