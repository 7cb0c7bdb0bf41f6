"""Each status path of the engine, on small real repositories."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import Runner, git, ledger, make_repo, snapshot, statuses

BASE_CONFIG = """\
name = "t"
scope = ["calc.py"]
harness = ["bench.py"]
{extra_top}
[metric]
command = "{metric}"
direction = "{direction}"
timeout = {timeout}
{extra_metric}
[stop]
max_iterations = {max_iterations}
plateau = {plateau}

[proposer]
kind = "command"
command = "bash {proposer}"
timeout = {proposer_timeout}
"""


def campaign(
    tmp_path: Path,
    script: str,
    *,
    metric: str = "python bench.py",
    bench: str = "import calc\nprint(calc.N)\n",
    direction: str = "minimize",
    timeout: float = 30,
    max_iterations: int = 3,
    plateau: int = 0,
    proposer_timeout: float = 30,
    extra_top: str = "",
    extra_metric: str = "",
    files: dict[str, str] | None = None,
) -> Path:
    proposer = tmp_path / "propose.sh"
    proposer.write_text("#!/bin/bash\n" + script)
    config = BASE_CONFIG.format(
        metric=metric,
        direction=direction,
        timeout=timeout,
        max_iterations=max_iterations,
        plateau=plateau,
        proposer=proposer,
        proposer_timeout=proposer_timeout,
        extra_top=extra_top,
        extra_metric=extra_metric,
    )
    return make_repo(
        tmp_path / "repo",
        {"calc.py": "N = 10\n", "bench.py": bench, "autoresearch.toml": config, **(files or {})},
    )


def alive(pid: int) -> bool:
    """True for a running process; a zombie waiting for its reaper is not running."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return False
        if state in ("Z", "X"):
            return False
        time.sleep(0.05)
    return True


def test_maximize_keeps_only_higher(tmp_path: Path, cli: Runner) -> None:
    repo = campaign(
        tmp_path,
        'sed -i "s/^N = .*/N = $((10 + (AUTORESEARCH_ITERATION % 2 ? 5 : -5)))/" calc.py\n',
        direction="maximize",
    )
    assert cli(repo, "run").returncode == 0
    assert statuses(repo, "t") == ["baseline", "keep", "discard", "no_change"]


def test_equal_is_not_better(tmp_path: Path, cli: Runner) -> None:
    repo = campaign(
        tmp_path, 'echo "# comment $AUTORESEARCH_ITERATION" >> calc.py\n', max_iterations=2
    )
    assert cli(repo, "run").returncode == 0
    assert statuses(repo, "t") == ["baseline", "discard", "discard"]


def test_metric_timeout_is_logged_and_rolled_back(tmp_path: Path, cli: Runner) -> None:
    repo = campaign(
        tmp_path,
        "sed -i 's/^N = .*/N = 1/' calc.py\n",
        bench="import calc, time, os\nif calc.N == 1: time.sleep(60)\nprint(calc.N)\n",
        timeout=1,
        max_iterations=1,
    )
    started = time.monotonic()
    result = cli(repo, "run")
    assert result.returncode == 0, result.stderr
    assert time.monotonic() - started < 30
    records = ledger(repo, "t")
    assert records[1]["status"] == "timeout"
    assert "timed out" in records[1]["reason"]
    assert git(repo, "show", "autoresearch/t:calc.py") == "N = 10\n"


def test_metric_without_number_or_nan_is_a_crash(tmp_path: Path, cli: Runner) -> None:
    repo = campaign(
        tmp_path,
        'sed -i "s/^N = .*/N = $AUTORESEARCH_ITERATION/" calc.py\n',
        bench="import calc\nprint({1: 'nan', 2: 'no number here'}.get(calc.N, calc.N))\n",
        max_iterations=2,
    )
    assert cli(repo, "run").returncode == 0
    records = ledger(repo, "t")
    assert [r["status"] for r in records] == ["baseline", "crash", "crash"]
    assert "not a finite number" in records[1]["reason"]
    assert "no number" in records[2]["reason"]


def test_plateau_stops_the_campaign(tmp_path: Path, cli: Runner) -> None:
    repo = campaign(tmp_path, "sed -i 's/^N = .*/N = 99/' calc.py\n", max_iterations=10, plateau=3)
    assert cli(repo, "run").returncode == 0
    assert statuses(repo, "t") == ["baseline", "discard", "discard", "discard"]
    assert json.loads(cli(repo, "status", "--json").stdout)["stop_reason"] == "plateau"


