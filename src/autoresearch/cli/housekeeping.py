"""`list`, `clean` and `stop`: the campaigns of a repository, freeing their disk, stopping one.

`list` is a reader and never takes an engine's lock. `clean` takes the lock for as long as
it works, so that no engine can start on a half-removed workspace. `stop` signals the pid
recorded in `state.json` only once the kernel confirms that this very process holds the
campaign's engine lock (through a pidfd where there is one, so a pid reused in between is
never signalled).
"""

from __future__ import annotations

import os
import shutil
import signal
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from autoresearch.attempt import Status
from autoresearch.config import NAME_RE
from autoresearch.errors import AutoresearchError, ConfigError
from autoresearch.gitcmd import Git
from autoresearch.isolation.process import process_ended
from autoresearch.store.ledger import Ledger, StateFile
from autoresearch.store.liveness import (
    LOCK_FILE,
    holds_engine_lock,
    kernel_reports_locks,
    lock_holder,
    pid_alive,
)
from autoresearch.store.summary import summarize

# What `clean` removes from a campaign's folder: the worktree and what measuring and
# proposing wrote. The ledger, results.tsv, state.json, the reports and a proposer's own
# state (an Optuna journal, ideas) stay: they are the campaign's record.
REMOVED = (
    "worktree",
    "logs",
    "prompts",
    "workspace.git",
    "measure",
    "measure.git",
    "modules",
    "tmp",
    "slots",  # with [executor] jobs: each slot's workspace and measurement folder
    "ray.git",  # the Ray executor's commits of measured trees
)


@dataclass(frozen=True)
class CampaignInfo:
    name: str
    state: str  # running, stopped, never finished, not started
    stop_reason: str | None
    pid: int | None
    direction: str
    baseline: float | None
    best: float | None
    best_iteration: int | None
    attempts: int
    disk_bytes: int
    path: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def disk_usage(path: Path) -> int:
    """Bytes on disk under `path` (allocated blocks), symlinks not followed."""
    total = 0
    stack = [path]
    while stack:
        current = stack.pop()
        try:
            entries = list(os.scandir(current))
        except OSError:
            continue
        for entry in entries:
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            total += getattr(info, "st_blocks", 0) * 512 or info.st_size
            if entry.is_dir(follow_symlinks=False):
                stack.append(Path(entry.path))
    return total


def campaign_dirs(root: Path) -> list[Path]:
    base = root / ".autoresearch"
    if not base.is_dir():
        return []
    return sorted(
        p
        for p in base.iterdir()
        if p.is_dir() and ((p / "ledger.jsonl").exists() or (p / "state.json").exists())
    )


def describe(state_dir: Path) -> CampaignInfo:
    state = StateFile(state_dir).read()
    records = Ledger(state_dir).read()
    direction = str(state.get("direction") or "minimize")
    summary = summarize(state_dir.name, direction, records)
    pid = lock_holder(state_dir)
    if pid is not None:
        label = "running"
    elif state.get("stop_reason"):
        label = "stopped"
    elif records:
        label = "never finished"
    else:
        label = "not started"
    attempts = sum(1 for r in records if r.status is not Status.BASELINE)
    return CampaignInfo(
        name=state_dir.name,
        state=label,
        stop_reason=None if pid is not None else state.get("stop_reason"),
        pid=pid,
        direction=direction,
        baseline=summary.baseline,
        best=summary.best,
        best_iteration=summary.best_iteration,
        attempts=attempts,
        disk_bytes=disk_usage(state_dir),
        path=str(state_dir),
    )


def list_campaigns(root: Path) -> list[CampaignInfo]:
    return [describe(path) for path in campaign_dirs(root)]


def human_bytes(count: int) -> str:
    size = float(count)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GB"


def campaign_dir(root: Path, name: str) -> Path:
    """The folder of campaign `name`, which must exist."""
    if not NAME_RE.fullmatch(name) or ".." in name:
        raise ConfigError(f"{name!r} is not a campaign name; see `autoresearch list`.")
    path = root / ".autoresearch" / name
    if not path.is_dir():
        raise ConfigError(f"there is no campaign '{name}' here; see `autoresearch list`.")
    return path


@dataclass(frozen=True)
class Cleaned:
    removed: list[str]  # folders and refs removed
    freed_bytes: int
    branch_removed: bool


def clean_campaign(root: Path, name: str, branch: bool = False) -> Cleaned:
    """Remove the campaign's workspace, measurement folders and attempt refs; with
    `branch`, its branch too. Refused while an engine runs it."""
    state_dir = campaign_dir(root, name)
    lock = FileLock(str(state_dir / LOCK_FILE), timeout=0)
    try:
        lock.acquire()
    except Timeout:
        pid = lock_holder(state_dir)
        who = f" (pid {pid})" if pid else ""
        raise AutoresearchError(
            f"campaign '{name}' is running{who}; stop it first with `autoresearch stop {name}`."
        ) from None
    try:
        return _clean(root, state_dir, name, branch)
    finally:
        lock.release()


