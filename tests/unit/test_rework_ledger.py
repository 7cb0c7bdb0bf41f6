"""A guard rework lives in the ledger, not in one engine's memory: the agent-driven mode
(`step`, one attempt a process) and a stopped-then-resumed `run` go on with the candidate
sent back, its guard output, and the count of tries.

Real git, the real ledger, a real guard command (`app.OK` must hold) run by the local
executor; the campaign is the one of test_judging (latency is the primary metric)."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from autoresearch.agent import mode as agent_mode
from autoresearch.agent.mcp_server import StepResult, _step_json
from autoresearch.attempt import AttemptRecord, Status
from autoresearch.checks.replay import replay
from autoresearch.config import load_campaign
from autoresearch.engine import Engine
from autoresearch.engine.lifecycle import Interrupted
from autoresearch.executors import LocalExecutor
from autoresearch.proposers.base import Proposal
from autoresearch.store.ledger import Ledger
from conftest import Runner, git
from unit.memory import Edit, ScriptedProposer
from unit.test_judging import APP, campaign, nothing, setting


def records(repo: Path) -> list[AttemptRecord]:
    return Ledger(repo / ".autoresearch" / "toy").read()


def branch_app(repo: Path) -> str:
    return git(repo, "show", "autoresearch/toy:app.py")


def verified(repo: Path) -> list[AttemptRecord]:
    """The ledger, whose every verdict `verify` re-derives."""
    done = records(repo)
    config = load_campaign(repo).config
    assert replay(done, config.decision.to_rule(), str(config.metric.direction)) == []
    return done


def step(repo: Path, description: str = "") -> agent_mode.StepReport:
    return agent_mode.step(load_campaign(repo), description, executor=LocalExecutor())


def run(repo: Path, *edits: Edit, until: int) -> tuple[Engine, ScriptedProposer]:
    """One engine (one process of `run`) up to attempt `until`."""
    proposer = ScriptedProposer(*edits)
    engine = Engine(
        load_campaign(repo),
        proposer=proposer,  # type: ignore[arg-type]
        executor=LocalExecutor(),
        max_iterations=until,
    )
    engine.run()
    return engine, proposer


def test_a_campaign_driven_through_step_reworks_the_candidate_the_guard_refused(
    tmp_path: Path, invoke: Runner
) -> None:
    repo = campaign(tmp_path, **{"guard.rework": 2})
    assert invoke(repo, "start").returncode == 0
    ws = agent_mode.workspace_path(load_campaign(repo))
    base = branch_app(repo)

    setting(LATENCY=80, OK=False)(ws)  # faster, but it breaks the guard
    sent = invoke(repo, "step", "--description", "faster")
    assert sent.returncode == 0, sent.stderr
    assert "attempt 1 rework" in sent.stdout
    # `step` tells the agent that its candidate waits, what the guard said, what is left.
    assert "holds attempt 1's change" in sent.stdout
    assert "app.OK is false" in sent.stdout  # the guard's last lines
    assert "try 1 of 2 (2 tries left)" in sent.stdout
    assert "Rolled back" not in sent.stdout
    assert "LATENCY = 80" in (ws / "app.py").read_text()  # not rolled back
    assert branch_app(repo) == base

    setting(OK=True)(ws)  # the fix, on top of the candidate
    fixed = invoke(repo, "step", "--description", "fix the guard", "--json")
    assert fixed.returncode == 0, fixed.stderr
    data = json.loads(fixed.stdout)
    assert data["attempt"]["status"] == "keep" and data["attempt"]["metric"] == 80
    assert data["attempt"]["rework_of"] == 1 and data["rework"] is None

    done = verified(repo)
    assert [r.status for r in done] == [Status.BASELINE, Status.REWORK, Status.KEEP]
    assert [r.rework_of for r in done] == [None, None, 1]
    assert "LATENCY = 80" in branch_app(repo) and "OK = True" in branch_app(repo)
    assert done[-1].commit == git(repo, "rev-parse", "autoresearch/toy").strip()


def test_step_after_a_rework_reports_it_in_json(tmp_path: Path) -> None:
    repo = campaign(tmp_path, **{"guard.rework": 1})
    agent_mode.start(load_campaign(repo), executor=LocalExecutor())
    ws = agent_mode.workspace_path(load_campaign(repo))
    setting(LATENCY=80, OK=False)(ws)
    report = step(repo, "faster").to_json()
    assert report["attempt"]["status"] == "rework"
    rework = report["rework"]
    assert rework["of"] == 1 and rework["next_try"] == 1
    assert rework["tries"] == 1 and rework["left"] == 1
    assert "app.OK is false" in rework["guard_output"]
    result = StepResult.model_validate(_step_json(report))  # what the MCP `step` returns
    assert result.rework is not None and result.rework.of == 1 and result.rework.left == 1
    # a resumed campaign (`start` again) says the same, and keeps the candidate
    again = agent_mode.start(load_campaign(repo), executor=LocalExecutor())
    assert again.rework is not None and again.rework["of"] == 1
    assert "holds attempt 1's change" in again.next
    assert "LATENCY = 80" in (ws / "app.py").read_text()


def interrupt(workspace: Path) -> Proposal:
    raise Interrupted(signal.SIGINT)  # Ctrl-C while the proposer works on the try


@pytest.mark.parametrize("how", ["interrupted", "stopped"])
def test_a_run_stopped_right_after_a_rework_resumes_it(tmp_path: Path, how: str) -> None:
    repo = campaign(tmp_path, **{"guard.rework": 2})
    if how == "interrupted":
        run(repo, setting(LATENCY=80, OK=False), interrupt, until=10)
    else:  # a stop rule held right after the rework record
        run(repo, setting(LATENCY=80, OK=False), until=1)
    base = [r.status for r in records(repo)]
    assert base[:2] == [Status.BASELINE, Status.REWORK]
    before = branch_app(repo)

    _, proposer = run(repo, setting(OK=True), until=len(base))
    done = verified(repo)
    assert done[-1].status is Status.KEEP and done[-1].rework_of == 1
    assert done[-1].metric == 80
    if how == "interrupted":  # the try cut short names the candidate it was fixing
        assert done[2].status is Status.INTERRUPTED and done[2].rework_of == 1
    # the resumed try started from the candidate, with the guard's output in its prompt
    prompt = proposer.contexts[0].prompt
    assert "Rework 1 of 2" in prompt and "app.OK is false" in prompt
    assert branch_app(repo) != before
    assert "LATENCY = 80" in branch_app(repo) and "OK = True" in branch_app(repo)


def test_a_rework_resumed_attempt_by_attempt_counts_its_tries(tmp_path: Path) -> None:
    repo = campaign(tmp_path, **{"guard.rework": 2})
    base = None
    prompts = []
    for until, edit in enumerate([setting(LATENCY=80, OK=False), nothing, nothing], 1):
        _, proposer = run(repo, edit, until=until)
        prompts.append(proposer.contexts[0].prompt)
        base = base or git(repo, "rev-parse", "autoresearch/toy").strip()
    done = verified(repo)
    statuses = [r.status for r in done]
    assert statuses == [Status.BASELINE, Status.REWORK, Status.REWORK, Status.GUARD_FAILED]
    assert [r.rework_of for r in done] == [None, None, 1, 2]
    assert "Rework 1 of 2" in prompts[1] and "Rework 2 of 2" in prompts[2]
    assert git(repo, "rev-parse", "autoresearch/toy").strip() == base
    assert branch_app(repo) == APP


def test_a_rework_exhausted_through_step_is_guard_failed_and_rolled_back(
    tmp_path: Path,
) -> None:
    repo = campaign(tmp_path, **{"guard.rework": 2})
    agent_mode.start(load_campaign(repo), executor=LocalExecutor())
    ws = agent_mode.workspace_path(load_campaign(repo))
    base = git(repo, "rev-parse", "autoresearch/toy").strip()

    setting(LATENCY=80, OK=False)(ws)
    assert step(repo, "faster").attempt["status"] == "rework"  # type: ignore[index]
    setting(LATENCY=75)(ws)  # a try that does not fix the guard
    second = step(repo, "faster still")
    assert second.attempt is not None and second.attempt["status"] == "rework"
    assert "try 2 of 2 (1 try left)" in second.next
    assert "LATENCY = 75" in (ws / "app.py").read_text()
    last = step(repo, "no fix")  # the workspace as the last try left it
    assert last.attempt is not None and last.attempt["status"] == "guard_failed"
    assert last.rework is None and "rolled back" in last.next

    done = verified(repo)
    statuses = [r.status for r in done]
    assert statuses == [Status.BASELINE, Status.REWORK, Status.REWORK, Status.GUARD_FAILED]
    assert [r.rework_of for r in done] == [None, None, 1, 2]
    assert git(repo, "rev-parse", "autoresearch/toy").strip() == base
    assert (ws / "app.py").read_text() == APP  # rolled back to the best
    assert step(repo).attempt["status"] == "no_change"  # type: ignore[index]


def test_a_parked_candidate_tells_the_agent_how_a_person_decides(tmp_path: Path) -> None:
    repo = campaign(tmp_path, **{"approval.paths": ["app.py"]})
    agent_mode.start(load_campaign(repo), executor=LocalExecutor())
    ws = agent_mode.workspace_path(load_campaign(repo))
    setting(LATENCY=80)(ws)
    parked = step(repo, "faster")
    assert parked.attempt is not None and parked.attempt["status"] == "awaiting_approval"
    assert "autoresearch approve 1" in parked.next and "autoresearch reject 1" in parked.next
    assert "Rolled back (awaiting_approval)" not in parked.next
