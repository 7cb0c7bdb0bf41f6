"""No repeated work: files measured before are answered from the ledger, and the same
failure over and over trips the breaker. In-process engine, real git and ledger."""

from __future__ import annotations

from pathlib import Path

from autoresearch.attempt import AttemptRecord, Status
from autoresearch.checks.verify import verify_campaign
from autoresearch.config import load_campaign
from autoresearch.engine import Engine
from autoresearch.measure.repeats import breaker_trips, duplicate_of, failure_signature
from autoresearch.proposers.base import Proposal
from autoresearch.store.ledger import Ledger
from campaigns import campaign_toml
from conftest import make_repo
from unit.memory import MemoryExecutor, ScriptedProposer, score, set_n


def toy_repo(tmp_path: Path, **overrides: object) -> Path:
    config = campaign_toml(
        **{"metric.command": "metric", "guard": None, "metric.target": None, **overrides}  # type: ignore[arg-type]
    )
    return make_repo(
        tmp_path / "repo",
        {"calc.py": "N = 10\n", "bench.py": "# the judge\n", "autoresearch.toml": config},
    )


def run(repo: Path, proposer: ScriptedProposer, executor: MemoryExecutor, n: int) -> Engine:
    made = Engine(
        load_campaign(repo),
        proposer=proposer,  # type: ignore[arg-type]
        executor=executor,  # type: ignore[arg-type]
        max_iterations=n,
    )
    made.run()
    return made


def metric_runs(executor: MemoryExecutor) -> int:
    return sum(1 for command, _ in executor.runs if command == "metric")


def test_files_measured_before_are_not_measured_again(tmp_path: Path) -> None:
    repo = toy_repo(tmp_path)
    executor = MemoryExecutor(score)
    proposer = ScriptedProposer(
        set_n("7"),  # keep (4)
        set_n("8"),  # discard (5)
        set_n("8"),  # the same files as attempt 2
        set_n("10"),  # the baseline's files
        set_n("6"),  # keep (3): something new is measured
    )
    run(repo, proposer, executor, 5)
    records = Ledger(repo / ".autoresearch" / "toy").read()
    assert [str(r.status) for r in records] == [
        "baseline",
        "keep",
        "discard",
        "duplicate",
        "duplicate",
        "keep",
    ]
    assert records[3].metric is None and not records[3].samples
    assert "attempt 2" in (records[3].reason or "")
    assert "baseline" in (records[4].reason or "")
    assert duplicate_of(records[3]) == 2 and duplicate_of(records[4]) == 0
    # One metric run each for the baseline and the three measured candidates, none more.
    assert metric_runs(executor) == 4
    # The proposer hears the number the earlier twin measured.
    assert [o.metric for o in proposer.outcomes[2:4]] == [5.0, 7.0]
    # The duplicate's candidate was rolled back: the next keep builds on attempt 1.
    assert records[5].parent == records[1].commit
    report = verify_campaign(repo, repo / ".autoresearch" / "toy", "toy")
    assert report.ok, report.problems


def test_a_resumed_campaign_still_knows_what_it_measured(tmp_path: Path) -> None:
    repo = toy_repo(tmp_path)
    run(repo, ScriptedProposer(set_n("8")), MemoryExecutor(score), 1)
    executor = MemoryExecutor(score)
    run(repo, ScriptedProposer(set_n("8")), executor, 2)
    records = Ledger(repo / ".autoresearch" / "toy").read()
    assert [str(r.status) for r in records] == ["baseline", "keep", "no_change"]
    run(repo, ScriptedProposer(set_n("10")), executor, 3)
    records = Ledger(repo / ".autoresearch" / "toy").read()
    assert str(records[-1].status) == "duplicate" and duplicate_of(records[-1]) == 0
    assert metric_runs(executor) == 0  # the resumed engines measured nothing


def test_a_duplicate_needs_the_exact_files(tmp_path: Path) -> None:
    repo = toy_repo(tmp_path)
    executor = MemoryExecutor(score)

    def comment(workspace: Path) -> Proposal:
        path = workspace / "calc.py"
        path.write_text("# again\nN = 8\n")
        return Proposal(description="same number, other text")

    run(repo, ScriptedProposer(set_n("8"), comment), executor, 2)
    records = Ledger(repo / ".autoresearch" / "toy").read()
    assert [str(r.status) for r in records][1:] == ["keep", "discard"]


def record(iteration: int, status: str, reason: str = "") -> AttemptRecord:
    return AttemptRecord(iteration=iteration, status=Status(status), reason=reason or None)


def test_the_breaker_counts_runs_of_the_same_failure_since_the_last_keep() -> None:
    crash = "exited with code 1: N is x (0.{} s)"
    same = [record(i, "crash", crash.format(i)) for i in range(1, 4)]
    assert len({failure_signature(r) for r in same}) == 1
    assert breaker_trips([record(0, "baseline"), *same], 3) == 1
    assert breaker_trips([record(0, "baseline"), *same], 0) == 0
    mixed = [same[0], record(2, "guard_failed", "exit 1"), same[2]]
    assert breaker_trips(mixed, 2) == 0
    # A discard is a measured result, not a failure: it breaks the run.
    broken = [same[0], same[1], record(3, "discard", "mean 5 vs 4"), same[2]]
    assert breaker_trips(broken, 3) == 0
    # An interrupted attempt neither counts nor breaks it.
    paused = [same[0], record(2, "interrupted", "signal"), same[1], same[2]]
    assert breaker_trips(paused, 3) == 1
    # A keep starts afresh.
    assert breaker_trips([*same, record(4, "keep")], 3) == 0
    dupes = [record(i, "duplicate", "the same files as attempt 2 (discard)") for i in (3, 4)]
    assert breaker_trips(dupes, 2) == 1


def test_the_breaker_counts_refused_candidates_but_not_parked_ones() -> None:
    from autoresearch.learning.escalation import step

    base = record(0, "baseline")
    broke = [record(i, "constraint_failed", f"mem_mb {100 + i} > 100") for i in (1, 2, 3)]
    assert breaker_trips([base, *broke], 3) == 1
    where = step([base, *broke], 0, 3, 1)
    assert where.breaker is not None and where.breaker.startswith("constraint_failed")
    for status in ("overfit", "rejected", "superseded"):
        same = [record(i, status, "the same reason") for i in (1, 2)]
        assert breaker_trips([base, *same], 2) == 1, status
    parked = [record(i, "awaiting_approval", "touches x ([approval] paths)") for i in (1, 2, 3)]
    assert breaker_trips([base, *parked], 3) == 0
    assert failure_signature(parked[0]) is None
