"""Crash safety, bounded output and clean timeouts, measured on real campaigns.

1. SIGKILL at random moments: each campaign is started and killed with SIGKILL at a random
   time (while proposing, committing, measuring, guarding, logging or rolling back), again
   and again, then run to the end. A campaign has recovered when `autoresearch verify` passes
   (hash chain, refs, branch at the best commit), the numbering has no gap or repeat, the
   worktree is clean, the user's checkout is untouched, no process of the campaign is left,
   and the result is the one an uninterrupted run reaches.
2. A metric that prints 2 GB: the engine's peak memory and the size of the log it keeps.
3. Timeouts: metric commands that start background processes and then hang; how many of
   their processes are left afterwards.

    python bench/reliability.py [--campaigns 10] [--kills 5] [--seed 1]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from autoresearch.attempt import Status
from autoresearch.store.ledger import Ledger
from gitrepo import commit_all, git

MARK = "AR_RELIABILITY_MARK"

PROPOSER = r"""#!/bin/bash
sleep 0.$((RANDOM % 3))
case "$AUTORESEARCH_ITERATION" in
  1) sed -i 's/^N = .*/N = 7/' calc.py;;
  2) sed -i 's/^N = .*/N = 9/' calc.py;;
  3) sed -i 's/^N = .*/N = 5/' calc.py;;
  4) sed -i 's/^N = .*/N = "x"/' calc.py;;
  5) echo note > notes.txt;;
  6) true;;
  *) sed -i 's/^N = .*/N = 3/' calc.py;;
esac
echo "attempt $AUTORESEARCH_ITERATION"
"""

CONFIG = """\
name = "rel"
scope = ["calc.py"]
harness = ["bench.py"]

[metric]
command = "sleep 0.1; python bench.py"
direction = "minimize"
target = 0

[guard]
command = "sleep 0.05; python -c 'import calc; assert calc.N != 5'"

[stop]
max_iterations = 10

[proposer]
kind = "command"
command = "bash {proposer}"
"""


def cli(cwd: Path, *args: str, **kwargs: object) -> subprocess.Popen[str]:
    env = {**os.environ, MARK: "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "autoresearch", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        **kwargs,
    )  # type: ignore[call-overload]


def marked_processes() -> list[int]:
    """Processes started by the engines of this benchmark that are still running."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            if f"{MARK}=1".encode() in (proc / "environ").read_bytes():
                state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
                if state not in ("Z", "X"):
                    found.append(int(proc.name))
        except OSError:
            continue
    return found


def checkout_snapshot(repo: Path) -> tuple[str, str, dict[str, bytes]]:
    files = {
        str(p.relative_to(repo)): p.read_bytes()
        for p in repo.rglob("*")
        if p.is_file() and p.relative_to(repo).parts[0] not in (".git", ".autoresearch")
    }
    return git(repo, "rev-parse", "HEAD"), git(repo, "status", "--porcelain"), files


def kill_campaign(base: Path, kills: int, rng: random.Random) -> tuple[bool, list[str]]:
    base.mkdir(parents=True)
    proposer = base / "propose.sh"
    proposer.write_text(PROPOSER)
    repo = base / "repo"
    repo.mkdir()
    (repo / "calc.py").write_text("N = 10\n")
    (repo / "bench.py").write_text("import calc\nprint(f'score: {abs(calc.N - 3)}')\n")
    (repo / "autoresearch.toml").write_text(CONFIG.format(proposer=proposer))
    commit_all(repo)
    before = checkout_snapshot(repo)
    problems: list[str] = []
    for _ in range(kills):
        engine = cli(repo, "run")
        time.sleep(rng.uniform(0.05, 2.5))
        engine.send_signal(signal.SIGKILL)
        engine.wait()
    final = cli(repo, "run")
    _, err = final.communicate(timeout=300)
    if final.returncode != 0:
        problems.append(f"the final run exited {final.returncode}: {err.strip()[-200:]}")
    verify = subprocess.run(
        [sys.executable, "-m", "autoresearch", "verify"], cwd=repo, capture_output=True, text=True
    )
    if verify.returncode != 0:
        problems.append("verify: " + verify.stdout.strip().replace("\n", "; "))
    records = Ledger(repo / ".autoresearch/rel").read()
    numbers = [r.iteration for r in records]
    if numbers != list(range(len(numbers))):
        problems.append(f"numbering {numbers}")
    best = [r for r in records if r.status is Status.KEEP]
    if not best or best[-1].metric != 0:
        problems.append("the campaign did not reach N = 3")
    if git(repo, "show", "autoresearch/rel:calc.py") != "N = 3\n":
        problems.append("the branch does not hold N = 3")
    worktree = repo / ".autoresearch/rel/worktree"
    if git(worktree, "status", "--porcelain", "--ignored"):
        problems.append("the worktree is not clean")
    if checkout_snapshot(repo) != before:
        problems.append("the user's checkout changed")
    leftover = marked_processes()
    if leftover:
        problems.append(f"{len(leftover)} processes left")
        for pid in leftover:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    return not problems, problems


