"""Sandboxed commands start without Python between fork and exec: the restrictions ride on
the launcher's thread, the record and the limits on a shell before bubblewrap. Each test
attacks what that must still hold: the record on disk before the sandbox starts, a
sandbox whose engine died at the start killed by the next engine, the keyrings and the
host's abstract sockets out of the command's reach while the engine's own threads keep
theirs, and nothing left running when the start is interrupted."""

from __future__ import annotations

import ctypes
import mmap
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from autoresearch.isolation import landlock, launcher, seccomp
from autoresearch.isolation.process import ChildRecord, CommandResult, Limits, run_command
from autoresearch.isolation.sandbox import Boundary, Bwrap, allowed_env, bwrap_problem
from syscalls32 import ABI_32

pytestmark = pytest.mark.skipif(bwrap_problem() is not None, reason=str(bwrap_problem()))

KEYRINGS = seccomp.problem() is None
SCOPE = (
    landlock.scoping_problem(tuple(Bwrap().command(["true"], Boundary(Path("/"), Path("/tmp")))))
    is None
)


def marked(token: str) -> list[int]:
    """The processes whose command line carries `token`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if token.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


@pytest.fixture
def token() -> Iterator[str]:
    mark = f"ar-launch-{uuid.uuid4().hex[:12]}"
    yield mark
    for pid in marked(mark):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def past_the_prelude(token: str) -> bool:
    """Whether the shell that writes the record (`PRELUDE`) has handed over to bubblewrap:
    the shell carries `token` in its command line too, before the record is written."""
    for pid in marked(token):
        try:
            argv0 = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
        except OSError:
            continue
        if os.path.basename(argv0) in (b"bwrap", token.encode()):
            return True
    return False


def gone(token: str, seconds: float = 10) -> bool:
    deadline = time.monotonic() + seconds
    while marked(token):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.fixture
def box(tmp_path: Path) -> Boundary:
    work, tmp = tmp_path / "work", tmp_path / "tmp"
    work.mkdir()
    tmp.mkdir()
    return Boundary(work, tmp, env=allowed_env(os.environ))


def sandboxed(
    command: str, tmp_path: Path, box: Boundary, sandbox: Bwrap, record: Path
) -> CommandResult:
    """`command` started through the shared launcher in `sandbox`, its record at `record`."""
    return run_command(
        command,
        cwd=box.workdir,
        env=sandbox.environment(box),
        timeout=20,
        stdout_path=tmp_path / "o",
        stderr_path=tmp_path / "e",
        child=ChildRecord(record),
        wrap=lambda argv, fd: sandbox.command(argv, box, fd),
        launch=launcher.shared(KEYRINGS, SCOPE),
    )


def test_the_record_is_on_disk_before_bubblewrap_starts(tmp_path: Path, box: Boundary) -> None:
    # The sandbox program itself checks, as it starts, that the record names it (its pid
    # and start time): an engine killed the moment after the start leaves it behind.
    record = tmp_path / "child.pgid"
    checking = tmp_path / "bwrap"
    checking.write_text(
        textwrap.dedent(
            f"""\
            #!/bin/sh
            read -r pid start < {record} || exit 97
            [ "$pid" = "$$" ] || exit 98
            [ "$start" = "$(cut -d' ' -f22 /proc/$$/stat)" ] || exit 99
            exec bwrap "$@"
            """
        )
    )
    checking.chmod(0o755)
    sandbox = Bwrap(str(checking))
    result = sandboxed("echo inside", tmp_path, box, sandbox, record)
    assert result.ok, (result.returncode, (tmp_path / "e").read_text())
    assert result.stdout_text() == "inside\n"
    assert not record.exists()  # cleared when the command ended


def test_a_link_planted_at_the_record_is_not_written_through(tmp_path: Path, box: Boundary) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    record = tmp_path / "child.pgid"
    record.symlink_to(victim)
    sandbox = Bwrap()
    result = sandboxed("true", tmp_path, box, sandbox, record)
    assert result.ok
    assert victim.read_text() == "precious\n"


# An engine that dies (SIGKILL) the instant its sandboxed command has started, before it
# notes anything of it. Its command goes on only once the engine is dead, as on a loaded
# machine: bubblewrap then starts with no parent to die with, and lives on.
DYING_ENGINE = """
import os, signal, sys
from pathlib import Path
from autoresearch.isolation import launcher, process
from autoresearch.isolation.process import ChildRecord, run_command
from autoresearch.isolation.sandbox import Boundary, Bwrap, allowed_env

engine = os.getpid()  # not $PPID: the shell may read it once the engine is gone
process.PRELUDE = f"while [ -d /proc/{engine} ]; do sleep 0.01; done\\n" + process.PRELUDE

