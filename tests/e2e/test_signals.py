"""Ctrl-C, SIGTERM and SIGKILL sent to a real engine process, and the resume after them."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from campaigns import campaign_toml, script_campaign
from conftest import Runner, git, ledger, make_repo, marked


@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_interrupt_rolls_back_and_logs(tmp_path: Path, cli: Runner, sig: int, code: int) -> None:
    out = tmp_path / "out"
    out.mkdir()
    marker, token = out / "started", f"ar-interrupted-{uuid.uuid4().hex}"
    repo = script_campaign(
        tmp_path,
        'if [ "$AUTORESEARCH_ITERATION" = 2 ]; then echo "N = 1" > calc.py; '
        f"bash -c 'exec -a {token} sleep 60' & touch {marker}; wait; fi\n"
        "sed -i 's/^N = .*/N = 5/' calc.py\n",
        **{
            "stop.max_iterations": 5,
            "proposer.timeout": 120,
            "proposer.writable": [str(out)],
        },
    )
    engine = subprocess.Popen(
        [sys.executable, "-m", "autoresearch", "run"],
        cwd=repo,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.3)
    engine.send_signal(sig)
    out, err = engine.communicate(timeout=60)
    assert engine.returncode == code, out + err
    assert "Traceback" not in err
    records = ledger(repo, "t")
    assert [r["status"] for r in records] == ["baseline", "keep", "interrupted"]
    status = json.loads(cli(repo, "status", "--json").stdout)
    assert status["stop_reason"] == "interrupted" and status["running"] is False
    # No process left from the proposer.
    assert not marked(token)
    worktree = repo / ".autoresearch/t/worktree"
    assert git(worktree, "status", "--porcelain") == ""
    assert (worktree / "calc.py").read_text() == "N = 5\n"
    # Resuming continues after the interrupted attempt.
    marker.unlink()
    assert cli(repo, "run").returncode == 0
    assert [r["iteration"] for r in ledger(repo, "t")] == [0, 1, 2, 3, 4, 5]


@pytest.mark.parametrize("phase", ["proposing", "measuring"])
def test_sigkill_mid_attempt_is_recovered(tmp_path: Path, cli: Runner, phase: str) -> None:
    marker = tmp_path / "marker"
    pid_file = tmp_path / "child.pid"
    proposer = tmp_path / "p.sh"
    hang = f"if [ ! -e {marker} ]; then echo $$ > {pid_file}; touch {marker}; sleep 60; fi"
    proposer.write_text(
        'sed -i "s/^N = .*/N = $((10 - AUTORESEARCH_ITERATION))/" calc.py\n'
        + (
            f'if [ "$AUTORESEARCH_ITERATION" = 2 ]; then {hang}; fi\n'
            if phase == "proposing"
            else ""
        )
    )
    bench = "import calc\n"
    if phase == "measuring":
        bench += (
            "import os, time, pathlib\n"
            f"m = pathlib.Path({str(marker)!r})\n"
            "if calc.N == 8 and not m.exists():\n"
            f"    pathlib.Path({str(pid_file)!r}).write_text(str(os.getpid()))\n"
            "    m.touch(); time.sleep(60)\n"
        )
    bench += "print(calc.N)\n"
    repo = make_repo(
        tmp_path / "repo",
        {
            "calc.py": "N = 10\n",
            "bench.py": bench,
            "autoresearch.toml": campaign_toml(
                name="k",
                goal=None,
                guard=None,
                **{
                    "metric.pattern": None,
                    "metric.target": None,
                    "stop.max_iterations": 3,
                    "proposer.command": f"bash {proposer}",
                    # The recorded process group is what a killed engine leaves to clean
                    # up without a sandbox (bubblewrap's dies with the engine by itself).
                    "sandbox.isolation": "none",
                },
            ),
        },
    )
    engine = subprocess.Popen(
        [sys.executable, "-m", "autoresearch", "run"],
        cwd=repo,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while not (marker.exists() and pid_file.exists() and pid_file.read_text().strip()):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    engine.send_signal(signal.SIGKILL)
    engine.wait()
    orphan = int(pid_file.read_text())
    assert Path(f"/proc/{orphan}").exists(), "the command outlives a SIGKILLed engine"
    result = cli(repo, "run")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "killed process group" in result.stdout
    stat = Path(f"/proc/{orphan}/stat")
    assert not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] in "ZX"
    records = ledger(repo, "k")
    assert [r["iteration"] for r in records] == [0, 1, 2, 3]
    assert [r["status"] for r in records] == ["baseline", "keep", "interrupted", "keep"]
    assert cli(repo, "verify").returncode == 0
    worktree = repo / ".autoresearch/k/worktree"
    assert git(worktree, "status", "--porcelain", "--ignored") == ""
