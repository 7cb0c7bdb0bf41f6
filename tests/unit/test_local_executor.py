"""The local executor's lifecycle: the process-group record, leftovers, the network check."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from autoresearch.errors import ConfigError
from autoresearch.executors import CommandSpec, ExecutorSetup, LocalExecutor
from autoresearch.isolation.process import ChildRecord
from autoresearch.testing.executor_suite import _alive

ENV = {"PATH": "/usr/bin:/bin"}


def _leftover(record: Path) -> subprocess.Popen[bytes]:
    """A process group such as a SIGKILLed engine leaves behind, written down in `record`."""
    proc = subprocess.Popen(["sleep", "300"], start_new_session=True)
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(str(proc.pid))
    return proc


def test_start_kills_the_group_a_killed_engine_left(tmp_path: Path) -> None:
    proc = _leftover(tmp_path / "state" / "child.pgid")
    warnings = LocalExecutor().start(ExecutorSetup(state_dir=tmp_path / "state"))
    assert warnings == [
        f"killed process group {proc.pid} left by an engine that was stopped abruptly"
    ]
    proc.wait(timeout=5)
    assert not (tmp_path / "state" / "child.pgid").exists()


def test_the_running_command_is_written_down_and_cleared(tmp_path: Path) -> None:
    record = tmp_path / "child.pgid"
    executor = LocalExecutor(ChildRecord(record))
    seen = tmp_path / "seen"
    result = executor.run(
        # The record is written just after the command starts: wait for it.
        CommandSpec(
            f'while [ ! -s {record} ]; do sleep 0.01; done; echo "$(cat {record}) $$" > {seen}; '
            "echo 1",
            10,
        ),
        workspace=tmp_path,
        env=ENV,
        log_stem=tmp_path / "logs" / "m",
    )
    assert result.ok
    written, *_, own = seen.read_text().split()  # the group, the leader's start time, $$
    assert written == own, "the record names the command's process group"
    assert not record.exists()


def test_network_off_is_refused_where_unshare_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    setup = ExecutorSetup(state_dir=tmp_path / "state", network=False, source="a.toml")
    with pytest.raises(ConfigError) as info:
        LocalExecutor().start(setup)
    assert str(info.value) == (
        "a.toml: key 'sandbox.network': false needs network namespaces, which this system "
        "refuses (the unshare command is not installed (util-linux)); set it to true or run "
        "where `unshare --net` works."
    )


def test_a_leftover_is_gone_even_when_it_ignores_sigterm(tmp_path: Path) -> None:
    proc = subprocess.Popen(["bash", "-c", "trap '' TERM; sleep 300"], start_new_session=True)
    (tmp_path / "child.pgid").write_text(str(proc.pid))
    time.sleep(0.1)
    assert ChildRecord(tmp_path / "child.pgid").kill_leftover() == proc.pid
    proc.wait(timeout=5)
    assert not _alive(proc.pid)
