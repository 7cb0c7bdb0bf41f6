"""`log` and `status` read the ledger and state; in-process through the click runner."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import Runner

EXPECTED = [
    "baseline",
    "keep",
    "discard",
    "guard_failed",
    "crash",
    "scope_violation",
    "no_change",
    "keep",
]


def test_log_lists_attempts(toy: Path, invoke: Runner) -> None:
    assert invoke(toy, "run", "--max-iterations", "3").returncode == 0
    table = invoke(toy, "log")
    assert table.returncode == 0
    assert "guard_failed" in table.stdout and "set N to 7" in table.stdout
    data = json.loads(invoke(toy, "log", "--json").stdout)
    assert [r["status"] for r in data] == EXPECTED[:4]
