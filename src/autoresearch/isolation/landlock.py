"""Landlock's scopes: a sandboxed command cannot connect to the host's abstract unix sockets.

An abstract unix socket (an X server's, some session buses') has no file a mount could
cover, and lives in the network namespace, which a proposer shares with the host (agents
call their APIs). Since Linux 6.12 a Landlock domain can be scoped so that its processes
connect only to abstract sockets made inside the same domain: the command's own processes
still talk to each other, the host's daemons are out of reach (`EPERM`). The scope is
applied (`scope_child`) in the child between fork and exec, so bubblewrap and everything it
starts are inside it, or on the thread that starts the sandboxed commands (`launcher.py`),
whose processes take the domain from it; it restricts nothing else (no file or network
rule is handled).
"""

from __future__ import annotations

import ctypes
import os
import signal
import struct
import subprocess
import sys
from collections.abc import Callable
from functools import lru_cache

# The system call numbers are the same on every architecture (allocated after they were
# unified); so is the prctl.
_CREATE_RULESET = 444
_RESTRICT_SELF = 446
_CREATE_RULESET_VERSION = 1
_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_PDEATHSIG = 1
SCOPE_ABSTRACT_UNIX_SOCKET = 1
SCOPED_ABI = 6  # the first Landlock version with scopes


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


_LIBC = _libc()
# Built before any fork: the child only makes three calls.
_ATTR = ctypes.create_string_buffer(struct.pack("QQQ", 0, 0, SCOPE_ABSTRACT_UNIX_SOCKET), 24)


def abi() -> int:
    """The kernel's Landlock version (0: none, or turned off)."""
    if _LIBC is None:
        return 0
    version = int(_LIBC.syscall(_CREATE_RULESET, None, 0, _CREATE_RULESET_VERSION))
    return max(version, 0)


def scope_child() -> None:
    """In the child, before exec: only abstract sockets made inside this domain from now on.
    Raises OSError when the kernel refuses (the command then does not start)."""
    assert _LIBC is not None
    fd = int(_LIBC.syscall(_CREATE_RULESET, _ATTR, 24, 0))
    if fd < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset")
    try:
        # Required of a process without CAP_SYS_ADMIN; bubblewrap needs no setuid bit where
        # user namespaces are allowed, and one that does is refused by `scoping_problem`.
        if _LIBC.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
        if _LIBC.syscall(_RESTRICT_SELF, fd, 0) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self")
    finally:
        os.close(fd)


def die_with_parent(parent: int) -> None:
    """In the child, before exec: killed when the thread that forked it ends, and gone at
    once if `parent` already has (the signal is only sent for a death still to come)."""
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)


@lru_cache(maxsize=4)
def scoping_problem(probe: tuple[str, ...]) -> str | None:
    """Why commands cannot be scoped here, or None when they can: the kernel's version, and
    `probe` (the sandbox's own command line for `true`) run inside the scope once."""
    version = abi()
    if version < SCOPED_ABI:
        found = f"Landlock {version}" if version else "no Landlock"
        return f"the kernel has {found}; scopes need Landlock {SCOPED_ABI} (Linux 6.12)"
    try:
        proc = subprocess.run(
            list(probe),
            preexec_fn=scope_child,
            capture_output=True,
            timeout=10,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"a scoped command does not start ({exc})"
    if proc.returncode != 0:
        return "the sandbox does not start inside a Landlock scope"
    return None


def child_setup(probe: list[str]) -> Callable[[], None] | None:
    """`scope_child` when scoping works with the sandbox whose probe is `probe`."""
    return scope_child if scoping_problem(tuple(probe)) is None else None
