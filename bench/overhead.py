"""The engine's own time per attempt, apart from what the proposer and the metric do.

Runs a real campaign of 50 attempts (a command proposer, a shell-builtin metric) on
generated repositories of 100 and 10,000 files and prints, per attempt:

- engine ms: `engine_seconds` of the ledger (git bookkeeping, scope checks,
  fingerprints, the record), which leaves out the commands and what comes after the
  record (the ledger's write, the roll-back);
- attempt ms: the whole attempt, from one record to the next, minus the commands' own
  time (each command run bare, `bash -c`, from this process): the engine's cost
  including the sandbox's start-up for the proposer and the metric, the ledger and the
  roll-back. This is the figure to hold against a budget.

Each campaign runs in a fresh process; `--before DIR` measures another source tree (an
earlier commit's, say) alongside, interleaved, so one invocation compares them on the
same (possibly loaded) machine. `--rounds N` runs N campaigns of each, alternating which
goes first, and pools their attempts: on a shared machine the load moves by half from one
minute to the next, and one campaign each would compare two different minutes.

    python bench/overhead.py [--attempts 50] [--rounds 1] [--sizes 100,10000] [--before DIR]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CONFIG = """\
name = "bench"
scope = ["pkg/mod_0000.py"]
harness = ["bench.py"]

[metric]
command = "{metric}"
direction = "minimize"

[stop]
max_iterations = {attempts}

[sandbox]
isolation = "{isolation}"

[proposer]
kind = "command"
command = "{proposer}"
"""
METRIC = "echo $(( 1000 - (AUTORESEARCH_ITERATION % 2) * AUTORESEARCH_ITERATION ))"
PROPOSER = 'echo "X = $AUTORESEARCH_ITERATION" > pkg/mod_0000.py'


def make_repo(root: Path, files: int, attempts: int, isolation: str = "bwrap") -> None:
    from gitrepo import commit_all

    per_dir = 100
    for i in range(files):
        folder = root / "pkg" if i == 0 else root / "pkg" / f"d{i // per_dir:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        name = "mod_0000.py" if i == 0 else f"mod_{i:05d}.py"
        (folder / name).write_text(f"X = {i}\n" + "# filler line\n" * 20)
    (root / "bench.py").write_text("print(1)\n")
    config = CONFIG.format(
        attempts=attempts,
        isolation=isolation,
        metric=METRIC,
        proposer=PROPOSER.replace('"', '\\"'),
    )
    (root / "autoresearch.toml").write_text(config)
    commit_all(root, "files")


def bare_ms(root: Path, runs: int = 5) -> float:
    """The proposer's and the metric's own time: each command run bare with bash."""
    env = {**os.environ, "AUTORESEARCH_ITERATION": "1"}
    out = []
    for _ in range(runs):
        began = time.perf_counter()
        for command in (PROPOSER, METRIC):
            subprocess.run(["bash", "-c", command], cwd=root, env=env, capture_output=True)
        out.append(1000 * (time.perf_counter() - began))
    subprocess.run(["git", "checkout", "-q", "--", "."], cwd=root)
    return statistics.median(out)


def measure(files: int, attempts: int, isolation: str) -> dict[str, object]:
    from autoresearch.attempt import Status
    from autoresearch.config import load_campaign
    from autoresearch.engine import Engine
    from autoresearch.events import Attempted, Event
    from autoresearch.store.ledger import Ledger

    with tempfile.TemporaryDirectory(prefix="ar-overhead-") as tmp:
        root = Path(tmp).resolve()
        make_repo(root, files, attempts, isolation)
        bare = bare_ms(root)
        campaign = load_campaign(root)
        landed: list[float] = []

        def heard(event: Event) -> None:
            if isinstance(event, Attempted):
                landed.append(time.monotonic())

        result = Engine(campaign, on_event=heard).run()
        assert result.stop_reason == "max_iterations", result
        records = [r for r in Ledger(campaign.state_dir).read() if r.iteration > 0]
        statuses = {r.status for r in records}
        assert statuses == {Status.KEEP, Status.DISCARD}, statuses
        engine = [1000 * r.timings.engine for r in records if r.timings is not None]
        walls = [1000 * (b - a) for a, b in itertools.pairwise(landed)]
        return {"engine": engine, "walls": walls, "bare": bare}


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[int(q * (len(ordered) - 1))]


def child(files: int, attempts: int, isolation: str, source: Path | None) -> dict[str, object]:
    env = dict(os.environ)
    bench = str(Path(__file__).resolve().parent)
    if source is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(source / "src"), bench])
    else:
        env["PYTHONPATH"] = os.pathsep.join([*sys.path[:1], env.get("PYTHONPATH", ""), bench])
    argv = [sys.executable, __file__, "--child", f"{files},{attempts},{isolation}"]
    done = subprocess.run(argv, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise SystemExit(f"the campaign failed:\n{done.stderr[-3000:]}")
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attempts", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=1, help="campaigns of each, interleaved")
    parser.add_argument("--sizes", default="100,10000")
    parser.add_argument("--isolation", default="bwrap,none")
    parser.add_argument("--before", type=Path, help="another source tree, measured alongside")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        files, attempts, isolation = args.child.split(",")
        print(json.dumps(measure(int(files), int(attempts), isolation)))
        return 0
    from autoresearch.isolation.sandbox import bwrap_problem

    modes = [m for m in args.isolation.split(",") if m != "bwrap" or not bwrap_problem()]
    sources: list[tuple[str, Path | None]] = [("this tree", None)]
    if args.before:
        sources.append(("before", args.before.resolve()))
    print(
        f"engine time per attempt (median of {args.rounds} x {args.attempts} attempts) on "
        f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; engine ms: the ledger's "
        "engine_seconds; attempt ms: record to record minus the commands' own time, "
        "sandbox start-up, ledger and roll-back included"
    )
    print(
        f"{'files':>7} {'isolation':>9} {'source':>10} {'engine ms':>10} {'p90':>6} "
        f"{'attempt ms':>11} {'p90':>6}"
    )
    for size in (int(s) for s in args.sizes.split(",")):
        for isolation in modes:
            # Interleaved, first one then the other, so drift hits both alike.
            pooled: dict[str, tuple[list[float], list[float]]] = {n: ([], []) for n, _ in sources}
            for round_ in range(args.rounds):
                for name, source in sources if round_ % 2 == 0 else sources[::-1]:
                    row = child(size, args.attempts, isolation, source)
                    engine, walls, bare = row["engine"], row["walls"], row["bare"]
                    assert isinstance(engine, list) and isinstance(walls, list)
                    assert isinstance(bare, float)
                    pooled[name][0].extend(engine)
                    pooled[name][1].extend(w - bare for w in walls)
            for name, _ in sources:
                engine, extra = pooled[name]
                print(
                    f"{size:>7} {isolation:>9} {name:>10} {statistics.median(engine):>10.1f} "
                    f"{pct(engine, 0.9):>6.1f} {statistics.median(extra):>11.1f} "
                    f"{pct(extra, 0.9):>6.1f}",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
