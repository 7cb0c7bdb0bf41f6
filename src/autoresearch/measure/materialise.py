"""Putting a commit's files into a folder path by path: only what differs is written.

The measurement folder is moved from one commit to the next, and put back after a run, by
the paths that differ: those the two trees differ in (`tree_differences`, which compares
tree objects and never reads the folder) and those a run touched (`watch.FolderWatch`). Each is
removed whatever it became (a file, a folder, a link: never followed) and written again as
the commit holds it, so the work is in proportion to the change, not to the repository.
"""

from __future__ import annotations

import contextlib
import io
import os
import stat
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from autoresearch.errors import GitError
from autoresearch.isolation.owned import real_dir, real_parents, remove
from autoresearch.isolation.watch import FolderWatch


@dataclass(frozen=True)
class Entry:
    mode: str  # git's: 100644, 100755, 120000 (a link) or 160000 (a submodule)
    oid: str


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


UMASK = _umask()
DIR_MODE = 0o777 & ~UMASK  # what git (and mkdir) gives a folder it makes


def reset_folder(path: Path) -> None:
    """A folder kept as it is gets back what git would give a new one: its mode, no
    extended attribute (no ACL, whose default would pass to the files written next), and
    the time of now, so that nothing a run set on it can carry a number."""
    os.chmod(path, DIR_MODE, follow_symlinks=False)
    for name in os.listxattr(path, follow_symlinks=False):
        os.removexattr(path, name, follow_symlinks=False)
    os.utime(path, follow_symlinks=False)


def tree_differences(objects: Blobs, old: str, new: str) -> dict[str, Entry | None]:
    """Each path whose entry differs between two commits: its entry in `new`, or None (as
    `git diff-tree -r --no-renames` names them), read from the tree objects through the
    running `cat-file --batch` instead of a process per move: only the folders whose
    trees differ are opened."""
    if old == new:
        return {}
    old_tree = objects.whole(f"{old}^{{tree}}", "tree")
    new_tree = objects.whole(f"{new}^{{tree}}", "tree")
    out: dict[str, Entry | None] = {}

    def walk(prefix: bytes, before: bytes | None, after: bytes | None) -> None:
        width = objects.width
        was = _tree_entries(before, width) if before is not None else {}
        now = _tree_entries(after, width) if after is not None else {}
        for name in sorted(was.keys() | now.keys()):
            old_entry, new_entry = was.get(name), now.get(name)
            if old_entry == new_entry:
                continue
            path = prefix + name
            old_dir = old_entry is not None and old_entry.mode == TREE_MODE
            new_dir = new_entry is not None and new_entry.mode == TREE_MODE
            if old_dir or new_dir:
                walk(
                    path + b"/",
                    objects.whole(old_entry.oid, "tree") if old_dir and old_entry else None,
                    objects.whole(new_entry.oid, "tree") if new_dir and new_entry else None,
                )
            if new_entry is not None and not new_dir:
                out[os.fsdecode(path)] = new_entry
            elif old_entry is not None and not old_dir:
                out[os.fsdecode(path)] = None

    walk(b"", old_tree, new_tree)
    return out


TREE_MODE = "40000"


def _tree_entries(data: bytes, width: int) -> dict[bytes, Entry]:
    """A tree object's entries by name: `<mode> <name>\\0<oid, binary>` one after another."""
    out: dict[bytes, Entry] = {}
    i = 0
    while i < len(data):
        space = data.index(b" ", i)
        nul = data.index(b"\0", space)
        oid = data[nul + 1 : nul + 1 + width]
        if len(oid) != width:
            raise ValueError("a tree object ends in the middle of an entry")
        out[data[space + 1 : nul]] = Entry(data[i:space].decode("ascii"), oid.hex())
        i = nul + 1 + width
    return out


def entries(objects: Blobs, commit: str, paths: Iterable[str]) -> dict[str, Entry]:
    """What `commit` holds at each of `paths`, a folder's files included (as `git ls-tree
    -r` lists them), read from the tree objects through the running `cat-file --batch`:
    only the folders on the way to each path are opened."""
    wanted = sorted({p for p in paths if p})
    if not wanted:
        return {}
    folders: dict[bytes, dict[bytes, Entry] | None] = {}
    out: dict[str, Entry] = {}

    def listing(folder: bytes) -> dict[bytes, Entry] | None:
        """The entries of the folder at `folder` in the commit (b"": its root), or None."""
        if folder not in folders:
            if not folder:
                # The width of an object id is known once an object was read: after it.
                found: dict[bytes, Entry] | None = _tree_entries(
                    objects.whole(f"{commit}^{{tree}}", "tree"), objects.width
                )
            else:
                parent, _, name = folder.rpartition(b"/")
                above = listing(parent)
                entry = above.get(name) if above is not None else None
                found = None
                if entry is not None and entry.mode == TREE_MODE:
                    found = _tree_entries(objects.whole(entry.oid, "tree"), objects.width)
            folders[folder] = found
        return folders[folder]

    def below(prefix: bytes, oid: str) -> None:
        for name, entry in _tree_entries(objects.whole(oid, "tree"), objects.width).items():
            path = prefix + b"/" + name
            if entry.mode == TREE_MODE:
                below(path, entry.oid)
            else:
                out[os.fsdecode(path)] = entry

    for rel in wanted:
        raw = os.fsencode(rel)
        parent, _, name = raw.rpartition(b"/")
        above = listing(parent)
        entry = above.get(name) if above is not None else None
        if entry is None:
            continue
        if entry.mode == TREE_MODE:
            below(raw, entry.oid)
        else:
            out[rel] = entry
    return out


