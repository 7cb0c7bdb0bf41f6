"""`autoresearch dashboard` as a process: it serves on 127.0.0.1 and prints its address."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import Runner
from unit.test_dashboard_http import at, get


def test_the_command_listens_on_loopback_only(toy: Path, invoke: Runner) -> None:
    assert invoke(toy, "run", "--max-iterations", "1").returncode == 0
    proc = subprocess.Popen(
        [sys.executable, "-m", "autoresearch", "dashboard", "--port", "0"],
        cwd=toy,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        assert "http://127.0.0.1:" in line and "/?token=" in line
        url = line.split(" at ", 1)[1].split()[0]
        assert json.loads(get(at(url, "/api/status"))[1])["name"] == "toy"
        # the token printed is the one kept in the campaign's folder; without it, nothing
        token = (toy / ".autoresearch/toy/dashboard.token").read_text().strip()
        assert url.endswith("?token=" + token)
        assert get(url.split("?")[0] + "api/status")[0] == 401
    finally:
        proc.terminate()
        proc.wait(timeout=10)
