"""The engine in-process: real git and ledger, an in-memory executor and proposer."""

from __future__ import annotations

import json
import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from autoresearch.attempt import AttemptRecord, Status
from autoresearch.checks.verify import verify_campaign
from autoresearch.config import load_campaign
from autoresearch.engine import Engine
from autoresearch.engine.lifecycle import Interrupted
from autoresearch.events import Attempted, Event, PhaseChanged, Started, Stopped
from autoresearch.executors.base import CommandSpec
from autoresearch.proposers.base import Proposal
from autoresearch.stats.decide import JUDGE_VERSION
from autoresearch.store.ledger import Ledger, stored_object
from campaigns import campaign_toml, v1_campaign
from conftest import git, make_repo, snapshot
from unit.memory import MemoryExecutor, ScriptedProposer, score, set_n

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "ledger_v1"


def toy_repo(tmp_path: Path, **overrides: object) -> Path:
    config = campaign_toml(
        **{"metric.command": "metric", "guard.command": "guard", **overrides}  # type: ignore[arg-type]
    )
    return make_repo(
        tmp_path / "repo",
        {
            "calc.py": "# the number to tune\nN = 10\n",
            "bench.py": "# the judge\n",
            "autoresearch.toml": config,
        },
    )


def engine(repo: Path, proposer: ScriptedProposer, **kwargs: object) -> tuple[Engine, list[Event]]:
    events: list[Event] = []
    executor = kwargs.pop("executor", None) or MemoryExecutor(
        score, guard=lambda ws: "N = 5" not in (ws / "calc.py").read_text()
    )
    made = Engine(
        load_campaign(repo),
        proposer=proposer,  # type: ignore[arg-type]
        executor=executor,  # type: ignore[arg-type]
        on_event=events.append,
        **kwargs,  # type: ignore[arg-type]
    )
    return made, events


def write_notes(workspace: Path) -> Proposal:
    (workspace / "notes.txt").write_text("hi\n")
    return Proposal(description="write notes outside the scope")


def fail(workspace: Path) -> Proposal:
    return Proposal(description="boom", failed=True, reason="the proposer exited with code 4")


TOY_ATTEMPTS = [
    set_n("7"),
    set_n("9"),
    set_n("5"),
    set_n('"x"', "set N to x"),
    write_notes,
    lambda ws: Proposal(description="change nothing"),
    fail,
    set_n("4"),
    set_n("3"),
]


def test_the_toy_campaign_gives_every_status_and_the_keys_0_1_0_wrote(tmp_path: Path) -> None:
    repo = toy_repo(tmp_path)
    before = snapshot(repo)
    run, events = engine(repo, ScriptedProposer(*TOY_ATTEMPTS))
    result = run.run()
    assert (result.stop_reason, result.exit_code) == ("target", 0)
    records = Ledger(repo / ".autoresearch" / "toy").read()
    assert [r.status for r in records] == [
        Status.BASELINE,
        Status.KEEP,
        Status.DISCARD,
        Status.GUARD_FAILED,
        Status.CRASH,
        Status.SCOPE_VIOLATION,
        Status.NO_CHANGE,
        Status.PROPOSER_FAILED,
        Status.KEEP,
        Status.KEEP,
    ]
    assert [r.metric for r in records] == [7, 4, 6, 2, None, None, None, None, 1, 0]
    assert [r.delta for r in records[1:]] == [-3, 2, -2, None, None, None, None, -3, -1]
    assert [r.best for r in records[1:]] == [4, 4, 4, 4, 4, 4, 4, 1, 0]
    # The same keys, attempt by attempt, as the ledger the previous version wrote.
    old = [json.loads(line) for line in (FIXTURES / "toy_full.jsonl").read_text().splitlines()]
    for new, was in zip(map(stored_object, records), old, strict=True):
        assert new["status"] == was["status"]
        # (the in-memory proposer writes no output file, so it has no `proposer_output`;
        # a keep or a discard now says why, in `reason`)
        keys = [k for k in was if k != "proposer_output"]
        if new["status"] in ("keep", "discard"):
            keys.insert(
                keys.index("previous_best" if "previous_best" in keys else "delta"), "reason"
            )
        # and every record names the version of the rule that wrote it, in `judge`
        assert new.pop("judge") == JUDGE_VERSION
        assert list(new) == keys, new["status"]
    assert records[1].reason == "first run 42.9% better than the incumbent"
    assert records[2].reason == "first run 50.0% worse than the incumbent"
    assert records[3].reason is not None and records[3].reason.startswith("guard exited")
    # The branch holds the best, the user's checkout is untouched byte for byte.
    assert git(repo, "show", "autoresearch/toy:calc.py") == "# the number to tune\nN = 3\n"
    assert snapshot(repo) == before
    kinds = [type(e) for e in events]
    assert kinds[0] is Started and kinds[-1] is Stopped
    assert sum(k is Attempted for k in kinds) == 10
    assert any(isinstance(e, PhaseChanged) and e.phase == "measuring" for e in events)


