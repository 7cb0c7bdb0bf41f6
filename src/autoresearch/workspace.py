"""The engine's own git worktree: candidates are committed, refs kept, roll-backs exact.

The branch `autoresearch/<name>` moves only when a candidate is kept; every attempt's
commit stays reachable under `refs/autoresearch/<name>/<iteration>`.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from autoresearch.errors import GitError
from autoresearch.gitcmd import IDENTITY, Git

# Caches that tools write as a side effect; never a proposer's change.
TOOL_CACHES = (
    "__pycache__/",
    "*.py[cod]",
    ".pytest_cache/",
    ".mypy_cache/",
    ".ruff_cache/",
    ".hypothesis/",
    ".ipynb_checkpoints/",
)


@dataclass(frozen=True)
class Change:
    status: str  # A, M, D or T, as git reports it
    path: str


@dataclass
class Candidate:
    tree: str
    changes: list[Change] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)
    head_moved: bool = False

    @property
    def paths(self) -> list[str]:
        return [c.path for c in self.changes]


@dataclass
class Scan:
    head: str | None = None
    branch: str | None = None
    staged: list[str] = field(default_factory=list)
    unstaged: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    untracked: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)


def _nul_join(paths: list[str]) -> bytes:
    return b"\0".join(p.encode("utf-8", "surrogateescape") for p in paths)


def _split_nul(raw: bytes) -> list[str]:
    return [p.decode("utf-8", errors="surrogateescape") for p in raw.split(b"\0") if p]


def _message_bytes(text: str) -> bytes:
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a surrogate no file name produced
        return text.encode("utf-8", "backslashreplace")


class Workspace:
    def __init__(self, root: Path, name: str, state_dir: Path, share: list[str]) -> None:
        self.root = root
        self.name = name
        self.state_dir = state_dir
        self.path = state_dir / "worktree"
        self.branch = f"autoresearch/{name}"
        self.branch_ref = f"refs/heads/{self.branch}"
        self.ref_prefix = f"refs/autoresearch/{name}"
        self.share = [s.strip().rstrip("/") for s in share]
        self.exclude_file = state_dir / "exclude"
        self.repo = Git(root)
        self._git: Git | None = None

    @property
    def git(self) -> Git:
        if self._git is None:
            self._git = Git(self.path, config=self._config())
        return self._git

    def _config(self) -> list[str]:
        return [
            f"core.excludesFile={self.exclude_file}",
            "core.autocrlf=false",
            "core.safecrlf=false",
            "core.hooksPath=/dev/null",
            "gc.auto=0",
            "advice.detachedHead=false",
        ]

    # -- setup -------------------------------------------------------------------------

    def attempt_ref(self, iteration: int) -> str:
        return f"{self.ref_prefix}/{iteration}"

    def branch_commit(self) -> str | None:
        return self.repo.rev(self.branch_ref)

    def ensure(self, start: str) -> list[str]:
        """Create or repair the worktree so it exists, on our branch, at `start`.

        Returns warnings for the user: a submodule that could not be initialised."""
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.exclude_file.write_text(
            "".join(f"/{s}\n" for s in self.share) + "".join(f"{p}\n" for p in TOOL_CACHES),
            encoding="utf-8",
        )
        self.clear_stale_locks()
        if self.branch_commit() is None:
            self.repo.run("update-ref", self.branch_ref, start)
        if not (self.path / ".git").exists():
            self.repo.run("worktree", "prune")
            if self.path.exists():
                shutil.rmtree(self.path)
            self.repo.run("worktree", "add", "-q", "-f", str(self.path), self.branch)
            self.git.run("update-index", "--untracked-cache", check=False)
        self.reset_to(start)
        self.link_shares()
        return self.init_submodules()

    def submodules(self) -> list[tuple[str, str]]:
        """(name, path) of each submodule the worktree's `.gitmodules` declares."""
        if not (self.path / ".gitmodules").is_file():
            return []
        raw = self.git.run(
            "config",
            "-z",
            "-f",
            ".gitmodules",
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

    def init_submodules(self) -> list[str]:
        """Check out every submodule in the worktree at the commit the tree records.

        The user's checkout and configuration are never written: the URL comes from the
        user's own checkout of the submodule when it has one (no network needed), else from
        the user's `submodule.<name>.url`, else from `.gitmodules`; it is handed to git for
        this one command. The clone lives in the worktree's own git folder."""
        warnings = []
        for name, path in self.submodules():
            sources = self._submodule_sources(name, path)
            if not sources:
                warnings.append(
                    f"submodule {path} is not checked out in the workspace: its URL in "
                    ".gitmodules is relative and your checkout has not initialised it; run "
                    "`git submodule update --init` in your checkout and start again"
                )
                continue
            problem = ""
            for url, local in sources:
                extra = [f"submodule.{name}.url={url}", f"submodule.{name}.active=true"]
                if local:
                    extra.append("protocol.file.allow=always")
                git = Git(self.path, config=[*self._config(), *extra])
                try:
                    git.run("submodule", "update", "--checkout", "--force", "--", path)
                    if (self.path / path / ".gitmodules").is_file():
                        # Nested submodules are configured inside the workspace's clone.
                        git.run("-C", path, "submodule", "update", "--init", "--recursive")
                    problem = ""
                    break
                except GitError as exc:
                    problem = str(exc)
            if problem:
                warnings.append(
                    f"submodule {path} is not checked out in the workspace ({problem}); "
                    "commands that need it will fail"
                )
        return warnings

    def submodule_gitdirs(self) -> dict[str, Path]:
        """The git directory of each checked-out submodule, by its path: where the
        measurement folder can read a submodule commit's files from."""
        found = {}
        for _, path in self.submodules():
            out = self.git.run("-C", path, "rev-parse", "--absolute-git-dir", check=False)
            if (self.path / path / ".git").exists() and out.strip():
                found[path] = Path(out.strip())
        return found

    def _submodule_sources(self, name: str, path: str) -> list[tuple[str, bool]]:
        """Where a submodule can be cloned from, best first; True for the user's own
        checkout of it."""
        sources = []
        own = self.root / path
        if (own / ".git").exists() and Git(own).ok("rev-parse", "--verify", "-q", "HEAD"):
            sources.append((str(own), True))
        configured = self.repo.run("config", "--get", f"submodule.{name}.url", check=False)
        if configured.strip():
            sources.append((configured.strip(), False))
        declared = self.git.run(
            "config", "-f", ".gitmodules", "--get", f"submodule.{name}.url", check=False
        ).strip()
        if declared and not declared.startswith(("./", "../")):
            sources.append((declared, False))
        return sources

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
        gitfile = self.path / ".git"
        if gitfile.is_file():
            text = gitfile.read_text(encoding="utf-8", errors="replace").strip()
            if text.startswith("gitdir:"):
                gitdir = Path(text.split(":", 1)[1].strip())
                candidates += [gitdir / "index.lock", gitdir / "HEAD.lock"]
        for lock in candidates:
            if lock.is_file():
                lock.unlink(missing_ok=True)

    def link_shares(self) -> None:
        for item in self.share:
            source = self.root / item
            target = self.path / item
            if not source.exists() or target.is_symlink() or target.exists():
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(source)

    # -- state -------------------------------------------------------------------------

    def tree_of(self, commit: str) -> str:
        return self.git.run("rev-parse", f"{commit}^{{tree}}").strip()

    def reset_to(self, commit: str) -> None:
        """Point the branch at `commit` and make the worktree exactly that commit."""
        git = self.git
        git.run("symbolic-ref", "HEAD", self.branch_ref)
        git.run("update-ref", "--no-deref", self.branch_ref, commit)
        self.restore()

    def restore(self) -> None:
        """Drop everything in the worktree that is not in the branch's commit."""
        git = self.git
        git.run("reset", "-q", "--hard", "HEAD")
        args = ["clean", "-ffdxq"]
        for item in self.share:
            args += ["-e", f"/{item}"]
        git.run(*args)
        self._restore_submodules()

    def _restore_submodules(self) -> None:
        """Put each checked-out submodule back at the commit the tree records, clean."""
        for _, path in self.submodules():
            target = self.path / path
            if not (target / ".git").exists():
                continue
            recorded = self.git.run("rev-parse", "-q", "--verify", f"HEAD:{path}", check=False)
            if recorded.strip():
                sub = Git(target, config=self._config())
                sub.run("checkout", "-q", "-f", "--detach", recorded.strip(), check=False)
                sub.run("clean", "-ffdxq", check=False)

    def scan(self) -> Scan:
        """One `git status` pass: where HEAD is, and every path that differs from it."""
        raw = self.git.run_bytes(
            "status",
            "--porcelain=v2",
            "--branch",
            "-z",
            "--no-renames",
            "-uall",
            "--ignored=matching",
        )
        scan = Scan()
        for entry in _split_nul(raw):
            kind = entry[0]
            if kind == "#":
                key, _, value = entry[2:].partition(" ")
                if key == "branch.oid":
                    scan.head = None if value == "(initial)" else value
                elif key == "branch.head":
                    scan.branch = None if value == "(detached)" else value
            elif kind == "1":
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

    def collect(self, incumbent: str, incumbent_tree: str) -> Candidate:
        """Stage what the proposer left in the worktree and describe it against the incumbent.

        The engine never trusts HEAD: if the proposer committed, reset or switched
        branches, the refs are put back and its work is judged as plain changes.
        """
        git = self.git
        scan = self.scan()
        moved = scan.branch != self.branch or scan.head != incumbent
        if moved:
            git.run("symbolic-ref", "HEAD", self.branch_ref)
            git.run("update-ref", "--no-deref", self.branch_ref, incumbent)
            scan = self.scan()
        dirty = scan.staged + scan.unstaged + scan.untracked
        if not dirty:
            return Candidate(tree=incumbent_tree, ignored=scan.ignored, head_moved=moved)
        git.run_bytes(
            "add",
            "-A",
            "--pathspec-from-file=-",
            "--pathspec-file-nul",
            input=b"\0".join(p.encode("utf-8", "surrogateescape") for p in dirty),
        )
        tree = git.run("write-tree").strip()
        changes: list[Change] = []
        if tree == incumbent_tree:
            pass
        elif not moved and not scan.staged:
            # Plain worktree edits: the scan already names each change exactly.
            deleted = set(scan.deleted)
            changes = [Change("D" if p in deleted else "M", p) for p in scan.unstaged]
            changes += [Change("A", p) for p in scan.untracked]
            changes.sort(key=lambda c: c.path)
        else:
            out = git.run_bytes(
                "diff-tree", "-r", "-z", "--no-renames", "--name-status", incumbent_tree, tree
            )
            items = _split_nul(out)
            changes = [Change(items[i], items[i + 1]) for i in range(0, len(items) - 1, 2)]
        return Candidate(tree=tree, changes=changes, ignored=scan.ignored, head_moved=moved)

    def settle(self) -> None:
        """Undo what a measurement left behind: the worktree matches the index again.

        Costs one `git status` plus work in proportion to what the command touched.
        """
        scan = self.scan()
        if scan.unstaged:
            self.git.run_bytes(
                "checkout",
                "-q",
                "-f",
                "--pathspec-from-file=-",
                "--pathspec-file-nul",
                input=_nul_join(scan.unstaged),
            )
        self.drop_paths(scan.untracked + scan.ignored)

    def show_incumbent(self, candidate: Candidate, incumbent: str) -> None:
        """Put the incumbent's files in the worktree; `settle` brings the candidate back."""
        if candidate.changes:
            self.git.run_bytes(
                "restore",
                "-q",
                f"--source={incumbent}",
                "--worktree",
                "--pathspec-from-file=-",
                "--pathspec-file-nul",
                input=_nul_join(candidate.paths),
            )

    def drop_candidate(self, candidate: Candidate, incumbent: str) -> None:
        """Put index and worktree back to the incumbent for the paths the candidate changed."""
        if candidate.changes:
            self.git.run_bytes(
                "restore",
                "-q",
                f"--source={incumbent}",
                "--staged",
                "--worktree",
                "--pathspec-from-file=-",
                "--pathspec-file-nul",
                input=_nul_join(candidate.paths),
            )

    def commit(self, candidate: Candidate, parent: str, message: str, iteration: int) -> str:
        # The message comes from the proposer: passed on stdin, since an argument cannot
        # hold a NUL byte, and a path that is not UTF-8 goes back to its own bytes.
        text = _message_bytes(message.replace("\0", " "))
        commit = self.git.run(
            "commit-tree", candidate.tree, "-p", parent, "-F", "-", input=text, extra_env=IDENTITY
        ).strip()
        self.git.run("update-ref", self.attempt_ref(iteration), commit)
        return commit

    def diffstat(self, parent: str, commit: str) -> str:
        """`path +added/-removed` per changed file, for the proposer's history."""
        out = self.git.run("diff", "--numstat", "--no-renames", parent, commit)
        parts = []
        for line in out.splitlines()[:8]:
            added, removed, path = line.split("\t", 2)
            parts.append(f"{path} +{added}/-{removed}")
        return ", ".join(parts)

    def drop_paths(self, paths: list[str]) -> None:
        """Remove untracked or ignored paths, so what is measured is exactly the commit."""
        for rel in paths:
            target = self.path / rel.rstrip("/")
            if target.is_symlink() or target.is_file():
                target.unlink(missing_ok=True)
            elif target.is_dir():
                shutil.rmtree(target, ignore_errors=True)

    def roll_back(
        self, candidate: Candidate | None, incumbent: str, *, kept: bool, fast: bool
    ) -> str | None:
        """Leave the worktree exactly at `incumbent` for the next attempt.

        After an ordinary outcome (`fast`) only the candidate's own paths are undone;
        otherwise, or if that fails, the whole worktree is reset. Returns why the fast way
        failed, if it did.
        """
        problem = None
        if fast and candidate is not None:
            try:
                if not kept:
                    self.drop_candidate(candidate, incumbent)
                self.drop_paths(candidate.ignored)
                self.link_shares()
                return None
            except GitError as exc:
                problem = str(exc)
        self.reset_to(incumbent)
        self.link_shares()
        return problem

    def load_tree(self, commit: str) -> None:
        """Make index and worktree `commit`'s tree while HEAD stays on the incumbent: the
        next `collect` finds it as the candidate."""
        self.git.run("read-tree", "-u", "--reset", commit)

    def advance(self, commit: str, expected: str) -> None:
        """Move the branch from `expected` to the kept `commit` (refuses if it moved)."""
        self.git.run("update-ref", "--no-deref", self.branch_ref, commit, expected)

    def record_ref(self, iteration: int, commit: str) -> None:
        self.git.run("update-ref", self.attempt_ref(iteration), commit)

    def escapes(self, rel: str) -> bool:
        """True when `rel` is a symlink whose target lies outside the worktree."""
        target = self.path / rel
        if not target.is_symlink():
            return False
        resolved = os.path.realpath(target)
        base = os.path.realpath(self.path)
        return not (resolved == base or resolved.startswith(base + os.sep))


def head_of(root: Path) -> str:
    repo = Git(root)
    commit = repo.rev("HEAD")
    if commit is None:
        raise GitError(
            f"the repository at {root} has no commits yet; commit your code first "
            "(git add -A && git commit -m baseline)."
        )
    return commit


def _tree_stat(path: Path) -> str:
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
    for entry in _split_nul(raw):
        if entry.startswith("## "):
            state["(branch)"] = entry[3:]
        else:
            state[entry[3:]] = entry[:2]
    state["(HEAD)"] = repo.run("rev-parse", "-q", "--verify", "HEAD", check=False).strip()
    for share in shares or []:
        target = root / share
        if target.exists():
            state[f"{share} (shared)"] = _tree_stat(target)
    return state


def checkout_changes(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """The paths (or HEAD, branch) whose state differs between two `checkout_state` calls."""
    return sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))


def ensure_state_dir(root: Path) -> Path:
    """Create `.autoresearch/` so that it ignores itself."""
    base = root / ".autoresearch"
    base.mkdir(exist_ok=True)
    ignore = base / ".gitignore"
    if not ignore.exists():
        ignore.write_text("*\n", encoding="utf-8")
    return base