def peak_memory_with_huge_output(base: Path, size: int) -> tuple[float, int, float]:
    repo = base / "huge"
    repo.mkdir()
    (repo / "calc.py").write_text("N = 1\n")
    (repo / "autoresearch.toml").write_text(f"""\
name = "huge"
scope = ["calc.py"]
[metric]
command = "head -c {size} /dev/zero | tr '\\\\0' x; echo; echo 42"
direction = "minimize"
timeout = 600
[stop]
max_iterations = 0
[proposer]
kind = "command"
command = "true"
""")
    commit_all(repo)
    wrapper = (
        "import resource, subprocess, sys, time\n"
        "t = time.monotonic()\n"
        "subprocess.run([sys.executable, '-m', 'autoresearch', 'run', '--quiet'], check=True,"
        " stdout=subprocess.DEVNULL)\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, time.monotonic() - t)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", wrapper], cwd=repo, capture_output=True, text=True, check=True
    ).stdout.split()
    log = repo / ".autoresearch/huge/logs/0000-metric-1.out"
    metric = json.loads((repo / ".autoresearch/huge/ledger.jsonl").read_text().splitlines()[0])
    assert metric["metric"] == 42, metric
    return int(out[0]) / 1024, log.stat().st_size, float(out[1])


def leftovers_after_timeouts(base: Path, count: int) -> int:
    repo = base / "timeouts"
    repo.mkdir()
    (repo / "calc.py").write_text("N = 1\n")
    (repo / "autoresearch.toml").write_text("""\
name = "to"
scope = ["calc.py"]
[metric]
command = "sleep 300 & sleep 300 & (sleep 300 &) ; python -c 'import time; time.sleep(300)'"
direction = "minimize"
timeout = 1
[proposer]
kind = "command"
command = "true"
""")
    commit_all(repo)
    for _ in range(count):
        run = cli(repo, "check")
        run.wait(timeout=120)
    time.sleep(0.5)
    return len(marked_processes())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--campaigns", type=int, default=10)
    parser.add_argument("--kills", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--output-bytes", type=int, default=2_000_000_000)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    recovered = 0
    with tempfile.TemporaryDirectory(prefix="ar-reliability-") as tmp:
        for c in range(args.campaigns):
            ok, problems = kill_campaign(Path(tmp) / f"c{c}", args.kills, rng)
            recovered += ok
            status = "recovered" if ok else "FAILED: " + "; ".join(problems)
            print(f"campaign {c + 1}: {args.kills} SIGKILLs, {status}", flush=True)
        total = args.campaigns * args.kills
        print(
            f"\nSIGKILL at {total} random points over {args.campaigns} campaigns: "
            f"{recovered}/{args.campaigns} campaigns recovered consistently "
            f"({recovered * args.kills}/{total} kills)"
        )
        peak, log_size, seconds = peak_memory_with_huge_output(Path(tmp), args.output_bytes)
        print(
            f"metric printing {args.output_bytes / 1e9:.1f} GB: engine peak RSS "
            f"{peak:.0f} MB, log kept {log_size / 1e6:.1f} MB, {seconds:.1f} s"
        )
        print(
            f"processes left after 5 timed-out metrics that start background jobs: "
            f"{leftovers_after_timeouts(Path(tmp), 5)}"
        )


if __name__ == "__main__":
    main()
