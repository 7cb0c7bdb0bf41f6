"""Readers never take the engine's lock; `stop` signals only the engine; `clean` and `list`.

Real engines in their own processes: the lock and signals are what is under test.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from autoresearch.views.status import campaign_status, is_running
from campaigns import script_campaign
from conftest import Runner, git, ledger


def engine(repo: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "autoresearch", "run", *args],
        cwd=repo,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for_phase(repo: Path, phase: str, name: str = "t") -> None:
    state = repo / ".autoresearch" / name / "state.json"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if state.exists() and json.loads(state.read_text() or "{}").get("phase") == phase:
            return
        time.sleep(0.05)
    raise AssertionError(f"the engine never reached {phase}")


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    """A process that is not an engine."""
    proc = subprocess.Popen(["sleep", "120"])
    yield proc
    proc.kill()
    proc.wait()


def hold_lock(path: Path) -> subprocess.Popen[str]:
    """Another process holding the campaign's engine lock, as an engine does."""
    code = (
        "import sys, time\nfrom filelock import FileLock\n"
        f"lock = FileLock({str(path)!r}, timeout=0); lock.acquire()\n"
        "print('held', flush=True); time.sleep(120)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def test_status_polling_never_makes_a_run_fail(tmp_path: Path, cli: Runner) -> None:
    repo = script_campaign(tmp_path, "echo nothing\n", **{"stop.max_iterations": 1})
    assert cli(repo, "run").returncode == 0
    state_dir = repo / ".autoresearch/t"
    stop = threading.Event()
    polls = [0]

    def poll() -> None:
        while not stop.is_set():
            is_running(state_dir)
            campaign_status(state_dir)
            polls[0] += 1

    pollers = [threading.Thread(target=poll) for _ in range(4)]
    for thread in pollers:
        thread.start()
    try:
        for total in range(2, 10):
            # One more attempt per run; every start races the pollers for the lock.
            result = cli(repo, "run", "--max-iterations", str(total))
            assert result.returncode == 0, result.stderr
            outside = cli(repo, "status", "--json")
            assert outside.returncode == 0, outside.stderr
    finally:
        stop.set()
        for thread in pollers:
            thread.join()
    assert polls[0] > 100
    assert len(ledger(repo, "t")) == 10


def test_status_shows_the_attempt_and_phase_and_stop_rolls_it_back(
    tmp_path: Path, cli: Runner
) -> None:
    repo = script_campaign(
        tmp_path,
        'if [ "$AUTORESEARCH_ITERATION" = 2 ]; then echo "N = 1" > calc.py; sleep 60; fi\n'
        'echo "N = 5" > calc.py\n',
        **{"stop.max_iterations": 5, "proposer.timeout": 120},
    )
    first = engine(repo)
    try:
        wait_for_phase(repo, "proposing")
        deadline = time.monotonic() + 60
        while json.loads((repo / ".autoresearch/t/state.json").read_text())["iteration"] != 2:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        shown = cli(repo, "status")
        assert shown.returncode == 0, shown.stderr
        assert f"running (pid {first.pid}, attempt 2, proposing)" in shown.stdout
        data = json.loads(cli(repo, "status", "--json").stdout)
        assert sum(data["attempt_counts"].values()) == data["iterations"] == 1
        listed = json.loads(cli(repo, "list", "--json").stdout)
        assert [(c["name"], c["state"], c["pid"]) for c in listed] == [("t", "running", first.pid)]
        refused = cli(repo, "clean", "t")
        assert refused.returncode == 1 and "is running" in refused.stderr
        assert (repo / ".autoresearch/t/worktree").is_dir()
        stopped = cli(repo, "stop", "t")
        assert stopped.returncode == 0, stopped.stderr
        assert first.poll() is not None  # the engine had exited when stop returned
    finally:
        if first.poll() is None:
            first.kill()
        first.wait(timeout=30)
    records = ledger(repo, "t")
    assert [r["status"] for r in records][-1] == "interrupted"
    assert git(repo / ".autoresearch/t/worktree", "status", "--porcelain") == ""
    assert (repo / ".autoresearch/t/worktree/calc.py").read_text() == "N = 5\n"
    again = cli(repo, "stop", "t")
    assert again.returncode == 1 and "not running" in again.stderr


def test_stop_never_signals_a_process_that_is_not_the_engine(
    tmp_path: Path, cli: Runner, sleeper: subprocess.Popen[bytes]
) -> None:
    repo = script_campaign(tmp_path, "echo nothing\n", **{"stop.max_iterations": 1})
    assert cli(repo, "run").returncode == 0
    state_path = repo / ".autoresearch/t/state.json"
    state = json.loads(state_path.read_text())
    # A reused pid: state.json names a live process that is not the engine.
    state_path.write_text(json.dumps({**state, "pid": sleeper.pid, "running": True}))
    nothing = cli(repo, "stop", "t")
    assert nothing.returncode == 1 and "not running" in nothing.stderr
    holder = hold_lock(repo / ".autoresearch/t/engine.lock")
    try:
        refused = cli(repo, "stop", "t", "--timeout", "5")
        assert refused.returncode == 1 and "nothing was signalled" in refused.stderr
        assert holder.poll() is None and sleeper.poll() is None
        status = json.loads(cli(repo, "status", "--json").stdout)
        assert status["running"] is True and status["pid"] == holder.pid
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert sleeper.poll() is None


def test_clean_keeps_the_ledger_and_the_branch_unless_asked(tmp_path: Path, cli: Runner) -> None:
    repo = script_campaign(tmp_path, 'echo "N = $((10 - AUTORESEARCH_ITERATION))" > calc.py\n')
    assert cli(repo, "run").returncode == 0
    state_dir = repo / ".autoresearch/t"
    listed = json.loads(cli(repo, "list", "--json").stdout)
    assert len(listed) == 1 and listed[0]["attempts"] == 3 and listed[0]["best"] == 7
    assert listed[0]["state"] == "stopped" and listed[0]["disk_bytes"] > 0
    branch = git(repo, "rev-parse", "autoresearch/t")
    ledger_bytes = (state_dir / "ledger.jsonl").read_bytes()
    result = cli(repo, "clean", "t")
    assert result.returncode == 0, result.stderr
    assert not (state_dir / "worktree").exists() and not (state_dir / "logs").exists()
    assert git(repo, "for-each-ref", "refs/autoresearch/t/") == ""
    assert git(repo, "rev-parse", "autoresearch/t") == branch
    assert (state_dir / "ledger.jsonl").read_bytes() == ledger_bytes
    assert "autoresearch/t" not in git(repo, "worktree", "list")
    assert cli(repo, "verify").returncode == 0
    assert cli(repo, "list").returncode == 0
    assert cli(repo, "clean", "t", "--branch").returncode == 0
    assert git(repo, "branch", "--list", "autoresearch/t") == ""
    missing = cli(repo, "clean", "nope")
    assert missing.returncode == 2 and "no campaign 'nope'" in missing.stderr
