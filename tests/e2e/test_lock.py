"""One engine per campaign: a second `run` is refused and names the first one's process."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from campaigns import script_campaign
from conftest import Runner


def test_second_engine_is_refused_naming_the_first(tmp_path: Path, cli: Runner) -> None:
    repo = script_campaign(
        tmp_path, "sleep 30\n", **{"stop.max_iterations": 1, "proposer.timeout": 60}
    )
    first = subprocess.Popen(
        [sys.executable, "-m", "autoresearch", "run"],
        cwd=repo,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            state = repo / ".autoresearch/t/state.json"
            if state.exists() and json.loads(state.read_text()).get("phase") == "proposing":
                break
            time.sleep(0.1)
        second = cli(repo, "run")
        assert second.returncode == 1
        assert f"process {first.pid}" in second.stderr
        status = json.loads(cli(repo, "status", "--json").stdout)
        assert status["running"] is True and status["pid"] == first.pid
        assert status["phase"] == "proposing"
    finally:
        first.send_signal(signal.SIGINT)
        first.wait(timeout=30)
