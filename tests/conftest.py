"""Shared fixtures: real git repositories in temporary folders, and the CLI two ways.

`cli` runs `python -m autoresearch` in its own process (tests/e2e/ only: signals, the lock,
a terminal, a whole campaign as a user runs it); `invoke` calls the same click command in
this process, with the working directory and environment set for the call only.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

from autoresearch.testing.repo import git
from campaigns import campaign_toml

__all__ = ["Runner", "alive", "git", "ledger", "make_repo", "snapshot", "statuses"]

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


def upper_bound(p: float, n: int) -> float:
    """The false-keep rate a rule that keeps p of its null candidates stays below in 99% of
    samples of n (one-sided, normal approximation to the binomial)."""
    return p + 2.33 * math.sqrt(p * (1 - p) / n)


def make_repo(path: Path, files: dict[str, str], commit: bool = True) -> Path:
    """A repository on branch `main` holding `files`, committed unless `commit` is False."""
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


def make_toy(tmp_path: Path) -> Path:
    """The engine issue's toy repository; the proposer script lives outside the repo."""
    proposer = tmp_path / "propose.sh"
    proposer.write_text(TOY_PROPOSER)
    return make_repo(
        tmp_path / "repo",
        {
            "calc.py": "# the number to tune\nN = 10\n",
            "bench.py": TOY_BENCH,
            "autoresearch.toml": campaign_toml(**{"proposer.command": f"bash {proposer}"}),
        },
    )


@pytest.fixture
def toy(tmp_path: Path) -> Path:
    return make_toy(tmp_path)


@pytest.fixture(scope="module")
def finished_toy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The toy campaign run to its target once per module, for tests that only read it."""
    from autoresearch.config import load_campaign
    from autoresearch.engine import Engine

    repo = make_toy(tmp_path_factory.mktemp("finished"))
    assert Engine(load_campaign(repo)).run().stop_reason == "target"
    return repo


def rewrite_config(repo: Path, text: str, message: str = "config") -> None:
    """Replace the campaign's config and commit it, as a user editing it would."""
    (repo / "autoresearch.toml").write_text(text)
    git(repo, "commit", "-qam", message)


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


@dataclass(frozen=True)
class Ran:
    """What a command gave back, the same shape whether it ran in- or out-of-process."""

    returncode: int
    stdout: str
    stderr: str


Runner = Callable[..., Ran | subprocess.CompletedProcess[str]]


@pytest.fixture
def cli() -> Runner:
    """`python -m autoresearch` in a process of its own."""

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


@pytest.fixture
def invoke(monkeypatch: pytest.MonkeyPatch) -> Runner:
    """The click command in this process: same arguments, exit code, stdout and stderr."""
    from autoresearch.cli.commands import main

    def run(cwd: Path, *args: str, timeout: float = 0, env: dict[str, str] | None = None) -> Ran:
        with monkeypatch.context() as patch:
            patch.chdir(cwd)
            for key, value in (env or {}).items():
                patch.setenv(key, value)
            result = CliRunner().invoke(main, list(args), catch_exceptions=False)
        return Ran(result.exit_code, result.stdout, result.stderr)

    return run


def ledger(repo: Path, name: str = "toy") -> list[dict[str, object]]:
    path = repo / ".autoresearch" / name / "ledger.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def statuses(repo: Path, name: str = "toy") -> list[str]:
    return [str(r["status"]) for r in ledger(repo, name)]


def start_engine(repo: Path, *args: str) -> subprocess.Popen[str]:
    """`autoresearch run --plain` in the background, in its own session, so that a test
    can kill it as a user's SIGKILL would; stderr is kept for the assertion message."""
    return subprocess.Popen(
        [sys.executable, "-m", "autoresearch", "run", "--plain", *args],
        cwd=repo,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def marked(token: str) -> list[int]:
    """Live processes whose command line carries `token` (a pid means something else
    inside a PID namespace; a marker means the same everywhere)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            stat = (entry / "stat").read_bytes()
        except OSError:
            continue
        if token.encode() in cmdline and b") Z" not in stat:
            found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    """True for a running process; a zombie waiting for its reaper is not running."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return False
        if state in ("Z", "X"):
            return False
        time.sleep(0.05)
    return True


# The watch tests' repository: commits that differ in every way a tree can.
WATCHED_FILES = {
    "calc.py": "N = 10\n",
    "helper.py": "OFFSET = 0\n",
    "lib/a.py": "A = 1\n",
    "lib/deep/b.py": "B = 2\n",
    "lib/deep/c.txt": "c\n",
    "docs/readme.md": "read me\n",
    "run.sh": "#!/bin/sh\necho run\n",
}


def commit_all(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", message, "--allow-empty")
    return git(repo, "rev-parse", "HEAD").strip()


@pytest.fixture
def commits(tmp_path: Path) -> tuple[Path, list[str]]:
    """A repository with commits that differ in every way a tree can: edits, an executable
    bit, a link, a file that becomes a folder and back, a folder that goes."""
    repo = make_repo(tmp_path / "repo", WATCHED_FILES)
    (repo / "run.sh").chmod(0o755)
    os.symlink("lib/a.py", repo / "alias.py")
    first = commit_all(repo, "exec bit and a link")
    (repo / "calc.py").write_text("N = 4\n")
    (repo / "helper.py").unlink()
    (repo / "helper.py").mkdir()
    (repo / "helper.py" / "inner.py").write_text("inner\n")
    shutil.rmtree(repo / "docs")
    (repo / "run.sh").chmod(0o644)
    (repo / "alias.py").unlink()
    os.symlink("calc.py", repo / "alias.py")
    (repo / "new" / "folder").mkdir(parents=True)
    (repo / "new" / "folder" / "x.py").write_text("x\n")
    second = commit_all(repo, "a file becomes a folder, a folder goes")
    shutil.rmtree(repo / "helper.py")
    (repo / "helper.py").write_text("OFFSET = 1\n")
    (repo / "lib" / "deep" / "c.txt").write_text("c changed\n")
    third = commit_all(repo, "and back")
    return repo, [first, second, third]


# Whole campaigns run end to end (real engines in their own processes, bundled examples,
# a Ray cluster) are `slow`: `pytest -m "not slow"` is the inner loop.
SLOW_MODULES = {
    "test_isolation.py",  # the attack suite: whole campaigns in real sandboxes
    "test_noise_campaigns.py",
    "test_bench_replica.py",
    "test_parallel.py",
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        path = Path(str(item.fspath))
        if path.parent.name == "e2e" or path.name in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)
