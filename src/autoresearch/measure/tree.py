"""The measurement directory: an engine-owned folder holding exactly one commit's tree.

Metric, guard and judge run here, never in the proposer's workspace, so what they see is
the commit and nothing else: no index flags, no files the commit does not contain, no
leftovers of an earlier run. It is written through a git directory of the engine's own
that borrows the repository's objects (`objects/info/alternates`) and nothing else: no
config, so no clean/smudge filter or hook that anyone planted in the repository applies.
Whatever a run writes is thrown away before the next one.

The folder is moved from commit to commit, and put back after a run, by the paths that
differ, so a measurement costs work in proportion to the change, not to the repository.
When every run here is sealed (bubblewrap: nothing outlives it) the kernel names the paths a
run touched (`watch.FolderWatch`) and only those, with the paths the two commits differ in,
are written again (`materialise`). Otherwise, or when the kernel cannot vouch, git compares
the whole folder with its index (`clean -ffdx`, `read-tree --reset -u`). The files written
path by path are listed in `unindexed` (in the git directory) before they are written: the
index no longer describes them, so git is told to forget them before it next compares.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from autoresearch.errors import GitError, WorkspaceHijacked
from autoresearch.gitcmd import Git
from autoresearch.isolation.owned import (
    OwnedDir,
    append_own,
    real_dir,
    remove,
    writable,
    write_file,
)
from autoresearch.isolation.watch import FolderWatch
from autoresearch.measure import materialise
from autoresearch.workspace import GIT_CONFIG, link_shares, under


class Tree(Protocol):
    """Where measurements run: a folder that shows one commit at a time."""

    @property
    def path(self) -> Path: ...

    def show(self, commit: str) -> None: ...

    def settle(self) -> None: ...

    def discard(self) -> None: ...


class MeasureTree:
    def __init__(
        self,
        root: Path,
        path: Path,
        share: list[str],
        exclude_file: Path,
        submodules: Callable[[], dict[str, Path]] = dict,
        sealed: Callable[[], bool] = lambda: False,
    ) -> None:
        self.root = root
        # Whether every command that runs here dies with all it started (bubblewrap's PID
        # namespace): only then may the kernel's account of a run stand for the folder.
        self.sealed = sealed
        # The git directory of each submodule, by path: its commits' files are read there.
        self.submodules = submodules
        self.path = path
        self.gitdir = path.with_name(path.name + ".git")
        # Both folders are checked before every destructive git command: a folder swapped
        # for a link (into the user's checkout, say) is refused, never written through.
        self._folder = OwnedDir(path, "the measurement folder")
        self._git_folder = OwnedDir(self.gitdir, "the measurement git folder")
        self.share = [s.strip().rstrip("/") for s in share]
        self.exclude_file = exclude_file
        self.current: str | None = None
        self._dirty = False  # a run wrote here since the folder last showed `current`
        self._git: Git | None = None
        self._common: str | None = None
        self._watch: FolderWatch | None = None
        self._cat: materialise.Blobs | None = None
        self._unindexed: set[str] = set()  # written path by path since git last compared
        # How the folder was moved so far: path by path, or by git's pass over all of it.
        self.passes = {"paths": 0, "whole": 0}

    @property
    def git(self) -> Git:
        if self._git is None:
            self._make_gitdir()
            config = [*GIT_CONFIG, f"core.excludesFile={self.exclude_file}"]
            self._git = Git(self.path.parent, config=config)
        return self._git

    def _make_gitdir(self) -> None:
        """A git directory holding only a pointer to the repository's objects."""
        self._close_objects()
        objects = Git(self.root).run("rev-parse", "--git-path", "objects").strip()
        source = (self.root / objects).resolve()
        gitdir = self._git_folder.make()
        (gitdir / "objects" / "info").mkdir(parents=True)
        (gitdir / "refs").mkdir()
        (gitdir / "objects" / "info" / "alternates").write_text(f"{source}\n", encoding="utf-8")
        (gitdir / "HEAD").write_text("ref: refs/heads/measure\n", encoding="utf-8")
        (gitdir / "config").write_text("[core]\n\trepositoryformatversion = 0\n\tbare = false\n")
        self.current = None

    def _run(self, *args: str) -> str:
        return self._run_bytes(*args).decode("utf-8", errors="surrogateescape")

    def _run_bytes(self, *args: str, input: bytes | None = None) -> bytes:
        git = self.git
        # No user or system configuration either: only the engine's settings apply.
        env = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}
        return git.run_bytes(
            f"--git-dir={self.gitdir}",
            f"--work-tree={self.path}",
            *args,
            input=input,
            extra_env=env,
        )

    def _popen(self, *args: str) -> subprocess.Popen[bytes]:
        return self.git.popen(
            f"--git-dir={self.gitdir}",
            f"--work-tree={self.path}",
            *args,
            extra_env={"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull},
        )

    def show(self, commit: str) -> None:
        """Make the folder exactly `commit`'s tree (plus the shared paths' links), throwing
        away what the last run wrote."""
        if self.current is not None:
            self._check()
        if self.current == commit and not self._dirty:
            return
        index = self.gitdir / "index"
        if self.current is None and self._git is None:
            self.current = self._adopt()
        if self.current is None or not index.is_file() or not self.path.is_dir():
            self._rebuild(commit)
        elif not self._move(commit):
            try:
                self._reset(commit)
            except GitError:
                self._rebuild(commit)
        self._dirty = False
        self.current = commit
        self._fill_submodules()
        self._link_shares()
        self._watch_next()

    def files(self) -> list[str]:
        """The files of the commit the folder shows (read from the commit: the folder lies
        inside the user's ignored `.autoresearch/`, where git sees none)."""
        if self.current is None:
            return []
        raw = self._run("ls-tree", "-r", "-z", "--full-tree", "--name-only", self.current)
        return sorted(p for p in raw.split("\0") if p)

    # -- path by path ----------------------------------------------------------------------

    def _move(self, commit: str) -> bool:
        """Put back what the last run touched and move to `commit`, path by path, when the
        kernel vouches for what the run touched; False when git must compare instead."""
        watch = self._watch
        if watch is None or self.current is None or not self.sealed() or self.submodules():
            return False
        touched = watch.changes()
        if touched is None:
            return False
        try:
            content = self._objects()
            moved = materialise.tree_differences(content, self.current, commit)
            write = {p: e for p, e in moved.items() if e}
            drop = set(moved)
            for rel in touched:
                if rel and under(rel, self.share):
                    continue  # the share links are made again exactly, below
                if watch.is_dir(rel) and watch.same(rel):
                    # The same folder, its own attributes changed (the root's included).
                    materialise.reset_folder(self.path / rel)
                    continue
                if not rel:
                    return False  # the root itself cannot be put back path by path
                drop.add(rel)
            looked_up = materialise.entries(content, commit, drop - set(write))
            write.update(looked_up)
            self._note_unindexed(sorted(write))

            def held(folders: list[str]) -> set[str]:
                found = materialise.entries(content, commit, folders)
                return {f for f in folders if any(under(p, [f]) for p in found)}

            materialise.apply(self.path, drop, write, content, watch, held)
        except (GitError, OSError, ValueError, MemoryError):
            # git's whole pass does it instead (git streams large files itself); the reader
            # may be left in the middle of an object
            self._close_objects()
            return False
        self.passes["paths"] += 1
        return True

    def _objects(self) -> materialise.Blobs:
        """The folder's one `git cat-file --batch`, kept running from move to move (a
        process start per move saved); objects written since it started are found too."""
        if self._cat is None:
            self._cat = materialise.Blobs(self._popen("cat-file", "--batch"))
        return self._cat

    def _close_objects(self) -> None:
        if self._cat is not None:
            self._cat.close()
            self._cat = None

    def _note_unindexed(self, paths: list[str]) -> None:
        """Listed before they are written: an engine that stops midway leaves the list."""
        new = [p for p in paths if p not in self._unindexed]
        if not new:
            return
        with append_own(self.gitdir / "unindexed") as handle:
            handle.write(b"".join(os.fsencode(p) + b"\0" for p in new))
        self._unindexed.update(new)

    def _forget_unindexed(self) -> bool:
        """Drop the files written path by path from the index, so that git's next pass
        removes and writes them again instead of trusting what it last saw; whether any."""
        log = self.gitdir / "unindexed"
        listed = set(self._unindexed)
        if log.is_file() and not log.is_symlink():
            listed.update(os.fsdecode(p) for p in log.read_bytes().split(b"\0") if p)
        if listed:
            self._run_bytes(
                "update-index",
                "--force-remove",
                "-z",
                "--stdin",
                input=b"".join(os.fsencode(p) + b"\0" for p in sorted(listed)),
            )
        log.unlink(missing_ok=True)
        self._unindexed.clear()
        return bool(listed)

    def _watch_next(self) -> None:
        """The folder shows what it should: what the kernel reports from now on is the next
        run's doing. The marks are placed afresh after git wrote the folder whole."""
        if not self.sealed() or self.submodules() or self.current is None:
            self._close_watch()
            return
        if self._watch is not None:
            self._watch.settle()
            return
        files = [f for f in self.files() if not under(f, self.share)]
        # The share links' folders too: the engine makes them to hold a nested share's link.
        dirs = {str(p) for f in [*files, *self.share] for p in Path(f).parents if str(p) != "."}
        self._watch = FolderWatch.open(self.path, files, sorted(dirs))

    def _close_watch(self) -> None:
        if self._watch is not None:
            self._watch.close()
            self._watch = None

    # -- git's whole pass -------------------------------------------------------------------

    def _reset(self, commit: str) -> None:
        self.passes["whole"] += 1
        self._close_watch()
        forgot = self._forget_unindexed()
        if self._dirty or forgot:
            self._reset_folders()
            self._clean()
        # One pass both undoes what a run changed in tracked files and moves to `commit`: a
        # reset writes every file that differs from the new index.
        self._run("read-tree", "--reset", "-u", commit)

    def settle(self) -> None:
        """A run is over: what it wrote goes before the folder shows anything again. The
        work is done by the next `show` (one pass over the files instead of two), or by
        `discard` when nothing will run here for a while."""
        if self.current is not None:
            self._check()  # a folder swapped during the run is named now, not at next use
            self._dirty = True

    def discard(self) -> None:
        """Undo what the last run wrote now: tracked files back to the commit, everything
        else gone."""
        if self.current is not None and self._dirty:
            self.show(self.current)
        self._close_watch()  # marks are a kernel resource: none held while nothing runs
        self._close_objects()  # a process too

    def _reset_folders(self) -> None:
        """Git never looks at a folder's own mode, attributes or times, nor inside a
        gitlink's folder: what a run left there is undone before git writes any file."""
        for folder, dirnames, _ in os.walk(self.path):
            with contextlib.suppress(OSError):  # one the run made unreadable: clean takes it
                materialise.reset_folder(Path(folder))
            dirnames[:] = [d for d in dirnames if not os.path.islink(os.path.join(folder, d))]
        if self.current is None or self.submodules():
            return
        raw = self._run("ls-files", "-s", "-z")
        for entry in raw.split("\0"):
            meta, _, path = entry.partition("\t")
            if meta.startswith("160000 ") and real_dir(self.path / path):
                for child in os.listdir(self.path / path):
                    remove(self.path / path / child)

    def _clean(self) -> None:
        args = ["clean", "-ffdxq"]
        for item in self.share:
            args += ["-e", f"/{item}"]
        try:
            self._run(*args)
        except GitError:
            # A run took the write permission off a folder it made: given back, then again.
            writable(self.path)
            self._run(*args)

    def _fill_submodules(self) -> None:
        """Each submodule's folder holds exactly the commit the measured tree records."""
        gitdirs = self.submodules()
        if not gitdirs or self.current is None:
            return
        raw = self._run("ls-tree", "-r", "-z", self.current)
        for entry in raw.split("\0"):
            meta, _, path = entry.partition("\t")
            parts = meta.split()
            if len(parts) != 3 or parts[0] != "160000" or path not in gitdirs:
                continue
            target = self.path / path
            target.mkdir(parents=True, exist_ok=True)
            index = self.gitdir / "modules" / f"{path.replace('/', '%')}.index"
            index.parent.mkdir(exist_ok=True)
            git = self.git
            git.run(
                f"--git-dir={gitdirs[path]}",
                f"--work-tree={target}",
                "read-tree",
                "--reset",
                "-u",
                parts[2],
                extra_env={"GIT_INDEX_FILE": str(index), "GIT_CONFIG_NOSYSTEM": "1"},
            )
            # What a run left in the submodule's folder goes too, as in the workspace.
            git.run(
                f"--git-dir={gitdirs[path]}",
                f"--work-tree={target}",
                "clean",
                "-ffdxq",
                extra_env={"GIT_INDEX_FILE": str(index), "GIT_CONFIG_NOSYSTEM": "1"},
            )

    def _adopt(self) -> str | None:
        """Take over the folder an engine before this one left (a `step` is a process of
        its own): its git directory is written again but for the index, and the folder is
        put back to exactly the index's tree (`read-tree --reset -u`, `clean -ffdx`: work in
        proportion to what differs, as after every run). The tree it shows, or None to
        rebuild from nothing. Whatever was changed there in between is undone, as anything
        a run leaves is; the move to the commit to measure follows."""
        index = self.gitdir / "index"
        if not (real_dir(self.path) and real_dir(self.gitdir)) or index.is_symlink():
            return None
        if not index.is_file() or self.submodules():
            return None
        try:
            self._folder.remember()
            self._git_folder.remember()
            objects = Git(self.root).run("rev-parse", "--git-path", "objects").strip()
            source = (self.root / objects).resolve()
            info = self.gitdir / "objects" / "info"
            if not real_dir(info):
                return None
            write_file(info / "alternates", f"{source}\n".encode())
            write_file(self.gitdir / "HEAD", b"ref: refs/heads/measure\n")
            write_file(
                self.gitdir / "config", b"[core]\n\trepositoryformatversion = 0\n\tbare = false\n"
            )
            config = [*GIT_CONFIG, f"core.excludesFile={self.exclude_file}"]
            self._git = Git(self.path.parent, config=config)
            self._forget_unindexed()  # an earlier engine's path-by-path writes
            tree = self._run("write-tree").strip()
            self._run("read-tree", "--reset", "-u", tree)
            args = ["clean", "-ffdxq"]
            for item in self.share:
                args += ["-e", f"/{item}"]
            self._run(*args)
        except (GitError, WorkspaceHijacked, OSError):
            self._git = None  # the next use makes the git directory afresh
            return None
        return tree

    def _check(self) -> None:
        self._folder.check()
        self._git_folder.check()

    def _rebuild(self, commit: str) -> None:
        self._close_watch()
        self._close_objects()
        self._folder.make()
        (self.gitdir / "index").unlink(missing_ok=True)
        (self.gitdir / "unindexed").unlink(missing_ok=True)
        self._unindexed.clear()
        self._run("read-tree", "--reset", "-u", commit)

    def _link_shares(self) -> None:
        link_shares(self.root, self.path, self.share, exact=True)
