"""The commit the engine writes itself is the object `git commit-tree` makes, byte for
byte, and git reads it as its own."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from autoresearch.gitcmd import IDENTITY
from autoresearch.testing.repo import git, make_repo
from autoresearch.workspace import loose

NOW = 1_700_000_123.75
MESSAGES = [
    b"",
    b"one line, no newline",
    b"autoresearch t #3: faster\n\nbody\n",
    "unicode: caf\u00e9 \u2192 ok\n".encode(),
]
# git rewrites these (bytes that are not UTF-8 as if Latin-1, noncharacters too): left to it
REWRITTEN = [b"not UTF-8: caf\xe9\n", "a noncharacter: \ufffe\n".encode(), b"\xed\xa0\x80"]


def git_commit_tree(repo: Path, tree: str, parent: str, message: bytes) -> str:
    stamp = f"{int(NOW)} {loose._timezone(NOW)}"
    env = {**os.environ, **IDENTITY, "GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp}
    done = subprocess.run(
        ["git", "commit-tree", tree, "-p", parent, "-F", "-"],
        cwd=repo,
        input=message,
        env=env,
        capture_output=True,
        check=True,
    )
    return done.stdout.decode().strip()


@pytest.mark.parametrize("message", MESSAGES)
def test_the_commit_is_the_one_git_makes(
    tmp_path: Path, message: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path / "r", {"a.txt": "1\n"})
    parent = git(repo, "rev-parse", "HEAD").strip()
    (repo / "a.txt").write_text("2\n")
    git(repo, "add", "a.txt")
    tree = git(repo, "write-tree").strip()
    monkeypatch.setattr(loose.time, "time", lambda: NOW)
    objects = repo / ".git" / "objects"
    ours = loose.write_commit(objects, tree, parent, message, {})
    assert ours is not None
    path = objects / ours[:2] / ours[2:]
    assert not os.stat(path).st_mode & 0o222  # read-only, as git leaves its objects
    assert git(repo, "cat-file", "-t", ours).strip() == "commit"
    assert git_commit_tree(repo, tree, parent, message) == ours
    assert git(repo, "fsck", "--strict", "--no-progress", "--no-dangling") == ""
    # Written again (the same second): the object stands, nothing fails.
    assert loose.write_commit(objects, tree, parent, message, {}) == ours


def test_what_git_would_not_store_as_it_is_is_left_to_git(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"a.txt": "1\n"})
    parent = git(repo, "rev-parse", "HEAD").strip()
    tree = git(repo, "rev-parse", "HEAD^{tree}").strip()
    objects = repo / ".git" / "objects"
    env = {"GIT_COMMITTER_DATE": "2001-01-01T00:00:00"}
    assert loose.write_commit(objects, tree, parent, b"m", env) is None
    for message in REWRITTEN:
        assert loose.write_commit(objects, tree, parent, message, {}) is None
    assert loose.write_commit(objects, "ab" * 32, parent, b"m", {}) is None  # SHA-256
