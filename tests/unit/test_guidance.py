"""What the engine learns and hands on: the research memory, escalation when stuck, the
breaker, the hypothesis queue and the ideas backlog. In-process engine, real git and ledger."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autoresearch.attempt import AttemptRecord, Status
from autoresearch.config import load_campaign
from autoresearch.engine import Engine
from autoresearch.learning.escalation import diminishing_returns
from autoresearch.learning.ideas import append_ideas, queue_hypotheses, read_backlog
from autoresearch.learning.memory import MAX_CHARS, memory_text
from autoresearch.proposers.base import Proposal
from autoresearch.store.ledger import Ledger
from campaigns import campaign_toml
from conftest import Runner, make_repo
from unit.memory import MemoryExecutor, ScriptedProposer, score, set_n


def toy_repo(tmp_path: Path, **overrides: object) -> Path:
    config = campaign_toml(
        **{"metric.command": "metric", "guard.command": "guard", "metric.target": None, **overrides}  # type: ignore[arg-type]
    )
    return make_repo(
        tmp_path / "repo",
        {"calc.py": "N = 10\n", "bench.py": "# the judge\n", "autoresearch.toml": config},
    )


def no_five(workspace: Path) -> bool:
    return "N = 5" not in (workspace / "calc.py").read_text()


def run(repo: Path, proposer: ScriptedProposer, n: int) -> Engine:
    made = Engine(
        load_campaign(repo),
        proposer=proposer,  # type: ignore[arg-type]
        executor=MemoryExecutor(
            score, guard=lambda ws: "N = 5" not in (ws / "calc.py").read_text()
        ),  # type: ignore[arg-type]
        max_iterations=n,
    )
    made.run()
    return made


def records(repo: Path) -> list[AttemptRecord]:
    return Ledger(repo / ".autoresearch" / "toy").read()


def boasting(value: str) -> object:
    """An edit whose description claims a gain the metric will not show."""

    def edit(workspace: Path) -> Proposal:
        set_n(value)(workspace)
        return Proposal(description=f"N={value}: gained 99% for sure")

    return edit


def test_the_memory_is_derived_from_the_ledger_and_handed_to_the_proposer(tmp_path: Path) -> None:
    repo = toy_repo(tmp_path)
    proposer = ScriptedProposer(
        set_n("7"),  # keep 4
        boasting("20"),  # discard, whatever it says
        set_n("5"),  # guard fails
        set_n('"x"'),  # crash
        set_n("6"),  # keep 3
        set_n("6.5"),
    )
    run(repo, proposer, 6)
    text = (repo / ".autoresearch" / "toy" / "memory.md").read_text()
    worked = text.split("## What worked")[1].split("##")[0]
    failed = text.split("## What failed and why")[1].split("##")[0]
    dead = text.split("## Dead ends")[1]
    assert "#1 gain 3" in worked and "#5 gain 1" in worked
    assert "99%" not in worked  # the claim is not a gain: the ledger says discard
    assert "#3 guard_failed" in failed and "#4 crash" in failed and 'N is "x"' in failed
    assert "calc.py, edits: discard x" in dead and "#2" in dead
    # The prompt of the last attempt carries the memory of the five before it.
    last = proposer.contexts[-1]
    assert "## Research memory (from the ledger)" in last.prompt
    assert "#4 crash" in last.memory and "#4 crash" in last.prompt
    # A proposer without a prompt (Optuna) hears it in observe.
    assert "#5 gain" in proposer.outcomes[-1].memory


def test_the_memory_stays_bounded(tmp_path: Path) -> None:
    many = [AttemptRecord(0, Status.BASELINE, metric=1000.0, commit="c0")]
    for i in range(1, 2001):
        status = [Status.KEEP, Status.DISCARD, Status.CRASH][i % 3]
        many.append(
            AttemptRecord(
                i,
                status,
                metric=1000.0 - i,
                commit=f"c{i}",
                files=(f"src/mod{i % 40}.py",),
                description="x" * 500,
                reason="y" * 2000,
                previous_best=1001.0 - i,
                diffstat=f"src/mod{i % 40}.py +3/-1",
            )
        )
    text = memory_text("toy", "minimize", many)
    assert len(text) <= MAX_CHARS + 600
    assert "#2000" in text or "#1999" in text  # the newest are kept
    assert "older entries left out" in text


def test_escalation_rotates_the_strategy_and_a_keep_resets_it(tmp_path: Path) -> None:
    repo = toy_repo(tmp_path, **{"stop.escalate_after": 2, "stop.breaker_after": 0})
    values = ["20", "21", "22", "23", "24", "25", "26", "27", "28", "7", "29"]
    proposer = ScriptedProposer(*(set_n(v) for v in values))
    run(repo, proposer, len(values))
    asked = [c.strategy for c in proposer.contexts]
    assert asked == [
        "refine",
        "refine",
        "pivot",
        "pivot",
        "simplify",
        "simplify",
        "revisit",
        "revisit",
        "refine",
        "refine",  # attempt 10 is the keep (N=7)
        "refine",
    ]
    assert [r.strategy for r in records(repo)[1:]] == asked
    assert "## Strategy now: pivot" in proposer.contexts[2].prompt


def test_status_names_the_strategy_while_stuck(tmp_path: Path, invoke: Runner) -> None:
    repo = toy_repo(tmp_path, **{"stop.escalate_after": 2})
    run(repo, ScriptedProposer(*(set_n(v) for v in ["20", "21", "22", "23"])), 4)
    data = json.loads(invoke(repo, "status", "--json").stdout)
    assert data["escalation"] == "escalation: strategy pivot (4 attempts without a keep)"
    assert "strategy pivot" in invoke(repo, "status").stdout


def test_the_same_failure_repeated_trips_the_breaker(tmp_path: Path) -> None:
    repo = toy_repo(tmp_path, **{"stop.breaker_after": 2})

    def again(workspace: Path) -> Proposal:
        (workspace / "calc.py").write_text('# once more\nN = "x"\n')
        return Proposal(description="x again")

    proposer = ScriptedProposer(set_n('"x"'), again, set_n("7"), set_n('"x"'), set_n("6"))
    run(repo, proposer, 5)
    statuses = [str(r.status) for r in records(repo)[1:]]
    assert statuses == ["crash", "crash", "keep", "duplicate", "keep"]
    assert [c.strategy for c in proposer.contexts] == [None, None, "pivot", None, None]
    assert "## Stop repeating yourself" in proposer.contexts[2].prompt
    assert "crash" in proposer.contexts[2].prompt.split("Stop repeating yourself")[1]


def test_hypotheses_are_tried_one_per_attempt_and_resume_in_order(tmp_path: Path) -> None:
    repo = toy_repo(tmp_path)
    state = repo / ".autoresearch" / "toy"
    queue_hypotheses(state, ["lower N to 7", "try N = 20", "set N to 6"])
    proposer = ScriptedProposer(set_n("7"), set_n("20"))
    run(repo, proposer, 2)
    assert [c.hypothesis for c in proposer.contexts] == ["lower N to 7", "try N = 20"]
    assert "## The hypothesis to try in this attempt\n\nlower N to 7" in proposer.contexts[0].prompt
    later = ScriptedProposer(set_n("6"), set_n("4"))
    run(repo, later, 4)
    assert [c.hypothesis for c in later.contexts] == ["set N to 6", None]
    assert [r.hypothesis for r in records(repo)[1:]] == [
        "lower N to 7",
        "try N = 20",
        "set N to 6",
        None,
    ]


def test_diminishing_returns_when_recent_gains_are_below_the_noise() -> None:
    def keep(i: int, before: float, after: float) -> AttemptRecord:
        return AttemptRecord(i, Status.KEEP, metric=after, previous_best=before)

    big = [keep(1, 10, 8), keep(2, 8, 6), keep(3, 6, 4)]
    small = [keep(1, 10, 8), keep(2, 8, 7.99), keep(3, 7.99, 7.98), keep(4, 7.98, 7.97)]
    assert diminishing_returns(big, "minimize", 0.1) is None
    assert "noise" in str(diminishing_returns(small, "minimize", 0.1))
    assert diminishing_returns(small, "minimize", None) is not None  # < 0.5% each
    assert diminishing_returns(small[:2], "minimize", 0.1) is None


def test_status_shows_the_diminishing_returns_note(tmp_path: Path, invoke: Runner) -> None:
    repo = toy_repo(tmp_path, **{"stop.escalate_after": 1, "metric.direction": "maximize"})
    # maximize |N - 3|: tiny gains, each under 0.5% of the best before.
    values = ["1000", "1000.5", "1001", "1001.5"]
    run(repo, ScriptedProposer(*(set_n(v) for v in values)), 4)
    data = json.loads(invoke(repo, "status", "--json").stdout)
    assert data["diminishing_returns"] and "0.5%" in data["diminishing_returns"]
    assert "diminishing returns" in invoke(repo, "status").stdout


@pytest.mark.parametrize(
    ("override", "words"),
    [
        ({"stop.escalate_after": -1}, "stop.escalate_after"),
        ({"stop.breaker_after": True}, "stop.breaker_after"),
        ({"ideas": "../outside.md"}, "ideas"),
        ({"proposer": []}, "[[proposer]]"),
    ],
)
def test_bad_settings_are_one_sentence(
    tmp_path: Path, invoke: Runner, override: dict[str, object], words: str
) -> None:
    repo = toy_repo(tmp_path, **override)
    result = invoke(repo, "check")
    assert result.returncode != 0
    assert words in result.stderr and "Traceback" not in result.stderr


def test_the_backlog_is_never_written_through_a_link(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.md"
    target.write_text("- mine\n")
    link = tmp_path / "autoresearch.ideas.md"
    link.symlink_to(target)
    with pytest.raises(OSError):
        append_ideas(link, ["new idea"], 3)
    assert target.read_text() == "- mine\n" and link.is_symlink()
    plain = tmp_path / "plain.md"
    assert append_ideas(plain, ["a", "A", "b"], 1) == ["a", "b"]
    assert append_ideas(plain, ["a (attempt 9)", "c"], 2) == ["c"]
    assert read_backlog(plain)[-3:] == ["a (attempt 1)", "b (attempt 1)", "c (attempt 2)"]


def test_the_memory_says_why_every_refused_attempt_was_not_kept() -> None:
    def attempt(i: int, status: Status, reason: str, **extra: object) -> AttemptRecord:
        return AttemptRecord(
            i, status, commit=f"c{i}", files=("calc.py",), description=f"try {i}", reason=reason,
            **extra,  # type: ignore[arg-type]
        )  # fmt: skip

    history = [
        AttemptRecord(0, Status.BASELINE, metric=7.0, commit="c0"),
        attempt(1, Status.CONSTRAINT_FAILED, "mem_mb 130 broke its limit 120"),
        attempt(2, Status.OVERFIT, "worse on the holdout by 0.4"),
        attempt(3, Status.AWAITING_APPROVAL, "touches calc.py ([approval] paths); better"),
        attempt(4, Status.SUPERSEDED, "a winner, but its change conflicts with #5"),
        attempt(5, Status.SCOPE_VIOLATION, "bench.py is outside the scope"),
        attempt(6, Status.AWAITING_APPROVAL, "touches calc.py ([approval] paths); better"),
        attempt(7, Status.REJECTED, "turned down by a person", approval_of=6),
        attempt(8, Status.DISCARD, "mean 4 vs 4"),
    ]
    text = memory_text("toy", "minimize", history)
    failed = text.split("## What failed and why")[1].split("##")[0]
    dead = text.split("## Dead ends")[1]
    assert "#1 constraint_failed, calc.py (try 1): mem_mb 130 broke its limit 120" in failed
    assert "#2 overfit" in failed and "worse on the holdout" in failed
    assert "#4 superseded" in failed and "#5 scope_violation" in failed
    assert "#7 rejected" in failed and "turned down by a person" in failed
    # A parked candidate did not fail: it waits, or says who decided it.
    assert "#3 awaiting_approval (parked for a person, not a failure)" in failed
    assert "#6 awaiting_approval (parked, then decided by #7: rejected)" in failed
    assert "#8" not in failed  # a discard is a dead end, not a failure
    for status in ("constraint_failed x1", "overfit x1", "superseded x1", "rejected x1"):
        assert status in dead
    assert "discard x1" in dead and "awaiting_approval" not in dead


def test_a_merged_keep_is_remembered_as_worked() -> None:
    history = [
        AttemptRecord(0, Status.BASELINE, metric=7.0, commit="c0"),
        AttemptRecord(
            1, Status.MERGED, metric=5.0, previous_best=7.0, commit="c1", description="both"
        ),
    ]
    worked = memory_text("toy", "minimize", history).split("## What worked")[1]
    assert "#1 gain 2" in worked
