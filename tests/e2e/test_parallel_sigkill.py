"""SIGKILL with several candidates in flight: on resume each of them is logged (or measured)
once, nothing they started is left running, and the ledger verifies."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

from autoresearch.attempt import Status
from autoresearch.checks.verify import verify_campaign
from autoresearch.store.ledger import Ledger
from campaigns import script_campaign
from conftest import start_engine

# Measurements hang (a recognisable sleep) until the marker file exists.
BENCH = """import calc, os, subprocess
if not os.path.exists({resumed!r}) and os.environ.get("AUTORESEARCH_ITERATION") != "0":
    subprocess.run(["sleep", "97.25"])
print(calc.N)
"""
PROPOSE = 'sed -i "s/^N = .*/N = $((10 - AUTORESEARCH_ITERATION))/" calc.py\n'


def sleepers() -> list[str]:
    out = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if line.strip() == "sleep 97.25"]


def test_sigkill_with_three_in_flight_then_resume(tmp_path: Path) -> None:
    resumed = tmp_path / "resumed"
    repo = script_campaign(
        tmp_path,
        PROPOSE,
        bench=BENCH.format(resumed=str(resumed)),
        **{"metric.timeout": 200, "stop.max_iterations": 5, "executor.jobs": 3},
    )
    state = repo / ".autoresearch" / "t" / "state.json"
    engine = start_engine(repo)
    deadline = time.monotonic() + 60
    while True:
        assert time.monotonic() < deadline, "three candidates were never measured at once"
        data = json.loads(state.read_text()) if state.exists() else {}
        slots = data.get("slots") or {}
        measuring = [s for s in slots.values() if s.get("phase") == "measuring" and s["record"]]
        if len(measuring) == 3:
            break
        time.sleep(0.05)
    os.kill(engine.pid, signal.SIGKILL)
    engine.wait(timeout=10)
    in_flight = sorted(s["iteration"] for s in slots.values())
    assert in_flight == [1, 2, 3]
    resumed.write_text("")
    again = start_engine(repo)
    _, err = again.communicate(timeout=120)
    assert again.returncode == 0, err
    assert not sleepers(), "a measurement of the killed engine is still running"
    records = Ledger(repo / ".autoresearch" / "t").read()
    iterations = [r.iteration for r in records]
    assert sorted(iterations) == list(range(6)), iterations
    for record in records:
        if record.iteration in in_flight:
            assert record.status is Status.INTERRUPTED
            assert record.commit and record.files == ("calc.py",)
    report = verify_campaign(repo, repo / ".autoresearch" / "t", "t")
    assert report.ok, report.problems
