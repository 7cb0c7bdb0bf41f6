"""The proposer's own `.git` in the workspace (and in each submodule), the links to the
shared paths, and the engine's clones of submodules."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from autoresearch.errors import GitError
from autoresearch.gitcmd import Git, isolated_env
from autoresearch.isolation.owned import (
    real_dir,
    real_parents,
    remove,
    write_file,
)


def digest(path: Path) -> tuple[int, int, int, int] | None:
    """What changes whenever anyone writes the file: git replaces the index by a rename (a
    new inode), and a write in place moves its change time, which no one can set back."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def read_small(path: Path) -> bytes | None:
    """A small regular file's bytes, never following a link nor waiting on a pipe."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return os.read(fd, 4096)
    finally:
        os.close(fd)


def quote(name: str) -> str:
    return name.replace("%", "%25").replace("/", "%2F")


def has_commit(clone: Path, commit: str) -> bool:
    if not real_dir(clone):
        return False
    git = Git(clone.parent, args=[f"--git-dir={clone}"], env=isolated_env())
    return git.ok("cat-file", "-e", f"{commit}^{{commit}}")


def clone_submodule(url: str, local: bool, clone: Path, commit: str) -> str:
    """Clone `url` into the engine's folder `clone`; why not, or "" when it holds `commit`."""
    remove(clone)
    clone.parent.mkdir(parents=True, exist_ok=True)
    config = ["protocol.file.allow=always"] if local else []
    try:
        Git(clone.parent, config=config).run("clone", "-q", "--bare", "--", url, str(clone))
    except GitError as exc:
        return str(exc)
    if not has_commit(clone, commit):
        return f"{url} does not hold the recorded commit {commit[:12]}"
    return ""


def make_private_git(
    dotgit: Path,
    objects: Path,
    head: bytes,
    refs: dict[str, str],
    index: Path,
    exclude: Path | None,
) -> None:
    """A `.git` folder for the proposer, made afresh: whatever was there (a link, a file
    pointing elsewhere, hooks, config) is removed, never followed."""
    remove(dotgit)
    (dotgit / "objects" / "info").mkdir(parents=True)
    (dotgit / "refs" / "heads").mkdir(parents=True)
    (dotgit / "refs" / "tags").mkdir()
    (dotgit / "info").mkdir()
    write_file(dotgit / "objects" / "info" / "alternates", f"{objects}\n".encode())
    write_file(dotgit / "HEAD", head)
    write_file(dotgit / "config", b"[core]\n\trepositoryformatversion = 0\n\tbare = false\n")
    for ref, commit in refs.items():
        (dotgit / ref).parent.mkdir(parents=True, exist_ok=True)
        write_file(dotgit / ref, f"{commit}\n".encode())
    if index.is_file():
        shutil.copyfile(index, dotgit / "index")
    if exclude is not None:
        shutil.copyfile(exclude, dotgit / "info" / "exclude")


def link_shares(root: Path, folder: Path, share: list[str], exact: bool = False) -> None:
    """Link each shared path of the checkout into `folder` where nothing stands yet. With
    `exact` (the measurement folder) whatever stands there instead, a folder a command put
    in the link's place among it, is removed first: every run reads the shared data, never
    what an earlier run left at its path."""
    for item in share:
        source = root / item
        target = folder / item
        if not source.exists():
            continue
        if exact:
            target = real_parents(folder, item)
            if target.is_symlink() and os.readlink(target) == str(source):
                continue
            remove(target)
        elif os.path.lexists(target):
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.symlink_to(source)
