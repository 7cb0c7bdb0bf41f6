"""Runs the engine did not end are not the candidate's fault: a metric or guard run killed
by a signal from outside the engine (an OOM killer, another process's kill) is made once
more, and if that one is killed too the attempt is `interrupted` with the signal named,
never the candidate's crash or a dead end. Real subprocesses, real signals."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from autoresearch.attempt import Status
from autoresearch.config import load_campaign
from autoresearch.engine import Engine
from autoresearch.learning.memory import memory_text
from autoresearch.store.ledger import Ledger
from campaigns import script_campaign

LOWER = 'sed -i "s/^N = .*/N = $((10 - AUTORESEARCH_ITERATION))/" calc.py\n'
# Kills itself with SIGKILL, as another process would, the first `times` runs on a
# candidate (N below 10); the marker folder lies outside the sandbox's view of the repo.
KILLED = """import calc, os, signal
marks = {marks!r}
if calc.N < 10:
    done = len(os.listdir(marks))
    if done < {times}:
        open(os.path.join(marks, str(done)), "w").close()
        os.kill(os.getpid(), signal.SIGKILL)
print(calc.N)
"""


def campaign(tmp_path: Path, times: int, **extra: object) -> Path:
    marks = tmp_path / "marks"
    marks.mkdir()
    return script_campaign(
        tmp_path,
        LOWER,
        bench=KILLED.format(marks=str(marks), times=times),
        **{"stop.max_iterations": 1, "sandbox.writable": [str(marks)], **extra},  # type: ignore[arg-type]
    )


def test_a_run_killed_from_outside_once_is_made_again_and_judged(tmp_path: Path) -> None:
    repo = campaign(tmp_path, times=1)
    result = Engine(load_campaign(repo)).run()
    assert result.exit_code == 0, result.message
    records = Ledger(repo / ".autoresearch" / "t").read()
    assert records[-1].status is Status.KEEP, records[-1]
    assert records[-1].metric_runs == 2  # the killed run is counted: it cost its time
    logs = repo / ".autoresearch" / "t" / "logs"
    assert list(logs.glob("0001-metric-1-again.out")), sorted(p.name for p in logs.iterdir())


def test_a_run_killed_from_outside_twice_is_interrupted_not_a_crash(tmp_path: Path) -> None:
    repo = campaign(tmp_path, times=2)
    result = Engine(load_campaign(repo)).run()
    assert result.exit_code == 0, result.message
    record = Ledger(repo / ".autoresearch" / "t").read()[-1]
    assert record.status is Status.INTERRUPTED, record
    assert record.reason and "killed by SIGKILL from outside the engine" in record.reason
    assert not record.status.dead_end and not record.status.failed_or_refused
    memory = memory_text("t", "minimize", Ledger(repo / ".autoresearch" / "t").read())
    assert "SIGKILL" not in memory  # never listed to the proposer as a dead end


# Killed from outside on its first run; on the run made again it rewrites the judge and is
# killed too: a kill must be no cover for a tamper.
TAMPER_ON_RETRY = """import calc, os, signal
marks = {marks!r}
if calc.N < 10:
    if os.listdir(marks):
        with open(__file__, "a") as judge:
            judge.write("# rewritten\\n")
    open(os.path.join(marks, str(len(os.listdir(marks)))), "w").close()
    os.kill(os.getpid(), signal.SIGKILL)
print(calc.N)
"""


def test_a_judge_rewritten_by_the_run_made_again_is_still_tampered(tmp_path: Path) -> None:
    """The harness is checked after the run made again too, before its kill is taken
    for what it is. Without a sandbox: in one, the harness is read-only where it runs and
    the rewrite itself fails (`test_isolation_channels`); the fingerprint is the second
    line, tested here alone."""
    marks = tmp_path / "marks"
    marks.mkdir()
    bench = TAMPER_ON_RETRY.format(marks=str(marks))
    repo = script_campaign(
        tmp_path,
        LOWER,
        bench=bench,
        **{  # type: ignore[arg-type]
            "stop.max_iterations": 1,
            "sandbox.writable": [str(marks)],
            "sandbox.isolation": "none",
        },
    )
    result = Engine(load_campaign(repo)).run()
    assert result.exit_code == 3, result.message
    record = Ledger(repo / ".autoresearch" / "t").read()[-1]
    assert record.status is Status.TAMPERED, record
    assert len(os.listdir(marks)) == 2  # the first run and the one made again
    assert (repo / "bench.py").read_text() == bench  # the checkout's judge untouched


OWN_FAILURE = """import calc, os, signal, sys
if calc.N < 10:
    {code}
print(calc.N)
"""


@pytest.mark.parametrize("code", ["sys.exit(3)", "os.kill(os.getpid(), signal.SIGSEGV)"])
def test_the_candidate_s_own_failure_is_still_a_crash(tmp_path: Path, code: str) -> None:
    """Its own exit code, or a signal of its own doing, is the candidate's: no second run."""
    bench = OWN_FAILURE.format(code=code)
    repo = script_campaign(tmp_path, LOWER, bench=bench, **{"stop.max_iterations": 1})
    result = Engine(load_campaign(repo)).run()
    assert result.exit_code == 0, result.message
    record = Ledger(repo / ".autoresearch" / "t").read()[-1]
    assert record.status is Status.CRASH, record
    logs = repo / ".autoresearch" / "t" / "logs"
    assert not list(logs.glob("*-again.*"))


@pytest.mark.parametrize(
    ("returncode", "signal_number"),
    [(137, 9), (143, 15), (129, 1), (-9, 9), (-15, 15), (139, None), (-11, None), (1, None),
     (3, None), (0, None), (None, None)],
)  # fmt: skip
def test_which_exit_statuses_are_an_end_from_outside(
    returncode: int | None, signal_number: int | None
) -> None:
    """SIGKILL, SIGTERM and SIGHUP (the shell's 128 + N, or -N) come from outside; a crash
    signal (SIGSEGV) or an exit code is the candidate's own."""
    from autoresearch.executors.local import signal_from_outside

    assert signal_from_outside(returncode) == signal_number
