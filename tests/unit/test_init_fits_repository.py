"""`init` fits the config to the repository: packages become scope globs, the benchmark and
the tests the harness; the [decision] and [sandbox] sections are there, commented, and valid
when uncommented."""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

import pytest

from conftest import Runner, git, make_repo


def init_config(invoke: Runner, repo: Path, env: dict[str, str] | None = None) -> str:
    result = invoke(repo, "init", env=env)
    assert result.returncode == 0, result.stderr
    return (repo / "autoresearch.toml").read_text()


@pytest.mark.parametrize(
    "files,scope",
    [
        ({"src/lib/__init__.py": "", "src/lib/core.py": "X = 1\n"}, ["src/**/*.py"]),
        (
            {"mylib/__init__.py": "", "mylib/deep/x.py": "", "tools/gen.py": ""},
            ["mylib/**/*.py", "tools/**/*.py"],
        ),
        ({"train.py": "LR = 1\n", "model.py": ""}, ["model.py", "train.py"]),
        ({"crate/src/lib.rs": "", "crate/src/main.rs": "", "build.py": ""}, ["crate/**/*.rs"]),
    ],
)
def test_package_folders_become_scope_globs(
    tmp_path: Path, invoke: Runner, files: dict[str, str], scope: list[str]
) -> None:
    repo = make_repo(
        tmp_path / "repo",
        {**files, "tests/test_core.py": "", "bench.py": "print(1)\n", "setup.py": ""},
    )
    data = tomllib.loads(init_config(invoke, repo))
    assert data["scope"] == scope
    assert data["harness"] == ["bench.py", "tests/**"]  # the benchmark and the tests are fixed
    assert data["metric"]["command"] == "python bench.py"
    assert data["guard"]["command"].startswith("python -m pytest")


def test_decision_and_sandbox_are_written_commented_and_valid(
    tmp_path: Path, invoke: Runner
) -> None:
    from autoresearch.config import load_campaign

    repo = make_repo(tmp_path / "repo", {"calc.py": "N = 1\n", "bench.py": "print(1)\n"})
    text = init_config(invoke, repo)
    data = tomllib.loads(text)
    assert "decision" not in data and "sandbox" not in data  # the defaults hold
    assert "# [decision]" in text and "# [sandbox]" in text
    # Uncommented, every key written is a key the config takes, with a valid value.
    lines = text.splitlines()
    start = lines.index(next(line for line in lines if line.startswith("# [decision]")))
    end = lines.index("[proposer]")
    for i in range(start, end):
        if re.match(r"# (\[\w+\]|\w+ = )", lines[i]):
            lines[i] = lines[i][2:]
    (repo / "autoresearch.toml").write_text("\n".join(lines) + "\n")
    campaign = load_campaign(repo, None)
    assert campaign.config.decision.rule == "auto"
    assert campaign.config.sandbox.network is True


def test_an_installed_agent_becomes_the_proposer(tmp_path: Path, invoke: Runner) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    codex = bin_dir / "codex"
    codex.write_text("#!/bin/bash\nexit 0\n")
    codex.chmod(0o755)
    repo = make_repo(tmp_path / "repo", {"calc.py": "N = 1\n", "bench.py": "print(1)\n"})
    # Only the stand-in's folder and the system's: no real agent CLI is found first.
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin:{Path(sys.executable).parent}"}
    data = tomllib.loads(init_config(invoke, repo, env))
    assert data["proposer"]["kind"] == "codex"
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "config")
    check = invoke(repo, "check", env=env)
    assert check.returncode == 0, check.stdout + check.stderr
    assert f"proposer: codex, runs {codex}" in check.stdout


def test_init_says_the_config_is_read_from_disk(tmp_path: Path, invoke: Runner) -> None:
    repo = make_repo(tmp_path / "repo", {"calc.py": "N = 1\n"})
    result = invoke(repo, "init")
    assert "reads this file as it is on disk" in result.stdout
    assert "as it is on disk" in (repo / "autoresearch.toml").read_text()