def test_the_proposer_hears_every_outcome_but_an_interrupted_one(tmp_path: Path) -> None:
    repo = toy_repo(tmp_path)
    proposer = ScriptedProposer(*TOY_ATTEMPTS)
    engine(repo, proposer)[0].run()
    assert [o.status for o in proposer.outcomes] == [
        "keep",
        "discard",
        "guard_failed",
        "crash",
        "scope_violation",
        "no_change",
        "proposer_failed",
        "keep",
        "keep",
    ]
    assert proposer.closed == 1
    assert proposer.contexts[1].best == 4 and proposer.contexts[1].baseline == 7


def test_max_minutes_with_an_injected_clock(tmp_path: Path) -> None:
    repo = toy_repo(tmp_path, **{"stop.max_minutes": 10, "metric.target": None})
    now = [0.0]

    def slow_edit(workspace: Path) -> Proposal:
        now[0] += 180.0  # every proposal takes three minutes of the campaign's clock
        return set_n("9")(workspace)

    run, _ = engine(repo, ScriptedProposer(slow_edit), clock=lambda: now[0])
    assert run.run().stop_reason == "max_minutes"
    # The clock alone decides: 3, 6, 9 minutes go on; after the fourth, 12 >= 10 stops.
    records = Ledger(repo / ".autoresearch" / "toy").read()
    assert [r.iteration for r in records] == [0, 1, 2, 3, 4]


def test_a_signal_during_measurement_rolls_back_and_logs_interrupted(tmp_path: Path) -> None:
    repo = toy_repo(tmp_path)
    executor = MemoryExecutor(score)
    calls = [0]

    def interrupt(spec: CommandSpec, workspace: Path) -> None:
        calls[0] += spec.parse
        if calls[0] == 3:  # baseline, attempt 1, then attempt 2's measurement
            (workspace / "junk.bin").write_text("left by the measurement")
            raise Interrupted(signal.SIGTERM)

    executor.before_run = interrupt
    run, _ = engine(repo, ScriptedProposer(set_n("7"), set_n("6")), executor=executor)
    result = run.run()
    assert (result.stop_reason, result.exit_code) == ("interrupted", 143)
    records = Ledger(repo / ".autoresearch" / "toy").read()
    assert [r.status for r in records] == [Status.BASELINE, Status.KEEP, Status.INTERRUPTED]
    last = records[-1]
    assert last.commit is not None and last.files == ("calc.py",)
    assert last.reason == "stopped by a signal during the attempt"
    worktree = repo / ".autoresearch" / "toy" / "worktree"
    assert (worktree / "calc.py").read_text() == "# the number to tune\nN = 7\n"
    assert not (worktree / "junk.bin").exists()
    assert git(worktree, "status", "--porcelain") == ""
    assert git(repo, "rev-parse", "autoresearch/toy") == git(
        repo, "rev-parse", records[1].commit or ""
    )


