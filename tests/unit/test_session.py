"""`autoresearch session`: the session log of agents that measure themselves — its fields,
its invariants, segments, the MAD-based confidence, budgets and convergence — and that no
number in it reaches a decision of the engine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autoresearch.agent import mode as agent_mode
from autoresearch.agent import session
from autoresearch.agent.importing import import_pi, read_imported
from autoresearch.config import load_campaign
from autoresearch.store.ledger import Ledger
from campaigns import campaign_toml
from conftest import Runner, make_repo
from unit.memory import MemoryExecutor, score


def lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_session_from_init_to_convergence(tmp_path: Path, invoke: Runner) -> None:
    log = tmp_path / "autoresearch.jsonl"
    out = invoke(
        tmp_path,
        "session", "init", "--file", str(log), "--metric", "total_ms", "--direction", "lower",
        "--max-runs", "10", "--max-runtime-seconds", "100", "--max-cost", "1",
        "--convergence-runs", "2",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    config = lines(log)[0]
    assert config["type"] == "config" and config["metricName"] == "total_ms"
    assert config["bestDirection"] == "lower" and config["maxRuns"] == 10
    for metric, status in [("40", "keep"), ("-2", "keep"), ("41", "discard"), ("0", "crash")]:
        ran = invoke(
            tmp_path, "session", "record", "--file", str(log), "--metric", metric,
            "--status", status, "--commit", "abc1234", "--description", f"{status} {metric}",
            "--elapsed-seconds", "30", "--estimated-cost", "0.1",
        )  # fmt: skip
        assert ran.returncode == 0, ran.stderr
    runs = lines(log)[1:]
    assert [r["run"] for r in runs] == [1, 2, 3, 4]
    assert all(r["self_reported"] and r["segment"] == 0 for r in runs)
    status = json.loads(invoke(tmp_path, "session", "status", "--file", str(log)).stdout)
    assert status["baseline"] == 40 and status["best"] == -2 and status["best_run"] == 2
    assert status["delta"] == -42
    # MAD of the measured values 40, -2, 41 (the crash's 0 is no measurement): median 40,
    # deviations 0, 42, 1 -> 1; confidence = 42 / 1.
    assert status["mad"] == 1 and status["confidence"] == 42
    assert status["counts"] == {"keep": 2, "discard": 1, "crash": 1, "checks_failed": 0}
    assert status["budgets"]["used"] == {"runs": 4, "runtime_seconds": 120.0, "cost": 0.4}
    assert status["budgets"]["exhausted"] == ["runtime_seconds"]
    assert status["convergence"] == {"runs": 2, "runs_since_improvement": 2, "converged": True}
    assert status["stop"] is True and status["self_reported"] is True
    summary = invoke(tmp_path, "session", "status", "--file", str(log), "--format", "summary")
    assert "run 4" in summary.stdout and "converged: stop here" in summary.stdout


def test_a_new_metric_opens_a_segment(tmp_path: Path) -> None:
    log = tmp_path / "s.jsonl"
    session.init(log, "seconds", "lower")
    session.record(log, "keep", 10.0)
    session.record(log, "keep", 8.0)
    after = session.record(log, "keep", 0.5, metric_name="accuracy", direction="higher")
    assert after["segment"] == 1 and after["metric_name"] == "accuracy"
    assert after["baseline"] == 0.5 and after["runs"] == 1 and after["total_runs"] == 3
    same = session.record(log, "keep", 0.7, metric_name="accuracy", direction="higher")
    assert same["segment"] == 1 and same["best"] == 0.7
    kinds = [e.get("type", "run") for e in lines(log)]
    assert kinds == ["config", "run", "run", "config", "run", "run"]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--metric", "nan", "--status", "keep"], "not a finite number"),
        (["--metric", "inf", "--status", "keep"], "not a finite number"),
        (["--status", "keep"], "needs the measured value"),
        (["--metric", "1", "--status", "keep", "--metric-name", "x"], "both --metric-name"),
        (["--metric", "1", "--status", "keep", "--elapsed-seconds", "-1"], ">= 0"),
    ],
)
def test_bad_records_are_refused_and_not_written(
    tmp_path: Path, invoke: Runner, args: list[str], says: str
) -> None:
    log = tmp_path / "s.jsonl"
    session.init(log, "m", "higher")
    before = log.read_bytes()
    out = invoke(tmp_path, "session", "record", "--file", str(log), *args)
    assert out.returncode != 0 and says in out.stderr and "Traceback" not in out.stderr
    assert log.read_bytes() == before


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ('{"run": 1, "status": "keep", "metric": 1}\n', "before any config"),
        (
            '{"type": "config", "metricName": "m", "bestDirection": "lower"}\n'
            '{"run": 2, "status": "keep", "metric": 1, "segment": 0}\n',
            "run 1 was due",
        ),
        (
            '{"type": "config", "metricName": "m", "bestDirection": "lower"}\n'
            '{"run": 1, "status": "maybe", "metric": 1, "segment": 0}\n',
            "status 'maybe'",
        ),
        ('{"type": "config", "metricName": "m", "bestDirection": "up"}\n', "higher|lower"),
        ("not json\n", "not JSON"),
    ],
)
def test_a_broken_log_is_named(tmp_path: Path, content: str, says: str) -> None:
    log = tmp_path / "s.jsonl"
    log.write_text(content)
    with pytest.raises(session.SessionError, match=says):
        session.summary(session.read(log))


def test_init_does_not_overwrite_a_session(tmp_path: Path) -> None:
    log = tmp_path / "s.jsonl"
    session.init(log, "m", "lower")
    session.record(log, "keep", 1.0)
    with pytest.raises(session.SessionError, match="already holds a session"):
        session.init(log, "m", "lower")
    session.init(log, "other", "higher", force=True)
    assert session.read(log).segments[-1].index == 1 and len(session.read(log).runs) == 1


def test_self_reported_numbers_never_decide(tmp_path: Path) -> None:
    """A session log claiming a perfect result sits in the repository: the campaign's
    baseline and verdicts are the engine's own measurements, and importing the log keeps
    its records apart, marked self-reported."""
    config = campaign_toml(**{"metric.command": "metric", "guard.command": "guard"})
    repo = make_repo(
        tmp_path / "repo",
        {"calc.py": "N = 10\n", "bench.py": "# judge\n", "autoresearch.toml": config},
    )
    log = repo / "autoresearch.jsonl"
    session.init(log, "score", "lower")
    session.record(log, "keep", 0.0, description="claims the target")
    campaign = load_campaign(repo)
    started = agent_mode.start(campaign, executor=MemoryExecutor(score))
    assert started.baseline == 7 and not started.stopped  # target 0 not reached
    (agent_mode.workspace_path(campaign) / "calc.py").write_text("N = 8\n")
    judged = agent_mode.step(campaign, executor=MemoryExecutor(score))
    # Against the claimed 0 this would be worse; against the measured 7 it is better.
    assert judged.attempt is not None and judged.attempt["status"] == "keep"
    assert judged.attempt["previous_best"] == 7 and judged.best == 5
    import_pi(repo)  # into the configured campaign; its config stays
    name = load_campaign(repo).name
    imported = read_imported(repo / ".autoresearch" / name)
    assert imported and all(e["self_reported"] for e in imported)
    records = Ledger(campaign.state_dir).read()
    assert [r.metric for r in records] == [7.0, 5.0]
