"""Putting a commit's files into a folder path by path: only what differs is written.

The measurement folder is moved from one commit to the next, and put back after a run, by
the paths that differ: those the two trees differ in (`git diff-tree`, which compares tree
objects and never reads the folder) and those a run touched (`watch.FolderWatch`). Each is
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

Run = Callable[..., bytes]  # runs git with the folder's git directory: args -> stdout


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


def differences(run: Run, old: str, new: str) -> dict[str, Entry | None]:
    """Each path whose entry differs between two commits: its entry in `new`, or None."""
    if old == new:
        return {}
    raw = run("diff-tree", "-r", "-z", "--raw", "--no-renames", old, new)
    items = raw.split(b"\0")
    out: dict[str, Entry | None] = {}
    for i in range(0, len(items) - 1, 2):
        meta = items[i].decode().lstrip(":").split()
        if len(meta) < 5:
            continue
        path = os.fsdecode(items[i + 1])
        out[path] = None if meta[4].startswith("D") else Entry(meta[1], meta[3])
    return out


def entries(run: Run, commit: str, paths: Iterable[str]) -> dict[str, Entry]:
    """What `commit` holds at each of `paths`, a folder's files included."""
    wanted = sorted({p for p in paths if p})
    if not wanted:
        return {}
    # Past a few hundred paths the whole listing is cheaper than a command line that long.
    listed = wanted if len(wanted) <= 256 else []
    raw = run("ls-tree", "-r", "-z", "--full-tree", commit, "--", *listed)
    exact = set(wanted)
    out: dict[str, Entry] = {}
    for item in raw.split(b"\0"):
        meta, _, name = item.partition(b"\t")
        parts = meta.decode().split()
        path = os.fsdecode(name)
        if len(parts) == 3 and (listed or _within(path, exact)):
            out[path] = Entry(parts[0], parts[2])
    return out


def _within(path: str, paths: set[str]) -> bool:
    """Whether `path` is one of `paths` or lies in a folder among them."""
    while True:
        if path in paths:
            return True
        path, sep, _ = path.rpartition("/")
        if not sep:
            return False


CHUNK = 1 << 20  # a blob is copied a MiB at a time
LINK_MAX = 1 << 16  # a link's target longer than this is no path the kernel takes


class Blobs:
    """Blob contents read one at a time from one `git cat-file --batch`, each copied into
    its file a chunk at a time: no blob is ever held whole in the engine's memory, however
    large it is."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc

    def __enter__(self) -> Blobs:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _ask(self, oid: str) -> int:
        """Ask for `oid`; its size, with its content next on the pipe."""
        stdin, stdout = self.proc.stdin, self.proc.stdout
        assert stdin is not None and stdout is not None
        try:
            stdin.write(f"{oid}\n".encode())
            stdin.flush()
        except OSError as exc:
            raise GitError(f"git cat-file stopped before {oid} was read ({exc})") from None
        header = stdout.readline(256).decode(errors="replace").split()
        if len(header) != 3 or header[1] != "blob" or not header[2].isdigit():
            raise GitError(f"the object {oid} is not a blob the measurement folder can hold")
        return int(header[2])

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
