"""The bubblewrap sandbox, attacked from inside: each test runs a real command in a real
sandbox and asserts what it could not do."""

from __future__ import annotations

import os
import socket
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

from autoresearch.isolation import sandbox as sandbox_module
from autoresearch.isolation.process import (
    SETUP_TRIES,
    ChildRecord,
    CommandResult,
    Wrapper,
    run_command,
)
from autoresearch.isolation.sandbox import (
    Boundary,
    Bwrap,
    NoSandbox,
    allowed_env,
    bwrap_problem,
)

pytestmark = pytest.mark.skipif(bwrap_problem() is not None, reason=str(bwrap_problem()))


def run(script: str, boundary: Boundary, timeout: float = 20) -> subprocess.CompletedProcess[str]:
    sandbox = Bwrap()
    return subprocess.run(
        sandbox.command(["bash", "-c", script], boundary),
        env=sandbox.environment(boundary),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture
def box(tmp_path: Path) -> Boundary:
    work, tmp = tmp_path / "work", tmp_path / "tmp"
    work.mkdir()
    tmp.mkdir()
    return Boundary(work, tmp, env=allowed_env(os.environ))


def test_it_writes_only_its_own_folder_and_tmpdir(tmp_path: Path, box: Boundary) -> None:
    outside = tmp_path / "outside.txt"
    proc = run(f'echo a > out.txt && echo b > "$TMPDIR/t" && (echo c > {outside} || true)', box)
    assert proc.returncode == 0, proc.stderr
    assert (box.workdir / "out.txt").read_text() == "a\n"
    assert (box.tmpdir / "t").read_text() == "b\n"
    assert not outside.exists()


def test_hidden_folders_and_files_read_as_empty(tmp_path: Path, box: Boundary) -> None:
    secret_dir = tmp_path / "checkout"
    secret_dir.mkdir()
    (secret_dir / ".env").write_text("TOKEN=hunter2\n")
    secret_file = tmp_path / "netrc"
    secret_file.write_text("password hunter2\n")
    shown = secret_dir / "data"
    shown.mkdir()
    (shown / "x.csv").write_text("1,2\n")
    hidden = Boundary(
        box.workdir, box.tmpdir, hidden=(secret_dir, secret_file), readonly=(shown,), env=box.env
    )
    proc = run(
        f"cat {secret_dir}/.env {secret_file} 2>/dev/null; ls -A {secret_dir}; cat {shown}/x.csv;"
        f" echo y > {shown}/x.csv || echo read-only",
        hidden,
    )
    assert "hunter2" not in proc.stdout
    assert "1,2" in proc.stdout and "read-only" in proc.stdout
    assert (shown / "x.csv").read_text() == "1,2\n"


def test_a_daemon_dies_with_its_command(box: Boundary) -> None:
    marker = box.workdir / "alive"
    proc = run(
        f'setsid bash -c \'trap "" HUP TERM; while true; do echo x >> {marker}; sleep 0.05;'
        " done' & disown; sleep 0.3; echo started",
        box,
    )
    assert "started" in proc.stdout
    size = marker.stat().st_size
    assert size > 0  # it did run
    threading.Event().wait(0.6)
    assert marker.stat().st_size == size  # nobody is writing any more


def test_the_engine_is_invisible_in_proc(box: Boundary) -> None:
    # A process outside the sandbox whose environment holds a secret, as the engine's does.
    outside = subprocess.Popen(
        ["sleep", "30"], env={**os.environ, "AR_TEST_ENGINE_SECRET": "hunter2"}
    )
    try:
        environ = Path(f"/proc/{outside.pid}/environ")
        for _ in range(500):  # until it has started: then its environment is readable here
            if b"hunter2" in environ.read_bytes():
                break
            threading.Event().wait(0.01)
        assert b"hunter2" in environ.read_bytes()
        proc = run(f"cat /proc/{outside.pid}/environ; ls /proc | grep -c '^[0-9]'", box)
    finally:
        outside.kill()
        outside.wait()
    assert "hunter2" not in proc.stdout
    assert int(proc.stdout.split()[-1]) <= 4  # its own few processes only


def test_the_environment_is_an_allowlist(box: Boundary) -> None:
    env = {"PATH": os.environ["PATH"], "MY_API_KEY": "k", "DATABASE_URL": "pg://u:p@h"}
    allowed = Boundary(box.workdir, box.tmpdir, env=allowed_env(env, ["DATABASE_URL"]))
    proc = run("env", allowed)
    assert "MY_API_KEY" not in proc.stdout and "DATABASE_URL=pg://u:p@h" in proc.stdout
    assert f"TMPDIR={box.tmpdir}" in proc.stdout


def test_no_network_when_it_is_off(box: Boundary) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    try:
        closed = Boundary(box.workdir, box.tmpdir, network=False, env=box.env)
        script = f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected || echo refused"
        assert "refused" in run(script, closed).stdout
        assert "connected" in run(script, box).stdout
    finally:
        server.close()


def test_without_a_sandbox_the_command_is_unchanged(box: Boundary) -> None:
    assert NoSandbox().command(["true"], box) == ["true"]


def _sandboxed(box: Boundary, before: list[str] | None = None) -> tuple[Wrapper, list[int]]:
    """A wrapper as the engine makes one, counting its calls; `before` lists the sockets
    each call covers besides the host's (a path gone by the mount fails the set-up)."""
    calls: list[int] = []

    def wrap(argv: list[str], status_fd: int) -> list[str]:
        calls.append(status_fd)
        args = Bwrap().command(argv, box, status_fd)
        if before and len(calls) <= len(before):
            at = args.index("--chdir")
            args[at:at] = ["--ro-bind", os.devnull, before[len(calls) - 1]]
        return args

    return wrap, calls


def boxed(box: Boundary, command: str, wrap: Wrapper, **extra: Any) -> CommandResult:
    """`command` through the engine's runner in `box`, its logs beside the box's folders."""
    logs = box.workdir.parent
    return run_command(
        command,
        cwd=box.workdir,
        env=Bwrap().environment(box),
        timeout=20,
        stdout_path=logs / "o",
        stderr_path=logs / "e",
        wrap=wrap,
        **extra,
    )


def test_a_socket_gone_before_the_mount_does_not_fail_the_command(
    tmp_path: Path, box: Boundary
) -> None:
    # A daemon's socket listed when the command line is made, removed before bubblewrap
    # covers it: bubblewrap cannot make the mount point on a read-only root and gives up.
    path = tmp_path / "daemon.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.close()
    path.unlink()
    wrap, calls = _sandboxed(box, [str(path)])
    result = boxed(box, "echo 42", wrap)
    assert result.ok, (tmp_path / "e").read_text()
    assert result.stdout_text() == "42\n"
    assert len(calls) == 2  # made afresh once, from a new listing


def test_a_command_that_fails_by_itself_runs_once(tmp_path: Path, box: Boundary) -> None:
    wrap, calls = _sandboxed(box)
    result = boxed(box, "echo ran >> runs; echo 'bwrap: no such thing' >&2; exit 1", wrap)
    assert result.returncode == 1
    assert (box.workdir / "runs").read_text() == "ran\n"
    assert len(calls) == 1


def test_a_set_up_that_keeps_failing_is_a_failed_command_with_its_reason(
    tmp_path: Path, box: Boundary
) -> None:
    gone = str(tmp_path / "never.sock")
    wrap, calls = _sandboxed(box, [gone] * SETUP_TRIES)
    result = boxed(box, "echo ran >> runs", wrap)
    assert result.returncode == 1 and not result.timed_out
    assert not (box.workdir / "runs").exists()
    assert len(calls) == SETUP_TRIES
    assert "never.sock" in result.stderr_tail()


def test_the_probe_is_not_fooled_by_a_socket_gone_before_the_mount(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The probe decides for the whole run whether commands are sandboxed: one socket that
    # went away at the wrong moment must not switch the sandbox off (or refuse "bwrap").
    gone = tmp_path / "gone.sock"
    listings: list[int] = []
    real = sandbox_module.host_sockets

    def racing(boundary: Boundary, table: Path = sandbox_module.UNIX_SOCKETS) -> list[Path]:
        listings.append(1)
        return [*real(boundary, table), *([gone] if len(listings) == 1 else [])]

    monkeypatch.setattr(sandbox_module, "host_sockets", racing)
    assert bwrap_problem.__wrapped__("bwrap") is None
    assert len(listings) == 2

    monkeypatch.setattr(sandbox_module, "host_sockets", lambda b, t=None: [gone])
    problem = bwrap_problem.__wrapped__("bwrap")
    assert problem is not None and "gone.sock" in problem


# An engine started from the user's terminal, as `autoresearch run` is.
ENGINE_ON_A_TERMINAL = """
import os, sys
from pathlib import Path
from autoresearch.isolation.process import run_command
from autoresearch.isolation.sandbox import Boundary, Bwrap, allowed_env

work, out = Path(sys.argv[1]), Path(sys.argv[2])
box = Boundary(work / "work", work / "tmp", env=allowed_env(os.environ))
os.close(os.open("/dev/tty", os.O_RDONLY))  # this process has the terminal
result = run_command(
    "if exec 3</dev/tty; then echo has-a-terminal; else echo none; fi",
    cwd=box.workdir, env=Bwrap().environment(box), timeout=20,
    stdout_path=work / "o", stderr_path=work / "e",
    wrap=lambda argv, fd: Bwrap().command(argv, box, fd),
)
out.write_text(result.stdout_text())
"""


def test_a_command_cannot_reach_the_engines_terminal(tmp_path: Path, box: Boundary) -> None:
    # bubblewrap runs without --new-session: the engine's own new session for every command
    # is what keeps it from the terminal, where TIOCSTI would type commands for the user.
    import pty
    import sys

    out = tmp_path / "seen"
    pid, master = pty.fork()
    if pid == 0:  # the child has the pty as its controlling terminal
        os.execv(
            sys.executable, [sys.executable, "-c", ENGINE_ON_A_TERMINAL, str(tmp_path), str(out)]
        )
    while True:  # drain the terminal until the engine is done with it
        try:
            if not os.read(master, 1024):
                break
        except OSError:
            break
    _, status = os.waitpid(pid, 0)
    os.close(master)
    assert os.waitstatus_to_exitcode(status) == 0
    assert out.read_text() == "none\n"


def test_the_record_is_on_disk_before_the_sandbox_starts(tmp_path: Path, box: Boundary) -> None:
    # An engine killed the instant after the fork cannot write anything, and bubblewrap
    # binds itself to the engine only later: the child writes the record that lets the next
    # engine kill the sandbox, before exec (the engine's own write would come after exec).
    record = tmp_path / "child.pgid"

    def before_exec() -> None:
        text = record.read_text() if record.exists() else ""
        if text.split()[:1] != [str(os.getpid())]:
            os._exit(97)

    wrap, _ = _sandboxed(box)
    result = boxed(box, "true", wrap, child=ChildRecord(record), child_setup=before_exec)
    assert result.ok, result.returncode
    assert not record.exists()  # cleared when the command ended
