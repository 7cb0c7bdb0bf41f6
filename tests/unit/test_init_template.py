"""`init`: the commented config it writes is valid, and it refuses to overwrite."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

from conftest import Runner, git, make_repo


def test_init_writes_a_valid_commented_config(tmp_path: Path, invoke: Runner) -> None:
    repo = make_repo(tmp_path / "my repo", {"train.py": "LR = 1\n", "bench.py": "print(1)\n"})
    result = invoke(repo, "init")
    assert result.returncode == 0, result.stderr
    text = (repo / "autoresearch.toml").read_text()
    assert "#" in text
    data = tomllib.loads(text)
    assert data["name"] == "my-repo"
    assert data["scope"] == ["train.py"] and data["harness"] == ["bench.py"]
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "config")
    # `check` also checks the proposer's executable: a stand-in for the agent CLI.
    agent = tmp_path / "bin" / data["proposer"]["kind"]
    agent.parent.mkdir()
    agent.write_text("#!/bin/bash\n")
    agent.chmod(0o755)
    check = invoke(repo, "check", env={"PATH": f"{agent.parent}:{os.environ['PATH']}"})
    assert check.returncode == 0, check.stdout + check.stderr
    again = invoke(repo, "init")
    assert again.returncode == 2 and "--force" in again.stderr
    assert invoke(repo, "init", "--force").returncode == 0
