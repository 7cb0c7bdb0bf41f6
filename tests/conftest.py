"""Shared fixtures: real git repositories in temporary folders and the real CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

TOY_BENCH = 'import calc\nprint(f"score: {abs(calc.N - 3)}")\n'

# Attempts of the engine issue's acceptance scenario, by AUTORESEARCH_ITERATION.
TOY_PROPOSER = r"""#!/bin/bash
set -e
case "$AUTORESEARCH_ITERATION" in
  1) sed -i 's/^N = .*/N = 7/' calc.py; echo "set N to 7";;
  2) sed -i 's/^N = .*/N = 9/' calc.py; echo "set N to 9";;
  3) sed -i 's/^N = .*/N = 5/' calc.py; echo "set N to 5";;
  4) sed -i 's/^N = .*/N = "x"/' calc.py; echo "set N to x";;
  5) echo hi > notes.txt; echo "write notes outside the scope";;
  6) echo "change nothing";;
  *) sed -i 's/^N = .*/N = 3/' calc.py; echo "set N to 3";;
esac
"""

TOY_CONFIG = """\
name = "toy"
goal = "make the score zero"
scope = ["calc.py"]
harness = ["bench.py"]

[metric]
command = "python bench.py"
direction = "minimize"
pattern = 'score: ([-+0-9.eE]+)'
target = 0

[guard]
command = "python -c 'import calc; assert calc.N != 5'"

[stop]
max_iterations = 20

[proposer]
kind = "command"
command = "bash {proposer}"
"""


def git(cwd: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    return subprocess.run(
        ["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True
    ).stdout


def make_repo(path: Path, files: dict[str, str], commit: bool = True) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    for rel, text in files.items():
        target = path / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    if commit:
        git(path, "add", "-A")
        git(path, "commit", "-qm", "initial")
    return path


@pytest.fixture
def toy(tmp_path: Path) -> Path:
    """The engine issue's toy repository; the proposer script lives outside the repo."""
    proposer = tmp_path / "propose.sh"
    proposer.write_text(TOY_PROPOSER)
    repo = tmp_path / "repo"
    return make_repo(
        repo,
        {
            "calc.py": "# the number to tune\nN = 10\n",
            "bench.py": TOY_BENCH,
            "autoresearch.toml": TOY_CONFIG.format(proposer=proposer),
        },
    )


def snapshot(repo: Path) -> dict[str, object]:
    """Everything of the user's checkout that the engine must not touch."""
    files: dict[str, bytes] = {}
    for path in sorted(repo.rglob("*")):
        rel = path.relative_to(repo)
        if rel.parts[0] in (".git", ".autoresearch") or not path.is_file():
            continue
        files[str(rel)] = path.read_bytes()
    return {
        "files": files,
        "head": git(repo, "rev-parse", "HEAD"),
        "symbolic": git(repo, "symbolic-ref", "HEAD"),
        "status": git(repo, "status", "--porcelain", "-uall"),
        "index": (repo / ".git" / "index").read_bytes(),
        "branches": [
            b for b in git(repo, "branch", "--format=%(refname)").split() if "autoresearch" not in b
        ],
    }


Runner = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def cli() -> Runner:
    def run(
        cwd: Path, *args: str, timeout: float = 120, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "autoresearch", *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **(env or {})},
        )

    return run


def ledger(repo: Path, name: str = "toy") -> list[dict[str, object]]:
    path = repo / ".autoresearch" / name / "ledger.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def statuses(repo: Path, name: str = "toy") -> list[str]:
    return [str(r["status"]) for r in ledger(repo, name)]
