"""Each status path of the engine, on small real repositories with real commands.

The campaigns run in-process (through the click runner, or the Engine with an injected
clock); the proposer, metric and guard are real processes."""

from __future__ import annotations

import json
import time
from pathlib import Path

from autoresearch.config import load_campaign
from autoresearch.engine import Engine
from campaigns import script_campaign
from conftest import Runner, git, ledger, snapshot, statuses


def test_maximize_keeps_only_higher(tmp_path: Path, invoke: Runner) -> None:
    repo = script_campaign(
        tmp_path,
        'sed -i "s/^N = .*/N = $((10 + (AUTORESEARCH_ITERATION % 2 ? 5 : -5)))/" calc.py\n',
        **{"metric.direction": "maximize"},
    )
    assert invoke(repo, "run").returncode == 0
    assert statuses(repo, "t") == ["baseline", "keep", "discard", "no_change"]


def test_equal_is_not_better(tmp_path: Path, invoke: Runner) -> None:
    repo = script_campaign(
        tmp_path,
        'echo "# comment $AUTORESEARCH_ITERATION" >> calc.py\n',
        **{"stop.max_iterations": 2},
    )
    assert invoke(repo, "run").returncode == 0
    assert statuses(repo, "t") == ["baseline", "discard", "discard"]


def test_metric_timeout_is_logged_and_rolled_back(tmp_path: Path, invoke: Runner) -> None:
    beat = tmp_path / "heartbeat"
    repo = script_campaign(
        tmp_path,
        "sed -i 's/^N = .*/N = 1/' calc.py\n",
        bench=(
            "import calc, time, pathlib\n"
            "if calc.N == 1:\n"
            "    for i in range(1200):\n"
            f"        pathlib.Path({str(beat)!r}).write_text(str(i)); time.sleep(0.05)\n"
            "print(calc.N)\n"
        ),
        **{"metric.timeout": 1, "stop.max_iterations": 1, "sandbox.writable": [str(tmp_path)]},
    )
    result = invoke(repo, "run")
    assert result.returncode == 0, result.stderr
    records = ledger(repo, "t")
    assert records[1]["status"] == "timeout"
    assert "timed out" in records[1]["reason"]
    assert git(repo, "show", "autoresearch/t:calc.py") == "N = 10\n"
    # The timed-out metric was killed, not left to go on: its heartbeat has stopped.
    last = beat.read_text()
    time.sleep(0.5)
    assert beat.read_text() == last


def test_metric_without_number_or_nan_is_a_crash(tmp_path: Path, invoke: Runner) -> None:
    repo = script_campaign(
        tmp_path,
        'sed -i "s/^N = .*/N = $AUTORESEARCH_ITERATION/" calc.py\n',
        bench="import calc\nprint({1: 'nan', 2: 'no number here'}.get(calc.N, calc.N))\n",
        **{"stop.max_iterations": 2},
    )
    assert invoke(repo, "run").returncode == 0
    records = ledger(repo, "t")
    assert [r["status"] for r in records] == ["baseline", "crash", "crash"]
    assert "not a finite number" in records[1]["reason"]
    assert "no number" in records[2]["reason"]


def test_plateau_stops_the_campaign(tmp_path: Path, invoke: Runner) -> None:
    repo = script_campaign(
        tmp_path,
        "sed -i 's/^N = .*/N = 99/' calc.py\n",
        **{"stop.max_iterations": 10, "stop.plateau": 3},
    )
    assert invoke(repo, "run").returncode == 0
    # The same change again is answered from the ledger; it counts toward the plateau.
    assert statuses(repo, "t") == ["baseline", "discard", "duplicate", "duplicate"]
    assert json.loads(invoke(repo, "status", "--json").stdout)["stop_reason"] == "plateau"


def test_max_minutes_stops_the_campaign(tmp_path: Path, invoke: Runner) -> None:
    repo = script_campaign(
        tmp_path,
        "sed -i 's/^N = .*/N = 99/' calc.py\n",
        **{"stop.max_iterations": 100, "stop.max_minutes": 0.03},
    )
    now = [0.0]

    def clock() -> float:
        now[0] += 0.5  # every look at the clock is half a second later
        return now[0]

    result = Engine(load_campaign(repo), clock=clock).run()
    assert result.stop_reason == "max_minutes"
    # The budget (1.8 s) is spent on the injected clock, so the attempts are the same on
    # any machine.
    assert statuses(repo, "t")[0] == "baseline" and len(statuses(repo, "t")) < 100
    assert json.loads(invoke(repo, "status", "--json").stdout)["stop_reason"] == "max_minutes"


def test_proposer_timeout_and_failure(tmp_path: Path, invoke: Runner) -> None:
    repo = script_campaign(
        tmp_path,
        'if [ "$AUTORESEARCH_ITERATION" = 1 ]; then echo "N = 1" > calc.py; sleep 30; fi\n'
        'if [ "$AUTORESEARCH_ITERATION" = 2 ]; then echo broken >&2; exit 4; fi\n'
        "sed -i 's/^N = .*/N = 2/' calc.py\n",
        **{"proposer.timeout": 1},
    )
    assert invoke(repo, "run").returncode == 0
    records = ledger(repo, "t")
    assert [r["status"] for r in records] == ["baseline", "timeout", "proposer_failed", "keep"]
    assert "proposer timed out" in records[1]["reason"]
    assert "code 4" in records[2]["reason"] and "broken" in records[2]["reason"]
    # The timed-out proposer's edit was rolled back, not measured.
    assert records[1]["metric"] is None


