"""The run's terminal output end to end: plain and quiet lines, the live view on a terminal.

The live view fed events directly is tests/unit/test_live.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import Runner


def test_plain_and_quiet_output(toy: Path, cli: Runner) -> None:
    plain = cli(toy, "run", "--plain", "--max-iterations", "2")
    assert plain.returncode == 0
    assert "1/2 keep" in plain.stdout
    quiet = cli(toy, "run", "--quiet", "--max-iterations", "3")
    assert quiet.returncode == 0
    assert "guard_failed" not in quiet.stdout and "stopped: max_iterations" in quiet.stdout


def test_live_view_on_a_terminal(toy: Path) -> None:
    """Under a pseudo-terminal the run shows the panel and ends with the summary."""
    import os
    import pty

    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "autoresearch", "run"],
        cwd=toy,
        stdin=follower,
        stdout=follower,
        stderr=follower,
        env={**os.environ, "COLUMNS": "120", "TERM": "xterm"},
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=120)
    os.close(leader)
    screen = b"".join(chunks).decode(errors="replace")
    assert proc.returncode == 0
    assert "autoresearch · toy" in screen and "phase:" in screen
    assert "stopped: target" in screen
