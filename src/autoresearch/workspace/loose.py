"""A commit object written as `git commit-tree` writes it, without starting git.

Each attempt's candidate becomes a commit: its tree, the incumbent as parent, the engine's
identity, the time of now and the message. The object is the same bytes git would make
(`commit <size>\\0` and the commit's text), stored the way git stores a loose object (a
zlib stream in a new file under `objects/<2>/`, linked into place, never fsynced: the
engine's git directories have no configuration that would ask for it). Where it cannot be
the same (another hash than SHA-1, a date or an identity of the environment's), None is
returned and the caller starts git.
"""

from __future__ import annotations

import errno
import hashlib
import os
import tempfile
import time
import zlib
from collections.abc import Mapping
from pathlib import Path

from autoresearch.gitcmd import IDENTITY

SHA1_HEX = 40
# Dates git would take from the environment instead of the time of now.
GIT_DATES = ("GIT_AUTHOR_DATE", "GIT_COMMITTER_DATE")


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


OBJECT_MODE = 0o444 & ~_umask()  # what git gives a loose object


def _git_keeps(message: bytes) -> bool:
    """Whether git stores `message` as it is: UTF-8 holding no noncharacter (git rewrites
    any other byte as if it were Latin-1, and warns)."""
    try:
        text = message.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return not any(
        (ord(c) & 0xFFFE) == 0xFFFE or 0xFDD0 <= ord(c) <= 0xFDEF for c in text if ord(c) >= 0xFDD0
    )


def _timezone(now: float) -> str:
    offset = time.localtime(now).tm_gmtoff // 60
    sign = "-" if offset < 0 else "+"
    return f"{sign}{abs(offset) // 60:02d}{abs(offset) % 60:02d}"


def commit_text(tree: str, parent: str, message: bytes, identity: Mapping[str, str]) -> bytes:
    """The commit's text as git writes it for `commit-tree <tree> -p <parent> -F -` with
    `identity` (names and addresses git writes as they are: the engine's own)."""
    now = time.time()
    stamp = f"{int(now)} {_timezone(now)}"
    author = f"{identity['GIT_AUTHOR_NAME']} <{identity['GIT_AUTHOR_EMAIL']}> {stamp}"
    committer = f"{identity['GIT_COMMITTER_NAME']} <{identity['GIT_COMMITTER_EMAIL']}> {stamp}"
    head = f"tree {tree}\nparent {parent}\nauthor {author}\ncommitter {committer}\n\n"
    return head.encode() + message


def write_commit(
    objects: Path, tree: str, parent: str, message: bytes, env: Mapping[str, str]
) -> str | None:
    """Store the commit, made by the engine's identity, in the object directory `objects`;
    its id, or None when git must make it (see the module's note). `env` is the one git
    would run with."""
    if any(name in env for name in GIT_DATES):
        return None
    if len(tree) != SHA1_HEX or len(parent) != SHA1_HEX or not _git_keeps(message):
        return None
    text = commit_text(tree, parent, message, IDENTITY)
    raw = f"commit {len(text)}\0".encode() + text
    oid = hashlib.sha1(raw).hexdigest()
    folder = objects / oid[:2]
    final = folder / oid[2:]
    if final.exists():
        return oid
    folder.mkdir(exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix="tmp_obj_", dir=folder)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(zlib.compress(raw, 1))  # git's own level for loose objects
        os.chmod(tmp, OBJECT_MODE)
        try:
            os.link(tmp, final)
        except FileExistsError:
            pass  # the same object, made meanwhile
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.EMLINK, errno.EXDEV, errno.ENOTSUP):
                raise
            os.replace(tmp, final)  # no hard links here: as git, renamed instead
    finally:
        Path(tmp).unlink(missing_ok=True)
    return oid
