"""`run --more N` extends a finished campaign by N attempts; `run --ci` prints a JSON
summary on stdout only, and its exit code says improved (0), not improved (4) or failed."""

from __future__ import annotations

import json
from pathlib import Path

from campaigns import script_campaign
from conftest import Runner, ledger

# Attempts 1 and 2 improve; later ones make N worse; attempt 6 rewrites the judge.
SCRIPT = """case "$AUTORESEARCH_ITERATION" in
  1|2) sed -i "s/^N = .*/N = $((10 - AUTORESEARCH_ITERATION))/" calc.py;;
  6) echo "print(0)" > bench.py;;
  *) sed -i "s/^N = .*/N = $((20 + AUTORESEARCH_ITERATION))/" calc.py;;
esac
"""


def test_more_extends_a_finished_campaign(tmp_path: Path, invoke: Runner) -> None:
    repo = script_campaign(tmp_path, SCRIPT, **{"stop.max_iterations": 2})
    assert invoke(repo, "run", "--plain").returncode == 0
    assert [r["iteration"] for r in ledger(repo, "t")] == [0, 1, 2]
    again = invoke(repo, "run", "--plain")  # finished: nothing more without --more
    assert again.returncode == 0 and len(ledger(repo, "t")) == 3
    more = invoke(repo, "run", "--plain", "--more", "2")
    assert more.returncode == 0, more.stderr
    assert [r["iteration"] for r in ledger(repo, "t")] == [0, 1, 2, 3, 4]
    assert [r["status"] for r in ledger(repo, "t")][3:] == ["discard", "discard"]


def test_more_goes_past_a_plateau(tmp_path: Path, invoke: Runner) -> None:
    repo = script_campaign(tmp_path, SCRIPT, **{"stop.max_iterations": 10, "stop.plateau": 1})
    invoke(repo, "run", "--plain")
    state = json.loads((repo / ".autoresearch" / "t" / "state.json").read_text())
    assert state["stop_reason"] == "plateau" and len(ledger(repo, "t")) == 4
    assert invoke(repo, "run", "--plain", "--more", "1").returncode == 0
    assert len(ledger(repo, "t")) == 5


def test_more_is_refused_before_a_first_run_and_beside_max_iterations(
    tmp_path: Path, invoke: Runner
) -> None:
    repo = script_campaign(tmp_path, SCRIPT)
    early = invoke(repo, "run", "--more", "2")
    assert early.returncode == 2 and "has not run yet" in early.stderr
    assert "Traceback" not in early.stderr
    both = invoke(repo, "run", "--more", "2", "--max-iterations", "3")
    assert both.returncode == 2 and "pass one" in both.stderr
    ci = invoke(repo, "run", "--ci", "--more", "2")  # a scheduler still gets its JSON
    assert ci.returncode == 2 and "has not run yet" in ci.stderr
    data = json.loads(ci.stdout)
    assert data["outcome"] == "failed" and data["exit_code"] == 2
    assert "has not run yet" in data["message"]


def test_ci_says_improved_not_improved_and_failed(tmp_path: Path, invoke: Runner) -> None:
    repo = script_campaign(tmp_path, SCRIPT, **{"stop.max_iterations": 2})
    first = invoke(repo, "run", "--ci")
    assert first.returncode == 0, first.stderr
    data = json.loads(first.stdout)  # stdout is the JSON summary and nothing else
    assert data["outcome"] == "improved" and data["improved"] is True
    assert data["kept"] == [1, 2] and data["best"] == 8 and data["baseline"] == 10
    assert data["attempts"] == 2 and data["exit_code"] == 0
    assert "keep" in first.stderr  # the attempts, for the CI log

    flat = invoke(repo, "run", "--ci", "--more", "2")
    assert flat.returncode == 4, flat.stderr
    data = json.loads(flat.stdout)
    assert data["outcome"] == "not_improved" and data["kept"] == []
    assert data["attempts"] == 2 and data["best"] == data["best_before"] == 8

    failed = invoke(repo, "run", "--ci", "--more", "2")  # attempt 6 tampers with the judge
    assert failed.returncode == 3
    data = json.loads(failed.stdout)
    assert data["outcome"] == "failed" and data["stop_reason"] == "tampered"
