"""SIGKILL while a paid agent's candidate is measured: nothing known is lost, and on resume
the candidate is measured instead of paying for a new one."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from autoresearch.attempt import Status
from autoresearch.store.ledger import Ledger
from autoresearch.testing.repo import git, make_repo
from campaigns import campaign_toml
from conftest import start_engine

CLAUDE = """#!/bin/bash
echo called >> "{calls}"
sed -i 's/^N = .*/N = 4/' calc.py
cat <<'JSON'
{{"type":"result","subtype":"success","is_error":false,"result":"DESCRIPTION: set N to 4",
 "total_cost_usd":0.25,"usage":{{"input_tokens":1000,"output_tokens":50}}}}
JSON
"""

# The first candidate's measurement hangs, so the engine can be killed during it.
BENCH = """import calc, os, time
if os.environ.get("AUTORESEARCH_ITERATION") == "1" and not os.path.exists("{resumed}"):
    time.sleep(60)
print(f"score: {{abs(calc.N - 3)}}")
"""


def test_sigkill_during_measurement_then_resume(tmp_path: Path) -> None:
    # The stand-in tool writes down its calls in a folder the sandbox lets it write.
    calls, resumed = tmp_path / "out" / "calls.txt", tmp_path / "resumed"
    calls.parent.mkdir()
    claude = tmp_path / "claude"
    claude.write_text(CLAUDE.format(calls=calls))
    claude.chmod(0o755)
    config = campaign_toml(
        guard=None,
        proposer={"kind": "claude", "executable": str(claude), "writable": [str(calls.parent)]},
        **{"metric.target": None, "metric.timeout": 120},
    )
    repo = make_repo(
        tmp_path / "repo",
        {
            "calc.py": "N = 10\n",
            "bench.py": BENCH.format(resumed=resumed),
            "autoresearch.toml": config,
        },
    )
    state = repo / ".autoresearch" / "toy" / "state.json"
    engine = start_engine(repo)
    deadline = time.monotonic() + 60
    while True:
        assert time.monotonic() < deadline, "the first candidate was never measured"
        data = json.loads(state.read_text()) if state.exists() else {}
        if data.get("phase") == "measuring" and data.get("iteration") == 1:
            break
        time.sleep(0.05)
    os.kill(engine.pid, signal.SIGKILL)
    engine.wait(timeout=10)
    resumed.write_text("")
    again = start_engine(repo, "--max-iterations", "2")
    _, err = again.communicate(timeout=120)
    assert again.returncode == 0, err
    records = Ledger(repo / ".autoresearch" / "toy").read()
    assert [r.status for r in records] == [Status.BASELINE, Status.INTERRUPTED, Status.KEEP]
    lost, measured = records[1], records[2]
    assert lost.commit and lost.files == ("calc.py",) and lost.description == "set N to 4"
    assert lost.cost.usd == 0.25
    assert (
        measured.metric == 1 and measured.note == "the candidate of attempt 1, measured on resume"
    )
    assert calls.read_text().count("called") == 1  # the agent was paid once
    assert git(repo, "show", "autoresearch/toy:calc.py") == "N = 4\n"
    assert git(repo, "rev-parse", "--verify", "refs/autoresearch/toy/1").strip() == lost.commit
