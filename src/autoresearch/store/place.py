"""Where a command runs: the user's checkout and, inside a campaign's folder, which one.

A command may run in the user's checkout, in any folder below it, or inside one of a
campaign's own folders (its workspace `.autoresearch/<name>/worktree`, a slot's, its logs):
an agent works in the workspace, which holds a `.git` of its own, so git alone would take
it for a repository apart. `place_of` walks up to the checkout instead and remembers the
campaign whose folder it came through. Light on imports: `autoresearch mcp` starts here.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from autoresearch.errors import GitError
from autoresearch.gitcmd import repo_root

STATE_FOLDER = ".autoresearch"


@dataclass(frozen=True)
class Place:
    """Where a command runs: the user's checkout, and the campaign whose folder it is in."""

    root: Path
    campaign: str | None = None  # the campaign whose folder the command runs in
    worktree: Path | None = None  # that campaign's workspace (or a slot's), when inside one
    cwd: Path | None = None

    def config(self, explicit: Path | None) -> Path | None:
        """A `--config` path as the user meant it: inside a workspace, a relative path
        names the checkout's file (the workspace's copy is the proposer's to edit)."""
        if explicit is None or explicit.is_absolute() or self.cwd is None:
            return explicit
        if self.worktree is not None:
            below = self.cwd.relative_to(self.worktree)
            return self.root / below / explicit
        return self.cwd / explicit


def current_folder() -> Path:
    """The folder the command runs in; one sentence when it was removed under the shell
    (a campaign's workspace is made afresh when `run` opens the campaign)."""
    try:
        return Path.cwd()
    except FileNotFoundError:
        where = os.environ.get("PWD") or "the folder you are in"
        raise GitError(
            f"{where} no longer exists (a campaign's workspace is made afresh when "
            f"`autoresearch run` opens the campaign); `cd {where}` again, or run from your "
            "repository."
        ) from None


def place_of(cwd: Path) -> Place:
    """The checkout and campaign of a folder; one sentence naming where to run from when
    it is in no repository."""
    cwd = cwd.resolve()
    for parent in (cwd, *cwd.parents):
        if parent.name != STATE_FOLDER or not (parent.parent / ".git").exists():
            continue
        root = parent.parent
        parts = cwd.relative_to(parent).parts
        name = parts[0] if parts else None
        worktree: Path | None = None
        if name is not None:
            if parts[1:2] == ("worktree",):
                worktree = parent / name / "worktree"
            elif parts[1:2] == ("slots",) and parts[3:4] == ("worktree",):
                worktree = parent.joinpath(*parts[:4])
        return Place(root=_top(root), campaign=name, worktree=worktree, cwd=cwd)
    return Place(root=_top(cwd), cwd=cwd)


def _top(folder: Path) -> Path:
    try:
        return repo_root(folder)
    except GitError:
        raise GitError(
            f"{folder} is not inside a git repository; run autoresearch from your repository "
            "(the folder holding autoresearch.toml) or a folder below it."
        ) from None


def recorded_config(root: Path, name: str) -> Path | None:
    """The config file campaign `name`'s last engine read (its `state.json`)."""
    try:
        state = json.loads((root / STATE_FOLDER / name / "state.json").read_text("utf-8"))
    except (OSError, ValueError):
        return None
    recorded = state.get("config") if isinstance(state, dict) else None
    return Path(recorded) if isinstance(recorded, str) and recorded else None


__all__ = ["STATE_FOLDER", "Place", "current_folder", "place_of", "recorded_config"]
