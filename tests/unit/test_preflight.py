"""`check`: HEAD measured in a scratch worktree, in-process through the click runner."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import Runner, git, snapshot


def test_check_prints_the_number_and_guard(toy: Path, invoke: Runner) -> None:
    before = snapshot(toy)
    result = invoke(toy, "check")
    assert result.returncode == 0, result.stderr
    assert "metric: 7" in result.stdout
    assert "guard: passed" in result.stdout
    assert "harness: bench.py" in result.stdout
    assert snapshot(toy) == before
    assert git(toy, "worktree", "list").count("\n") == 1


def test_check_repeat_prints_the_spread(toy: Path, invoke: Runner) -> None:
    result = invoke(toy, "check", "--repeat", "3", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["values"] == [7, 7, 7]
    assert data["spread"] == {"median": 7, "mad": 0, "min": 7, "max": 7}


def test_check_reports_a_broken_metric(toy: Path, invoke: Runner) -> None:
    (toy / "bench.py").write_text("print('no digits')\n")
    git(toy, "commit", "-qam", "break")
    result = invoke(toy, "check")
    assert result.returncode == 1
    assert "metric failed" in result.stdout and "no line matched" in result.stdout


def test_check_measures_the_commit_not_uncommitted_edits(toy: Path, invoke: Runner) -> None:
    (toy / "calc.py").write_text("N = 3\n")
    result = invoke(toy, "check")
    assert "metric: 7" in result.stdout


def test_check_repeat_reports_robust_noise_and_recommends_a_rule(toy: Path, invoke: Runner) -> None:
    data = json.loads(invoke(toy, "check", "--repeat", "3", "--json").stdout)
    assert data["noise"] == {"robust_sigma": 0, "sigma": 0}
    assert data["recommended"]["min_delta"] == "0"
    assert data["recommended"]["rule"].startswith("auto (an exact metric")
    text = invoke(toy, "check", "--repeat", "3").stdout
    assert "noise: robust sigma 0" in text and "recommended: rule = auto" in text


def test_check_repeat_says_what_a_noisy_metric_lets_the_campaign_detect(
    toy: Path, invoke: Runner
) -> None:
    (toy / "bench.py").write_text(
        "import random\nprint(f'score: {100 + random.gauss(0, 30):.3f}')\n"
    )
    git(toy, "commit", "-qam", "a noisy benchmark")
    data = json.loads(invoke(toy, "check", "--repeat", "6", "--json").stdout)
    assert data["detectable_pct"] is not None and data["detectable_pct"] > 5, data
    text = invoke(toy, "check", "--repeat", "6").stdout
    assert "detectable: gains of about" in text
    exact = json.loads(invoke(toy, "check", "--repeat", "1", "--json").stdout)
    assert exact["detectable_pct"] is None
