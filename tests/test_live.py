"""The live view, rendered from the engine's events onto a recording terminal."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

from rich.console import Console

from autoresearch.live import LiveView, sparkline
from conftest import Runner


def test_sparkline() -> None:
    assert sparkline([]) == ""
    line = sparkline([3.0, 2.0, 1.0, 1.0])
    assert line[0] == "█" and line[-1] == "▁" and len(line) == 4


def test_live_view_shows_progress_phase_and_attempts() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=120, color_system=None)
    with LiveView(console) as view:
        view(
            "start",
            {
                "summary": {
                    "name": "toy",
                    "direction": "minimize",
                    "baseline": None,
                    "best": None,
                    "iterations": 0,
                },
                "max_iterations": 4,
                "workspace": "/w",
                "resumed": False,
            },
        )
        view(
            "attempt",
            {
                "record": {"iteration": 0, "status": "baseline", "metric": 7.0},
                "best": 7.0,
                "max_iterations": 4,
            },
        )
        view("phase", {"phase": "measuring", "iteration": 1, "sample": 2, "samples": 8})
        view(
            "attempt",
            {
                "record": {
                    "iteration": 1,
                    "status": "keep",
                    "metric": 4.0,
                    "delta": -3.0,
                    "description": "set N to 7",
                    "total_seconds": 1.0,
                    "cost_usd": 0.5,
                },
                "best": 4.0,
                "max_iterations": 4,
            },
        )
        panel = view.render()
    render = Console(file=io.StringIO(), width=120, record=True, color_system=None)
    render.print(panel)
    shown = render.export_text()
    assert "1/4" in shown and "ETA" in shown and "cost $0.5000" in shown
    assert "baseline 7" in shown and "best 4" in shown and "delta -3" in shown
    assert "measuring #1 (sample 2 of up to 8)" in shown
    assert "set N to 7" in shown and "keep" in shown


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
