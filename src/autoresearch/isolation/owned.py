"""Folders the engine made for itself, told apart from anything put in their place.

Destructive git commands (`read-tree -u`, `clean -ffdx`, `restore`) and every write under
`.autoresearch/` go only to a folder the engine created: it is remembered by device and
inode when made, and checked with `lstat` (never following a link) before each use. A
symbolic link, or another folder moved in at the same path, is refused.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path
from typing import BinaryIO

from autoresearch.errors import AutoresearchError, WorkspaceHijacked


def remove(path: Path) -> None:
    """Remove whatever is at `path` without following a link: a link is unlinked, a folder
    removed with its contents (`rmtree` unlinks the links inside, never their targets)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(st.st_mode):
        path.unlink()
        return
    try:
        shutil.rmtree(path)
    except (RecursionError, OSError):
        _remove_hard(path)


def writable(path: Path) -> None:
    """Give the owner back every permission under `path` (links are not followed)."""
    subprocess.run(["chmod", "-R", "u+rwx", "--", str(path)], capture_output=True, check=False)


def _remove_hard(path: Path) -> None:
    """What a command left so that `rmtree` fails (folders nested deeper than Python's
    recursion, folders without write or search permission) is still removed: coreutils
    walk without recursion, and permissions are restored first; never following a link."""
    writable(path)
    done = subprocess.run(
        ["rm", "-rf", "--one-file-system", "--", str(path)], capture_output=True, check=False
    )
    if os.path.lexists(path):
        detail = done.stderr.decode(errors="replace").strip().splitlines()
        raise AutoresearchError(
            f"cannot remove {path}, a folder of the engine's own"
            + (f" ({detail[-1]})" if detail else "")
            + "; remove it by hand (it holds nothing of yours), then run again."
        )


def real_dir(path: Path) -> bool:
    """True when `path` is a folder itself, not a link to one."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except (FileNotFoundError, NotADirectoryError):  # gone, or a parent is a file now
        return False


def real_parents(root: Path, rel: str) -> Path:
    """`root / rel`, every folder on the way made a real folder of its own: a link or a
    file planted there (by a command that ran in `root`) is removed, never followed, so
    what the engine writes next lands inside `root`."""
    current = root
    for part in Path(rel).parts[:-1]:
        current = current / part
        try:
            mode = os.lstat(current).st_mode
        except FileNotFoundError:
            os.mkdir(current)
            continue
        if not stat.S_ISDIR(mode):
            remove(current)
            os.mkdir(current)
    return root / rel


def open_own(path: Path) -> BinaryIO:
    """Open a file of the engine's own for writing: a link (or anything but a file) planted
    at its path is removed, never written through."""
    if os.path.lexists(path) and not stat.S_ISREG(os.lstat(path).st_mode):
        remove(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    return os.fdopen(fd, "wb")


def append_own(path: Path, record: str | None = None) -> BinaryIO:
    """Open a file of the engine's own for appending, never through a link planted at its
    path. A derived file (a table, a log) found replaced is begun afresh; a `record` that
    nothing rebuilds (the ledger) found replaced halts the campaign instead, untouched."""
    if os.path.lexists(path) and not stat.S_ISREG(os.lstat(path).st_mode):
        if record is not None:
            raise WorkspaceHijacked(
                f"{path}: the {record} is not a file of the engine's own (a link or another "
                "kind of file was put in its place); the campaign halts without writing "
                "through it."
            )
        remove(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o644)
    return os.fdopen(fd, "ab")


def write_file(path: Path, data: bytes) -> None:
    """Write a file of the engine's own (see `open_own`)."""
    with open_own(path) as handle:
        handle.write(data)


def write_text(path: Path, text: str) -> None:
    write_file(path, text.encode("utf-8", errors="surrogateescape"))


class OwnedDir:
    """One folder the engine made; `check` refuses to go on if it was swapped."""

    def __init__(self, path: Path, what: str) -> None:
        self.path = path
        self.what = what
        self.identity: tuple[int, int] | None = None

    def make(self) -> Path:
        """Create the folder afresh (whatever was at its path is removed, not followed)."""
        remove(self.path)
        self.path.mkdir(parents=True)
        self.remember()
        return self.path

    def remember(self) -> None:
        st = os.lstat(self.path)
        if not stat.S_ISDIR(st.st_mode):
            raise self._hijacked("is not a folder")
        self.identity = (st.st_dev, st.st_ino)

    def check(self) -> Path:
        try:
            st = os.lstat(self.path)
        except FileNotFoundError:
            raise self._hijacked("was removed") from None
        if stat.S_ISLNK(st.st_mode):
            raise self._hijacked("was replaced by a symbolic link")
        if not stat.S_ISDIR(st.st_mode) or (st.st_dev, st.st_ino) != self.identity:
            raise self._hijacked("was replaced by another folder")
        return self.path

    def _hijacked(self, what: str) -> WorkspaceHijacked:
        return WorkspaceHijacked(
            f"{self.what} {self.path} {what} while the campaign ran; the engine stopped "
            "without touching it. Remove it and run again: the engine makes a fresh one."
        )


def refuse_links(base: Path, path: Path) -> None:
    """Refuse when `path` or a folder between `base` and it is a symbolic link."""
    current = path
    while True:
        if current.is_symlink():
            raise WorkspaceHijacked(
                f"{current} is a symbolic link; the engine writes only into folders of its "
                "own. Remove the link and run again."
            )
        if current == base or current.parent == current:
            return
        current = current.parent
