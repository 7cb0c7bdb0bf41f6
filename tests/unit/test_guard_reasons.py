"""A failed guard's reason says what failed: pytest's short test summary lines with the
assertion whole, other tools' last meaningful lines, never separator rows."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from autoresearch.measure.evaluation import failure_lines
from campaigns import campaign_toml
from conftest import Runner, git, ledger, make_repo

LONG = "a message much longer than the eighty columns pytest cuts its summary lines to"

TESTS = f'''import calc

def test_n_is_not_three():
    assert calc.N != 3, "{LONG}"

def test_passes():
    pass
'''


def pytest_repo(tmp_path: Path) -> Path:
    config = campaign_toml(
        **{
            "metric.command": "python bench.py",
            "metric.target": None,
            "guard.command": f"{sys.executable} -m pytest -q -p no:cacheprovider tests",
            "guard.rework": 0,
            "proposer.command": "true",
        }
    )
    return make_repo(
        tmp_path / "repo",
        {
            "calc.py": "N = 4\n",
            "bench.py": 'import calc\nprint(f"score: {abs(calc.N - 3)}")\n',
            "tests/test_calc.py": TESTS,
            "conftest.py": "",
            "autoresearch.toml": config,
        },
    )


def assert_says_what_failed(reason: str) -> None:
    assert "FAILED tests/test_calc.py::test_n_is_not_three - AssertionError: " + LONG in reason
    assert "1 failed, 1 passed" in reason
    for row in ("====", "!!!!", "----", "____", "short test summary info"):
        assert row not in reason


def test_a_failing_pytest_guard_names_the_test_and_its_assertion(
    tmp_path: Path, invoke: Runner
) -> None:
    repo = pytest_repo(tmp_path)
    assert invoke(repo, "start").returncode == 0
    ws = repo / ".autoresearch" / "toy" / "worktree"
    (ws / "calc.py").write_text("N = 3\n")  # better, but the test refuses it
    out = json.loads(invoke(ws, "step", "--json").stdout)["attempt"]
    assert out["status"] == "guard_failed", out
    assert_says_what_failed(out["reason"])
    assert ledger(repo)[-1]["reason"] == out["reason"]


def test_check_says_which_test_failed(tmp_path: Path, invoke: Runner) -> None:
    repo = pytest_repo(tmp_path)
    (repo / "calc.py").write_text("N = 3\n")
    git(repo, "commit", "-qam", "N to 3")
    out = invoke(repo, "check", "--json")
    assert out.returncode == 1
    assert_says_what_failed(json.loads(out.stdout)["guard"]["reason"])


def test_other_tools_last_meaningful_lines() -> None:
    output = [
        "compiling...",
        "error[E0308]: mismatched types",
        "  --> src/main.rs:4:5",
        "----------------------------------------",
        "error: could not compile `demo`",
        "========================================",
        "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!",
    ]
    assert failure_lines(output, 3) == [
        "error[E0308]: mismatched types",
        "--> src/main.rs:4:5",
        "error: could not compile `demo`",
    ]
    titled = failure_lines(["x", "!!!!!!!! Interrupted: 1 error during collection !!!!!!!!"])
    assert titled == ["x", "Interrupted: 1 error during collection"]