def test_max_minutes_stops_the_campaign(tmp_path: Path, cli: Runner) -> None:
    repo = campaign(tmp_path, "sleep 1; sed -i 's/^N = .*/N = 99/' calc.py\n", max_iterations=100)
    config = repo / "autoresearch.toml"
    config.write_text(config.read_text().replace("plateau = 0", "plateau = 0\nmax_minutes = 0.03"))
    git(repo, "commit", "-qam", "minutes")
    assert cli(repo, "run").returncode == 0
    # How many attempts fit in the budget depends on the machine's speed; the stop reason
    # does not.
    assert json.loads(cli(repo, "status", "--json").stdout)["stop_reason"] == "max_minutes"


def test_proposer_timeout_and_failure(tmp_path: Path, cli: Runner) -> None:
    repo = campaign(
        tmp_path,
        'if [ "$AUTORESEARCH_ITERATION" = 1 ]; then echo "N = 1" > calc.py; sleep 30; fi\n'
        'if [ "$AUTORESEARCH_ITERATION" = 2 ]; then echo broken >&2; exit 4; fi\n'
        "sed -i 's/^N = .*/N = 2/' calc.py\n",
        proposer_timeout=1,
    )
    assert cli(repo, "run").returncode == 0
    records = ledger(repo, "t")
    assert [r["status"] for r in records] == ["baseline", "timeout", "proposer_failed", "keep"]
    assert "proposer timed out" in records[1]["reason"]
    assert "code 4" in records[2]["reason"] and "broken" in records[2]["reason"]
    # The timed-out proposer's edit was rolled back, not measured.
    assert records[1]["metric"] is None


def test_proposer_that_keeps_failing_stops_the_campaign(tmp_path: Path, cli: Runner) -> None:
    repo = campaign(tmp_path, "exit 1\n", max_iterations=10)
    result = cli(repo, "run")
    assert result.returncode == 1
    assert statuses(repo, "t") == ["baseline"] + ["proposer_failed"] * 3
    assert "failed 3 times in a row" in result.stdout


def test_measurement_leftovers_never_leak(tmp_path: Path, cli: Runner) -> None:
    """Files the metric writes (tracked or not, ignored or not) are gone before the next run."""
    repo = campaign(
        tmp_path,
        'sed -i "s/^N = .*/N = $((10 - AUTORESEARCH_ITERATION))/" calc.py\n',
        metric="python bench.py",
        bench=(
            "import calc, os, pathlib\n"
            "leak = sum(os.path.exists(p) for p in ['out.log', 'cache/x', 'ckpt.bin'])\n"
            "pathlib.Path('out.log').write_text('x')\n"
            "os.makedirs('cache', exist_ok=True); pathlib.Path('cache/x').write_text('x')\n"
            "pathlib.Path('ckpt.bin').write_text('x')\n"
            "pathlib.Path('calc.py').write_text('N = -100\\n')\n"
            "print(calc.N + 1000 * leak)\n"
        ),
        files={".gitignore": "ckpt.bin\n"},
    )
    assert cli(repo, "run").returncode == 0
    records = ledger(repo, "t")
    assert [r["metric"] for r in records] == [10, 9, 8, 7]
    assert [r["status"] for r in records] == ["baseline", "keep", "keep", "keep"]
    assert all(r["files"] == ["calc.py"] for r in records[1:])


def test_ignored_files_from_the_proposer_are_not_measured(tmp_path: Path, cli: Runner) -> None:
    repo = campaign(
        tmp_path,
        "echo 'N = 0' > calc_override.py; sed -i 's/^N = .*/N = 9/' calc.py\n",
        bench="import os\ntry:\n    import calc_override as calc\nexcept ImportError:\n"
        "    import calc\nprint(calc.N)\n",
        files={".gitignore": "calc_override.py\n"},
        max_iterations=1,
    )
    assert cli(repo, "run").returncode == 0
    assert [r["metric"] for r in ledger(repo, "t")] == [10, 9]


def test_proposer_commit_and_branch_switch_are_judged_as_changes(
    tmp_path: Path, cli: Runner
) -> None:
    repo = campaign(
        tmp_path,
        'if [ "$AUTORESEARCH_ITERATION" = 1 ]; then\n'
        "  sed -i 's/^N = .*/N = 4/' calc.py; git add -A; git -c user.name=a -c user.email=a@a "
        "commit -qm sneaky; fi\n"
        'if [ "$AUTORESEARCH_ITERATION" = 2 ]; then\n'
        "  git checkout -q -b elsewhere; echo 'print(0)' > bench.py; git add -A; "
        "git -c user.name=a -c user.email=a@a commit -qm sneaky2; fi\n",
        max_iterations=2,
    )
    result = cli(repo, "run")
    assert result.returncode == 3, result.stdout + result.stderr
    records = ledger(repo, "t")
    assert [r["status"] for r in records] == ["baseline", "keep", "tampered"]
    assert "note" in records[1]
    assert "bench.py" in records[2]["reason"]
    assert json.loads(cli(repo, "status", "--json").stdout)["stop_reason"] == "tampered"
    assert git(repo, "show", "autoresearch/t:calc.py") == "N = 4\n"
    assert git(repo, "show", "autoresearch/t:bench.py") == "import calc\nprint(calc.N)\n"


