"""A thread that starts the sandbox's processes under the sandbox's own restrictions.

The keyring filter (`seccomp.py`) and the Landlock scope (`landlock.py`) must hold for
bubblewrap and everything it starts. Put on in the child between fork and exec, they are
Python run there, and for that CPython forks the whole engine (its page tables copied:
5 ms, 20 ms on a loaded machine) where it otherwise uses vfork. Both belong to a thread,
not to a process (neither is asked to spread to the other threads), and a new process
takes them from the thread that forks it. So one thread of the engine puts them on itself,
once, and starts every sandboxed command: nothing runs between fork and exec, and the
engine's other threads keep their own credentials. What else a process takes from the
thread that forks it, the CPU affinity (a slot pinned to its cores), is the caller's: the
thread takes it on before each start.

The thread is never stopped: bubblewrap's `--die-with-parent` watches the thread that
forked it, so the thread must outlive every command it started. One thread serves the
whole process per set of restrictions (`shared`).
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import threading
from collections.abc import Callable
from functools import cache

from autoresearch.isolation import landlock, seccomp

Start = Callable[[], "subprocess.Popen[bytes]"]


class _Request:
    def __init__(self, start: Start) -> None:
        self.start = start
        # The caller's CPU affinity, which a process takes from the thread that forks it (a
        # slot pinned to its cores, `cpus_per_job`): the launcher's thread takes it on first.
        self.cpus = os.sched_getaffinity(0)
        self.done = threading.Event()
        self.lock = threading.Lock()
        self.process: subprocess.Popen[bytes] | None = None
        self.error: BaseException | None = None
        self.abandoned = False


class Launcher:
    """Runs `start` (a `Popen` of a process that leads a session of its own) on a thread
    that carries `steps`' restrictions; the process, or what `start` raised."""

    def __init__(self, steps: tuple[Callable[[], None], ...]) -> None:
        self._requests: queue.SimpleQueue[_Request] = queue.SimpleQueue()
        self._ready = threading.Event()
        self._problem: str | None = None
        thread = threading.Thread(
            target=self._serve, args=(steps,), name="autoresearch-launcher", daemon=True
        )
        thread.start()
        self._ready.wait()

    def _serve(self, steps: tuple[Callable[[], None], ...]) -> None:
        try:
            for step in steps:
                step()
        except OSError as exc:
            self._problem = str(exc)
        self._ready.set()
        while True:
            request = self._requests.get()
            try:
                if os.sched_getaffinity(0) != request.cpus:
                    os.sched_setaffinity(0, request.cpus)
                process = request.start()
            except BaseException as exc:  # handed to the caller, raised there
                request.error = exc
                request.done.set()
                continue
            with request.lock:
                if request.abandoned:
                    _kill(process)
                else:
                    request.process = process
            request.done.set()

    def __call__(self, start: Start) -> subprocess.Popen[bytes]:
        if self._problem is not None:
            # As a failed step in the child would: the command does not start.
            raise OSError(f"the sandbox's restrictions cannot be applied ({self._problem})")
        request = _Request(start)
        self._requests.put(request)
        try:
            request.done.wait()
        except BaseException:
            # Interrupted while the process starts: it must not run unwatched.
            with request.lock:
                request.abandoned = True
                process = request.process
            if process is not None:
                _kill(process)
            raise
        if request.error is not None:
            raise request.error
        assert request.process is not None
        return request.process


def _kill(process: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    process.wait()


@cache
def shared(keyrings: bool, scope: bool) -> Launcher:
    """The launcher whose thread has the seccomp filter (`keyrings`: the keyrings, inode
    flags and page cache out of reach) and the Landlock scope (`scope`) on; made at the
    first call with these settings, then reused."""
    # Each step sets no_new_privs on the thread first, as both kernel calls require.
    steps: list[Callable[[], None]] = []
    if keyrings:
        steps.append(seccomp.install)
    if scope:
        steps.append(landlock.scope_child)
    return Launcher(tuple(steps))


# A forked child of the engine has none of its threads: it makes its own launcher.
os.register_at_fork(after_in_child=shared.cache_clear)
