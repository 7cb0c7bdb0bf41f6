"""Running commands: timeouts kill the whole group, output is bounded, numbers are read right."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autoresearch.process import run_command
from autoresearch.readout import MetricParseError, extract_number


def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    started = time.monotonic()
    result = run_command(
        f"sleep 100 & echo $! >> {pids}; (sleep 100 & echo $! >> {pids}; wait) & wait",
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin"},
        timeout=0.5,
        stdout_path=tmp_path / "o",
        stderr_path=tmp_path / "e",
    )
    assert result.timed_out and result.returncode is None
    assert time.monotonic() - started < 10
    for pid in pids.read_text().split():
        stat = Path(f"/proc/{pid}/stat")
        assert not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] in "ZX"


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
    time.sleep(0.2)
    stat = Path(f"/proc/{pid_file.read_text().strip()}/stat")
    assert not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] in "ZX"


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


@pytest.mark.parametrize(
    "text,pattern,value",
    [
        ("loss 0.5\nloss 0.25\n", None, 0.25),
        ("val: 1e-3", None, 1e-3),
        ("score: -4\n", r"score: ([-+0-9.eE]+)", -4),
        ("score: 3\nscore: 2\nother 9\n", r"score: ([-+0-9.eE]+)", 2),
        ("epoch 10 acc=0.91", r"acc=([0-9.]+)", 0.91),
        ("x 7.", None, 7),
        ("v1 result 12", None, 12),
    ],
)
def test_extract_number(text: str, pattern: str | None, value: float) -> None:
    assert extract_number(text, pattern) == pytest.approx(value)


@pytest.mark.parametrize(
    "text,pattern,message",
    [
        ("", None, "no number"),
        ("nothing here", None, "no number"),
        ("loss nan", None, "not a finite number"),
        ("loss inf", None, "not a finite number"),
        ("score: x", r"score: (\S+)", "not a number"),
        ("other 1", r"score: (\d+)", "no line matched"),
    ],
)
def test_extract_number_failures(text: str, pattern: str | None, message: str) -> None:
    with pytest.raises(MetricParseError, match=message):
        extract_number(text, pattern)


@given(st.floats(allow_nan=False, allow_infinity=False, width=64))
def test_extract_number_round_trips_any_float(value: float) -> None:
    assert extract_number(f"metric: {value!r}\n", None) == value