def test_proposer_that_keeps_failing_stops_the_campaign(tmp_path: Path, invoke: Runner) -> None:
    repo = script_campaign(tmp_path, "exit 1\n", **{"stop.max_iterations": 10})
    result = invoke(repo, "run")
    assert result.returncode == 1
    assert statuses(repo, "t") == ["baseline"] + ["proposer_failed"] * 3
    assert "failed 3 times in a row" in result.stdout


def test_measurement_leftovers_never_leak(tmp_path: Path, invoke: Runner) -> None:
    """Files the metric writes (tracked or not, ignored or not) are gone before the next run."""
    repo = script_campaign(
        tmp_path,
        'sed -i "s/^N = .*/N = $((10 - AUTORESEARCH_ITERATION))/" calc.py\n',
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
    assert invoke(repo, "run").returncode == 0
    records = ledger(repo, "t")
    assert [r["metric"] for r in records] == [10, 9, 8, 7]
    assert [r["status"] for r in records] == ["baseline", "keep", "keep", "keep"]
    assert all(r["files"] == ["calc.py"] for r in records[1:])


def test_ignored_files_from_the_proposer_are_not_measured(tmp_path: Path, invoke: Runner) -> None:
    repo = script_campaign(
        tmp_path,
        "echo 'N = 0' > calc_override.py; sed -i 's/^N = .*/N = 9/' calc.py\n",
        bench="import os\ntry:\n    import calc_override as calc\nexcept ImportError:\n"
        "    import calc\nprint(calc.N)\n",
        files={".gitignore": "calc_override.py\n"},
        **{"stop.max_iterations": 1},
    )
    assert invoke(repo, "run").returncode == 0
    assert [r["metric"] for r in ledger(repo, "t")] == [10, 9]


def test_proposer_commit_and_branch_switch_are_judged_as_changes(
    tmp_path: Path, invoke: Runner
) -> None:
    repo = script_campaign(
        tmp_path,
        'if [ "$AUTORESEARCH_ITERATION" = 1 ]; then\n'
        "  sed -i 's/^N = .*/N = 4/' calc.py; git add -A; git -c user.name=a -c user.email=a@a "
        "commit -qm sneaky; fi\n"
        'if [ "$AUTORESEARCH_ITERATION" = 2 ]; then\n'
        "  git checkout -q -b elsewhere; echo 'print(0)' > bench.py; git add -A; "
        "git -c user.name=a -c user.email=a@a commit -qm sneaky2; fi\n",
        **{"stop.max_iterations": 2},
    )
    result = invoke(repo, "run")
    assert result.returncode == 3, result.stdout + result.stderr
    records = ledger(repo, "t")
    assert [r["status"] for r in records] == ["baseline", "keep", "tampered"]
    assert "note" in records[1]
    assert "bench.py" in records[2]["reason"]
    assert json.loads(invoke(repo, "status", "--json").stdout)["stop_reason"] == "tampered"
    assert git(repo, "show", "autoresearch/t:calc.py") == "N = 4\n"
    assert git(repo, "show", "autoresearch/t:bench.py") == "import calc\nprint(calc.N)\n"


def test_symlink_pointing_outside_is_a_scope_violation(tmp_path: Path, invoke: Runner) -> None:
    repo = script_campaign(
        tmp_path, "rm calc.py; ln -s /etc/hostname calc.py\n", **{"stop.max_iterations": 1}
    )
    assert invoke(repo, "run").returncode == 0
    records = ledger(repo, "t")
    assert records[1]["status"] == "scope_violation"


def test_deleting_a_file_outside_scope_is_a_violation(tmp_path: Path, invoke: Runner) -> None:
    repo = script_campaign(
        tmp_path, "rm other.txt\n", **{"stop.max_iterations": 1}, files={"other.txt": "x\n"}
    )
    assert invoke(repo, "run").returncode == 0
    record = ledger(repo, "t")[1]
    assert record["status"] == "scope_violation" and record["files"] == ["other.txt"]


def test_shared_ignored_data_reaches_the_metric(tmp_path: Path, invoke: Runner) -> None:
    repo = script_campaign(
        tmp_path,
        "sed -i 's/^N = .*/N = 3/' calc.py\n",
        bench="import calc\nprint(calc.N * int(open('data/factor.txt').read()))\n",
        share=["data"],
        files={".gitignore": "data/\n"},
        **{"stop.max_iterations": 1},
    )
    (repo / "data").mkdir()
    (repo / "data" / "factor.txt").write_text("2\n")
    before = snapshot(repo)
    result = invoke(repo, "run")
    assert result.returncode == 0, result.stderr
    assert [r["metric"] for r in ledger(repo, "t")] == [20, 6]
    assert snapshot(repo) == before


def test_baseline_failure_is_one_clear_message(tmp_path: Path, invoke: Runner) -> None:
    repo = script_campaign(tmp_path, "true\n", bench="raise SystemExit('boom')\n")
    result = invoke(repo, "run")
    assert result.returncode == 1
    assert "baseline measurement failed" in result.stdout
    assert "Traceback" not in result.stderr
