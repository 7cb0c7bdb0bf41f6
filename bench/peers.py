"""The engine's own time per attempt beside a peer's, on one toy task, in one run.

    python bench/peers.py [--candidates 20] [--rounds 4] [--python PY] [--venv DIR]

The task: a file `solution.py` holding `X = <n>`; the metric is `sh score.sh`, which
prints n (one `sed`, no timing in it, smaller is better); a scripted proposer, in the
engine's own process, writes N fixed candidates one after another (every other one
better). The same task runs through

- autoresearch (this tree), its metric in bubblewrap (`[sandbox] isolation = "bwrap"`);
- hillclimb 0.8.2, installed with pip into a temporary virtual environment (it needs
  Python 3.12 or later: `--python`, else this interpreter when it is new enough, else
  `pyenv root`/versions/3.12+ or python3.1x on PATH), its proposer a scripted agent
  registered with `hillclimb.register_agent`, its verifier in its own bubblewrap sandbox
  (on by default on Linux); `--venv DIR` reuses an environment made before.

Each engine runs in a fresh process on a fresh folder, rounds interleaved (ours,
hillclimb, ours, ...), so a loaded machine's drift hits both alike; the bare metric
command is timed between them. An attempt's wall time is the time between two calls of
the scripted proposer: everything the engine does for one candidate (proposal, commit or
copy, sandbox, metric, decision, log). The overhead is that minus the metric's own time
(the bare command, started from Python) and the proposer's own time. The last line is
the ratio of ours to hillclimb's overhead, written like `0.80x`. Each engine's CPU time
per attempt (its process and the children it waited for, less the metric's) is printed
too: a loaded machine moves it far less than the wall time. `--before DIR` runs another
autoresearch source tree (an earlier commit's `git archive`) as a third engine.

OpenEvolve is not run: its proposer is an LLM answering in its own diff format, so a
loopback stand-in would be a script of the search rather than a model, and the
comparison would measure the script.

Where autoresearch's time per attempt goes on this task (a wall-clock trace of the
engine's steps, a 2-core machine shared with other work at load 1.3, so each figure moves
by a third from run to run), 32 ms from one proposal to the next:

    the metric run in bubblewrap      15 ms  the command itself 2 ms; bubblewrap's start,
                                             namespaces and mounts 5 ms; the shell that
                                             writes the command's record 0.7 ms; `bash -c`;
                                             the runner's pipes, threads and wait 2 ms
    git processes                     10 ms  add, write-tree, diff-tree (the changes and
                                             their line counts); restore on a discard
    state.json and the ledger          2 ms  three renames of state.json (ext4 flushes a
                                             file renamed over another), two fsyncs
    the measurement folder's move      1 ms  through its long-lived cat-file --batch
    the rest                           4 ms  fingerprints, the record, the memory file

Cut before these figures (the tree before, measured alongside with `--before`): the full
fork of the engine for every command (Python ran in the child between fork and exec: the
record, the keyring filter, the Landlock scope, the rlimits; now a launcher thread holds
the filter and the scope, and a shell writes the record and the limits, so CPython uses
vfork), a diff-tree, an ls-tree and a cat-file process per move of the measurement folder,
commit-tree (the commit object is written by the engine, the same bytes) and the
update-ref processes of the attempt's ref and the branch (one long-lived
`update-ref --stdin`); earlier still, the fsync of the in-flight number, a state write per
attempt, the proposer's `.git` remade after every attempt of a proposer that never reads
it, the home folder's allowlist resolved per command, `git diff --numstat`, two
`update-ref` of the engine's HEAD on a keep, the ledger read whole to chain each line. See
docs/architecture.md, the end of "The workspace and its git bookkeeping".
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HILLCLIMB = "hillclimb==0.8.2"
SCORE = 'sed -n "s/^X = //p" solution.py\n'
START = 1000


def cpu_seconds() -> float:
    """CPU time of this process and its children that ended: what an attempt costs the
    machine, whatever else runs on it."""
    own, children = (
        resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def candidate(k: int) -> int:
    """The k-th scripted candidate (k from 1): every other one better than the best."""
    return START - k if k % 2 == 1 else 2 * START + k


# -- autoresearch: run in a child process of this interpreter -------------------------------

OURS_CONFIG = """\
name = "toy"
scope = ["solution.py"]
harness = ["score.sh"]