work, token = Path(sys.argv[1]), sys.argv[2]
box = Boundary(work / "work", work / "tmp", env=allowed_env(os.environ))
ChildRecord.hold = lambda self, pgid: os.kill(os.getpid(), signal.SIGKILL)
sandbox = Bwrap()
run_command(
    f"exec -a {token} sleep 300", cwd=box.workdir, env=sandbox.environment(box), timeout=60,
    stdout_path=work / "o", stderr_path=work / "e", child=ChildRecord(work / "child.pgid"),
    wrap=lambda argv, fd: sandbox.command(argv, box, fd),
    launch=launcher.shared(sys.argv[3] == "1", sys.argv[4] == "1"),
)
"""


def test_a_sandbox_whose_engine_died_at_its_start_is_killed_by_the_next(
    tmp_path: Path, box: Boundary, token: str
) -> None:
    flags = ["1" if KEYRINGS else "0", "1" if SCOPE else "0"]
    engine = subprocess.run(
        [sys.executable, "-c", DYING_ENGINE, str(tmp_path), token, *flags],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        capture_output=True,
        timeout=60,
    )
    assert engine.returncode == -signal.SIGKILL, engine.stderr.decode()
    deadline = time.monotonic() + 60
    while not past_the_prelude(token):  # the sandbox outlived its engine ...
        assert time.monotonic() < deadline, f"still in the prelude: {marked(token)}"
        time.sleep(0.05)
    record = ChildRecord(tmp_path / "child.pgid")
    assert record.kill_leftover() is not None  # ... and the next engine finds it written down
    assert gone(token)


KEYRING_PROBE = (
    "import ctypes, sys\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "r = libc.syscall({'x86_64': 250, 'aarch64': 219}[sys.argv[1]], 0, -4, 0)\n"
    "print('refused' if r == -1 and ctypes.get_errno() == 1 else 'reached')\n"
)
SOCKET_PROBE = (
    "import socket, sys\n"
    "s = socket.socket(socket.AF_UNIX)\n"
    "try:\n"
    "    s.connect('\\0' + sys.argv[1]); print('reached')\n"
    "except PermissionError:\n"
    "    print('refused')\n"
)


def started(launch: launcher.Launcher | None, argv: list[str]) -> str:
    def start() -> subprocess.Popen[bytes]:
        return subprocess.Popen(argv, stdout=subprocess.PIPE, start_new_session=True)

    proc = start() if launch is None else launch(start)
    out, _ = proc.communicate(timeout=30)
    return out.decode().strip()


@pytest.mark.skipif(not KEYRINGS, reason="no keyring filter here")
def test_the_keyrings_are_out_of_reach_of_what_the_launcher_starts_only() -> None:
    import platform

    argv = [sys.executable, "-c", KEYRING_PROBE, platform.machine()]
    assert started(launcher.shared(True, SCOPE), argv) == "refused"
    # The engine's own threads keep their credentials: what they start is not filtered.
    assert started(None, argv) == "reached"


@pytest.mark.skipif(not SCOPE, reason="no Landlock scope here")
def test_the_hosts_abstract_sockets_are_out_of_reach_of_what_the_launcher_starts() -> None:
    name = f"ar-launch-{uuid.uuid4().hex[:12]}"
    server = socket.socket(socket.AF_UNIX)
    server.bind("\0" + name)
    server.listen(4)
    try:
        argv = [sys.executable, "-c", SOCKET_PROBE, name]
        assert started(launcher.shared(KEYRINGS, True), argv) == "refused"
        assert started(None, argv) == "reached"
    finally:
        server.close()


def test_a_start_interrupted_leaves_nothing_running(token: str) -> None:
    launch = launcher.Launcher(())

    def slow_start() -> subprocess.Popen[bytes]:
        time.sleep(0.3)  # the interrupt comes while the process is being started
        return subprocess.Popen(
            ["bash", "-c", f"exec -a {token} sleep 300"], start_new_session=True
        )

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.1)
        with pytest.raises(KeyboardInterrupt):
            launch(slow_start)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    time.sleep(0.5)  # the start finishes on the launcher's thread meanwhile
    assert gone(token)


def test_the_limits_hold_without_python_before_exec(tmp_path: Path) -> None:
    result = run_command(
        "grep -E '^Max (cpu time|address space)' /proc/self/limits",
        cwd=tmp_path,
        env=dict(os.environ),
        timeout=20,
        stdout_path=tmp_path / "o",
        stderr_path=tmp_path / "e",
        limits=Limits(memory_mb=300, cpu_seconds=4),
    )
    rows = [line.split() for line in result.stdout_text().splitlines()]
    assert [r[-3:-1] for r in rows] == [["4", "9"], [str(300 << 20)] * 2]


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one CPU: nothing to pin apart")
def test_a_command_keeps_the_cores_its_callers_thread_is_pinned_to() -> None:
    # A slot's thread is pinned to its cores (`cpus_per_job`), and its commands must be too,
    # though the launcher's thread forks them.
    launch = launcher.shared(KEYRINGS, SCOPE)
    seen: dict[int, str] = {}

    def pinned(core: int) -> None:
        os.sched_setaffinity(0, {core})
        argv = ["python3", "-c", "import os; print(sorted(os.sched_getaffinity(0)))"]
        seen[core] = started(launch, argv)

    for core in sorted(os.sched_getaffinity(0))[:2]:
        thread = threading.Thread(target=pinned, args=(core,))
        thread.start()
        thread.join()
    assert seen == {core: f"[{core}]" for core in seen} and len(seen) == 2
    assert started(
        launch, ["python3", "-c", "import os; print(len(os.sched_getaffinity(0)))"]
    ) == str(len(os.sched_getaffinity(0)))


# Push a file out of the page cache, as a candidate could at the end of its run so that the
# run after it (the incumbent's) reads the file from the disk: by fadvise, or by mapping
# it and asking the kernel to page the mapping out.
EVICT_PROBE = """
import ctypes, mmap, os, sys
fd = os.open(sys.argv[2], os.O_RDONLY)
PAGEOUT = 21
try:
    if sys.argv[1] == "fadvise":
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    else:
        mm = mmap.mmap(fd, 0, flags=mmap.MAP_PRIVATE)
        sum(mm[i] for i in range(0, len(mm), mmap.PAGESIZE))  # mapped, as PAGEOUT needs
        if sys.argv[1] == "madvise":
            mm.madvise(PAGEOUT)
        else:  # process_madvise on its own memory, by pidfd
            class iovec(ctypes.Structure):  # process_madvise is the same number everywhere
                _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
            libc = ctypes.CDLL(None, use_errno=True)
            libc.syscall.restype = ctypes.c_long
            anchor = ctypes.c_char.from_buffer(mm)
            iov = iovec(ctypes.addressof(anchor), len(mm))
            pidfd = os.pidfd_open(os.getpid())
            if libc.syscall(ctypes.c_long(440), ctypes.c_int(pidfd), ctypes.byref(iov),
                            ctypes.c_size_t(1), ctypes.c_int(PAGEOUT), ctypes.c_uint(0)) < 0:
                raise OSError(ctypes.get_errno(), "process_madvise")
    print("done")