def _clean(root: Path, state_dir: Path, name: str, branch: bool) -> Cleaned:
    repo = Git(root)
    branch_ref = f"refs/heads/autoresearch/{name}"
    if branch and repo.run("symbolic-ref", "-q", "HEAD", check=False).strip() == branch_ref:
        raise AutoresearchError(
            f"your checkout is on autoresearch/{name}; switch to another branch to remove it."
        )
    before = disk_usage(state_dir)
    removed: list[str] = []
    worktree = state_dir / "worktree"
    if worktree.exists():
        repo.run("worktree", "remove", "--force", "--force", str(worktree), check=False)
        shutil.rmtree(worktree, ignore_errors=True)
        removed.append(str(worktree.relative_to(root)))
    repo.run("worktree", "prune", check=False)
    for folder in REMOVED[1:]:
        path = state_dir / folder
        if path.exists():
            shutil.rmtree(path, ignore_errors=True)
            removed.append(str(path.relative_to(root)))
    listed = repo.run("for-each-ref", "--format=%(refname)", f"refs/autoresearch/{name}/")
    refs = [ref for ref in listed.splitlines() if ref]
    if refs:
        repo.run_bytes(
            "update-ref", "--stdin", input="".join(f"delete {r}\n" for r in refs).encode()
        )
        removed.append(f"{len(refs)} refs under refs/autoresearch/{name}/")
    branch_removed = False
    if branch and repo.rev(branch_ref) is not None:
        repo.run("update-ref", "-d", branch_ref)
        removed.append(f"branch autoresearch/{name}")
        branch_removed = True
    last = max((r.iteration for r in Ledger(state_dir).read()), default=-1)
    StateFile(state_dir).update(cleaned_through=last, branch_removed=branch_removed or None)
    return Cleaned(removed, max(before - disk_usage(state_dir), 0), branch_removed)


@dataclass(frozen=True)
class Stopped:
    pid: int
    stop_reason: str | None
    seconds: float


def stop_campaign(root: Path, name: str, timeout: float = 300.0) -> Stopped:
    """Ask the campaign's engine to stop (SIGTERM: it rolls back the attempt in flight,
    logs it and stops) and wait until it has."""
    state_dir = campaign_dir(root, name)
    if lock_holder(state_dir) is None:
        raise AutoresearchError(f"campaign '{name}' is not running; there is nothing to stop.")
    if not kernel_reports_locks():
        raise AutoresearchError(
            "this system cannot say which process holds the engine lock (no /proc/locks), so "
            f"no process is signalled; stop campaign '{name}' with Ctrl-C where it runs."
        )
    pid = _recorded_engine_pid(state_dir)
    if pid is None:
        raise AutoresearchError(
            f"the engine lock of campaign '{name}' is held by a process that is not the pid "
            f"recorded in {state_dir / 'state.json'}; nothing was signalled."
        )
    began = time.monotonic()
    _signal_engine(state_dir, pid, name)
    # The engine gives its lock back a moment before it exits (the summary is printed
    # after): `stop` returns once the process itself has ended.
    while time.monotonic() - began < timeout:
        if not holds_engine_lock(state_dir, pid) and process_ended(pid):
            break
        time.sleep(0.05)
    else:
        raise AutoresearchError(
            f"the engine of campaign '{name}' (pid {pid}) was asked to stop but still runs "
            f"after {timeout:.0f} s; `autoresearch status` shows when it has stopped."
        )
    reason = StateFile(state_dir).read().get("stop_reason")
    return Stopped(pid, None if reason is None else str(reason), time.monotonic() - began)


def _recorded_engine_pid(state_dir: Path, wait: float = 3.0) -> int | None:
    """The pid in state.json, when the kernel says it holds the engine lock. An engine
    that has just taken the lock writes its pid a moment later: wait for that."""
    deadline = time.monotonic() + wait
    while True:
        pid = StateFile(state_dir).read().get("pid")
        if type(pid) is int and pid > 0 and holds_engine_lock(state_dir, pid):
            return pid
        if time.monotonic() >= deadline or lock_holder(state_dir) is None:
            return None
        time.sleep(0.1)


def _signal_engine(state_dir: Path, pid: int, name: str) -> None:
    """SIGTERM to `pid`, checked to hold the lock after it was pinned (pidfd), so that a
    process that took over a reused pid is never signalled."""
    pidfd: int | None = None
    if hasattr(os, "pidfd_open"):
        try:
            pidfd = os.pidfd_open(pid)
        except OSError:
            pidfd = None
            if not pid_alive(pid):
                raise AutoresearchError(
                    f"campaign '{name}' stopped on its own; there is nothing to stop."
                ) from None
    try:
        if not holds_engine_lock(state_dir, pid):
            raise AutoresearchError(
                f"the engine of campaign '{name}' stopped before it was signalled; "
                "there is nothing to stop."
            )
        if pidfd is not None:
            signal.pidfd_send_signal(pidfd, signal.SIGTERM)
        else:
            os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        raise AutoresearchError(
            f"campaign '{name}' stopped on its own; there is nothing to stop."
        ) from None
    finally:
        if pidfd is not None:
            os.close(pidfd)
