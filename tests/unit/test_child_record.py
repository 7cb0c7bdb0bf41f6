"""The process group a killed engine left behind is killed only while it is still the same
group: a process that reuses the number (pid or pgid) must survive the next start."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from autoresearch.config import load_campaign
from autoresearch.engine import Engine
from autoresearch.events import Event, Warned
from autoresearch.executors import ExecutorSetup, LocalExecutor
from autoresearch.isolation.process import ChildRecord
from autoresearch.testing.executor_suite import _alive
from campaigns import campaign_toml
from conftest import make_repo
from unit.memory import ScriptedProposer, set_n


def start_ticks(pid: int) -> int:
    raw = Path(f"/proc/{pid}/stat").read_bytes()
    return int(raw[raw.rfind(b")") + 2 :].split()[19])


@pytest.fixture
def stranger() -> Iterator[subprocess.Popen[bytes]]:
    """An unrelated process leading its own group, as any shell job does."""
    proc = subprocess.Popen(["sleep", "300"], start_new_session=True)
    time.sleep(0.05)
    yield proc
    proc.kill()
    proc.wait()


def test_a_reused_number_survives_the_engine_start(
    tmp_path: Path, stranger: subprocess.Popen[bytes]
) -> None:
    repo = make_repo(
        tmp_path / "repo",
        {
            "calc.py": "N = 10\n",
            "bench.py": "import calc\nprint(f'score: {calc.N}')\n",
            "autoresearch.toml": campaign_toml(**{"metric.target": None, "guard": None}),
        },
    )
    state = repo / ".autoresearch" / "toy"
    state.mkdir(parents=True)
    (repo / ".autoresearch" / ".gitignore").write_text("*\n")
    # What a killed engine wrote for its command, whose number the stranger now holds.
    (state / "child.pgid").write_text(f"{stranger.pid} {start_ticks(stranger.pid) - 100}\n")
    events: list[Event] = []
    engine = Engine(
        load_campaign(repo),
        proposer=ScriptedProposer(set_n("7")),  # type: ignore[arg-type]
        executor=LocalExecutor(),
        on_event=events.append,
        max_iterations=1,
    )
    engine.run()
    assert stranger.poll() is None and _alive(stranger.pid), "an unrelated process was killed"
    assert not any(isinstance(e, Warned) and "killed process group" in e.message for e in events)
    assert not (state / "child.pgid").exists()


def test_the_group_that_was_written_down_is_killed(tmp_path: Path) -> None:
    proc = subprocess.Popen(["sleep", "300"], start_new_session=True)
    ChildRecord(tmp_path / "child.pgid").write(proc.pid)
    warnings = LocalExecutor().start(ExecutorSetup(state_dir=tmp_path))
    assert warnings == [
        f"killed process group {proc.pid} left by an engine that was stopped abruptly"
    ]
    proc.wait(timeout=5)


def test_a_process_that_leads_no_group_is_left_alone(tmp_path: Path) -> None:
    proc = subprocess.Popen(["sleep", "300"])  # in the test's own group
    try:
        (tmp_path / "child.pgid").write_text(f"{proc.pid} {start_ticks(proc.pid)}\n")
        assert ChildRecord(tmp_path / "child.pgid").kill_leftover() is None
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("written_offset", [-30.0, +60.0])
def test_a_record_of_0_1_0_must_fit_the_leaders_start(
    tmp_path: Path, stranger: subprocess.Popen[bytes], written_offset: float
) -> None:
    """0.1.0 wrote the bare number right after starting the command: a leader that started
    well after the record (a reused number) or long before it is not the command."""
    record = tmp_path / "child.pgid"
    record.write_text(str(stranger.pid))
    when = time.time() + written_offset
    os.utime(record, (when, when))
    assert ChildRecord(record).kill_leftover() is None
    assert stranger.poll() is None
    assert not record.exists()


def test_garbage_in_the_record_kills_nothing(
    tmp_path: Path, stranger: subprocess.Popen[bytes]
) -> None:
    for text in ("", "x", "-1", "1 2", f"{stranger.pid} abc", "\xff\xfe"):
        (tmp_path / "child.pgid").write_text(text)
        assert ChildRecord(tmp_path / "child.pgid").kill_leftover() is None
    assert stranger.poll() is None


def test_a_record_being_written_is_left_for_its_writer(
    tmp_path: Path, stranger: subprocess.Popen[bytes]
) -> None:
    """A reader that comes while the record is empty (opened, not yet written) must not
    delete it: the writer's group would then be out of everyone's reach."""
    record = tmp_path / "child.pgid"
    record.write_text("")
    assert ChildRecord(record).kill_leftover() is None
    assert record.exists()
    ChildRecord(record).write(stranger.pid)
    assert record.read_text().split()[0] == str(stranger.pid)
    assert not record.with_name("child.pgid.new").exists()


def test_a_canceller_kills_the_running_command_whatever_the_file_says(tmp_path: Path) -> None:
    """Cancelling from another thread reaches the group running now even when the record
    on disk is empty or gone, as it is for a moment while a command starts."""
    import threading

    from autoresearch.isolation.process import run_command

    child = ChildRecord(tmp_path / "child.pgid")
    marker = tmp_path / "pid"
    results: list[float] = []

    def measure() -> None:
        result = run_command(
            f"echo $$ > {marker}; sleep 60 & sleep 60",
            cwd=tmp_path,
            env=dict(os.environ),
            timeout=120,
            stdout_path=tmp_path / "out",
            stderr_path=tmp_path / "err",
            child=child,
        )
        results.append(result.seconds)

    worker = threading.Thread(target=measure)
    worker.start()
    deadline = time.monotonic() + 60
    # The command runs once its shell has written the marker and the engine has taken its
    # group (the shell may write first on a loaded machine).
    while not marker.exists() or not marker.read_text().strip() or child.running is None:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    shell = int(marker.read_text())
    (tmp_path / "child.pgid").write_text("")  # as if caught mid-write
    assert child.kill_running() is not None
    worker.join(timeout=10)
    assert not worker.is_alive() and results and results[0] < 10
    assert not _alive(shell)
    assert child.kill_running() is None  # nothing runs any more


def test_a_group_whose_leader_died_is_killed_whole(tmp_path: Path) -> None:
    # bubblewrap's monitor dies with the engine, but the sandbox's init, started a moment
    # before it could bind itself to the engine, lives on in the same group.
    pid_file = tmp_path / "member"
    leader = subprocess.Popen(
        ["bash", "-c", f"sleep 300 & echo $! > {pid_file}; exit"], start_new_session=True
    )
    record = ChildRecord(tmp_path / "child.pgid")
    record.write(leader.pid)
    leader.wait()  # the leader is gone (reaped), its child is not
    member = int(pid_file.read_text())
    assert Path(f"/proc/{member}").exists()
    assert record.kill_leftover() == leader.pid
    assert not _alive(member)


def test_a_group_that_ended_is_not_signalled_again(tmp_path: Path) -> None:
    leader = subprocess.Popen(["true"], start_new_session=True)
    record = ChildRecord(tmp_path / "child.pgid")
    record.write(leader.pid)
    leader.wait()
    assert record.kill_leftover() is None