except PermissionError:  # EPERM: the filter's answer
    print("refused")
"""


def resident(path: Path) -> float:
    """The share of `path`'s pages in the page cache (mincore on a private mapping of it,
    none of whose pages it touches)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    size = path.stat().st_size
    pages = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE
    vec = (ctypes.c_ubyte * pages)()
    with path.open("rb") as f:
        mm = mmap.mmap(f.fileno(), 0, flags=mmap.MAP_PRIVATE)
        try:
            anchor = ctypes.c_char.from_buffer(mm)
            failed = libc.mincore(ctypes.addressof(anchor), size, vec)
            del anchor
        finally:
            mm.close()
    if failed:
        raise OSError(ctypes.get_errno(), "mincore")
    return sum(v & 1 for v in vec) / pages


@pytest.fixture
def cached(tmp_path: Path) -> Path:
    """A file of 4 MiB wholly in the page cache, its pages clean (written back), as an
    installed library's are: what a run could push out."""
    path = tmp_path / "library.bin"
    with path.open("wb") as f:
        f.write(os.urandom(4 << 20))
        f.flush()
        os.fsync(f.fileno())
    path.read_bytes()
    assert resident(path) > 0.99
    return path


def assert_kept_in_the_cache(cached: Path, argv: list[str], refused: str) -> None:
    """`argv` asks the kernel to push `cached` out of the page cache: under the launcher's
    filter it is refused (prints `refused`) and the file stays; unfiltered (the engine's
    own children) it goes, so the attack is real here."""
    assert started(launcher.shared(True, SCOPE), argv) == refused
    assert resident(cached) > 0.99
    assert started(None, argv) == "done"
    assert resident(cached) < 0.9


@pytest.mark.skipif(not KEYRINGS, reason="no seccomp filter here")
@pytest.mark.parametrize("how", ["fadvise", "madvise", "process_madvise"])
def test_what_the_launcher_starts_cannot_push_a_file_out_of_the_page_cache(
    cached: Path, how: str
) -> None:
    """The promise: a file every run reads stays in the page cache whatever a run asks of
    the kernel, so no run can make the next one read it from the disk."""
    assert_kept_in_the_cache(
        cached, [sys.executable, "-c", EVICT_PROBE, how, str(cached)], "refused"
    )


# fadvise64 through the i386 ABI of x86-64 (its advice is the fifth argument there;
# fadvise64_64's sixth is past what the helper passes, and the program's own test covers
# it), and x32's. Prints "done" when the i386 call went through, else its result and
# x32's errno.
EVICT_PROBE_32 = """
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
native = i386(250, fd, 0, 0, 0, 4)
x = 0 if x32(221, fd, 0, 0, 4) == 0 else ctypes.get_errno()
print("done" if native == 0 else f"{native} {x}")
"""


@pytest.mark.skipif(not KEYRINGS, reason="no seccomp filter here")
@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the i386 and x32 ABIs of x86-64")
def test_what_the_launcher_starts_cannot_push_a_file_out_of_the_page_cache_as_i386(
    cached: Path,
) -> None:
    argv = [sys.executable, "-c", ABI_32 + EVICT_PROBE_32, str(cached)]
    # Both refused with EPERM: the filter answers before the kernel looks for the call, so
    # x32's is refused even where the kernel leaves that ABI out.
    assert_kept_in_the_cache(cached, argv, "-1 1")