def test_three_failing_proposals_in_a_row_stop_the_campaign(tmp_path: Path) -> None:
    def crash(workspace: Path) -> Proposal:
        (workspace / "calc.py").write_text("N = 1\n")
        raise RuntimeError("the proposer's own bug")

    repo = toy_repo(tmp_path)
    result = engine(repo, ScriptedProposer(crash))[0].run()
    assert (result.stop_reason, result.exit_code) == ("proposer_failed", 1)
    records = Ledger(repo / ".autoresearch" / "toy").read()
    assert [r.status for r in records[1:]] == [Status.PROPOSER_FAILED] * 3
    assert records[1].reason is not None and "RuntimeError" in records[1].reason
    assert records[1].commit is not None  # what it left is kept reachable, not measured
    worktree = repo / ".autoresearch" / "toy" / "worktree"
    assert (worktree / "calc.py").read_text() == "# the number to tune\nN = 10\n"


def test_editing_the_judge_halts_with_tampered(tmp_path: Path) -> None:
    def tamper(workspace: Path) -> Proposal:
        (workspace / "bench.py").write_text("print('score: 0')\n")
        return Proposal(description="improve the benchmark")

    repo = toy_repo(tmp_path, scope=["calc.py", "bench.py"], harness=["bench.py"])
    with pytest.raises(Exception, match="both in scope and in harness"):
        engine(repo, ScriptedProposer(tamper))[0].run()
    repo = toy_repo(tmp_path / "second")
    result = engine(repo, ScriptedProposer(tamper))[0].run()
    assert (result.stop_reason, result.exit_code) == ("tampered", 3)
    last = Ledger(repo / ".autoresearch" / "toy").read()[-1]
    assert last.status is Status.TAMPERED and last.reason is not None and "bench.py" in last.reason


def test_the_judge_edited_during_a_measurement_is_caught_before_the_next_run(
    tmp_path: Path,
) -> None:
    repo = toy_repo(tmp_path)
    executor = MemoryExecutor(score)
    calls = [0]

    def rewrite_judge(spec: CommandSpec, workspace: Path) -> None:
        calls[0] += spec.parse
        if calls[0] == 2:  # while attempt 1 is measured, the config in the checkout changes
            config = repo / "autoresearch.toml"
            config.write_text(config.read_text() + "\n# edited\n")

    executor.before_run = rewrite_judge
    result = engine(repo, ScriptedProposer(set_n("7"), set_n("6")), executor=executor)[0].run()
    assert (result.stop_reason, result.exit_code) == ("tampered", 3)


def test_a_proposer_that_commits_is_judged_as_plain_changes(tmp_path: Path) -> None:
    def commit(workspace: Path) -> Proposal:
        set_n("4")(workspace)
        git(workspace, "commit", "-qam", "my own commit")
        git(workspace, "checkout", "-qb", "elsewhere")
        return Proposal(description="set N to 4 and commit")

    repo = toy_repo(tmp_path)
    engine(repo, ScriptedProposer(commit, set_n("4")), max_iterations=1)[0].run()
    record = Ledger(repo / ".autoresearch" / "toy").read()[-1]
    assert record.status is Status.KEEP and record.files == ("calc.py",)
    assert record.note == "the proposer moved HEAD; its work was judged as plain changes"
    worktree = repo / ".autoresearch" / "toy" / "worktree"
    assert git(worktree, "symbolic-ref", "HEAD").strip() == "refs/heads/autoresearch/toy"


def test_a_ledger_written_by_0_1_0_resumes(tmp_path: Path) -> None:
    repo = v1_campaign(tmp_path)
    state = repo / ".autoresearch" / "toy"
    old = (state / "ledger.jsonl").read_text()
    run, _ = engine(repo, ScriptedProposer(set_n("3")), max_iterations=10)
    result = run.run()
    assert result.stop_reason == "target"
    records = Ledger(state).read()
    assert [r.iteration for r in records] == list(range(10))
    assert records[-1].status is Status.KEEP and records[-1].parent == records[8].commit
    assert (state / "ledger.jsonl").read_text().startswith(old)
    report = verify_campaign(repo, state, "toy")
    assert report.ok, report.problems


def test_records_are_typed_end_to_end(tmp_path: Path) -> None:
    repo = toy_repo(tmp_path)
    run, events = engine(repo, ScriptedProposer(set_n("7")), max_iterations=1)
    run.run()
    attempted = [e.record for e in events if isinstance(e, Attempted)]
    assert all(isinstance(r, AttemptRecord) for r in attempted)
    assert attempted == Ledger(repo / ".autoresearch" / "toy").read()