[metric]
command = "sh score.sh"
direction = "minimize"

[stop]
max_iterations = {n}

[sandbox]
isolation = "{isolation}"
"""


def run_ours(n: int, isolation: str) -> dict[str, object]:
    """One campaign of `n` scripted candidates; the proposer's call times."""
    from autoresearch.config import load_campaign
    from autoresearch.engine import Engine
    from autoresearch.proposers.base import Proposal, ProposalContext, Proposer
    from autoresearch.store.ledger import StateFile

    calls: list[tuple[float, float]] = []

    class Scripted(Proposer):
        runs_commands = False  # it writes through its own code, like hillclimb's agent

        def propose(self, ctx: ProposalContext) -> Proposal:
            began = time.monotonic()
            k = len(calls) + 1
            (ctx.workspace / "solution.py").write_text(f"X = {candidate(k)}\n")
            calls.append((began, time.monotonic(), cpu_seconds()))
            return Proposal(description=f"candidate {k}")

    with tempfile.TemporaryDirectory(prefix="peers-ours-") as tmp:
        root = Path(tmp).resolve()
        (root / "solution.py").write_text(f"X = {START}\n")
        (root / "score.sh").write_text(SCORE)
        (root / "autoresearch.toml").write_text(OURS_CONFIG.format(n=n, isolation=isolation))
        identity = {
            "GIT_AUTHOR_NAME": "bench",
            "GIT_AUTHOR_EMAIL": "bench@localhost",
            "GIT_COMMITTER_NAME": "bench",
            "GIT_COMMITTER_EMAIL": "bench@localhost",
        }
        env = {**os.environ, **identity}
        for argv in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "start"]):
            subprocess.run(["git", *argv], cwd=root, env=env, check=True, capture_output=True)
        campaign = load_campaign(root)
        result = Engine(campaign, proposer=Scripted()).run()
        if result.stop_reason != "max_iterations":
            raise SystemExit(f"autoresearch stopped early: {result}")
        sandbox = str(StateFile(campaign.state_dir).read().get("isolation", "?"))
    return {"calls": calls, "sandbox": sandbox}


# -- hillclimb: a driver run by the virtual environment's interpreter -----------------------

HILLCLIMB_DRIVER = r"""
import json, os, resource, sys, time
from pathlib import Path

import hillclimb as hc
from hillclimb.agents.base import AgentResult
from hillclimb.api import sdk_config
from hillclimb.harness import sandbox

n, start = int(sys.argv[1]), int(sys.argv[2])
root = Path.cwd()
problem = root / "toy"
problem.mkdir()
(problem / "problem.yaml").write_text(
    "problem_id: toy\nmetric: x\nhigher_is_better: false\ndescription: description.md\n"
)
(problem / "description.md").write_text("Make X small.\n")
(problem / "score.sh").write_text(SCORE)
# The verifier runs in the candidate's folder (solution.py there) and reports the number.
(problem / "verifier.sh").write_text('#!/bin/sh\nsh problem/score.sh > "$HILLCLIMB_RESULT"\n')
os.chmod(problem / "verifier.sh", 0o755)
(problem / "solution.py").write_text(f"X = {start}\n")
calls = []

def cpu_seconds():
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime

def candidate(k):
    return start - k if k % 2 == 1 else 2 * start + k

class Scripted:
    name = "scripted"

    def invoke(self, request):
        began = time.monotonic()
        k = len(calls) + 1
        (request.candidate_dir / "solution.py").write_text(f"X = {candidate(k)}\n")
        calls.append((began, time.monotonic(), cpu_seconds()))
        return AgentResult(ok=True, session_id=f"scripted-{k}", duration_s=0.0)

hc.register_agent("scripted", Scripted)
config = sdk_config(agent="scripted")
# The solution's interpreter as it is: no runtime environment built (that would download).
config.paths.runtime_python = Path(sys.executable)
on = sandbox.active(config)
outcome = hc.run(
    str(problem), climber=hc.catalog.climber("greedy"), config=config,
    budget=hc.Budget(evaluations=n), learning=False, hints=False, log=lambda line: None,
)
if outcome.state != "done" or len(calls) != n:
    raise SystemExit(f"hillclimb ended {outcome.state} after {len(calls)} of {n} candidates")
print(json.dumps({"calls": calls, "sandbox": sandbox.backend() if on else "none"}))
""".replace("SCORE", repr(SCORE))


