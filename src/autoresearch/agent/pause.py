"""Every process of a sandboxed agent held still while the engine works on its workspace.

In `run`, a proposer's processes are all gone before the engine reads the workspace; a
sandboxed agent's keep running while it waits for `step`, and one it left in the
background could race the engine's reading, committing and rolling back of the workspace
(swap a folder for a link between a check and a write). So `start` and `step` called from
the sandbox run with every process of the sandbox stopped (SIGSTOP), and continued after.
The agent waits for the answer anyway.

The sandbox's processes are the descendants of its bubblewrap process: its PID namespace's
init reaps every orphan, so none leaves the tree. They are stopped in sweeps until a sweep
finds none running (a process forked during a sweep is found by the next), each signalled
through a pidfd opened before it is checked to still be in the tree, so a reused pid is
never signalled.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from autoresearch.errors import AutoresearchError

SETTLE_SECONDS = 10.0  # a process in uninterruptible sleep stops when its call returns
STOPPED = ("T", "t", "Z", "X")
# Set for the MCP servers of a sandboxed session (never inside the sandbox): the sandbox's
# bubblewrap process, as `Root.to_env` writes it.
PAUSE_ENV = "AUTORESEARCH_AGENT_SANDBOX"
LOCK_NAME = "agent-pause.lock"


@dataclass(frozen=True)
class Root:
    """The sandbox's bubblewrap process: its pid and its start time (a pid reused after
    it ended is not it)."""

    pid: int
    started: int

    def to_env(self) -> str:
        return f"{self.pid}:{self.started}"

    @classmethod
    def from_env(cls, value: str) -> Root | None:
        pid, _, started = value.partition(":")
        if not (pid.isdigit() and started.isdigit()):
            return None
        return cls(int(pid), int(started))

    @classmethod
    def of(cls, pid: int) -> Root | None:
        found = _stat(pid)
        return None if found is None else cls(pid, found[2])


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, parent pid, start time) of a process, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            text = handle.read().decode("ascii", "replace")
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    return fields[0], int(fields[1]), int(fields[19])


def _table() -> dict[int, tuple[str, int]]:
    found: dict[int, tuple[str, int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            stat = _stat(int(entry.name))
            if stat is not None:
                found[int(entry.name)] = (stat[0], stat[1])
    return found


def _tree(root: int, table: dict[int, tuple[str, int]]) -> dict[int, str]:
    """The descendants of `root` (not itself), with their states."""
    children: dict[int, list[int]] = {}
    for pid, (_, parent) in table.items():
        children.setdefault(parent, []).append(pid)
    found: dict[int, str] = {}
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        if pid not in found:
            found[pid] = table[pid][0]
            todo += children.get(pid, [])
    return found


def _signal(pid: int, signum: int, members: set[int]) -> None:
    """`signum` to `pid` if it is still the process of the tree: its pidfd is opened
    first, then its parent is checked to be in the tree (or the root)."""
    try:
        fd = os.pidfd_open(pid)
    except OSError:
        return
    try:
        stat = _stat(pid)
        if stat is None or stat[1] not in members:
            return
        with contextlib.suppress(OSError):
            signal.pidfd_send_signal(fd, signum)
    finally:
        os.close(fd)


def _alive(root: Root) -> bool:
    stat = _stat(root.pid)
    return stat is not None and stat[2] == root.started


def stop(root: Root) -> None:
    """Stop every process of the sandbox; raises AutoresearchError (with them continued)
    when they cannot all be held within SETTLE_SECONDS."""
    deadline = time.monotonic() + SETTLE_SECONDS
    while _alive(root):
        tree = _tree(root.pid, _table())
        running = [pid for pid, state in tree.items() if state not in STOPPED]
        if not running:
            return
        if time.monotonic() > deadline:
            resume(root)
            raise AutoresearchError(
                "the agent's processes could not all be paused for the step (one keeps "
                "running); end what it left running and call the tool again."
            )
        members = {root.pid, *tree}
        for pid in running:
            _signal(pid, signal.SIGSTOP, members)
        time.sleep(0.001)


def resume(root: Root) -> None:
    if not _alive(root):
        return
    tree = _tree(root.pid, _table())
    members = {root.pid, *tree}
    for pid in tree:
        _signal(pid, signal.SIGCONT, members)


@contextlib.contextmanager
def paused(root: Root | None, lock: Path | None = None) -> Iterator[None]:
    """The sandbox of `root` held still for the block (nothing when there is none).

    `lock` (a file in the campaign's folder, out of the sandbox's sight) makes the
    sessions' pauses take turns: a second `step` waits for the first, so that its end
    cannot continue the agent while the first one still works."""
    if root is None:
        yield
        return
    with contextlib.ExitStack() as stack:
        if lock is not None:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            stack.callback(os.close, fd)
            fcntl.flock(fd, fcntl.LOCK_EX)
        stop(root)
        try:
            yield
        finally:
            resume(root)
