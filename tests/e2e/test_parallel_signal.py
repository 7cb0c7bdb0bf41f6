"""Ctrl-C with several candidates in flight: each is logged `interrupted`, nothing they
started is left running, the branch is at the best kept commit, and the ledger verifies."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from autoresearch.attempt import Status
from autoresearch.checks.verify import verify_campaign
from autoresearch.store.ledger import Ledger
from campaigns import script_campaign

BENCH = """import calc, os, subprocess
if os.environ.get("AUTORESEARCH_ITERATION") != "0":
    subprocess.run(["sleep", "96.75"])
print(calc.N)
"""
PROPOSE = 'sed -i "s/^N = .*/N = $((10 - AUTORESEARCH_ITERATION))/" calc.py\n'


def sleepers() -> list[str]:
    out = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if line.strip() == "sleep 96.75"]


def test_ctrl_c_with_two_in_flight(tmp_path: Path) -> None:
    repo = script_campaign(
        tmp_path,
        PROPOSE,
        bench=BENCH,
        **{"metric.timeout": 200, "stop.max_iterations": 5, "executor.jobs": 2},
    )
    state = repo / ".autoresearch" / "t" / "state.json"
    engine = subprocess.Popen(
        [sys.executable, "-m", "autoresearch", "run", "--plain"],
        cwd=repo,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while True:
        assert time.monotonic() < deadline, "two candidates were never measured at once"
        data = json.loads(state.read_text()) if state.exists() else {}
        slots = (data.get("slots") or {}).values()
        if sum(1 for s in slots if s.get("phase") == "measuring") == 2:
            break
        time.sleep(0.05)
    os.kill(engine.pid, signal.SIGINT)
    _, err = engine.communicate(timeout=60)
    assert engine.returncode == 130, err
    assert not sleepers()
    records = Ledger(repo / ".autoresearch" / "t").read()
    assert [r.iteration for r in records[1:]] and all(
        r.status is Status.INTERRUPTED for r in records[1:]
    ), [(r.iteration, r.status) for r in records]
    assert sorted(r.iteration for r in records) == [0, 1, 2]
    assert verify_campaign(repo, repo / ".autoresearch" / "t", "t").ok
