"""show, diff, branch and apply on the toy campaign."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import Runner, git, snapshot


def test_show_and_diff(toy: Path, cli: Runner) -> None:
    assert cli(toy, "run").returncode == 0
    shown = json.loads(cli(toy, "show", "1", "--json").stdout)
    assert shown["status"] == "keep" and shown["description"] == "set N to 7"
    assert "set N to 7" in cli(toy, "show", "1").stdout
    text = cli(toy, "diff", "1").stdout
    assert "-N = 10" in text and "+N = 7" in text and "calc.py" in text
    assert "+N = 9" in cli(toy, "diff", "2").stdout  # a discarded attempt, still inspectable
    assert "changed nothing" in cli(toy, "diff", "6").stdout
    missing = cli(toy, "show", "99")
    assert missing.returncode == 2 and "no attempt 99" in missing.stderr


def test_branch_makes_exactly_one_branch(toy: Path, cli: Runner) -> None:
    assert cli(toy, "run").returncode == 0
    before = snapshot(toy)
    result = cli(toy, "branch", "tuned")
    assert result.returncode == 0, result.stderr
    assert git(toy, "show", "tuned:calc.py").endswith("N = 3\n")
    assert cli(toy, "branch", "first", "--attempt", "1").returncode == 0
    assert git(toy, "show", "first:calc.py").endswith("N = 7\n")
    again = cli(toy, "branch", "tuned")
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


def test_apply_writes_uncommitted_changes_into_a_clean_tree(toy: Path, cli: Runner) -> None:
    assert cli(toy, "run").returncode == 0
    head = git(toy, "rev-parse", "HEAD")
    result = cli(toy, "apply")
    assert result.returncode == 0, result.stderr
    assert (toy / "calc.py").read_text().endswith("N = 3\n")
    assert git(toy, "rev-parse", "HEAD") == head
    assert git(toy, "status", "--porcelain") == " M calc.py\n"
    refused = cli(toy, "apply", "--attempt", "1")
    assert refused.returncode == 1 and "uncommitted changes" in refused.stderr
    assert (toy / "calc.py").read_text().endswith("N = 3\n")
    git(toy, "checkout", "--", "calc.py")
    assert cli(toy, "apply", "--attempt", "1").returncode == 0
    assert (toy / "calc.py").read_text().endswith("N = 7\n")
    nothing = cli(toy, "apply", "--attempt", "6")
    assert nothing.returncode == 1 and "changed nothing" in nothing.stderr


def test_report_states_baseline_best_and_draws_the_chart(toy: Path, cli: Runner) -> None:
    assert cli(toy, "run").returncode == 0
    result = cli(toy, "report", "--json")
    assert result.returncode == 0, result.stderr
    paths = json.loads(result.stdout)
    markdown = Path(paths["markdown"]).read_text()
    assert "- baseline: 7" in markdown and "- best: 0 (attempt 7" in markdown
    assert "- stop reason: target" in markdown
    assert "### crash (1)" in markdown and "### scope_violation (1)" in markdown
    assert "bench.py: sha256" in markdown
    png = Path(paths["image"]).read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 10_000
    page = Path(paths["html"]).read_text()
    assert "data:image/png;base64," in page and "set N to 3" in page