def test_symlink_pointing_outside_is_a_scope_violation(tmp_path: Path, cli: Runner) -> None:
    repo = campaign(tmp_path, "rm calc.py; ln -s /etc/hostname calc.py\n", max_iterations=1)
    assert cli(repo, "run").returncode == 0
    records = ledger(repo, "t")
    assert records[1]["status"] == "scope_violation"


def test_deleting_a_file_outside_scope_is_a_violation(tmp_path: Path, cli: Runner) -> None:
    repo = campaign(tmp_path, "rm other.txt\n", max_iterations=1, files={"other.txt": "x\n"})
    assert cli(repo, "run").returncode == 0
    record = ledger(repo, "t")[1]
    assert record["status"] == "scope_violation" and record["files"] == ["other.txt"]


def test_shared_ignored_data_reaches_the_metric(tmp_path: Path, cli: Runner) -> None:
    repo = campaign(
        tmp_path,
        "sed -i 's/^N = .*/N = 3/' calc.py\n",
        bench="import calc\nprint(calc.N * int(open('data/factor.txt').read()))\n",
        extra_top='share = ["data"]\n',
        files={".gitignore": "data/\n"},
        max_iterations=1,
    )
    (repo / "data").mkdir()
    (repo / "data" / "factor.txt").write_text("2\n")
    before = snapshot(repo)
    result = cli(repo, "run")
    assert result.returncode == 0, result.stderr
    assert [r["metric"] for r in ledger(repo, "t")] == [20, 6]
    assert snapshot(repo) == before


def test_config_from_pyproject(tmp_path: Path, cli: Runner) -> None:
    proposer = tmp_path / "p.sh"
    proposer.write_text("sed -i 's/^N = .*/N = 1/' calc.py\n")
    repo = make_repo(
        tmp_path / "repo",
        {
            "calc.py": "N = 10\n",
            "pyproject.toml": '[project]\nname = "x"\n\n[tool.autoresearch]\nname = "py"\n'
            'scope = ["calc.py"]\n[tool.autoresearch.metric]\n'
            'command = "python -c \'import calc; print(calc.N)\'"\ndirection = "minimize"\n'
            f"[tool.autoresearch.stop]\nmax_iterations = 1\n[tool.autoresearch.proposer]\n"
            f'command = "bash {proposer}"\n',
        },
    )
    result = cli(repo, "run")
    assert result.returncode == 0, result.stderr
    assert statuses(repo, "py") == ["baseline", "keep"]


def test_baseline_failure_is_one_clear_message(tmp_path: Path, cli: Runner) -> None:
    repo = campaign(tmp_path, "true\n", bench="raise SystemExit('boom')\n")
    result = cli(repo, "run")
    assert result.returncode == 1
    assert "baseline measurement failed" in result.stdout
    assert "Traceback" not in result.stderr


def test_second_engine_is_refused_naming_the_first(tmp_path: Path, cli: Runner) -> None:
    repo = campaign(tmp_path, "sleep 30\n", max_iterations=1, proposer_timeout=60)
    first = subprocess.Popen(
        [sys.executable, "-m", "autoresearch", "run"],
        cwd=repo,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            state = repo / ".autoresearch/t/state.json"
            if state.exists() and json.loads(state.read_text()).get("phase") == "proposing":
                break
            time.sleep(0.1)
        second = cli(repo, "run")
        assert second.returncode == 1
        assert f"process {first.pid}" in second.stderr
        status = json.loads(cli(repo, "status", "--json").stdout)
        assert status["running"] is True and status["pid"] == first.pid
        assert status["phase"] == "proposing"
    finally:
        first.send_signal(signal.SIGINT)
        first.wait(timeout=30)


@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_interrupt_rolls_back_and_logs(tmp_path: Path, cli: Runner, sig: int, code: int) -> None:
    marker = tmp_path / "child.pid"
    repo = campaign(
        tmp_path,
        'if [ "$AUTORESEARCH_ITERATION" = 2 ]; then echo "N = 1" > calc.py; '
        f"sleep 60 & echo $! > {marker}; wait; fi\n"
        "sed -i 's/^N = .*/N = 5/' calc.py\n",
        max_iterations=5,
        proposer_timeout=120,
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
    # No orphan left from the proposer's process group.
    assert not alive(int(marker.read_text()))
    worktree = repo / ".autoresearch/t/worktree"
    assert git(worktree, "status", "--porcelain") == ""
    assert (worktree / "calc.py").read_text() == "N = 5\n"
    # Resuming continues after the interrupted attempt.
    marker.unlink()
    assert cli(repo, "run").returncode == 0
    assert [r["iteration"] for r in ledger(repo, "t")] == [0, 1, 2, 3, 4, 5]
