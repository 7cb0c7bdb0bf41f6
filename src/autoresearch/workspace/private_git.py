"""The proposer's own `.git` in the workspace (and in each submodule), the links to the
shared paths, and the engine's clones of submodules."""

from __future__ import annotations

import os
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


PRIVATE_CONFIG = b"[core]\n\trepositoryformatversion = 0\n\tbare = false\n"


def make_private_git(
    dotgit: Path,
    objects: Path,
    head: bytes,
    refs: dict[str, str],
    index: Path,
    exclude: Path | None,
) -> None:
    """A `.git` folder for the proposer, made afresh: whatever was there (a link, a file
    pointing elsewhere, hooks, config) is removed, never followed. One that holds exactly
    what would be made (every entry a real folder or a file of one link, nothing more) is
    kept, its files that differ written anew: removing and making a dozen entries is what
    costs on a busy disk, reading them is not."""
    files: dict[str, bytes] = {
        "objects/info/alternates": f"{objects}\n".encode(),
        "HEAD": head,
        "config": PRIVATE_CONFIG,
        **{ref: f"{commit}\n".encode() for ref, commit in refs.items()},
    }
    if index.is_file():
        files["index"] = index.read_bytes()
    if exclude is not None:
        files["info/exclude"] = exclude.read_bytes()
    folders = {"objects", "objects/info", "refs", "refs/heads", "refs/tags", "info"}
    for name in files:
        parent = name.rpartition("/")[0]
        while parent:
            folders.add(parent)
            parent = parent.rpartition("/")[0]
    found = _entries(dotgit)
    kept = (
        found is not None
        and set(found) == folders | set(files)
        and all(found[name] is None for name in folders)
        and all(found[name] is not None for name in files)
    )
    if found is None or not kept:
        remove(dotgit)
        for folder in sorted(folders):
            (dotgit / folder).mkdir(parents=True, exist_ok=True)
        for name, data in files.items():
            write_file(dotgit / name, data)
        return
    for name, data in files.items():
        if found[name] != data:
            write_new(dotgit / name, data)


def _entries(dotgit: Path) -> dict[str, bytes | None] | None:
    """Every entry under `dotgit`: a folder as None, a file as its bytes; None when one is
    anything else (a link, a file with another name elsewhere, a pipe) or unreadable."""
    found: dict[str, bytes | None] = {}
    try:
        if not stat.S_ISDIR(os.lstat(dotgit).st_mode):
            return None
        pending = [""]
        while pending:
            rel = pending.pop()
            with os.scandir(dotgit / rel if rel else dotgit) as listing:
                for entry in listing:
                    name = f"{rel}/{entry.name}" if rel else entry.name
                    st = entry.stat(follow_symlinks=False)
                    if stat.S_ISDIR(st.st_mode):
                        found[name] = None
                        pending.append(name)
                    elif stat.S_ISREG(st.st_mode) and st.st_nlink == 1:
                        found[name] = _read_exactly(dotgit / name, st.st_size)
                    else:
                        return None
    except OSError:
        return None
    return found


def _read_exactly(path: Path, size: int) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        chunks = []
        while size > 0:
            chunk = os.read(fd, size)
            if not chunk:
                break
            chunks.append(chunk)
            size -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def write_new(path: Path, data: bytes) -> None:
    """`path` holding `data`, as a new file renamed over whatever stood there (never
    written through a link, nor into a file that has another name elsewhere)."""
    scratch = path.with_name(f".{path.name}.new")
    remove(scratch)
    write_file(scratch, data)
    os.replace(scratch, path)


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
