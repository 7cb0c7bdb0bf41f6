"""Running commands: timeouts kill the whole group, output is bounded."""

from __future__ import annotations

from pathlib import Path

from autoresearch.isolation.process import run_command
from autoresearch.measure.readout import extract_number
from conftest import alive


def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    result = run_command(
        f"sleep 100 & echo $! >> {pids}; (sleep 100 & echo $! >> {pids}; wait) & wait",
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin"},
        timeout=3,  # room for both pids to be written on a busy machine
        stdout_path=tmp_path / "o",
        stderr_path=tmp_path / "e",
    )
    assert result.timed_out and result.returncode is None
    assert len(pids.read_text().split()) == 2
    # A process killed a moment ago may still be on its way out (state R): alive() gives
    # it that moment, and no more.
    assert not any(alive(int(pid)) for pid in pids.read_text().split())


def test_background_children_do_not_survive_a_normal_exit(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    result = run_command(
        f"sleep 100 >/dev/null 2>&1 & echo $! > {pid_file}; echo 1.5",
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin"},
        timeout=10,
        stdout_path=tmp_path / "o",
        stderr_path=tmp_path / "e",
    )
    assert result.ok
    assert not alive(int(pid_file.read_text().strip()))


def test_huge_output_is_capped_head_and_tail(tmp_path: Path) -> None:
    result = run_command(
        "echo first; head -c 20000000 /dev/zero | tr '\\0' 'x'; echo; echo 'last 42'",
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin"},
        timeout=60,
        stdout_path=tmp_path / "o",
        stderr_path=tmp_path / "e",
        log_cap=1 << 20,
    )
    assert result.ok
    size = (tmp_path / "o").stat().st_size
    assert size < (1 << 20) + 200
    text = result.stdout_text()
    assert text.startswith("first\n") and text.rstrip().endswith("last 42")
    assert "bytes omitted" in text
    assert extract_number(text, None) == 42
