"""The checks every executor passes: a number, a crash, a timeout, logs where they belong,
the environment it was given and nothing else, and nothing left running afterwards."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from autoresearch.attempt import Status
from autoresearch.executors import (
    CommandSpec,
    Executor,
    ExecutorSetup,
    LocalExecutor,
    Measurement,
)

# The suite runs over every entry; a new executor adds one line here.
EXECUTORS: dict[str, Callable[[], Executor]] = {
    "local": LocalExecutor,
}

PATH = "/usr/local/bin:/usr/bin:/bin"


def _run(
    executor: Executor, root: Path, command: str, *, timeout: float = 20, pattern: str | None = None
) -> tuple[Measurement, Path]:
    workspace = root / "workspace"
    workspace.mkdir(parents=True, exist_ok=True)
    stem = root / "logs" / "0001-metric-1"
    env = {"PATH": PATH, "SUITE_PASSED": "passed-value-81b"}
    result = executor.run(
        CommandSpec(command, timeout, pattern),
        workspace=workspace,
        env=env,
        log_stem=stem,
    )
    return result, stem


def _started(make: Callable[[], Executor], root: Path) -> Executor:
    executor = make()
    warnings = executor.start(ExecutorSetup(state_dir=root / "state"))
    assert warnings == [], warnings
    return executor


def check_a_number(make: Callable[[], Executor], root: Path) -> None:
    executor = _started(make, root)
    result, _ = _run(executor, root, "echo 'loss 0.5'; echo 'score: 4.25'; echo done")
    assert result.ok and result.value == 4.25, result
    result, _ = _run(executor, root, "echo 'score: 4.25'; echo 9", pattern=r"score: (\S+)")
    assert result.value == 4.25, result
    executor.close()


def check_a_crash(make: Callable[[], Executor], root: Path) -> None:
    executor = _started(make, root)
    result, _ = _run(executor, root, "echo 'it broke' >&2; exit 3")
    assert result.outcome is Status.CRASH and result.value is None, result
    assert "exited with code 3: it broke" in result.reason
    result, _ = _run(executor, root, "echo no number here")
    assert result.outcome is Status.CRASH, result
    executor.close()


def check_a_timeout(make: Callable[[], Executor], root: Path) -> None:
    executor = _started(make, root)
    started = time.monotonic()
    result, _ = _run(executor, root, "sleep 60; echo 1", timeout=0.5)
    assert result.outcome is Status.TIMEOUT, result
    assert result.reason == "timed out after 0.5 s"
    assert time.monotonic() - started < 30
    executor.close()


def check_logs_where_they_belong(make: Callable[[], Executor], root: Path) -> None:
    executor = _started(make, root)
    result, stem = _run(executor, root, "echo to-stdout; echo to-stderr >&2; echo 1")
    assert result.stdout_path == stem.with_suffix(".out")
    assert "to-stdout" in stem.with_suffix(".out").read_text()
    assert "to-stderr" in stem.with_suffix(".err").read_text()
    assert "to-stderr" not in stem.with_suffix(".out").read_text()
    executor.close()


def check_the_environment_passed(make: Callable[[], Executor], root: Path) -> None:
    executor = _started(make, root)
    command = 'echo "got=$SUITE_PASSED home=${HOME:-unset} cwd=$(pwd)"; echo 1'
    _, stem = _run(executor, root, command)
    text = stem.with_suffix(".out").read_text()
    assert "got=passed-value-81b" in text, text
    assert "home=unset" in text, "a variable that was not passed reached the command"
    assert f"cwd={root / 'workspace'}" in text, text
    executor.close()


def check_nothing_left_running(make: Callable[[], Executor], root: Path) -> None:
    executor = _started(make, root)
    pid_file = root / "child.pid"
    result, _ = _run(executor, root, f"sleep 300 >/dev/null 2>&1 & echo $! > {pid_file}; echo 1")
    assert result.ok, result
    assert not _alive(int(pid_file.read_text())), "a background child outlived its command"
    executor.close()


def check_close_is_idempotent(make: Callable[[], Executor], root: Path) -> None:
    executor = make()
    executor.close()
    executor = _started(make, root)
    executor.close()
    executor.close()


def check_cancel_is_safe_at_any_moment(make: Callable[[], Executor], root: Path) -> None:
    """`cancel` (the engine calls it from another thread when the campaign stops) harms
    nothing when nothing runs: before start, between runs, after close."""
    executor = make()
    assert isinstance(executor, Executor), "an executor kind subclasses executors.base.Executor"
    executor.cancel()
    executor = _started(make, root)
    executor.cancel()
    result, _ = _run(executor, root, "echo 2")
    assert result.ok and result.value == 2, result
    executor.close()
    executor.cancel()


def _alive(pid: int) -> bool:
    """True while `pid` runs; a zombie awaiting its parent's wait counts as gone."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return False
        if state in "ZX":
            return False
        time.sleep(0.05)
    return True


CHECKS: dict[str, Callable[[Callable[[], Executor], Path], None]] = {
    "a_number": check_a_number,
    "a_crash": check_a_crash,
    "a_timeout": check_a_timeout,
    "logs_where_they_belong": check_logs_where_they_belong,
    "the_environment_passed": check_the_environment_passed,
    "nothing_left_running": check_nothing_left_running,
    "close_is_idempotent": check_close_is_idempotent,
    "cancel_is_safe_at_any_moment": check_cancel_is_safe_at_any_moment,
}
