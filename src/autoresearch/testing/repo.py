"""Real git repositories in temporary folders, and what of a checkout must never change."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
}


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args],
        cwd=cwd,
        env={**os.environ, **GIT_IDENTITY},
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def make_repo(path: Path, files: dict[str, str]) -> Path:
    """A repository on branch `main` with `files` committed."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    for rel, text in files.items():
        target = path / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    git(path, "add", "-A")
    git(path, "commit", "-qm", "initial")
    return path


def add_worktree(repo: Path, path: Path, branch: str) -> Path:
    """A worktree of `repo` on a new branch, as the engine makes one for a campaign."""
    git(repo, "worktree", "add", "-q", "-b", branch, str(path))
    return path


def snapshot(repo: Path) -> dict[str, object]:
    """The user's checkout, byte for byte: files, HEAD, index and branches."""
    files: dict[str, bytes] = {}
    for path in sorted(repo.rglob("*")):
        rel = path.relative_to(repo)
        if rel.parts[0] == ".git" or not path.is_file():
            continue
        files[str(rel)] = path.read_bytes()
    return {
        "files": files,
        "head": git(repo, "rev-parse", "HEAD"),
        "symbolic": git(repo, "symbolic-ref", "HEAD"),
        "index": (repo / ".git" / "index").read_bytes(),
        "status": git(repo, "status", "--porcelain", "-uall"),
    }
