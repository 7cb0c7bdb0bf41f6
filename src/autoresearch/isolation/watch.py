"""What changed in a folder while a sealed command ran, told by the kernel instead of a scan.

Reading a folder of 10,000 files to find the one a run changed costs a pass over every
file; the kernel can say it for nothing. Before a command starts, every directory and every
tracked file of its folder carries an inotify mark. A write, a truncation, a mode or
link-count change of a tracked file is reported on that file's own mark, whichever name the
writer reached it by (a hard link made elsewhere in the folder, a file kept open). A name
made, removed or moved in a marked directory is reported on the directory's mark; what
happens inside a directory the command made is covered by that directory's own name.

Two writes send no event of their own: through a shared mapping, and native AIO. They are
seen by their file's release (`IN_CLOSE_WRITE`), which a command can put off past its own
end by leaving the open file in flight in a unix socket (only the kernel's collector frees
it, later). So opens and closes are counted on each mark: a file or folder still open when
the account is read counts as touched, and a folder as not the same one (a lock left on it
in flight would carry a number to the next run).

The answer holds only when nothing outlives the command: a command sealed in a PID
namespace (bubblewrap's) is dead with all it started before the events are read, so none
can come later. When the kernel cannot vouch for the folder (its queue overflowed, a mark
could not be placed, the folder itself was moved) the answer is None and the caller reads
the folder whole. Linux only; elsewhere there is no watch and every answer is a full read.
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct
import sys
from collections.abc import Iterable
from pathlib import Path

IN_MODIFY = 0x2
IN_ATTRIB = 0x4
IN_CLOSE_WRITE = 0x8
IN_CLOSE_NOWRITE = 0x10
IN_OPEN = 0x20
IN_MOVED_FROM = 0x40
IN_MOVED_TO = 0x80
IN_CREATE = 0x100
IN_DELETE = 0x200
IN_DELETE_SELF = 0x400
IN_MOVE_SELF = 0x800
IN_UNMOUNT = 0x2000
IN_Q_OVERFLOW = 0x4000
IN_IGNORED = 0x8000
IN_DONT_FOLLOW = 0x02000000
IN_ISDIR = 0x40000000

CHANGES = (
    IN_MODIFY
    | IN_ATTRIB
    | IN_CLOSE_WRITE
    | IN_CLOSE_NOWRITE
    | IN_OPEN
    | IN_MOVED_FROM
    | IN_MOVED_TO
    | IN_CREATE
    | IN_DELETE
    | IN_DELETE_SELF
    | IN_MOVE_SELF
)
_EVENT = struct.Struct("iIII")


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.inotify_init1.argtypes = [ctypes.c_int]
        libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        libc.inotify_rm_watch.argtypes = [ctypes.c_int, ctypes.c_int]
    except (OSError, AttributeError):
        return None
    return libc


_LIBC = _libc()


class FolderWatch:
    """Marks on one folder's directories and tracked files, and what they reported."""

    def __init__(self, root: Path, fd: int) -> None:
        self.root = root
        self._fd = fd
        self._paths: dict[int, str] = {}  # mark -> the path it was placed on, "" the root
        self._marks: dict[str, int] = {}
        self._dirs: set[str] = {""}  # the paths marked as directories
        # Opens minus closes reported on each mark itself: still open when read means the
        # file may be written later (a mapping) or hold a lock (a file left in flight).
        self._open: dict[int, int] = {}
        self._touched: set[str] = set()
        self._lost = False

    @classmethod
    def open(cls, root: Path, files: Iterable[str], dirs: Iterable[str]) -> FolderWatch | None:
        """A watch on `root`, its folders `dirs` and its `files` (relative paths), or None
        when the system gives none (not Linux, no inotify instance or marks left)."""
        if _LIBC is None:
            return None
        fd = int(_LIBC.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC))
        if fd < 0:
            return None
        watch = cls(root, fd)
        marked = watch.add("") and all(watch.add(d, directory=True) for d in dirs)
        if not marked or not all(watch.add(f) for f in files):
            watch.close()
            return None
        return watch

    def add(self, rel: str, directory: bool = False) -> bool:
        """Mark `rel` (never following a link); False when it cannot be marked, after which
        the watch vouches for nothing."""
        if self._fd < 0 or _LIBC is None:
            return False
        path = os.fsencode(self.root / rel if rel else self.root)
        wd = int(_LIBC.inotify_add_watch(self._fd, path, CHANGES | IN_DONT_FOLLOW))
        if wd < 0:
            if ctypes.get_errno() == errno.ENOENT:
                return True  # nothing there to change
            self._lost = True
            return False
        known = self._paths.get(wd)
        if known is not None and known != rel:
            # One inode under two names: a mark can then name only one of them.
            self._lost = True
        old = self._marks.get(rel)
        if old is not None and old != wd:
            self._paths.pop(old, None)
            self._open.pop(old, None)
        self._paths[wd] = rel
        self._marks[rel] = wd
        if directory:
            self._dirs.add(rel)
        else:
            self._dirs.discard(rel)
        return True

    def changes(self) -> set[str] | None:
        """Every path that may differ since the last `settle` (a changed path's folder
        subtree included by its name), or None when that cannot be told."""
        self._drain()
        if self._lost or any(n < 0 for n in self._open.values()):
            return None  # more closes than opens: an event was lost or merged
        held = {self._paths[wd] for wd, n in self._open.items() if n > 0 and wd in self._paths}
        return self._touched | held

    def same(self, rel: str) -> bool:
        """Whether the directory marked at `rel` is still the one at that path: a folder the
        command only changed the mode of, not one it moved away or put in its place."""
        wd = self._marks.get(rel)
        if wd is None or self._fd < 0 or _LIBC is None or self._open.get(wd, 0) > 0:
            return False
        path = os.fsencode(self.root / rel)
        found = int(_LIBC.inotify_add_watch(self._fd, path, CHANGES | IN_DONT_FOLLOW))
        if found >= 0 and found != wd and found not in self._paths:
            _LIBC.inotify_rm_watch(self._fd, found)  # a mark just placed on a stranger
        return found == wd

    def is_dir(self, rel: str) -> bool:
        """Whether `rel` was marked as a directory (and that mark is still in place)."""
        return rel in self._dirs and rel in self._marks

    def settle(self) -> None:
        """The folder is as the engine wants it: what was reported until now is done with."""
        self._drain()
        self._touched.clear()

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        self._lost = True

    def __del__(self) -> None:
        self.close()

    def _drain(self) -> None:
        if self._fd < 0:
            return
        while True:
            try:
                data = os.read(self._fd, 1 << 16)
            except BlockingIOError:
                return
            except OSError:
                self._lost = True
                return
            self._read(data)

    def _read(self, data: bytes) -> None:
        offset = 0
        while offset + _EVENT.size <= len(data):
            wd, mask, _cookie, size = _EVENT.unpack_from(data, offset)
            raw = data[offset + _EVENT.size : offset + _EVENT.size + size].rstrip(b"\0")
            offset += _EVENT.size + size
            if mask & (IN_Q_OVERFLOW | IN_UNMOUNT):
                self._lost = True
                continue
            base = self._paths.get(wd)
            if mask & IN_IGNORED:
                # The inode is gone (or its mark replaced): its removal was reported by name.
                rel = self._paths.pop(wd, None)
                self._open.pop(wd, None)
                if rel is not None and self._marks.get(rel) == wd:
                    del self._marks[rel]
                    self._dirs.discard(rel)
                continue
            if base is None:
                continue
            if base == "" and not raw and mask & (IN_DELETE_SELF | IN_MOVE_SELF):
                self._lost = True
                continue
            if mask & (IN_OPEN | IN_CLOSE_WRITE | IN_CLOSE_NOWRITE) and not raw:
                # Counted on the mark itself; its folder's mark reports the same by name.
                step = 1 if mask & IN_OPEN else -1
                self._open[wd] = self._open.get(wd, 0) + step
            if mask & (IN_OPEN | IN_CLOSE_NOWRITE):
                continue  # reading changes nothing
            name = os.fsdecode(raw)
            self._touched.add(f"{base}/{name}" if base and name else base or name)