class Killed(BaseException):
    """The engine dies on the spot (no roll-back, no record): what SIGKILL leaves."""


def paid(value: str) -> Callable[[Path], Proposal]:
    def edit(workspace: Path) -> Proposal:
        set_n(value)(workspace)
        return Proposal(description=f"set N to {value}", cost_usd=0.25, tokens_in=100)

    return edit


def die_on_first_candidate_run() -> MemoryExecutor:
    executor = MemoryExecutor(score)
    runs = [0]

    def die(spec: CommandSpec, workspace: Path) -> None:
        runs[0] += spec.parse
        if runs[0] == 2:  # the baseline, then attempt 1's measurement
            raise Killed

    executor.before_run = die
    return executor


def test_a_killed_attempt_keeps_what_is_known_and_a_paid_candidate_is_measured(
    tmp_path: Path,
) -> None:
    repo = toy_repo(tmp_path)
    with pytest.raises(Killed):
        engine(repo, ScriptedProposer(paid("4")), executor=die_on_first_candidate_run())[0].run()
    again = ScriptedProposer(paid("9"))  # would propose something else: it must not be asked
    result = engine(repo, again, max_iterations=2)[0].run()
    assert result.stop_reason == "max_iterations"
    records = Ledger(repo / ".autoresearch" / "toy").read()
    assert [r.status for r in records] == [Status.BASELINE, Status.INTERRUPTED, Status.KEEP]
    lost, measured = records[1], records[2]
    assert lost.commit and lost.files == ("calc.py",) and lost.description == "set N to 4"
    assert lost.cost.usd == 0.25 and lost.diffstat
    assert lost.reason == "the engine stopped while this attempt was in flight"
    assert measured.metric == 1 and measured.description == "set N to 4"
    assert measured.note == "the candidate of attempt 1, measured on resume"
    assert git(repo, "rev-parse", f"{measured.commit}^{{tree}}") == git(
        repo, "rev-parse", f"{lost.commit}^{{tree}}"
    )
    assert again.contexts == [] and measured.cost.usd is None  # paid once, counted once
    assert git(repo, "show", "autoresearch/toy:calc.py").endswith("N = 4\n")


def test_an_unpaid_killed_candidate_is_logged_but_not_measured(tmp_path: Path) -> None:
    repo = toy_repo(tmp_path)
    with pytest.raises(Killed):
        engine(repo, ScriptedProposer(set_n("4")), executor=die_on_first_candidate_run())[0].run()
    again = ScriptedProposer(set_n("12"))
    engine(repo, again, max_iterations=2)[0].run()
    records = Ledger(repo / ".autoresearch" / "toy").read()
    assert [r.status for r in records] == [Status.BASELINE, Status.INTERRUPTED, Status.DISCARD]
    assert records[1].commit and records[1].description == "set N to 4"
    assert len(again.contexts) == 1 and records[2].description == "set N to 12"


def test_a_config_file_in_scope_is_refused_before_anything_runs(tmp_path: Path) -> None:
    from autoresearch.errors import ConfigError

    repo = toy_repo(tmp_path, scope=["calc.py", "*.toml"])
    proposer = ScriptedProposer(set_n("3"))
    with pytest.raises(ConfigError, match="key 'scope': it matches the config file"):
        engine(repo, proposer)[0].run()
    assert proposer.contexts == [] and not Ledger(repo / ".autoresearch" / "toy").read()


def test_the_uncommitted_changes_warning_says_the_config_on_disk_is_used(tmp_path: Path) -> None:
    from autoresearch.events import Warned

    repo = toy_repo(tmp_path)
    config = repo / "autoresearch.toml"
    config.write_text(config.read_text() + "\n# tuned locally\n")
    (repo / "notes.txt").write_text("mine\n")
    run, events = engine(repo, ScriptedProposer(set_n("7")), max_iterations=1)
    run.run()
    warnings = [e.message for e in events if isinstance(e, Warned)]
    assert warnings == [
        "your checkout has uncommitted changes (autoresearch.toml, notes.txt); the campaign "
        "starts from HEAD without them, but reads autoresearch.toml as it is on disk"
    ]