CHUNK = 1 << 20  # a blob is copied a MiB at a time
LINK_MAX = 1 << 16  # a link's target longer than this is no path the kernel takes


class Blobs:
    """Blob contents read one at a time from one `git cat-file --batch`, each copied into
    its file a chunk at a time: no blob is ever held whole in the engine's memory, however
    large it is."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.width = 20  # bytes of an object id in a tree: SHA-1's, or SHA-256's (32)

    def __enter__(self) -> Blobs:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _header(self, name: str) -> tuple[str, int]:
        """Ask for the object `name`; its type and size, with its content next."""
        stdin, stdout = self.proc.stdin, self.proc.stdout
        assert stdin is not None and stdout is not None
        try:
            stdin.write(f"{name}\n".encode())
            stdin.flush()
        except OSError as exc:
            raise GitError(f"git cat-file stopped before {name} was read ({exc})") from None
        header = stdout.readline(256).decode(errors="replace").split()
        if len(header) != 3 or not header[2].isdigit():
            raise GitError(f"git cat-file has no object {name}")
        self.width = len(header[0]) // 2
        return header[1], int(header[2])

    def _ask(self, oid: str) -> int:
        """Ask for `oid`; its size, with its content next on the pipe."""
        kind, size = self._header(oid)
        if kind != "blob":
            raise GitError(f"the object {oid} is not a blob the measurement folder can hold")
        return size

    def whole(self, name: str, kind: str) -> bytes:
        """The content of the object `name` (a tree, say), which must be of `kind`."""
        found, size = self._header(name)
        if found != kind:
            raise GitError(f"the object {name} is a {found}, not a {kind}")
        out = io.BytesIO()
        self._pour(size, out)
        return out.getvalue()

    def copy(self, oid: str, handle: BinaryIO) -> None:
        """Write the blob's content to `handle`."""
        self._pour(self._ask(oid), handle)

    def read(self, oid: str) -> bytes:
        """A small blob's content: a link's target."""
        size = self._ask(oid)
        if size > LINK_MAX:  # the pipe is left mid-object: the caller's error closes it
            raise GitError(f"the link {oid} names a target of {size} bytes")
        out = io.BytesIO()
        self._pour(size, out)
        return out.getvalue()

    def _pour(self, size: int, handle: BinaryIO) -> None:
        stdout = self.proc.stdout
        assert stdout is not None
        left = size
        while left:
            chunk = stdout.read(min(CHUNK, left))
            if not chunk:
                raise GitError("git cat-file stopped in the middle of an object")
            handle.write(chunk)
            left -= len(chunk)
        stdout.read(1)  # the newline after each object

    def close(self) -> None:
        proc = self.proc
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _is_empty_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode) and not os.listdir(path)
    except OSError:
        return False


def _parents_real(root: Path, rel: str) -> bool:
    """Whether every folder on the way to `rel` is a real folder (no link to follow)."""
    current = root
    for part in Path(rel).parts[:-1]:
        current = current / part
        try:
            if not stat.S_ISDIR(os.lstat(current).st_mode):
                return False
        except FileNotFoundError:
            return False
    return True


def apply(
    root: Path,
    drop: Iterable[str],
    write: dict[str, Entry],
    content: Blobs,
    watch: FolderWatch | None,
    held: Callable[[list[str]], set[str]] = lambda folders: set(),
) -> None:
    """Remove each path in `drop` and in `write` (whatever stands there), then write each
    entry of `write`; folders left empty go, as git's would, unless the commit holds
    something there (`held` names which of the folders it is given it does: a
    submodule's folder stays, empty)."""
    dropped = sorted(set(drop) | set(write))
    for rel in dropped:
        if _parents_real(root, rel) and os.path.lexists(root / rel):
            remove(root / rel)
    # A folder that held only dropped paths goes, whoever emptied it: the run, or the
    # removal above. Deepest first, so that emptying one may empty its parent.
    needed = {str(parent) for p in write for parent in Path(p).parents}
    empty = sorted(
        {
            str(parent)
            for rel in dropped
            for parent in Path(rel).parents
            if str(parent) != "." and str(parent) not in needed
        },
        key=lambda p: -p.count("/"),
    )
    empty = [f for f in empty if _parents_real(root, f + "/x") and real_dir(root / f)]
    kept = held(empty) if empty else set()
    for folder in empty:
        if folder not in kept and _is_empty_dir(root / folder):
            os.rmdir(root / folder)
    for rel, entry in sorted(write.items()):
        path = real_parents(root, rel)
        if watch is not None:  # folders made just now carry marks too (marking is idempotent)
            for parent in reversed(Path(rel).parents[:-1]):
                watch.add(str(parent), directory=True)
        if os.path.lexists(path):
            remove(path)
        if entry.mode == "120000":
            os.symlink(os.fsdecode(content.read(entry.oid)), path)
        elif entry.mode == "160000":
            os.mkdir(path)  # a submodule's folder, as git leaves it without one
        else:
            mode = 0o777 if entry.mode == "100755" else 0o666
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
            with os.fdopen(fd, "wb") as handle:
                content.copy(entry.oid, handle)
        if watch is not None:
            watch.add(rel, directory=entry.mode == "160000")
