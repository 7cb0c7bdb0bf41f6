"""`autoresearch check` and `autoresearch init`."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from conftest import Runner, git, make_repo, snapshot


def test_check_prints_the_number_and_guard(toy: Path, cli: Runner) -> None:
    before = snapshot(toy)
    result = cli(toy, "check")
    assert result.returncode == 0, result.stderr
    assert "metric: 7" in result.stdout
    assert "guard: passed" in result.stdout
    assert "harness: bench.py" in result.stdout
    assert snapshot(toy) == before
    assert git(toy, "worktree", "list").count("\n") == 1


def test_check_repeat_prints_the_spread(toy: Path, cli: Runner) -> None:
    result = cli(toy, "check", "--repeat", "3", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["values"] == [7, 7, 7]
    assert data["spread"] == {"median": 7, "mad": 0, "min": 7, "max": 7}


def test_check_reports_a_broken_metric(toy: Path, cli: Runner) -> None:
    (toy / "bench.py").write_text("print('no digits')\n")
    git(toy, "commit", "-qam", "break")
    result = cli(toy, "check")
    assert result.returncode == 1
    assert "metric failed" in result.stdout and "no line matched" in result.stdout


def test_check_measures_the_commit_not_uncommitted_edits(toy: Path, cli: Runner) -> None:
    (toy / "calc.py").write_text("N = 3\n")
    result = cli(toy, "check")
    assert "metric: 7" in result.stdout


def test_init_writes_a_valid_commented_config(tmp_path: Path, cli: Runner) -> None:
    repo = make_repo(tmp_path / "my repo", {"train.py": "LR = 1\n", "bench.py": "print(1)\n"})
    result = cli(repo, "init")
    assert result.returncode == 0, result.stderr
    text = (repo / "autoresearch.toml").read_text()
    assert "#" in text
    data = tomllib.loads(text)
    assert data["name"] == "my-repo"
    assert data["scope"] == ["train.py"] and data["harness"] == ["bench.py"]
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "config")
    check = cli(repo, "check")
    assert check.returncode == 0, check.stdout + check.stderr
    again = cli(repo, "init")
    assert again.returncode == 2 and "--force" in again.stderr
    assert cli(repo, "init", "--force").returncode == 0
