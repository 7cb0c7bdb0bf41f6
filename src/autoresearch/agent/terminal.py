"""The sandboxed agent's command, attached to the person at the terminal.

On a terminal the command gets a pseudo-terminal of its own, which the person's terminal
is relayed to (raw, its size followed), as `docker run -it` does: the agent's full-screen
interface works, and nothing it does to its terminal (a keystroke injected with TIOCSTI, a
mode left set) reaches the person's shell. Without a terminal (a pipe, a test) it inherits
stdin and stdout in a session of its own, so it has no controlling terminal to act on.

Either way, everything it started is killed when it ends: its process group is killed
while its leader is still unreaped, so the group's id cannot have been given to another.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import select
import signal
import subprocess
import termios
import tty
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from types import FrameType

CHUNK = 65536
POLL_SECONDS = 0.2


def run_attached(
    argv: Sequence[str],
    *,
    env: dict[str, str],
    cwd: Path,
    setup: Callable[[], None] | None = None,
    pass_fds: Iterable[int] = (),
    started: Callable[[int], None] = lambda pid: None,
) -> int:
    """Run `argv` for the person at the terminal; its exit code (128 + N: killed by
    signal N). `started` is told its pid once it runs."""
    if os.isatty(0) and os.isatty(1):
        return _on_pty(argv, env, cwd, setup, tuple(pass_fds), started)
    proc = subprocess.Popen(
        list(argv),
        env=env,
        cwd=cwd,
        start_new_session=True,
        preexec_fn=setup,
        pass_fds=tuple(pass_fds),
    )
    try:
        started(proc.pid)
        while not _ended(proc.pid, None):
            pass
    finally:
        _end(proc)
    return _code(proc)


def _on_pty(
    argv: Sequence[str],
    env: dict[str, str],
    cwd: Path,
    setup: Callable[[], None] | None,
    pass_fds: tuple[int, ...],
    started: Callable[[int], None],
) -> int:
    master, slave = pty.openpty()
    _copy_size(0, slave)

    def child() -> None:
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)  # the pty is its controlling terminal
        if setup is not None:
            setup()

    try:
        proc = subprocess.Popen(
            list(argv),
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=env,
            cwd=cwd,
            start_new_session=True,
            preexec_fn=child,
            pass_fds=pass_fds,
        )
    finally:
        os.close(slave)
    try:
        started(proc.pid)
    except BaseException:
        _end(proc)
        raise
    saved = termios.tcgetattr(0)

    def resized(signum: int, frame: FrameType | None) -> None:
        _copy_size(0, master)

    previous = signal.signal(signal.SIGWINCH, resized)
    relayed = False
    try:
        tty.setraw(0)
        _relay(master, proc.pid)
        relayed = True
    finally:
        termios.tcsetattr(0, termios.TCSAFLUSH, saved)
        signal.signal(signal.SIGWINCH, previous)
        os.close(master)
        if not relayed:
            _end(proc)
    try:
        # The terminal closes as the sandbox's processes die, a moment before bubblewrap
        # reports the command's exit code: wait for that, not kill it first.
        _ended(proc.pid, None)
    finally:
        _end(proc)
    return _code(proc)


def _relay(master: int, pid: int) -> None:
    """The person's keys to the pty, the pty's output to the person, until the command
    has ended and its terminal is closed (or quiet)."""
    reading = True
    while True:
        watched = [master, 0] if reading else [master]
        try:
            ready, _, _ = select.select(watched, [], [], POLL_SECONDS)
        except InterruptedError:
            continue
        if not ready and _ended(pid, 0):
            return
        if 0 in ready:
            data = os.read(0, CHUNK)
            if data:
                _write_all(master, data)
            else:
                reading = False
        if master in ready:
            try:
                data = os.read(master, CHUNK)
            except OSError:  # EIO: every holder of the terminal has closed it
                return
            if not data:
                return
            _write_all(1, data)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _copy_size(source: int, target: int) -> None:
    with contextlib.suppress(OSError):
        size = fcntl.ioctl(source, termios.TIOCGWINSZ, b"\0" * 8)
        fcntl.ioctl(target, termios.TIOCSWINSZ, size)


def _ended(pid: int, timeout: float | None) -> bool:
    """Whether the process has ended, without reaping it (its group's id stays reserved).
    `timeout` None: wait for it (a signal, Ctrl-C, interrupts the wait)."""
    options = os.WEXITED | os.WNOWAIT
    if timeout is not None:
        options |= os.WNOHANG
    try:
        return os.waitid(os.P_PID, pid, options) is not None
    except ChildProcessError:
        return True


def _end(proc: subprocess.Popen[bytes]) -> None:
    """Kill what the command left in its group, then reap it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _code(proc: subprocess.Popen[bytes]) -> int:
    code = proc.returncode
    return 128 - code if code < 0 else code
