"""show, diff, branch and apply on the toy campaign, in-process through the click runner."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import Runner, git, snapshot


def test_show_and_diff(finished_toy: Path, invoke: Runner) -> None:
    toy = finished_toy
    shown = json.loads(invoke(toy, "show", "1", "--json").stdout)
    assert shown["status"] == "keep" and shown["description"] == "set N to 7"
    assert "set N to 7" in invoke(toy, "show", "1").stdout
    text = invoke(toy, "diff", "1").stdout
    assert "-N = 10" in text and "+N = 7" in text and "calc.py" in text
    assert "+N = 9" in invoke(toy, "diff", "2").stdout  # a discarded attempt, still inspectable
    assert "changed nothing" in invoke(toy, "diff", "6").stdout
    missing = invoke(toy, "show", "99")
    assert missing.returncode == 2 and "no attempt 99" in missing.stderr


def test_branch_makes_exactly_one_branch(toy: Path, invoke: Runner) -> None:
    assert invoke(toy, "run").returncode == 0
    before = snapshot(toy)
    result = invoke(toy, "branch", "tuned")
    assert result.returncode == 0, result.stderr
    assert git(toy, "show", "tuned:calc.py").endswith("N = 3\n")
    assert invoke(toy, "branch", "first", "--attempt", "1").returncode == 0
    assert git(toy, "show", "first:calc.py").endswith("N = 7\n")
    again = invoke(toy, "branch", "tuned")
    assert again.returncode == 2 and "already exists" in again.stderr
    after = snapshot(toy)
    assert after["files"] == before["files"] and after["head"] == before["head"]
    assert after["branches"] == sorted(
        [
            *before["branches"],
            "refs/heads/first",  # type: ignore[list-item]
            "refs/heads/tuned",
        ]
    )


def test_apply_writes_uncommitted_changes_into_a_clean_tree(toy: Path, invoke: Runner) -> None:
    assert invoke(toy, "run").returncode == 0
    head = git(toy, "rev-parse", "HEAD")
    result = invoke(toy, "apply")
    assert result.returncode == 0, result.stderr
    assert (toy / "calc.py").read_text().endswith("N = 3\n")
    assert git(toy, "rev-parse", "HEAD") == head
    assert git(toy, "status", "--porcelain") == " M calc.py\n"
    refused = invoke(toy, "apply", "--attempt", "1")
    assert refused.returncode == 1 and "uncommitted changes" in refused.stderr
    assert (toy / "calc.py").read_text().endswith("N = 3\n")
    git(toy, "checkout", "--", "calc.py")
    assert invoke(toy, "apply", "--attempt", "1").returncode == 0
    assert (toy / "calc.py").read_text().endswith("N = 7\n")
    nothing = invoke(toy, "apply", "--attempt", "6")
    assert nothing.returncode == 1 and "changed nothing" in nothing.stderr
