"""Start or resume: where the campaign starts, what is refused, and the numbering on resume.

The commands run in-process through the click runner; the engine's commands are real."""

from __future__ import annotations

import json
from pathlib import Path

from campaigns import campaign_toml
from conftest import Runner, git, ledger, make_repo, statuses

EXPECTED = [
    "baseline",
    "keep",
    "discard",
    "guard_failed",
    "crash",
    "scope_violation",
    "no_change",
    "keep",
]
GOOD = campaign_toml(name="t", **{"proposer.command": "true"})


def test_not_a_repository(tmp_path: Path, invoke: Runner) -> None:
    (tmp_path / "plain").mkdir()
    result = invoke(tmp_path / "plain", "run")
    assert result.returncode == 1
    assert "not inside a git repository" in result.stderr
    assert "Traceback" not in result.stderr


def test_repository_without_commits(tmp_path: Path, invoke: Runner) -> None:
    repo = make_repo(
        tmp_path / "r",
        {"calc.py": "N = 1\n", "bench.py": "print(1)\n", "autoresearch.toml": GOOD},
        commit=False,
    )
    result = invoke(repo, "run")
    assert result.returncode == 1
    assert "no commits yet" in result.stderr


def test_existing_branch_without_ledger(tmp_path: Path, invoke: Runner) -> None:
    repo = make_repo(
        tmp_path / "r",
        {"calc.py": "N = 1\n", "bench.py": "print(1)\n", "autoresearch.toml": GOOD},
    )
    (repo / "calc.py").write_text("N = 2\n")
    git(repo, "commit", "-qam", "second")
    git(repo, "branch", "autoresearch/t", "HEAD~1")
    result = invoke(repo, "run")
    assert result.returncode == 2
    assert "git branch -D autoresearch/t" in result.stderr


def test_checkout_on_the_campaign_branch(tmp_path: Path, invoke: Runner) -> None:
    repo = make_repo(
        tmp_path / "r",
        {"calc.py": "N = 1\n", "bench.py": "print(1)\n", "autoresearch.toml": GOOD},
    )
    git(repo, "checkout", "-q", "-b", "autoresearch/t")
    result = invoke(repo, "run")
    assert result.returncode == 1
    assert "switch to another branch" in result.stderr


def test_status_before_any_run(tmp_path: Path, invoke: Runner) -> None:
    repo = make_repo(tmp_path / "r", {"calc.py": "N = 1\n", "autoresearch.toml": GOOD})
    result = invoke(repo, "status")
    assert result.returncode == 1
    assert "has no measurements yet" in result.stderr


def test_missing_git_is_one_sentence(tmp_path: Path, invoke: Runner) -> None:
    result = invoke(tmp_path, "run", env={"PATH": "/nonexistent"})
    assert result.returncode != 0
    assert "git" in result.stderr and "Traceback" not in result.stderr


def test_dirty_checkout_is_warned_about(toy: Path, invoke: Runner) -> None:
    (toy / "calc.py").write_text("N = 999\n")
    result = invoke(toy, "run", "--max-iterations", "1")
    assert result.returncode == 0
    assert "uncommitted changes" in result.stdout
    assert ledger(toy)[0]["metric"] == 7  # the campaign starts from HEAD


def test_detached_head_starts_from_that_commit(toy: Path, invoke: Runner) -> None:
    git(toy, "checkout", "-q", "--detach")
    result = invoke(toy, "run", "--max-iterations", "1")
    assert result.returncode == 0, result.stderr


def test_stale_git_locks_from_a_killed_engine_are_cleared(toy: Path, invoke: Runner) -> None:
    assert invoke(toy, "run", "--max-iterations", "1").returncode == 0
    # The engine's own git directory for the workspace (never the project's: a relative
    # path here would land in the directory the tests run from).
    gitdir = toy / ".autoresearch/toy/workspace.git"
    assert gitdir.is_dir()
    (gitdir / "index.lock").write_text("")
    (toy / ".git/refs/heads/autoresearch/toy.lock").write_text("")
    result = invoke(toy, "run", "--max-iterations", "3")
    assert result.returncode == 0, result.stderr
    assert [r["iteration"] for r in ledger(toy)] == [0, 1, 2, 3]


def test_resume_continues_numbering_without_repeating(toy: Path, invoke: Runner) -> None:
    first = invoke(toy, "run", "--max-iterations", "2")
    assert first.returncode == 0, first.stderr
    assert statuses(toy) == EXPECTED[:3]
    assert json.loads(invoke(toy, "status", "--json").stdout)["stop_reason"] == "max_iterations"

    second = invoke(toy, "run", "--max-iterations", "4")
    assert second.returncode == 0, second.stderr
    assert "resuming" in second.stdout
    records = ledger(toy)
    assert [r["iteration"] for r in records] == [0, 1, 2, 3, 4]
    assert statuses(toy) == EXPECTED[:5]
    assert git(toy, "show", "autoresearch/toy:calc.py").endswith("N = 7\n")

    # Already at the cap: nothing more happens, exit 0.
    third = invoke(toy, "run", "--max-iterations", "4")
    assert third.returncode == 0
    assert len(ledger(toy)) == 5

    fourth = invoke(toy, "run")
    assert fourth.returncode == 0
    assert statuses(toy) == EXPECTED
    assert [r["iteration"] for r in ledger(toy)] == list(range(8))
