"""Run a command the way the engine trusts: own process group, timeout, bounded logs."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from autoresearch.isolation.owned import open_own, remove, write_text

LOG_CAP_BYTES = 4 * 1024 * 1024  # per stream: half head, half tail
KILL_GRACE_SECONDS = 2.0
# After the command's group is gone, how long its output may take to drain: a process that
# escaped the group and holds the pipe would otherwise keep the engine waiting.
PIPE_GRACE_SECONDS = 1.0


@dataclass(frozen=True)
class Limits:
    memory_mb: int = 0
    cpu_seconds: int = 0
    network: bool = True

    def preexec(self) -> Callable[[], None] | None:
        if not self.memory_mb and not self.cpu_seconds:
            return None
        memory = self.memory_mb * 1024 * 1024
        cpu = self.cpu_seconds

        def apply() -> None:
            import resource

            if memory:
                resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
            if cpu:
                resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))

        return apply

    def argv(self, command: str) -> list[str]:
        if self.network:
            return ["bash", "-c", command]
        extra = [] if os.geteuid() == 0 else ["--map-root-user"]
        return ["unshare", "--net", *extra, "bash", "-c", command]


def network_isolation_problem() -> str | None:
    """Why commands cannot run without network here, or None when they can."""
    import shutil

    if shutil.which("unshare") is None:
        return "the unshare command is not installed (util-linux)"
    argv = Limits(network=False).argv("true")
    proc = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        return proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "unshare failed"
    return None


@dataclass(frozen=True)
class CommandResult:
    returncode: int | None
    timed_out: bool
    seconds: float
    stdout_path: Path
    stderr_path: Path
    # The command's process: the leader of its own session, which its processes keep
    # unless they start one of their own.
    pid: int = 0

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out

    def stdout_text(self) -> str:
        return _read_text(self.stdout_path)

    def stderr_tail(self, lines: int = 1) -> str:
        text = _read_text(self.stderr_path).strip().splitlines()
        return " | ".join(line.strip() for line in text[-lines:] if line.strip())[:400]


def _read_text(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8", errors="replace")
    except OSError:
        return ""


class _Pump(threading.Thread):
    """Copies a pipe to a file, keeping the first and last `cap/2` bytes only."""

    def __init__(self, source: BinaryIO, dest: Path, cap: int) -> None:
        super().__init__(daemon=True)
        self.source = source
        self.dest = dest
        self.head_limit = cap // 2
        self.tail_limit = cap - self.head_limit
        self.total = 0

    def run(self) -> None:
        tail: deque[bytes] = deque()
        tail_size = 0
        with open_own(self.dest) as out:
            while True:
                try:
                    chunk = self.source.read1(65536)  # type: ignore[attr-defined]
                except (OSError, ValueError):
                    break
                if not chunk:
                    break
                self.total += len(chunk)
                room = self.head_limit - out.tell() if not tail else 0
                if room > 0:
                    out.write(chunk[:room])
                    chunk = chunk[room:]
                if chunk:
                    tail.append(chunk)
                    tail_size += len(chunk)
                    while tail_size - len(tail[0]) >= self.tail_limit:
                        tail_size -= len(tail.popleft())
            if tail:
                excess = tail_size - self.tail_limit
                if excess > 0:
                    tail[0] = tail[0][excess:]
                    tail_size -= excess
                written = out.tell()
                omitted = self.total - written - tail_size
                if omitted > 0:
                    out.write(f"\n[... {omitted} bytes omitted ...]\n".encode())
                for chunk in tail:
                    out.write(chunk)
        try:
            self.source.close()
        except OSError:
            pass


def _kill_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _group_exists(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False  # another user's: never ours to kill
    return True


def process_ended(pid: int) -> bool:
    """Whether `pid` has exited: gone, or a zombie waiting for its parent to reap it."""
    return _proc_stat(pid) is None


def _proc_stat(pid: int) -> tuple[int, int] | None:
    """(process group, start time in clock ticks since boot) of a live process, or None."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after the last ')'.
    fields = raw[raw.rfind(b")") + 2 :].split()
    try:
        state, pgrp, start = fields[0], int(fields[2]), int(fields[19])
    except (IndexError, ValueError):
        return None
    if state in (b"Z", b"X"):
        return None
    return pgrp, start


