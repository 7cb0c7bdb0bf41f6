"""`run`'s output off a terminal: one line per attempt, or only the stop line when quiet.

In-process through the click runner; the live view fed events is tests/unit/test_live.py
and the live view on a real terminal is tests/e2e/test_live_terminal.py."""

from __future__ import annotations

from pathlib import Path

from conftest import Runner


def test_plain_and_quiet_output(toy: Path, invoke: Runner) -> None:
    plain = invoke(toy, "run", "--plain", "--max-iterations", "2")
    assert plain.returncode == 0
    assert "1/2 keep" in plain.stdout
    quiet = invoke(toy, "run", "--quiet", "--max-iterations", "3")
    assert quiet.returncode == 0
    # No attempt line; the stop summary's counts (guard_failed 1, ...) are shown.
    assert "3/3 guard_failed" not in quiet.stdout and "stopped: max_iterations" in quiet.stdout
    assert "guard_failed 1" in quiet.stdout
