"""The live view under a pseudo-terminal: a real engine process draws the panel and the summary."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path


def test_live_view_on_a_terminal(toy: Path) -> None:
    """Under a pseudo-terminal the run shows the panel and ends with the summary."""
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
