"""Refs moved through one long-lived `git update-ref --stdin`: what git holds afterwards is
what one `git update-ref` per move would leave, a refused move included."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from autoresearch.errors import GitError
from autoresearch.gitcmd import Git, RefUpdates
from autoresearch.testing.repo import git, make_repo


def commits(repo: Path, count: int) -> list[str]:
    found = [git(repo, "rev-parse", "HEAD").strip()]
    for k in range(count - 1):
        (repo / "f.txt").write_text(f"{k + 1}\n")
        git(repo, "commit", "-qam", f"c{k}")
        found.append(git(repo, "rev-parse", "HEAD").strip())
    return found


def ref(repo: Path, name: str) -> str:
    return git(repo, "rev-parse", "-q", "--verify", name).strip()


def test_refs_move_as_git_moves_them_and_a_refused_move_changes_nothing(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path / "r", {"f.txt": "0\n"})
    first, second, third = commits(repo, 3)
    refs = RefUpdates(Git(repo))
    refs.update("refs/autoresearch/x/1", second)
    refs.update("refs/heads/autoresearch/x", first)
    refs.update("refs/heads/autoresearch/x", second, first, deref=False)
    assert ref(repo, "refs/autoresearch/x/1") == second
    assert ref(repo, "refs/heads/autoresearch/x") == second
    # The branch moved meanwhile: the expected value does not hold, and git says so.
    with pytest.raises(GitError, match="update-ref"):
        refs.update("refs/heads/autoresearch/x", third, first, deref=False)
    assert ref(repo, "refs/heads/autoresearch/x") == second
    refs.update("refs/autoresearch/x/2", third)  # git is started again
    assert ref(repo, "refs/autoresearch/x/2") == third
    refs.close()
    assert git(repo, "fsck", "--no-progress") == ""


def test_a_symbolic_ref_planted_at_the_branch_is_replaced_not_written_through(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path / "r", {"f.txt": "0\n"})
    first, second = commits(repo, 2)
    git(repo, "branch", "-f", "theirs", first)
    git(repo, "symbolic-ref", "refs/heads/autoresearch/x", "refs/heads/theirs")
    refs = RefUpdates(Git(repo))
    refs.update("refs/heads/autoresearch/x", second, first, deref=False)
    refs.close()
    assert ref(repo, "refs/heads/theirs") == first
    assert ref(repo, "refs/heads/autoresearch/x") == second


def test_moves_from_several_threads_each_land(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"f.txt": "0\n"})
    targets = commits(repo, 4)
    refs = RefUpdates(Git(repo))

    def move(k: int) -> None:
        for i in range(10):
            refs.update(f"refs/autoresearch/x/{k}-{i}", targets[(k + i) % 4])

    threads = [threading.Thread(target=move, args=(k,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    refs.close()
    for k in range(4):
        for i in range(10):
            assert ref(repo, f"refs/autoresearch/x/{k}-{i}") == targets[(k + i) % 4]