def new_enough(python: str) -> bool:
    try:
        out = subprocess.run(
            [python, "-c", "import sys; print(sys.version_info >= (3, 12))"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.stdout.strip() == "True"


def find_python(given: str | None) -> str | None:
    """An interpreter of Python 3.12 or later, which hillclimb requires."""
    if given:
        return given if new_enough(given) else None
    if sys.version_info >= (3, 12):
        return sys.executable
    found: list[str] = []
    try:
        pyenv = subprocess.run(["pyenv", "root"], capture_output=True, text=True, timeout=30)
        versions = Path(pyenv.stdout.strip()) / "versions"
        if pyenv.returncode == 0 and versions.is_dir():
            found += [str(v / "bin" / "python") for v in sorted(versions.iterdir(), reverse=True)]
    except (OSError, subprocess.TimeoutExpired):
        pass
    found += [p for p in (shutil.which(f"python3.{m}") for m in range(20, 11, -1)) if p]
    return next((p for p in found if Path(p).is_file() and new_enough(p)), None)


def make_venv(python: str, where: Path) -> Path:
    """A virtual environment at `where` with hillclimb installed (pip, the registry)."""
    bin_python = where / "bin" / "python"
    if bin_python.is_file():
        check = subprocess.run([bin_python, "-c", "import hillclimb"], capture_output=True)
        if check.returncode == 0:
            return bin_python
    subprocess.run([python, "-m", "venv", str(where)], check=True)
    done = subprocess.run(
        [bin_python, "-m", "pip", "install", "-q", "--disable-pip-version-check", HILLCLIMB],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-5:])
        raise SystemExit(f"pip could not install {HILLCLIMB} into {where}:\n{tail}")
    return bin_python


def run_hillclimb(python: Path, n: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="peers-hillclimb-") as tmp:
        driver = Path(tmp) / "driver.py"
        driver.write_text(HILLCLIMB_DRIVER)
        work = Path(tmp) / "work"
        work.mkdir()
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        done = subprocess.run(
            [str(python), str(driver), str(n), str(START)],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise SystemExit(f"hillclimb failed:\n{done.stderr[-3000:]}")
        result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
        return result


def run_child_ours(n: int, isolation: str, source: Path | None = None) -> dict[str, object]:
    """A campaign in a child process: of this tree, or of the one at `source` (its src/)."""
    env = dict(os.environ)
    if source is not None:
        env["PYTHONPATH"] = str(source / "src")
    done = subprocess.run(
        [sys.executable, __file__, "--child", str(n), "--isolation", isolation],
        capture_output=True,
        text=True,
        env=env,
    )
    if done.returncode != 0:
        raise SystemExit(f"autoresearch failed:\n{done.stderr[-3000:]}")
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def bare_metric_ms(runs: int) -> list[tuple[float, float]]:
    """The metric's own (wall, CPU) time in ms: `sh score.sh` started from Python, no
    engine around it."""
    out = []
    with tempfile.TemporaryDirectory(prefix="peers-metric-") as tmp:
        folder = Path(tmp)
        (folder / "score.sh").write_text(SCORE)
        (folder / "solution.py").write_text(f"X = {START}\n")
        for _ in range(runs):
            began, cpu = time.perf_counter(), cpu_seconds()
            subprocess.run(["sh", "score.sh"], cwd=folder, capture_output=True, check=True)
            out.append((1000 * (time.perf_counter() - began), 1000 * (cpu_seconds() - cpu)))
    return out


def attempts_ms(result: dict[str, object]) -> tuple[list[float], list[float], list[float]]:
    """(wall time of each attempt, the proposer's own time in each, the CPU time of each),
    in ms."""
    calls = result["calls"]
    assert isinstance(calls, list)
    walls = [1000 * (b[0] - a[0]) for a, b in itertools.pairwise(calls)]
    own = [1000 * (a[1] - a[0]) for a in calls[:-1]]
    cpu = [1000 * (b[2] - a[2]) for a, b in itertools.pairwise(calls)]
    return walls, own, cpu


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[int(q * (len(ordered) - 1))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--candidates", type=int, default=20, help="scripted candidates per run")
    parser.add_argument("--rounds", type=int, default=4, help="runs of each engine, interleaved")
    parser.add_argument("--python", help="a Python 3.12+ interpreter for hillclimb")
    parser.add_argument("--venv", type=Path, help="hillclimb's virtual environment (kept)")
    parser.add_argument("--isolation", default="bwrap", choices=["bwrap", "none"])
    parser.add_argument(
        "--before",
        type=Path,
        help="another autoresearch source tree (say, an earlier commit's) measured alongside",
    )
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(run_ours(args.child, args.isolation)))
        return 0
    if args.candidates < 3 or args.rounds < 1:
        print("--candidates must be at least 3 and --rounds at least 1", file=sys.stderr)
        return 2
    python = find_python(args.python)
    if python is None:
        print(
            "hillclimb needs Python 3.12 or later and none was found (--python, this "
            "interpreter, `pyenv root`/versions, python3.1x on PATH): pass --python PATH",
            file=sys.stderr,
        )
        return 1
    with tempfile.TemporaryDirectory(prefix="peers-venv-") as tmp:
        venv = args.venv.resolve() if args.venv else Path(tmp) / "venv"
        print(f"hillclimb: {HILLCLIMB} with {python}, in {venv}", flush=True)
        hc_python = make_venv(python, venv)
        return compare(args, hc_python)


def compare(args: argparse.Namespace, hc_python: Path) -> int:
    n, rounds = args.candidates, args.rounds
    engines = ["autoresearch", "hillclimb"] + (["before"] if args.before else [])
    print(
        f"toy task: {n} scripted candidates per run, {rounds} runs per engine interleaved "
        f"({', '.join(engines)}, then backwards, ...), each in a fresh process and folder; "
        f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f} (a shared machine: the "
        "figures move from run to run, the ratio less)",
        flush=True,
    )
    walls: dict[str, list[float]] = {e: [] for e in engines}
    own: dict[str, list[float]] = {e: [] for e in engines}
    cpus: dict[str, list[float]] = {e: [] for e in engines}
    sandboxes: dict[str, str] = {}
    metric: list[tuple[float, float]] = []
    for r in range(rounds):
        order = engines if r % 2 == 0 else engines[::-1]
        for engine in order:
            metric += bare_metric_ms(5)
            if engine == "autoresearch":
                result = run_child_ours(n, args.isolation)
            elif engine == "before":
                result = run_child_ours(n, args.isolation, args.before.resolve())
            else:
                result = run_hillclimb(hc_python, n)
            sandboxes[engine] = str(result["sandbox"])
            w, o, c = attempts_ms(result)
            walls[engine] += w
            own[engine] += o
            cpus[engine] += c
        print(f"  round {r + 1}/{rounds} done", flush=True)
    metric_ms = statistics.median(m[0] for m in metric)
    metric_cpu = statistics.median(m[1] for m in metric)
    print(
        f"the metric's own time (bare `sh score.sh`, median of {len(metric)}): {metric_ms:.1f} ms, "
        f"{metric_cpu:.1f} ms of CPU"
    )
    print(
        "OpenEvolve: not measured here: its proposer is an LLM whose answers must be diffs in "
        "its own format, so a loopback stand-in model would script the search rather than "
        "stand in for a model; hillclimb's scripted agent is the like-for-like peer"
    )
    header = f"{'engine':<14} {'sandbox':>8} {'attempts':>9} {'wall ms':>8}"
    print(f"{header} {'overhead ms':>12} {'p90':>7} {'CPU ms':>7}")
    overhead: dict[str, float] = {}
    for engine in engines:
        extra = [w - metric_ms - o for w, o in zip(walls[engine], own[engine], strict=True)]
        overhead[engine] = statistics.median(extra)
        print(
            f"{engine:<14} {sandboxes[engine]:>8} {len(extra):>9} "
            f"{statistics.median(walls[engine]):>8.1f} {overhead[engine]:>12.1f} "
            f"{pct(extra, 0.9):>7.1f} {statistics.median(cpus[engine]) - metric_cpu:>7.1f}"
        )
    if args.before:
        before = overhead["before"] / overhead["hillclimb"]
        print(f"before: {args.before} (autoresearch as it was there), {before:.2f}x hillclimb's")
    ratio = overhead["autoresearch"] / overhead["hillclimb"]
    print(f"overhead per attempt, autoresearch / hillclimb: {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
