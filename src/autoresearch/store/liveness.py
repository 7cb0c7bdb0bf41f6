"""Whether a campaign's engine runs, told without touching its lock.

The engine holds an exclusive `flock` on `.autoresearch/<name>/engine.lock` while it runs
and takes it without waiting, so a reader that took the lock even for an instant could make
a `run` starting at that moment fail. Readers (`status`, `log`, `list`, the dashboard) ask
the kernel instead: on Linux `/proc/locks` names the process holding a lock on that file.
Elsewhere the pid in `state.json` is trusted when that process is alive and the state
says it runs.
"""

from __future__ import annotations

import os
from pathlib import Path

from autoresearch.store.ledger import StateFile

LOCK_FILE = "engine.lock"
PROC_LOCKS = Path("/proc/locks")


def _holders(path: Path) -> list[int] | None:
    """Pids holding a lock on `path` per /proc/locks; None when the kernel cannot tell."""
    try:
        table = PROC_LOCKS.read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    try:
        info = path.stat()
    except OSError:
        return []
    wanted = f"{os.major(info.st_dev):02x}:{os.minor(info.st_dev):02x}:{info.st_ino}"
    pids: list[int] = []
    for line in table.splitlines():
        fields = line.split()
        # "1: FLOCK  ADVISORY  WRITE 4242 fe:00:2147281 0 EOF"; waiters carry "->".
        if len(fields) < 6 or "->" in fields[1]:
            continue
        if fields[1] == "FLOCK" and fields[5] == wanted and fields[4].lstrip("-").isdigit():
            pids.append(int(fields[4]))
    return pids


def pid_alive(pid: object) -> bool:
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def lock_holder(state_dir: Path) -> int | None:
    """The pid of the running engine of the campaign in `state_dir`, or None.

    On Linux this is the process the kernel says holds the engine lock; elsewhere the pid in
    `state.json` when that process is alive and the state says the engine runs.
    """
    holders = _holders(state_dir / LOCK_FILE)
    if holders is not None:
        return next((pid for pid in holders if pid > 0), None)
    state = StateFile(state_dir).read()
    pid = state.get("pid")
    if state.get("running") and pid_alive(pid) and isinstance(pid, int):
        return pid
    return None


def is_running(state_dir: Path) -> bool:
    return lock_holder(state_dir) is not None


def kernel_reports_locks() -> bool:
    """Whether this system says who holds a lock (Linux's /proc/locks)."""
    try:
        PROC_LOCKS.read_bytes()
    except OSError:
        return False
    return True


def holds_engine_lock(state_dir: Path, pid: int) -> bool:
    """Whether `pid` is the process holding the campaign's engine lock. Only the kernel's
    word counts: where it cannot be asked, no process is taken for the engine."""
    holders = _holders(state_dir / LOCK_FILE)
    return holders is not None and pid in holders
