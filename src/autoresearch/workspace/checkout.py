"""The user's checkout, read and never written: its HEAD, the state of its files before and
after a proposer ran, and the engine's self-ignoring `.autoresearch/` in it."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from autoresearch.errors import GitError
from autoresearch.gitcmd import Git
from autoresearch.isolation.owned import (
    refuse_links,
    write_file,
)
from autoresearch.workspace.candidate import split_nul


def head_of(root: Path) -> str:
    repo = Git(root)
    commit = repo.rev("HEAD")
    if commit is None:
        raise GitError(
            f"the repository at {root} has no commits yet; commit your code first "
            "(git add -A && git commit -m baseline)."
        )
    return commit


def tree_stat(path: Path) -> str:
    """A cheap fingerprint of a folder: every file's path, size and modification time."""
    digest = hashlib.sha256()
    if path.is_file():
        st = path.stat()
        digest.update(f"{st.st_size}:{st.st_mtime_ns}".encode())
        return digest.hexdigest()
    for folder, dirs, files in os.walk(path):
        dirs.sort()
        for name in sorted(files):
            full = os.path.join(folder, name)
            try:
                st = os.lstat(full)
            except OSError:
                continue
            digest.update(f"{full}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def checkout_state(root: Path, shares: list[str] | None = None) -> dict[str, str]:
    """The user's checkout as git sees it: HEAD, the branch, and every changed path.

    Shared (git-ignored) paths are included by a stat fingerprint, since git does not
    look at them and a proposer could write through the workspace's links.
    """
    repo = Git(root)
    raw = repo.run_bytes(
        "status", "--porcelain=v1", "-z", "--branch", "-unormal", "--no-renames", check=False
    )
    state: dict[str, str] = {}
    for entry in split_nul(raw):
        if entry.startswith("## "):
            state["(branch)"] = entry[3:]
        else:
            state[entry[3:]] = entry[:2]
    state["(HEAD)"] = repo.run("rev-parse", "-q", "--verify", "HEAD", check=False).strip()
    for share in shares or []:
        target = root / share
        if target.exists():
            state[f"{share} (shared)"] = tree_stat(target)
    return state


def checkout_changes(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """The paths (or HEAD, branch) whose state differs between two `checkout_state` calls."""
    return sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))


def ensure_state_dir(root: Path) -> Path:
    """Create `.autoresearch/` so that it ignores itself."""
    base = root / ".autoresearch"
    refuse_links(root, base)
    base.mkdir(exist_ok=True)
    ignore = base / ".gitignore"
    if not os.path.lexists(ignore) or ignore.is_symlink():
        write_file(ignore, b"*\n")
    return base
