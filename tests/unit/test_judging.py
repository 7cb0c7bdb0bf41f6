"""Judging beyond one number, on a real campaign: secondary metrics and constraints, a
composite score, simplicity, guard rework. The proposer is scripted; its changes have
known effects on two metrics (latency, the primary, and memory)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from autoresearch.attempt import AttemptRecord, Status
from autoresearch.checks.replay import replay
from autoresearch.config import load_campaign
from autoresearch.engine import Engine
from autoresearch.executors import LocalExecutor
from autoresearch.proposers.base import Proposal
from autoresearch.store.ledger import Ledger
from campaigns import campaign_toml
from conftest import make_repo
from unit.memory import Edit, ScriptedProposer

PY = sys.executable
BENCH = (
    "import app\n"
    "print(f'METRIC latency_ms={app.LATENCY}')\n"
    "print(f'METRIC mem_mb={app.MEM}')\n"
    "print(f'METRIC acc={app.ACC}')\n"
)
FILLER = "".join(f"def helper_{i}():\n    return {i}\n\n\n" for i in range(6))
APP = f"LATENCY = 100\nMEM = 100\nACC = 0.9\nOK = True\n\n\n{FILLER}"


def campaign(tmp_path: Path, **overrides: Any) -> Path:
    config = campaign_toml(
        **{
            "scope": ["app.py"],
            "harness": ["bench.py"],
            "metric.command": f"{PY} bench.py",
            "metric.pattern": None,
            "metric.name": "latency_ms",
            "metric.target": None,
            "metric.timeout": 30,
            "guard.command": f"{PY} -c 'import app; assert app.OK, \"app.OK is false\"'",
            "stop.max_iterations": 10,
            **overrides,
        }
    )
    return make_repo(
        tmp_path / "repo", {"app.py": APP, "bench.py": BENCH, "autoresearch.toml": config}
    )


def with_metrics(path: Path, text: str) -> None:
    """Append [[metrics]] tables (tomlkit cannot add arrays of tables by dotted keys)."""
    config = path / "autoresearch.toml"
    config.write_text(config.read_text() + "\n" + text)
    from autoresearch.testing.repo import git

    git(path, "commit", "-qam", "metrics")


def setting(**values: Any) -> Edit:
    """Set module-level values of app.py."""

    def edit(workspace: Path) -> Proposal:
        path = workspace / "app.py"
        lines = path.read_text().splitlines()
        out = []
        for line in lines:
            name = line.split(" =", 1)[0]
            out.append(f"{name} = {values[name]!r}" if name in values else line)
        path.write_text("\n".join(out) + "\n")
        return Proposal(description=", ".join(f"{k}={v}" for k, v in values.items()))

    return edit


def drop_helpers(workspace: Path) -> Proposal:
    path = workspace / "app.py"
    path.write_text(path.read_text().split("def helper_0")[0])
    return Proposal(description="remove unused helpers")


def add_lines(count: int, **values: Any) -> Edit:
    def edit(workspace: Path) -> Proposal:
        setting(**values)(workspace)
        path = workspace / "app.py"
        extra = "".join(f"X_{i} = {i}\n" for i in range(count))
        path.write_text(path.read_text() + extra)
        return Proposal(description=f"{count} more lines")

    return edit


def nothing(workspace: Path) -> Proposal:
    return Proposal(description="no fix")


def run(repo: Path, *edits: Edit, **kwargs: Any) -> tuple[list[AttemptRecord], ScriptedProposer]:
    proposer = ScriptedProposer(*edits)
    engine = Engine(
        load_campaign(repo),
        proposer=proposer,  # type: ignore[arg-type]
        executor=LocalExecutor(),
        max_iterations=len(edits),
        **kwargs,
    )
    engine.run()
    records = Ledger(repo / ".autoresearch" / "toy").read()
    campaign = load_campaign(repo)
    rule = campaign.config.decision.to_rule()
    # verify re-derives every verdict
    assert replay(records, rule, str(campaign.config.metric.direction)) == []
    return records, proposer


MEM_NO_REGRESS = """
[[metrics]]
name = "mem_mb"
direction = "minimize"
no_regress = "10%"
"""


def test_a_speedup_that_doubles_memory_fails_its_constraint(tmp_path: Path) -> None:
    repo = campaign(tmp_path)
    with_metrics(repo, MEM_NO_REGRESS)
    records, _ = run(
        repo, setting(LATENCY=80, MEM=200), setting(LATENCY=90, MEM=105), setting(LATENCY=85)
    )
    assert [r.status for r in records] == [
        Status.BASELINE,
        Status.CONSTRAINT_FAILED,
        Status.KEEP,
        Status.KEEP,
    ]
    failed = records[1]
    assert failed.reason is not None
    assert "mem_mb" in failed.reason and "no_regress 10%" in failed.reason
    assert failed.metrics is not None and failed.metrics["mem_mb"]["value"] == 200
    assert records[0].metrics == {"mem_mb": {"value": 100.0, "samples": [100.0]}}
    # the branch holds the kept versions only: memory stayed within bounds
    assert records[-1].metric == 85


def test_max_and_min_bounds_name_the_metric_and_the_bound(tmp_path: Path) -> None:
    repo = campaign(tmp_path)
    with_metrics(
        repo,
        '[[metrics]]\nname = "mem_mb"\nmax = 150\n\n[[metrics]]\nname = "acc"\nmin = 0.85\n',
    )
    records, _ = run(repo, setting(LATENCY=80, MEM=151), setting(LATENCY=80, ACC=0.8))
    statuses = [r.status for r in records]
    assert statuses == [Status.BASELINE, Status.CONSTRAINT_FAILED, Status.CONSTRAINT_FAILED]
    assert records[1].reason == "mem_mb 151 > max 150"
    assert records[2].reason == "acc 0.8 < min 0.85"


def test_a_composite_score_with_a_hard_gate(tmp_path: Path) -> None:
    repo = campaign(
        tmp_path,
        **{
            "metric.name": None,
            "metric.direction": "maximize",
            "metric.score": "(mem_mb <= 150) * (100*acc - latency_ms/10)",
        },
    )
    records, _ = run(
        repo,
        setting(ACC=0.95),  # 95 - 10 = 85 > 80: keep
        setting(ACC=0.99, MEM=300),  # the gate zeroes it: discard
        setting(LATENCY=50),  # 95 - 5 = 90: keep
    )
    assert [r.status for r in records] == [
        Status.BASELINE,
        Status.KEEP,
        Status.DISCARD,
        Status.KEEP,
    ]
    assert records[0].metric == 80.0
    assert records[2].metric == 0.0
    assert records[3].metric == 90.0


def test_simplicity_keeps_less_code_and_refuses_a_tiny_gain_bought_with_lines(
    tmp_path: Path,
) -> None:
    repo = campaign(tmp_path, **{"decision.simplicity": {"lines_per_unit": 100}})
    records, _ = run(
        repo,
        add_lines(60, LATENCY=99.9),  # 0.1% better, 62 changed lines: needs 0.62%
        drop_helpers,  # the same latency, 24 lines fewer
        add_lines(3, LATENCY=99.9),  # 0.1% better, 4 lines: needs 0.04%
        setting(LATENCY=100.5),  # worse: not a simplification (adds nothing, removes nothing)
    )
    assert [r.status for r in records] == [
        Status.BASELINE,
        Status.DISCARD,
        Status.KEEP,
        Status.KEEP,
        Status.DISCARD,
    ]
    assert "does not pay for 62 changed lines (+61/-1)" in str(records[1].reason)
    assert str(records[2].reason).startswith("simplification: removes 24 lines net")
    assert records[2].lines == {
        "added": 0,
        "removed": 24,
        "lines_per_unit": 100,
        "percent": True,
    }
    assert records[3].metric == 99.9


def test_a_guard_failure_goes_back_to_the_proposer_and_a_second_try_fixes_it(
    tmp_path: Path,
) -> None:
    repo = campaign(tmp_path, **{"guard.rework": 2})
    records, proposer = run(
        repo,
        setting(LATENCY=80, OK=False),
        nothing,  # try 1: no fix
        setting(OK=True),  # try 2 fixes it, on top of the candidate
        setting(LATENCY=70, OK=False),
        nothing,
        nothing,
    )
    statuses = [r.status for r in records]
    assert statuses == [
        Status.BASELINE,
        Status.REWORK,
        Status.REWORK,
        Status.KEEP,
        Status.REWORK,
        Status.REWORK,
        Status.GUARD_FAILED,
    ]
    assert [r.rework_of for r in records] == [None, None, 1, 2, None, 4, 5]
    assert "sent back for rework (2 left)" in str(records[1].reason)
    assert records[3].metric == 80  # the fix kept the improvement
    # the try saw the guard's output and started from the candidate
    assert "app.OK is false" in proposer.contexts[1].prompt
    assert "Rework 2 of 2" in proposer.contexts[2].prompt
    assert records[-1].metric == 70 and records[-1].best == 80


MODEL = "def predict(x):\n    return 2 * x + 1\n"
VISIBLE = (
    "import app\n"
    "cases = [1, 2, 3]\n"
    "print(f'score: {sum(abs(app.predict(x) - 2 * x) for x in cases) / len(cases)}')\n"
)
UNSEEN = (
    "import sys\n"
    "sys.path.insert(0, '.')\n"
    "import app\n"
    "cases = [int(v) for v in open('holdout/data.txt').read().split()]\n"
    "print(sum(abs(app.predict(x) - 2 * x) for x in cases) / len(cases))\n"
)


def set_model(body: str) -> Edit:
    def edit(workspace: Path) -> Proposal:
        assert not (workspace / "holdout").exists()  # the proposer never sees it
        (workspace / "app.py").write_text(f"def predict(x):\n    {body}\n")
        return Proposal(description=body)

    return edit


def holdout_repo(tmp_path: Path) -> Path:
    """A model whose visible benchmark can be overfit, with an untracked holdout beside it."""
    config = campaign_toml(
        **{
            "scope": ["app.py"],
            "harness": ["bench.py"],
            "metric.command": f"{PY} bench.py",
            "metric.target": None,
            "guard": None,
            "holdout.command": f"{PY} holdout/bench.py",
            "holdout.files": ["holdout/**"],
        }
    )
    repo = make_repo(
        tmp_path / "repo",
        {
            "app.py": MODEL,
            "bench.py": VISIBLE,
            "autoresearch.toml": config,
            ".gitignore": "holdout/\n",
        },
    )
    (repo / "holdout").mkdir()
    (repo / "holdout" / "bench.py").write_text(UNSEEN)
    (repo / "holdout" / "data.txt").write_text("4 5 6 7\n")
    return repo


def test_a_change_that_overfits_the_visible_split_is_caught_by_the_holdout(
    tmp_path: Path,
) -> None:
    repo = holdout_repo(tmp_path)
    records, proposer = run(
        repo,
        set_model("return {1: 2, 2: 4, 3: 6}.get(x, 0)"),  # memorises the visible cases
        set_model("return 2 * x"),
    )
    assert [r.status for r in records] == [Status.BASELINE, Status.OVERFIT, Status.KEEP]
    assert "worse on unseen data" in str(records[1].reason)
    assert records[1].holdout is not None and records[1].holdout["value"] == 11.0
    assert records[1].holdout["incumbent"] == 1.0
    assert records[2].holdout == {"value": 0.0, "samples": [0.0], "incumbent": 1.0, "gain": 1.0}
    for ctx in proposer.contexts:
        assert "holdout" not in ctx.prompt
    state = json.loads((repo / ".autoresearch" / "toy" / "state.json").read_text())
    assert state["holdout"] == {"best": 0.0, "baseline": 1.0, "gain": 1.0}
    # nothing of the holdout was left in the measurement folder
    assert not (repo / ".autoresearch" / "toy" / "measure" / "holdout").exists()
    # the report puts the primary and the holdout gains side by side
    from autoresearch.views.report import write_report

    text = write_report(repo / ".autoresearch" / "toy").markdown.read_text()
    assert "Primary gain +1; holdout gain +1 (1 -> 0)" in text
    assert "| 2 | 0 | +1 | -1 | +1 |" in text  # the kept row: gain, delta, holdout gain
    assert "#1 overfit" in text


PAY_BENCH = "import app, pay\nprint(f'METRIC latency_ms={app.LATENCY + pay.FEE}')\n"


def critical(tmp_path: Path) -> Path:
    config = campaign_toml(
        **{
            "scope": ["app.py", "pay.py"],
            "harness": ["bench.py"],
            "metric.command": f"{PY} bench.py",
            "metric.pattern": None,
            "metric.name": "latency_ms",
            "metric.target": None,
            "guard": None,
            "approval.paths": ["pay.py"],
        }
    )
    return make_repo(
        tmp_path / "repo",
        {
            "app.py": "LATENCY = 100\n",
            "pay.py": "FEE = 10\n",
            "bench.py": PAY_BENCH,
            "autoresearch.toml": config,
        },
    )


def set_fee(value: int) -> Edit:
    def edit(workspace: Path) -> Proposal:
        (workspace / "pay.py").write_text(f"FEE = {value}\n")
        return Proposal(description=f"fee {value}")

    return edit


def test_a_change_to_a_critical_path_waits_for_approval_and_is_rechecked(
    tmp_path: Path,
) -> None:
    from autoresearch.checks.approval import ApprovalError, ApprovedChange, parked, reject

    repo = critical(tmp_path)
    records, _ = run(repo, set_fee(5), setting(LATENCY=90), set_fee(1))
    assert [r.status for r in records] == [
        Status.BASELINE,
        Status.AWAITING_APPROVAL,
        Status.KEEP,
        Status.AWAITING_APPROVAL,
    ]
    assert "pay.py" in str(records[1].reason) and records[2].metric == 100
    campaign = load_campaign(repo)
    # approving #1 measures its change on top of the current best (#2): 90 + 5 < 100
    engine = Engine(campaign, proposer=ApprovedChange(), approve=parked(records, 1))  # type: ignore[arg-type]
    engine.run()
    approved = engine.records[-1]
    assert (approved.status, approved.approval_of, approved.metric) == (Status.KEEP, 1, 95)
    assert approved.note is not None and approved.note.startswith("approved")
    # a person turns #3 down; it cannot be decided twice
    rejected = reject(campaign, 3, "fees are set by finance")
    assert (rejected.status, rejected.reason, rejected.approval_of) == (
        Status.REJECTED,
        "fees are set by finance",
        3,
    )
    records = Ledger(repo / ".autoresearch" / "toy").read()
    try:
        parked(records, 3)
    except ApprovalError as exc:
        assert "decided already" in str(exc)
    else:
        raise AssertionError("a decided attempt was offered again")
    assert replay(records, campaign.config.decision.to_rule(), "minimize") == []


def test_unattended_runs_reject_critical_changes_with_the_reason(tmp_path: Path) -> None:
    repo = critical(tmp_path)
    records, _ = run(repo, set_fee(5), setting(LATENCY=90), unattended=True)
    assert [r.status for r in records] == [Status.BASELINE, Status.REJECTED, Status.KEEP]
    assert "unattended" in str(records[1].reason) and "pay.py" in str(records[1].reason)


def test_approve_and_reject_on_the_command_line(tmp_path: Path, invoke: Any) -> None:
    repo = critical(tmp_path)
    records, _ = run(repo, set_fee(5), set_fee(1), set_fee(7))
    assert [r.status for r in records][1:] == [Status.AWAITING_APPROVAL] * 3
    kept = invoke(repo, "approve", "2")
    assert kept.returncode == 0, kept.stderr
    assert "attempt 2 approved: re-checked as attempt 4, keep" in kept.stdout
    # #1 changed pay.py as #2 did: it no longer applies on top of the new best
    conflict = invoke(repo, "approve", "1")
    assert conflict.returncode == 2 and "both changed pay.py" in conflict.stderr
    refused = invoke(repo, "reject", "3", "--reason", "not now")
    assert refused.returncode == 0 and "attempt 3 rejected" in refused.stdout
    again = invoke(repo, "reject", "3")
    assert again.returncode == 2 and "decided already" in again.stderr
    missing = invoke(repo, "approve", "99")
    assert missing.returncode == 2 and "no attempt 99" in missing.stderr
    log = invoke(repo, "log")
    assert "awaiting_approval" in log.stdout and "rejected" in log.stdout
    verify = invoke(repo, "verify")
    assert verify.returncode == 0, verify.stdout + verify.stderr


def test_check_computes_the_composite_and_reads_the_secondary_metrics(
    tmp_path: Path, invoke: Any
) -> None:
    repo = campaign(
        tmp_path,
        **{
            "metric.name": None,
            "metric.direction": "maximize",
            "metric.score": "100*acc - latency_ms/10",
            "proposer.command": "true",
        },
    )
    ran = invoke(repo, "check", "--offline")
    assert "80" in ran.stdout, ran.stdout + ran.stderr
    with_metrics(repo, '[[metrics]]\nname = "disk_mb"\n')
    ran = invoke(repo, "check", "--offline")
    assert ran.returncode == 1
    assert "metric 'disk_mb' printed no 'METRIC disk_mb=...' line" in ran.stdout + ran.stderr


def test_a_resumed_campaign_holds_constraints_against_the_kept_samples(tmp_path: Path) -> None:
    repo = campaign(tmp_path)
    with_metrics(repo, MEM_NO_REGRESS)
    records, _ = run(repo, setting(LATENCY=90, MEM=80))
    assert records[-1].status is Status.KEEP
    # a new engine reads the incumbent's memory (80) from the ledger: 95 is 19% worse
    engine = Engine(
        load_campaign(repo),
        proposer=ScriptedProposer(setting(LATENCY=85, MEM=95)),  # type: ignore[arg-type]
        executor=LocalExecutor(),
        max_iterations=2,
    )
    engine.run()
    last = engine.records[-1]
    assert last.status is Status.CONSTRAINT_FAILED
    assert "95 vs the incumbent's 80" in str(last.reason)


def test_a_simplification_still_meets_the_guard_and_verify_follows_it(tmp_path: Path) -> None:
    repo = campaign(tmp_path, **{"decision.simplicity": True})

    def simpler_but_broken(workspace: Path) -> Proposal:
        drop_helpers(workspace)
        setting(OK=False)(workspace)
        return Proposal(description="remove helpers, break OK")

    records, _ = run(repo, simpler_but_broken, drop_helpers)
    assert [r.status for r in records] == [Status.BASELINE, Status.GUARD_FAILED, Status.KEEP]
    assert str(records[2].reason).startswith("simplification")


def test_the_holdout_files_changed_between_runs_are_refused(tmp_path: Path) -> None:
    from autoresearch.errors import ConfigError

    repo = holdout_repo(tmp_path)
    run(repo, set_model("return 2 * x"))
    (repo / "holdout" / "data.txt").write_text("4 5 6 8\n")
    engine = Engine(
        load_campaign(repo),
        proposer=ScriptedProposer(set_model("return 2 * x + 0")),  # type: ignore[arg-type]
        executor=LocalExecutor(),
        max_iterations=2,
    )
    try:
        engine.run()
    except ConfigError as exc:
        assert "holdout/data.txt changed since the campaign started" in str(exc)
    else:
        raise AssertionError("a resume on other holdout data was not refused")
    # a holdout file committed to the repository is refused before anything runs
    (repo / ".gitignore").write_text("")
    from autoresearch.testing.repo import git

    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "commit the holdout")
    fresh = Engine(
        load_campaign(repo),
        proposer=ScriptedProposer(set_model("return 2 * x")),  # type: ignore[arg-type]
        executor=LocalExecutor(),
        max_iterations=1,
    )
    with __import__("pytest").raises(ConfigError, match="is committed, so the proposer would"):
        fresh.run()


def test_every_status_has_a_style_in_the_terminal_views() -> None:
    from autoresearch.views.render import STATUS_STYLE

    assert set(STATUS_STYLE) == set(Status)
