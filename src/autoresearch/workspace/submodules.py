"""Submodules in the workspace."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from autoresearch.gitcmd import Git, isolated_env
from autoresearch.isolation.owned import (
    real_dir,
    remove,
)
from autoresearch.workspace.private_git import clone_submodule, has_commit, make_private_git, quote
from autoresearch.workspace.settings import GIT_CONFIG


class Submodules:
    """The workspace's submodules: each checked out at the commit the tree records, from a
    clone of the engine's own under `modules/`."""

    def __init__(
        self, root: Path, path: Path, state_dir: Path, repo: Git, git: Callable[[], Git]
    ) -> None:
        self.root = root
        self.path = path
        self.state_dir = state_dir
        self.modules = state_dir / "modules"
        self.repo = repo
        self.git = git  # the workspace's git, made when first used
        self.paths: list[tuple[str, str]] = []  # (name, path) checked out
        self.clones: dict[str, Path] = {}

    def forget(self) -> None:
        self.paths, self.clones = [], {}

    def refill(self, head: str) -> None:
        """After a reset: every checked-out submodule at the commit `head` records."""
        for _, path in self.paths:
            recorded = self.recorded(head, path)
            if path in self.clones and recorded and has_commit(self.clones[path], recorded):
                self.fill(path, recorded)

    def declared(self) -> list[tuple[str, str]]:
        """(name, path) of each submodule the workspace's `.gitmodules` declares."""
        gitmodules = self.path / ".gitmodules"
        if not gitmodules.is_file() or gitmodules.is_symlink():
            return []
        raw = Git(self.state_dir, env=isolated_env()).run(
            "config",
            "-z",
            "-f",
            str(gitmodules),
            "--get-regexp",
            r"^submodule\..*\.path$",
            check=False,
        )
        found = []
        for entry in raw.split("\0"):
            key, _, path = entry.partition("\n")
            if key.startswith("submodule.") and key.endswith(".path") and path:
                found.append((key[len("submodule.") : -len(".path")], path))
        return found

    def init(self, head: str) -> list[str]:
        """Check out every submodule in the workspace at the commit the tree records.

        Each submodule's objects live in a clone of the engine's own (`modules/`), made
        from the user's own checkout of it when it has one (no network needed), else from
        the user's `submodule.<name>.url`, else from `.gitmodules`. The user's checkout and
        configuration are never written."""
        warnings = []
        self.paths = self.declared()
        self.clones = {}
        for name, path in self.paths:
            recorded = self.recorded(head, path)
            if recorded is None:
                continue
            sources = self.sources(name, path)
            if not sources:
                warnings.append(
                    f"submodule {path} is not checked out in the workspace: its URL in "
                    ".gitmodules is relative and your checkout has not initialised it; run "
                    "`git submodule update --init` in your checkout and start again"
                )
                continue
            clone = self.modules / f"{quote(name)}.git"
            problem = ""
            if not has_commit(clone, recorded):
                for url, local in sources:
                    problem = clone_submodule(url, local, clone, recorded)
                    if not problem:
                        break
            if problem:
                warnings.append(
                    f"submodule {path} is not checked out in the workspace ({problem}); "
                    "commands that need it will fail"
                )
                continue
            self.clones[path] = clone
            self.fill(path, recorded)
        return warnings

    def recorded(self, commit: str, path: str) -> str | None:
        out = self.git().run("rev-parse", "-q", "--verify", f"{commit}:{path}", check=False)
        return out.strip() or None

    def fill(self, path: str, recorded: str) -> None:
        """The submodule's folder holds exactly `recorded`'s files, and a `.git` of the
        proposer's own."""
        clone = self.clones[path]
        target = self.path / path
        base = os.path.realpath(self.path)
        if os.path.realpath(target.parent) != os.path.join(base, *Path(path).parts[:-1]):
            return  # a link on the way: the super-project's reset puts the folder back first
        if not real_dir(target):
            remove(target)
            target.mkdir(parents=True)
        index = self.modules / f"{quote(path)}.index"
        env = {**isolated_env(), "GIT_INDEX_FILE": str(index)}
        sub = Git(
            target, config=GIT_CONFIG, args=[f"--git-dir={clone}", f"--work-tree={target}"], env=env
        )
        sub.run("read-tree", "--reset", "-u", recorded)
        sub.run("clean", "-ffdxq")
        make_private_git(
            target / ".git", clone / "objects", f"{recorded}\n".encode(), {}, index, None
        )

    def gitdirs(self) -> dict[str, Path]:
        """The engine's clone of each checked-out submodule, by its path: where the
        measurement folder reads a submodule commit's files from."""
        return dict(self.clones)

    def sources(self, name: str, path: str) -> list[tuple[str, bool]]:
        """Where a submodule can be cloned from, best first; True for the user's own
        checkout of it."""
        sources = []
        own = self.root / path
        if (own / ".git").exists() and Git(own).ok("rev-parse", "--verify", "-q", "HEAD"):
            sources.append((str(own), True))
        configured = self.repo.run("config", "--get", f"submodule.{name}.url", check=False)
        if configured.strip():
            sources.append((configured.strip(), False))
        gitmodules = self.path / ".gitmodules"
        declared = (
            Git(self.state_dir, env=isolated_env())
            .run("config", "-f", str(gitmodules), "--get", f"submodule.{name}.url", check=False)
            .strip()
        )
        if declared and not declared.startswith(("./", "../")):
            sources.append((declared, False))
        return sources
