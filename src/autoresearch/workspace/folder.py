"""The proposer's workspace and the engine's git bookkeeping of it.

The workspace (`.autoresearch/<name>/worktree`) is a plain folder of files. The engine
reads it through a git directory of its own (`workspace.git`, beside it, outside the
proposer's reach): its own index and HEAD, no configuration but the engine's, and the
user's object store as its object directory, so that the candidate's blobs, trees and
commits land in the user's repository, where `refs/autoresearch/<name>/<i>` and the branch
`autoresearch/<name>` (the only refs the engine writes there) point at them.

The proposer gets a `.git` of its own in the workspace (objects borrowed from the user's
store through `objects/info/alternates`, a branch at the incumbent, an index): it may
commit, reset, switch branches, set index flags, filters or hooks there; none of it is
read by the engine, and the engine makes it afresh after every attempt.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import stat
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from autoresearch.errors import GitError, WorkspaceHijacked
from autoresearch.gitcmd import IDENTITY, Git, RefUpdates, isolated_env
from autoresearch.isolation.owned import (
    OwnedDir,
    real_dir,
    refuse_links,
    remove,
    write_file,
)
from autoresearch.isolation.watch import FolderWatch
from autoresearch.scope import Caps
from autoresearch.workspace.candidate import (
    Candidate,
    Change,
    Scan,
    message_bytes,
    nul_join,
    numstat_text,
    outermost,
    split_nul,
    under,
)
from autoresearch.workspace.loose import write_commit
from autoresearch.workspace.private_git import digest, link_shares, make_private_git, read_small
from autoresearch.workspace.refused import refused_diff
from autoresearch.workspace.settings import ENGINE_FOLDERS, GIT_CONFIG, NO_PRELOAD, TOOL_CACHES
from autoresearch.workspace.submodules import Submodules

FULL_ID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")  # a commit id as git writes it in HEAD
# The paths a refused flood of changes is named by in its record (the count says the rest).
NAMED_IN_A_FLOOD = 20


class Workspace:
    def __init__(self, root: Path, name: str, state_dir: Path, share: list[str]) -> None:
        self.root = root
        self.name = name
        self.state_dir = state_dir
        self.path = state_dir / "worktree"
        self.gitdir = state_dir / "workspace.git"
        self.modules = state_dir / "modules"
        self.branch = f"autoresearch/{name}"
        self.branch_ref = f"refs/heads/{self.branch}"
        self.ref_prefix = f"refs/autoresearch/{name}"
        self.share = [s.strip().rstrip("/") for s in share]
        self.exclude_file = state_dir / "exclude"
        # Only ref updates and reads run in the user's repository, with no hook of theirs.
        self.repo = Git(root, config=["core.hooksPath=/dev/null"])
        self.refs = RefUpdates(self.repo)  # the attempts' refs and the branch, one process
        self.folder = OwnedDir(self.path, "the workspace")
        self.own_gitdir = OwnedDir(self.gitdir, "the workspace's git directory")
        self._git: Git | None = None
        self._objects: Path | None = None
        self._index_digest: tuple[int, int, int, int] | None = None
        self.subs = Submodules(root, self.path, state_dir, self.repo, lambda: self.git)
        self._private_head: str | None = None
        # The proposer's `.git` is remade only when something may read it (see
        # `proposer_runs_commands`): `_private_due` is the head it waits to be made at.
        self._private_lazy = False
        self._private_due: str | None = None
        # Marks on the files while a sealed proposer works: its changes, named by the kernel.
        self._watch: FolderWatch | None = None
        # Whether the files are exactly HEAD's commit (what the marks' account starts from).
        self._at_head = False
        self._touched_last: list[str] = []  # what the proposer touched, read by `collect`

    @property
    def git(self) -> Git:
        """git on the workspace's files through the engine's own git directory."""
        if self._git is None:
            env = {**isolated_env(), "GIT_OBJECT_DIRECTORY": str(self.objects())}
            args = [f"--git-dir={self.gitdir}", f"--work-tree={self.path}"]
            self._git = Git(self.path, config=self._config(), args=args, env=env)
        return self._git

    def _config(self) -> list[str]:
        return [f"core.excludesFile={self.exclude_file}", *GIT_CONFIG]

    def objects(self) -> Path:
        """The user's object directory: where the engine's objects are written."""
        if self._objects is None:
            out = self.repo.run("rev-parse", "--git-path", "objects").strip()
            self._objects = (self.root / out).resolve()
        return self._objects

    # -- setup -------------------------------------------------------------------------

    def attempt_ref(self, iteration: int) -> str:
        return f"{self.ref_prefix}/{iteration}"

    def branch_commit(self) -> str | None:
        return self.repo.rev(self.branch_ref)

    def ensure(self, start: str) -> list[str]:
        """Make the workspace afresh at `start`: its files, the engine's git directory for
        them and the proposer's own `.git`.

        Returns warnings for the user: a submodule that could not be checked out."""
        refuse_links(self.root, self.state_dir)
        self.close_watch()
        self.state_dir.mkdir(parents=True, exist_ok=True)
        for name in ENGINE_FOLDERS:
            if (self.state_dir / name).is_symlink():
                (self.state_dir / name).unlink()  # replaced, never followed
        write_file(self.exclude_file, self._exclude())
        self.clear_stale_locks()
        if self.branch_commit() is None:
            self.repo.run("update-ref", self.branch_ref, start)
        if (self.path / ".git").is_file() and not self.path.is_symlink():
            # A workspace made by an earlier version was a worktree of the user's
            # repository: its registration goes with it.
            remove(self.path)
            self.repo.run("worktree", "prune", check=False)
        self.folder.make()
        self._make_gitdir(start)
        self.git.run("read-tree", "--reset", "-u", start)
        self._remember_index()
        self.link_shares()
        warnings = self.init_submodules()
        self._private_git(start)
        self._at_head = True
        return warnings

    def _exclude(self) -> bytes:
        shares = "".join(f"/{s}\n" for s in self.share)
        return (shares + "".join(f"{p}\n" for p in TOOL_CACHES)).encode()

    def reopen(self, start: str) -> bool:
        """Take the workspace over as an earlier engine left it, its files untouched (the
        agent-driven mode: the agent's edits wait there for the next step). False when it
        cannot be (no workspace, another incumbent, submodules): then `ensure` makes it
        afresh. The engine's git directory gets its own HEAD and config written again; its
        index is kept unless it carries flags that hide files (assume-unchanged,
        skip-worktree). What is measured is the committed tree, in a folder made afresh, so
        nothing left here can change a number."""
        refuse_links(self.root, self.state_dir)
        if not (real_dir(self.path) and real_dir(self.gitdir) and real_dir(self.path / ".git")):
            return False
        if self.branch_commit() != start or (self.path / ".gitmodules").exists():
            return False
        self.close_watch()
        self._at_head = False
        if read_small(self.gitdir / "HEAD") != f"{start}\n".encode():
            return False
        for name in ENGINE_FOLDERS:
            if (self.state_dir / name).is_symlink():
                (self.state_dir / name).unlink()
        self.clear_stale_locks()
        self.folder.remember()
        self.own_gitdir.remember()
        write_file(self.exclude_file, self._exclude())
        write_file(
            self.gitdir / "config", b"[core]\n\trepositoryformatversion = 0\n\tbare = false\n"
        )
        self._git = None
        index = self.gitdir / "index"
        flagged = index.is_file() and any(
            e[:1].islower() or e[:1] == "S"
            for e in self.git.run("ls-files", "-v", "-z").split("\0")
            if e
        )
        if not index.is_file() or flagged:
            index.unlink(missing_ok=True)
            self.git.run("read-tree", start)
        self._remember_index()
        self.subs.forget()
        self._private_head = start
        self.link_shares()
        return True

    def _make_gitdir(self, head: str) -> None:
        """The engine's git directory: an index, HEAD, no configuration of anyone's."""
        gitdir = self.own_gitdir.make()
        (gitdir / "refs").mkdir()
        (gitdir / "objects").mkdir()
        write_file(gitdir / "HEAD", f"{head}\n".encode())
        write_file(gitdir / "config", b"[core]\n\trepositoryformatversion = 0\n\tbare = false\n")
        self._git = None

    def _head(self) -> str:
        return self.git.run("rev-parse", "HEAD").strip()

    def check(self) -> None:
        """Refuse to touch a workspace or git directory that is not the one the engine
        made (a link, or another folder moved in): nothing is written, the run halts."""
        refuse_links(self.root, self.state_dir)
        self.folder.check()
        self.own_gitdir.check()
        for name in ("measure", "measure.git", "logs"):
            if (self.state_dir / name).is_symlink():
                raise WorkspaceHijacked(
                    f"{self.state_dir / name} was replaced by a symbolic link while the "
                    "campaign ran; the engine stopped without following it. Remove the link "
                    "and run again."
                )

    def _remember_index(self) -> None:
        self._index_digest = digest(self.gitdir / "index")

    def _trust_index(self, head: str) -> None:
        """The engine's index is what the engine last wrote, or it is rebuilt from HEAD
        (losing only the stat cache): flags set behind the engine's back never count."""
        if digest(self.gitdir / "index") != self._index_digest:
            self._reset_index(head)

    def _reset_index(self, head: str) -> None:
        """The engine's index made `head`'s tree again (the stat cache lost), nothing staged."""
        (self.gitdir / "index").unlink(missing_ok=True)
        self.git.run("read-tree", head)
        self._remember_index()

    def _add(self, paths: list[str]) -> str:
        """Stage `paths` as the workspace has them (deletions too); "" when done, else why
        git refused (an ignored path named, a name it will not store). A disk that is full
        is the engine's trouble, not the change's: raised as such."""
        problem = self.git.failure(
            "add",
            "-A",
            "--pathspec-from-file=-",
            "--pathspec-file-nul",
            input=nul_join(outermost(paths)),
            extra_env=NO_PRELOAD,
        )
        for code in (errno.ENOSPC, errno.EDQUOT):
            if os.strerror(code) in problem:
                raise OSError(code, f"git could not store the change: {problem}")
        return problem

    def proposer_runs_commands(self, runs: bool) -> None:
        """Say, before each proposal, whether the proposer starts processes (an agent, a
        command), which may read and write its `.git`. One that writes only through its own
        code never looks at it: then the `.git` is not remade after every attempt but once
        a proposer that runs commands comes, or the run ends (`settle_private_git`)."""
        self._private_lazy = not runs
        if runs:
            self.settle_private_git()

    def settle_private_git(self) -> None:
        """The proposer's `.git` made now if it waits to be."""
        if self._private_due is not None:
            self.check()
            self._make_private_git(self._private_due)

    def _private_git(self, head: str) -> None:
        if self._private_lazy:
            self._private_due = head
        else:
            self._make_private_git(head)

    def _make_private_git(self, head: str) -> None:
        """The proposer's own `.git` in the workspace, made afresh: a branch at `head`,
        objects borrowed from the user's store, an index matching the files."""
        make_private_git(
            self.path / ".git",
            self.objects(),
            f"ref: {self.branch_ref}\n".encode(),
            {self.branch_ref: head},
            self.gitdir / "index",
            self.exclude_file,
        )
        self._private_head = head
        self._private_due = None

    def _agent_moved(self) -> bool:
        """Whether the proposer moved HEAD or the branch in its own `.git` (for the record
        only: the engine reads the files, never these refs)."""
        if self._private_due is not None:
            return False  # no proposer that runs commands had it since it was last made
        dotgit = self.path / ".git"
        if not real_dir(dotgit):
            return True
        head = read_small(dotgit / "HEAD")
        ref = read_small(dotgit / self.branch_ref)
        expected = f"{self._private_head}\n".encode()
        return head != f"ref: {self.branch_ref}\n".encode() or ref != expected

    # -- submodules (submodules.py) ---------------------------------------------------

    def submodules(self) -> list[tuple[str, str]]:
        """(name, path) of each submodule the workspace's `.gitmodules` declares."""
        return self.subs.declared()

    def init_submodules(self) -> list[str]:
        """Check out every submodule at the commit the tree records; warnings for the user."""
        return self.subs.init(self._head())

    def submodule_gitdirs(self) -> dict[str, Path]:
        """The engine's clone of each checked-out submodule, by its path: where the
        measurement folder reads a submodule commit's files from."""
        return self.subs.gitdirs()

    def clear_stale_locks(self) -> None:
        """Remove lock files a killed git command left behind in the engine's own areas.

        Only called while holding the campaign lock, so no git command of ours is running;
        the user's own index and refs are never touched.
        """
        common = Path(self.repo.run("rev-parse", "--git-common-dir").strip())
        if not common.is_absolute():
            common = (self.root / common).resolve()
        candidates = [
            common / f"{self.branch_ref}.lock",
            *(common / self.ref_prefix).glob("*.lock"),
        ]
        if real_dir(self.gitdir):
            candidates += [self.gitdir / "index.lock", self.gitdir / "HEAD.lock"]
        for lock in candidates:
            if lock.is_file() and not lock.is_symlink():
                lock.unlink(missing_ok=True)

    def link_shares(self) -> None:
        link_shares(self.root, self.path, self.share)

    # -- state -------------------------------------------------------------------------

    def tree_of(self, commit: str) -> str:
        return self.git.run("rev-parse", f"{commit}^{{tree}}").strip()

    def reset_to(self, commit: str) -> None:
        """Point the branch at `commit` and make the workspace exactly that commit."""
        self.check()
        self.git.run("update-ref", "--no-deref", "HEAD", commit)
        if self.branch_commit() != commit:
            self.repo.run("update-ref", self.branch_ref, commit)
        self.restore()

    def restore(self) -> None:
        """Drop everything in the workspace that is not in HEAD's commit; the proposer's
        `.git` is made afresh."""
        self.check()
        self.close_watch()
        git = self.git
        head = self._head()
        git.run("read-tree", "--reset", "-u", head)
        self.drop_untracked()
        self._remember_index()
        self.subs.refill(head)
        self._private_git(head)
        self._at_head = True

    def drop_untracked(self) -> None:
        """Remove every file the index does not hold (ignored ones too), the shared links
        aside. Git writes nothing for it: it frees room on a disk that is full."""
        self.check()
        args = ["clean", "-ffdxq"]
        for item in self.share:
            args += ["-e", f"/{item}"]
        self.git.run(*args)

    def scan(self, paths: list[str] | None = None) -> Scan:
        """One `git status` pass: every path that differs from HEAD (among `paths`, and in
        the folders among them, when given)."""
        raw = self.git.run_bytes(
            "status",
            "--porcelain=v2",
            "-z",
            "--no-renames",
            "-uall",
            "--ignored=matching",
            "--ignore-submodules=all",
            *(["--", *paths] if paths is not None else []),
            # The engine's own index may be refreshed: files checked out in the second the
            # index was written would otherwise be hashed again by every scan.
            extra_env={"GIT_OPTIONAL_LOCKS": "1", **(NO_PRELOAD if paths is not None else {})},
        )
        self._remember_index()
        scan = Scan()
        for entry in split_nul(raw):
            kind = entry[0]
            if kind == "1":
                fields = entry.split(" ", 8)
                xy, path = fields[1], fields[8]
                if xy[0] != ".":
                    scan.staged.append(path)
                if xy[1] != ".":
                    scan.unstaged.append(path)
                    if xy[1] == "D":
                        scan.deleted.append(path)
            elif kind == "u":
                scan.unstaged.append(entry.split(" ", 10)[10])
            elif kind == "?":
                scan.untracked.append(entry[2:])
            elif kind == "!":
                path = entry[2:]
                if path.rstrip("/") not in self.share:
                    scan.ignored.append(path)
        return scan

    # -- attempts ----------------------------------------------------------------------

    def collect(
        self,
        incumbent: str,
        incumbent_tree: str,
        admit: Callable[[str], bool],
        caps: Caps | None = None,
    ) -> Candidate:
        """Stage what the proposer left in the workspace and describe it against the
        incumbent.

        The files are read by the engine through its own git directory: whatever the
        proposer did to its `.git` (commits, resets, branches, index flags, filters) is
        not looked at, beyond noting that it moved HEAD. When a changed path is one that
        `admit` refuses (outside the scope, the harness), nothing is staged: the candidate
        names its paths (it will be rejected) and its content never enters the repository.
        So it is when the change is beyond `caps` (a file too large, too many files): the
        sizes are read from the file system, no file is opened.
        """
        caps = caps or Caps()
        self.check()
        moved = self._agent_moved()
        git = self.git
        self._trust_index(incumbent)
        touched = self._touched()
        if touched == []:
            return Candidate(tree=incumbent_tree, head_moved=moved)
        if touched is not None and any(p.rpartition("/")[2] == ".gitignore" for p in touched):
            touched = None  # ignore rules changed: what an untouched path is depends on them
        if touched is not None and self._only_admitted_files(touched, admit):
            beyond = self._beyond_caps(touched, caps, admit, self._added_or_changed)
            if beyond is not None:
                return replace(beyond, tree=incumbent_tree, head_moved=moved)
            known = self._stage_touched(touched, incumbent, incumbent_tree, moved, admit)
            if known is not None:
                return known
            self._trust_index(incumbent)
        scan = self.scan(touched)
        dirty = scan.staged + scan.unstaged + scan.untracked
        if not dirty:
            return Candidate(tree=incumbent_tree, ignored=scan.ignored, head_moved=moved)
        deleted, untracked = set(scan.deleted), set(scan.untracked)
        beyond = self._beyond_caps(
            sorted(set(dirty)),
            caps,
            admit,
            lambda p: "D" if p in deleted else "A" if p in untracked else "M",
        )
        if beyond is not None:
            return replace(beyond, tree=incumbent_tree, ignored=scan.ignored, head_moved=moved)
        if not all(admit(p) for p in dirty):
            named = [
                Change("D" if p in deleted else "A" if p in untracked else "M", p)
                for p in sorted(set(dirty))
            ]
            return Candidate(incumbent_tree, named, scan.ignored, head_moved=moved, staged=False)
        problem = self._add(dirty)
        if problem:
            self._reset_index(incumbent)
            named = [Change("A" if p in scan.untracked else "M", p) for p in sorted(set(dirty))]
            reason = f"git cannot store the change (a name it refuses, such as .GIT): {problem}"
            return Candidate(incumbent_tree, named, scan.ignored, moved, False, reason)
        tree = git.run("write-tree").strip()
        self._remember_index()  # write-tree stores its cache-tree in the index
        return self._described(tree, incumbent, incumbent_tree, scan.ignored, moved, admit)

    def _described(
        self,
        tree: str,
        incumbent: str,
        incumbent_tree: str,
        ignored: list[str],
        moved: bool,
        admit: Callable[[str], bool],
    ) -> Candidate:
        """The staged tree's changes as git names them from the two trees. Git may stage
        more than was named to it (the files of a folder that became a looping link read as
        gone): a refused path among them unstages it all, and the candidate names them."""
        changes: list[Change] = []
        counted: list[str] = []
        if tree != incumbent_tree:
            # One pass names the changes (`:modes oids STATUS`, path) and counts their
            # lines (`added<TAB>removed<TAB>path`, as `git diff --numstat` does).
            out = self.git.run_bytes(
                "diff-tree", "-r", "-z", "--no-renames", "--raw", "--numstat", incumbent_tree, tree
            )
            items = split_nul(out)
            i = 0
            while i + 1 < len(items) and items[i].startswith(":"):
                # A type change (a file made a link) reads as an edit, as the scan names it.
                status = items[i].rpartition(" ")[2].replace("T", "M")
                changes.append(Change(status, items[i + 1]))
                i += 2
            counted = items[i:]
            changes.sort(key=lambda c: c.path)
        if not all(admit(c.path) for c in changes):
            self._reset_index(incumbent)
            return Candidate(incumbent_tree, changes, ignored, head_moved=moved, staged=False)
        return Candidate(
            tree=tree,
            changes=changes,
            ignored=ignored,
            head_moved=moved,
            diffstat=numstat_text(counted) if changes else None,
        )

    def _beyond_caps(
        self,
        paths: list[str],
        caps: Caps,
        admit: Callable[[str], bool],
        status: Callable[[str], str],
    ) -> Candidate | None:
        """The refused candidate when the changed `paths` are more than `caps.max_files`
        or one of them is a file larger than `caps.max_bytes`, else None. Nothing is
        staged. A flood names only what the screening needs: the refused paths (a harness
        file still halts the campaign), then a few of the others."""
        reason = caps.count_refusal(len(paths))
        if reason is not None:
            refused = [p for p in paths if not admit(p)][: caps.max_files]
            named = refused or paths[:NAMED_IN_A_FLOOD]
        else:
            named = paths
            for rel in paths:
                try:
                    st = os.lstat(self.path / rel)
                except OSError:
                    continue  # gone, or beyond a file or link: nothing to store
                if stat.S_ISREG(st.st_mode):
                    reason = caps.file_refusal(rel, st.st_size)
                    if reason is not None:
                        break
        if reason is None:
            return None
        changes = [Change(status(p), p) for p in named]
        return Candidate("", changes, staged=False, unstorable=reason)

    def _added_or_changed(self, path: str) -> str:
        """How a touched path changed, for a refused candidate's record: A or M (a path
        that is gone is named too: D)."""
        if not os.path.lexists(self.path / path):
            return "D"
        return "M" if self.git.ok("cat-file", "-e", f"HEAD:{path}") else "A"

    def _only_admitted_files(self, touched: list[str], admit: Callable[[str], bool]) -> bool:
        """Whether every path the kernel saw touched is one a candidate may change, and no
        folder (whose files `admit` has not seen): then nothing refused can be staged, and
        the scan that sorts paths before staging is not needed."""
        for rel in touched:
            if not admit(rel):
                return False
            try:
                mode = os.lstat(self.path / rel).st_mode
            except FileNotFoundError:
                continue  # gone: staged as a deletion
            except OSError:  # a parent made a file, or a looping link: the scan sorts it
                return False
            if stat.S_ISDIR(mode):
                return False
        return True

    def _stage_touched(
        self,
        touched: list[str],
        incumbent: str,
        incumbent_tree: str,
        moved: bool,
        admit: Callable[[str], bool],
    ) -> Candidate | None:
        """Stage the touched paths straight away and describe the tree they make; None
        when git refused (a touched path is ignored, say): the caller scans instead."""
        git = self.git
        if self._add(touched):
            return None
        tree = git.run("write-tree").strip()
        self._remember_index()
        candidate = self._described(tree, incumbent, incumbent_tree, [], moved, admit)
        # A touched file that is there and in no change is either unchanged or ignored; git
        # says which (ignored files are dropped at roll-back, as the scan would have named).
        changed = {c.path for c in candidate.changes}
        rest = [p for p in touched if p not in changed and os.path.lexists(self.path / p)]
        if rest:
            listed = git.run_bytes(
                "ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--", *rest
            )
            candidate.ignored = [p for p in split_nul(listed) if p and not under(p, self.share)]
        return candidate

    # -- the kernel's account of the proposer's work -------------------------------------

    def watch(self, sealed: bool) -> None:
        """The proposer is about to work. When it is `sealed` (its commands die with all
        they start, or it writes only through the engine's own code) the workspace's files
        carry marks from now on, and `collect` reads only what they report; otherwise git
        reads the whole workspace."""
        if not sealed or self.subs.paths or not self._at_head:
            self.close_watch()
            return
        if self._watch is not None:
            self._watch.settle()
            return
        files = [p for p in self.git.run("ls-files", "-z").split("\0") if p]
        files = [p for p in files if not under(p, self.share)]
        # The share links' folders too: a nested share's link is put in one of its own.
        found = [*files, *self.share]
        dirs = sorted({str(d) for f in found for d in Path(f).parents if str(d) != "."})
        self._watch = FolderWatch.open(self.path, files, dirs)

    def _touched(self) -> list[str] | None:
        """What the proposer touched, the proposer's own `.git` aside; None: not known."""
        if self._watch is None:
            return None
        touched = self._watch.changes()
        if touched is None:
            return None
        paths = sorted(p for p in touched if p and p != ".git" and not p.startswith(".git/"))
        self._touched_last = paths
        # `git status` takes paths only as arguments: past a few hundred, it reads it all.
        return paths if len(paths) <= 256 else None

    def _remark(self, paths: list[str]) -> None:
        """Paths the engine wrote (new files, or a candidate's files now tracked) carry
        marks again, their folders too; so does every folder the proposer made that is
        still there (an empty one, or one emptied of ignored files, is in no candidate)."""
        watch = self._watch
        if watch is None:
            return
        for rel in paths:
            parents = [str(d) for d in Path(rel).parents if str(d) != "."]
            for folder in reversed(parents):
                watch.add(folder, directory=True)
            watch.add(rel)
        for rel in self._touched_last:
            if not real_dir(self.path / rel):
                continue
            for folder, dirnames, _ in os.walk(self.path / rel):
                watch.add(os.path.relpath(folder, self.path), directory=True)
                dirnames[:] = [d for d in dirnames if not os.path.islink(os.path.join(folder, d))]
        self._touched_last = []

    def close_watch(self) -> None:
        if self._watch is not None:
            self._watch.close()
            self._watch = None

    def close(self) -> None:
        """Nothing runs here for now: the marks go, and the ref process (the next update
        starts it again)."""
        self.close_watch()
        self.refs.close()

    def drop_candidate(self, candidate: Candidate, incumbent: str) -> None:
        """Put index and files back to the incumbent for the paths the candidate changed."""
        if candidate.changes:
            self.check()
            self.git.run_bytes(
                "restore",
                "-q",
                f"--source={incumbent}",
                "--staged",
                "--worktree",
                "--pathspec-from-file=-",
                "--pathspec-file-nul",
                input=nul_join(candidate.paths),
            )
            self._remember_index()

    def commit(self, candidate: Candidate, parent: str, message: str, iteration: int) -> str:
        # The message comes from the proposer: passed on stdin, since an argument cannot
        # hold a NUL byte, and a path that is not UTF-8 goes back to its own bytes.
        text = message_bytes(message.replace("\0", " "))
        # Written by the engine, as git would write it: one process fewer per attempt.
        commit = write_commit(self.objects(), candidate.tree, parent, text, self.git.env)
        if commit is None:
            commit = self.git.run(
                "commit-tree",
                candidate.tree,
                "-p",
                parent,
                "-F",
                "-",
                input=text,
                extra_env=IDENTITY,
            ).strip()
        self.refs.update(self.attempt_ref(iteration), commit)
        return commit

    def forget(self, iteration: int) -> None:
        """Drop an attempt's ref: a candidate rejected for what it touched (outside the
        scope, or the harness) is not kept under a ref, so its content goes with the next
        `git gc` instead of staying in the repository for good."""
        self.repo.run("update-ref", "-d", self.attempt_ref(iteration), check=False)

    def refused_diff(self, start: str, candidate: Candidate, max_file_bytes: int) -> str:
        """What a refused candidate changed, as bounded text made from the folder (its
        content is not in the repository, so no commit can show it)."""
        return refused_diff(self.git, self.path, start, candidate.changes, max_file_bytes)

    def diffstat(self, parent: str, commit: str) -> str:
        """`path +added/-removed` per changed file, for the proposer's history."""
        out = self.git.run("diff", "--numstat", "--no-renames", parent, commit)
        return numstat_text(out.splitlines())

    def drop_paths(self, paths: list[str]) -> None:
        """Remove untracked or ignored paths, so what is left is exactly the commit."""
        for rel in paths:
            target = self.path / rel.rstrip("/")
            if target.is_symlink() or target.is_file():
                target.unlink(missing_ok=True)
            elif target.is_dir():
                shutil.rmtree(target, ignore_errors=True)

    def _drop_strays(self, touched: list[str]) -> None:
        """What git does not see, among the paths the proposer touched: a nested `.git`
        (which would hide a folder from every later scan), a FIFO, socket or device, a
        share path that is no longer the engine's link. None of these can be part of a
        commit, so none is left for the next attempt."""
        for rel in touched:
            path = self.path / rel
            try:
                mode = os.lstat(path).st_mode
            except OSError:
                continue
            if rel in self.share:
                stray = not stat.S_ISLNK(mode)
            elif rel.rpartition("/")[2] == ".git":
                stray = True
            else:  # a folder stays, empty or not: a later proposer may write into it
                stray = not (stat.S_ISREG(mode) or stat.S_ISLNK(mode) or stat.S_ISDIR(mode))
            if stray:
                remove(path)

    def roll_back(
        self, candidate: Candidate | None, incumbent: str, *, kept: bool, fast: bool
    ) -> str | None:
        """Leave the workspace exactly at `incumbent` for the next attempt.

        After an ordinary outcome (`fast`) only the candidate's own paths are undone;
        otherwise, or if that fails, the whole workspace is reset. The proposer's `.git` is
        made afresh either way. Returns why the fast way failed, if it did.
        """
        self.check()
        problem = None
        if fast and candidate is not None:
            try:
                if not kept:
                    self.drop_candidate(candidate, incumbent)
                self.drop_paths(candidate.ignored)
                self._drop_strays(self._touched_last)
                self.link_shares()
                self._private_git(incumbent)
                self._remark(candidate.paths)
                self._at_head = True
                return None
            except GitError as exc:
                problem = str(exc)
        self.reset_to(incumbent)
        self.link_shares()
        return problem

    def load_tree(self, commit: str) -> None:
        """Make index and files `commit`'s tree while HEAD stays on the incumbent: the
        next `collect` finds it as the candidate."""
        self.check()
        self.close_watch()
        self._at_head = False
        self.git.run("read-tree", "-u", "--reset", commit)
        self._remember_index()

    def advance(self, commit: str, expected: str) -> None:
        """Move the branch from `expected` to the kept `commit` (refuses if it moved)."""
        self.refs.update(self.branch_ref, commit, expected, deref=False)
        self._point_head(commit)

    def move_head(self, commit: str) -> None:
        """Point the workspace's HEAD at `commit`, whose files it holds already (a slot's
        candidate that was kept; the engine's own workspace is there already)."""
        if read_small(self.gitdir / "HEAD") != f"{commit}\n".encode():
            self._point_head(commit)

    def _point_head(self, commit: str) -> None:
        """HEAD of the engine's own git directory detached at `commit`, written as git
        writes it (a new file renamed over the old one) without starting git: no git
        command of the engine's runs in that directory meanwhile."""
        if not FULL_ID.fullmatch(commit):
            self.git.run("update-ref", "--no-deref", "HEAD", commit)
            return
        self.own_gitdir.check()
        new = self.gitdir / "HEAD.new"
        write_file(new, f"{commit}\n".encode())
        os.replace(new, self.gitdir / "HEAD")

    def record_ref(self, iteration: int, commit: str) -> None:
        self.refs.update(self.attempt_ref(iteration), commit)

    def escapes(self, rel: str) -> bool:
        """True when `rel` is a symlink whose target lies outside the workspace."""
        target = self.path / rel
        if not target.is_symlink():
            return False
        resolved = os.path.realpath(target)
        base = os.path.realpath(self.path)
        return not (resolved == base or resolved.startswith(base + os.sep))
