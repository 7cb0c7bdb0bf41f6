"""What the sandbox costs: a trivial command and a real timing campaign, with and without it.

    python bench/sandbox_cost.py [--runs 40]

Prints the median start-up cost of one command (`true` through the engine's process
runner, in bubblewrap vs plain), measured side by side in one run, and the metric runs
per minute of `examples/speedup` with isolation on and off (interleaved, same machine).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from autoresearch.isolation.process import run_command
from autoresearch.isolation.sandbox import Boundary, Bwrap, allowed_env, bwrap_problem


def command_ms(work: Path, sandboxed: bool) -> float:
    boundary = Boundary(work, work / "tmp", hidden=(), env=allowed_env({"PATH": "/usr/bin:/bin"}))
    sandbox = Bwrap()
    wrap = (lambda argv, fd: sandbox.command(argv, boundary, fd)) if sandboxed else None
    env = sandbox.environment(boundary) if sandboxed else {"PATH": "/usr/bin:/bin"}
    began = time.perf_counter()
    result = run_command(
        "true",
        cwd=work,
        env=env,
        timeout=30,
        stdout_path=work / "out",
        stderr_path=work / "err",
        wrap=wrap,
        launch=sandbox.launcher() if sandboxed else None,  # the keyring filter, Landlock scope
    )
    assert result.ok, (work / "err").read_text()
    return (time.perf_counter() - began) * 1000


def speedup_throughput(isolation: str, attempts: int) -> tuple[int, float]:
    """(metric and guard runs, wall seconds) of examples/speedup run for `attempts`
    attempts. Guard runs count: the noisy rule decides how many metric runs an attempt
    takes, and a keep adds a guard run, so metric runs alone would differ by luck."""
    from autoresearch.cli.demo import prepare
    from autoresearch.config import load_campaign
    from autoresearch.engine import Engine
    from autoresearch.store.ledger import Ledger

    with tempfile.TemporaryDirectory() as folder:
        repo = prepare("speedup", Path(folder) / "speedup")
        config = repo / "autoresearch.toml"
        config.write_text(config.read_text() + f'\n[sandbox]\nisolation = "{isolation}"\n')
        campaign = load_campaign(repo)
        began = time.perf_counter()
        result = Engine(campaign, max_iterations=attempts).run()
        seconds = time.perf_counter() - began
        assert result.exit_code == 0, result
        records = Ledger(campaign.state_dir).read()
        runs = sum(r.metric_runs or 0 for r in records)
        runs += sum(1 for r in records if r.timings is not None and r.timings.guard > 0)
    return runs, seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40, help="commands per mode")
    parser.add_argument("--rounds", type=int, default=2, help="speedup campaigns per mode")
    parser.add_argument("--attempts", type=int, default=8, help="attempts per campaign")
    args = parser.parse_args()
    if min(args.runs, args.rounds, args.attempts) < 1:
        print("--runs, --rounds and --attempts must be at least 1", file=sys.stderr)
        return 2
    problem = bwrap_problem()
    if problem:
        print(f"cannot measure the sandbox here: {problem}", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        (work / "tmp").mkdir()
        plain: list[float] = []
        boxed: list[float] = []
        for _ in range(args.runs):  # interleaved, so drift hits both alike
            plain.append(command_ms(work, False))
            boxed.append(command_ms(work, True))
    p, b = statistics.median(plain), statistics.median(boxed)
    print(f"one command, median of {args.runs}: plain {p:.1f} ms, bubblewrap {b:.1f} ms")
    print(f"sandbox start-up cost: {b - p:.1f} ms per command")
    totals = {"none": [0, 0.0], "bwrap": [0, 0.0]}
    for _ in range(args.rounds):  # interleaved, so drift hits both alike
        for isolation in ("none", "bwrap"):
            runs, seconds = speedup_throughput(isolation, args.attempts)
            totals[isolation][0] += runs
            totals[isolation][1] += seconds
    rate = {k: 60 * runs / seconds for k, (runs, seconds) in totals.items()}
    print(
        f"examples/speedup, {args.rounds} x {args.attempts} attempts per mode: "
        f"{rate['none']:.1f} metric and guard runs/min without isolation, {rate['bwrap']:.1f} with "
        f"bubblewrap ({rate['bwrap'] / rate['none']:.2f}x)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
