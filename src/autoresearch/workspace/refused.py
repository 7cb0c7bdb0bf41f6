"""What a refused candidate changed, as text the user can read later.

A candidate screened out for what it touched (outside the scope, the harness, a file over
the size cap) never enters the repository, so no commit shows it. Its changes are written
instead, as a bounded unified diff, into the campaign folder (`refused/<N>.diff`), which
no sandbox sees. The diff is made from the workspace folder, where the proposer left the
files, against the commit the attempt started from. A binary file, or one larger than
`MAX_SHOWN_FILE` (or the campaign's `[scope] max_file_mb` cap), is named with its size and
never read; the whole text stops at `MAX_DIFF_BYTES`, and after `MAX_FILES_SHOWN` files,
with a line that says so.
"""

from __future__ import annotations

import difflib
import os
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path

from autoresearch.gitcmd import Git
from autoresearch.workspace.candidate import Change

MAX_DIFF_BYTES = 256 << 10
MAX_SHOWN_FILE = 1 << 20
MAX_FILES_SHOWN = 200  # each file costs a few git calls: a flood is named, not shown whole
SNIFF = 8000  # as git does: a NUL byte among the first 8000 makes a file binary
FOLDER = "refused"


def refused_diff_path(state_dir: Path, iteration: int) -> Path:
    return state_dir / FOLDER / f"{iteration}.diff"


class _Side:
    """One side of a changed path: its text, or why it is not shown."""

    def __init__(self, lines: list[str] | None, note: str = "") -> None:
        self.lines = lines
        self.note = note  # set when the content is not shown


def _text(data: bytes) -> _Side:
    if b"\0" in data[:SNIFF]:
        return _Side(None, f"binary, {len(data)} bytes")
    return _Side(data.decode("utf-8", errors="replace").splitlines(keepends=True))


def _old(git: Git, start: str, path: str, limit: int) -> _Side:
    """The path in the start commit (read from git, bounded by its size first)."""
    spec = f"{start}:{path}"
    kind = git.run("cat-file", "-t", spec, check=False).strip()
    if not kind:
        return _Side([])  # not there: an added path
    if kind != "blob":
        return _Side(None, kind)  # a submodule's commit, a folder
    size = int(git.run("cat-file", "-s", spec).strip() or 0)
    if size > limit:
        return _Side(None, f"{size} bytes")
    return _text(git.run_bytes("cat-file", "blob", spec))


def _new(folder: Path, path: str, limit: int) -> _Side:
    """The path as the proposer left it: never followed through a link, never read beyond
    `limit`, nothing but a regular file read at all."""
    target = folder / path
    try:
        st = os.lstat(target)
    except FileNotFoundError:
        return _Side([])  # removed
    except OSError as exc:
        return _Side(None, f"unreadable: {exc.strerror}")
    if stat.S_ISLNK(st.st_mode):
        return _Side([f"(symbolic link to {os.readlink(target)})\n"])
    if stat.S_ISDIR(st.st_mode):
        return _Side(None, "a folder")
    if not stat.S_ISREG(st.st_mode):
        return _Side(None, "not a regular file")
    if st.st_size > limit:
        return _Side(None, f"{st.st_size} bytes")
    try:
        fd = os.open(target, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        return _Side(None, f"unreadable: {exc.strerror}")
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:  # it grew since: still never shown past the cap
        return _Side(None, f"over {limit} bytes")
    return _text(data)


def _pieces(git: Git, folder: Path, start: str, changes: list[Change], limit: int) -> Iterator[str]:
    for change in changes[:MAX_FILES_SHOWN]:
        path = change.path
        old = _old(git, start, path, limit)
        new = _new(folder, path, limit)
        yield f"diff --refused a/{path} b/{path}\n"
        if old.lines is None or new.lines is None:
            before = old.note or ("absent" if not old.lines else "text")
            after = new.note or ("absent" if not new.lines else "text")
            yield f"{path}: not shown (before: {before}; after: {after})\n"
            continue
        body = difflib.unified_diff(old.lines, new.lines, f"a/{path}", f"b/{path}", n=3)
        shown = False
        for line in body:
            shown = True
            yield line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
        if not shown:
            yield f"{path}: content unchanged (its mode or type changed)\n"
    if len(changes) > MAX_FILES_SHOWN:
        yield f"... and {len(changes) - MAX_FILES_SHOWN} more changed files, not shown\n"


def _bounded(pieces: Iterable[str], limit: int) -> str:
    out: list[str] = []
    size = 0
    for piece in pieces:
        size += len(piece.encode("utf-8", errors="replace"))
        if size > limit:
            out.append(f"... the refused change is cut here, at {limit} bytes\n")
            break
        out.append(piece)
    return "".join(out)


def refused_diff(
    git: Git,
    folder: Path,
    start: str,
    changes: list[Change],
    max_file_bytes: int = MAX_SHOWN_FILE,
    limit: int = MAX_DIFF_BYTES,
) -> str:
    """The refused candidate's `changes` in `folder` against commit `start`, as text."""
    per_file = min(max_file_bytes, MAX_SHOWN_FILE)
    return _bounded(_pieces(git, folder, start, changes, per_file), limit)


def write_refused_diff(state_dir: Path, iteration: int, text: str) -> Path:
    """Store the text in the campaign folder (replacing any left by an attempt of the same
    number that a resume is making again)."""
    path = refused_diff_path(state_dir, iteration)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_symlink():
        path.unlink()  # replaced, never followed
    partial = path.with_suffix(".diff.partial")
    partial.unlink(missing_ok=True)
    partial.write_text(text, encoding="utf-8", errors="replace")
    os.replace(partial, path)
    return path