def _boot_seconds(ticks: int) -> float:
    return ticks / os.sysconf("SC_CLK_TCK")


def _uptime() -> float | None:
    try:
        return float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


class ChildRecord:
    """The file where the process group of the running command is written down.

    If the engine is killed (SIGKILL leaves no chance to clean up), the command's group
    lives on; the next engine reads the record and kills that group before doing anything,
    but only if it is still the same group: the record holds the group leader's start time
    (`/proc/<pid>/stat` field 22), and a process that merely reuses the number is left alone.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        # The group running now, held in memory as well: a canceller in another thread
        # kills it without reading the file, which may be half-written at that moment.
        self.running: int | None = None
        self.lock = threading.Lock()

    def hold(self, pgid: int) -> None:
        """The group running now, for `kill_running` (its record is on disk already)."""
        with self.lock:
            self.running = pgid

    @property
    def _partial(self) -> Path:
        return self.path.with_name(self.path.name + ".new")

    @staticmethod
    def _line(pgid: int) -> str:
        stat = _proc_stat(pgid)
        return f"{pgid}\n" if stat is None else f"{pgid} {stat[1]}\n"

    def write(self, pgid: int) -> None:
        self.hold(pgid)
        # Written whole or not at all: a reader never sees an empty record.
        write_text(self._partial, self._line(pgid))
        os.replace(self._partial, self.path)

    def in_child(self) -> Callable[[], None]:
        """The record, written by the command's own process between fork and exec: an
        engine killed the moment after the fork (before bubblewrap binds its life to the
        engine's) still leaves the record by which the next engine kills what it started.
        Plain system calls only, as fits a forked child."""
        path, partial = os.fsencode(self.path), os.fsencode(self._partial)

        def write() -> None:
            line = self._line(os.getpid())  # the group's leader: a new session
            fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
            try:
                os.write(fd, line.encode())
            finally:
                os.close(fd)
            os.replace(partial, path)

        return write

    def ready(self) -> None:
        """Before the command's own process writes the record (`PRELUDE`): whatever was
        planted at its path is removed, never written through."""
        if os.path.lexists(self.path):
            remove(self.path)

    def clear(self) -> None:
        with self.lock:
            self.running = None
        self.path.unlink(missing_ok=True)

    def kill_running(self) -> int | None:
        """Kill the group of the command running now in this process; its id, or None."""
        with self.lock:
            pgid = self.running
        if pgid is not None and pgid > 1:
            _kill_group(pgid, signal.SIGKILL)
        return pgid

    def kill_leftover(self) -> int | None:
        """Kill the group a killed engine left running; return its id if there was one."""
        try:
            text = self.path.read_text(encoding="utf-8", errors="replace")
            written = self.path.stat().st_mtime
        except OSError:
            return None
        parts = text.split()
        try:
            pgid = int(parts[0])
            start = int(parts[1]) if len(parts) > 1 else None
        except (IndexError, ValueError):
            return None  # not a record (yet): left for its writer to finish or clear
        self.path.unlink(missing_ok=True)
        if pgid > 1 and self._still_ours(pgid, start, written):
            _kill_group(pgid, signal.SIGKILL)
            return pgid
        return None

    @staticmethod
    def _still_ours(pgid: int, start: int | None, written: float) -> bool:
        """True when the group's leader is the process the record was written for."""
        stat = _proc_stat(pgid)
        if stat is None:
            # The leader is gone (bubblewrap's monitor, killed with the engine) but members
            # may be left (the sandbox's init, when the engine died before it bound itself
            # to it). A number still in use as a group's id is never given to a new
            # process, so a group found under it is the one the record was written for.
            return _group_exists(pgid)
        if stat[0] != pgid:
            return False  # the number now names a process of another group
        if start is not None:
            return stat[1] == start
        # A record without a start time (written by 0.1.0): the leader must have started
        # just before the record was written; a process that reused the number started
        # after the original had ended, which is after the write.
        uptime = _uptime()
        if uptime is None:
            return False
        started = time.time() - uptime + _boot_seconds(stat[1])
        return written - 10.0 <= started <= written + 0.5


def _both(
    first: Callable[[], None] | None, second: Callable[[], None] | None
) -> Callable[[], None] | None:
    if first is None or second is None:
        return first or second

    def both() -> None:
        first()
        second()

    return both


# A sandbox whose own set-up fails (bubblewrap covering a socket that vanished between the
# listing and the mount) never started the command: that is tried again, this many times.
SETUP_TRIES = 3
# What a sandbox writes to its status fd once the command inside has ended (bubblewrap's
# `--json-status-fd`); exiting 1 without it means the set-up failed.
SANDBOX_EXITED = b'"exit-code"'

# Turns a command line into one that runs inside a sandbox, which reports on `status_fd`.
Wrapper = Callable[[list[str], int], list[str]]
# Starts a process (a `Popen`, handed over as a function) from a thread that carries the
# sandbox's restrictions (`launcher.Launcher`).
Launch = Callable[[Callable[[], "subprocess.Popen[bytes]"]], "subprocess.Popen[bytes]"]

# What a command's own process does before it becomes the command, where no Python may run
# (for a `preexec_fn` CPython forks the whole engine instead of using vfork): a POSIX shell
# writes the command's record (as `ChildRecord.in_child` does: the group's leader and its
# start time) and sets the rlimits, then execs the command line that follows. The record
# is written in place, not renamed into it: its folder is the campaign's, which no
# command reaches, and the one process that writes it lives on until it is written.
PRELUDE = """\
r=$1 as=$2 cpu=$3; shift 3
if [ -n "$r" ]; then
  read -r s < /proc/$$/stat || exit 1
  s=${s##*) }
  record() { shift 19; printf '%s %s\\n' $$ "$1" > "$r"; }
  record $s || exit 1
fi
if [ "$as" != 0 ]; then ulimit -v "$as" || exit 1; fi
if [ "$cpu" != 0 ]; then { ulimit -t $((cpu + 5)) && ulimit -S -t "$cpu"; } || exit 1; fi
exec "$@"
"""


def with_prelude(argv: list[str], record: Path | None, limits: Limits) -> list[str]:
    """`argv` started through `PRELUDE` when there is a record to write or a limit to set."""
    if record is None and not limits.memory_mb and not limits.cpu_seconds:
        return argv
    values = [str(record or ""), str(limits.memory_mb * 1024), str(limits.cpu_seconds)]
    return ["/bin/sh", "-c", PRELUDE, "autoresearch", *values, *argv]


def run_command(
    command: str,
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout: float,
    stdout_path: Path,
    stderr_path: Path,
    log_cap: int = LOG_CAP_BYTES,
    limits: Limits | None = None,
    child: ChildRecord | None = None,
    wrap: Wrapper | None = None,
    child_setup: Callable[[], None] | None = None,
    launch: Launch | None = None,
) -> CommandResult:
    """Run `command` with bash in its own process group; never leave processes behind.

    `child`, when given, holds the group's id while the command runs. `wrap` turns the
    command line into one that runs inside a sandbox (which then also keeps the network
    out when `limits.network` is false); `launch` starts it from a thread that carries
    the sandbox's restrictions, and nothing but a shell (`PRELUDE`) runs before it, so
    the engine is not forked whole. `child_setup`, when given instead, is the sandbox's
    own step in the child before exec (the record, the limits and the step then run as
    Python there). A sandbox that failed to set itself up is started afresh (`wrap` is
    asked again) up to SETUP_TRIES times; its last words are in the logs.
    """
    stdout_path.parent.mkdir(parents=True, exist_ok=True)
    limits = limits or Limits()
    start = time.monotonic()
    args = (cwd, env, timeout, stdout_path, stderr_path, log_cap, limits, child)
    steps = (child_setup, launch)
    if wrap is None:
        proc, timed_out = _run_once(limits.argv(command), *args, *steps, None)
    else:
        for _ in range(SETUP_TRIES):
            read_end, write_end = os.pipe()
            try:
                try:
                    proc, timed_out = _run_once(
                        wrap(["bash", "-c", command], write_end), *args, *steps, write_end
                    )
                finally:
                    os.close(write_end)
                status = drain(read_end)
            finally:
                os.close(read_end)
            if timed_out or proc.returncode != 1 or SANDBOX_EXITED in status:
                break
    return CommandResult(
        returncode=None if timed_out else proc.returncode,
        timed_out=timed_out,
        seconds=time.monotonic() - start,
        stdout_path=stdout_path,
        stderr_path=stderr_path,
        pid=proc.pid,
    )


def _wait(proc: subprocess.Popen[bytes], timeout: float) -> None:
    """`proc.wait(timeout)`, woken the moment the process ends: Popen's own wait polls in
    sleeps that grow to 50 ms, late by that much for every command the engine runs."""
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # not Linux 5.3+, or the process is already gone
        proc.wait(timeout=timeout)
        return
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        deadline = time.monotonic() + timeout
        while not poller.poll(min(max(0.0, deadline - time.monotonic()) * 1000, 2**31 - 1)):
            if time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(proc.args, timeout)
    finally:
        os.close(fd)
    proc.wait()


def drain(fd: int) -> bytes:
    """What a pipe holds now, without waiting for a writer that may still hold it."""
    os.set_blocking(fd, False)
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def _run_once(
    argv: list[str],
    cwd: Path,
    env: Mapping[str, str],
    timeout: float,
    stdout_path: Path,
    stderr_path: Path,
    log_cap: int,
    limits: Limits,
    child: ChildRecord | None,
    child_setup: Callable[[], None] | None,
    launch: Launch | None,
    status_fd: int | None,
) -> tuple[subprocess.Popen[bytes], bool]:
    """Start `argv` in a new session, wait for it up to `timeout`, and kill what is left of
    its group; (the process, whether it timed out)."""
    # A sandboxed command writes its record itself, before the sandbox starts (an engine
    # killed the moment after the fork cannot write it, and bubblewrap binds itself to the
    # engine only later). An unsandboxed command's record is written by the engine just
    # after the start: it has no sandbox to outlive the engine in.
    own = child if status_fd is not None else None
    preexec = None
    if child_setup is None:
        if own is not None:
            own.ready()
        argv = with_prelude(argv, None if own is None else own.path, limits)
    else:
        writer = None if own is None else own.in_child()
        preexec = _both(_both(writer, limits.preexec()), child_setup)
    environment = dict(env)

    def start() -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            argv,
            preexec_fn=preexec,
            cwd=cwd,
            env=environment,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            pass_fds=() if status_fd is None else (status_fd,),
        )

    proc = start() if launch is None else launch(start)
    if own is not None:
        own.hold(proc.pid)
    elif child is not None:
        child.write(proc.pid)
    pumps = [
        _Pump(proc.stdout, stdout_path, log_cap),  # type: ignore[arg-type]
        _Pump(proc.stderr, stderr_path, log_cap),  # type: ignore[arg-type]
    ]
    for pump in pumps:
        pump.start()
    timed_out = False
    try:
        try:
            _wait(proc, timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=KILL_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                pass
    except BaseException:
        _kill_group(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=KILL_GRACE_SECONDS)
        except BaseException:
            pass
        raise
    finally:
        # Whatever the command left running in its group goes with it.
        _kill_group(proc.pid, signal.SIGKILL)
        proc.wait()
        if child is not None:
            child.clear()
        for pump in pumps:
            pump.join(timeout=PIPE_GRACE_SECONDS)
            if pump.is_alive():
                # A process that left the group still holds the pipe open.
                try:
                    pump.source.close()
                except OSError:
                    pass
    return proc, timed_out
