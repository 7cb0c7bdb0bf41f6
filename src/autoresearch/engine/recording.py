"""Turning an attempt's steps into the ledger record: one place that knows the keys."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from autoresearch.attempt import (
    AttemptRecord,
    Cost,
    EarlierComparison,
    Incumbent,
    Screened,
    Status,
    Timings,
)
from autoresearch.learning.guidance import Guidance
from autoresearch.measure.evaluation import Evaluation
from autoresearch.measure.metrics import ledger_field
from autoresearch.proposers.base import Proposal
from autoresearch.stats.decide import Verdict, judged_level, kept_best
from autoresearch.workspace import Candidate


@dataclass(frozen=True)
class Collected:
    """What the proposer left in the workspace, committed unless the checkout changed."""

    candidate: Candidate
    description: str
    commit: str | None = None
    diffstat: str | None = None
    checkout_changes: tuple[str, ...] = ()

    @property
    def files(self) -> tuple[str, ...]:
        return () if self.checkout_changes else tuple(self.candidate.paths)


@dataclass(frozen=True)
class Judged:
    """How a measured candidate came out."""

    status: Status
    reason: str | None
    measured: Evaluation
    guard_seconds: float = 0.0
    lines: dict[str, Any] | None = None  # the diff size, when simplicity weighed it
    holdout: dict[str, Any] | None = None  # the holdout's verdict, when it ran


# An attempt whose steps never reached an outcome: a signal stopped it.
NOT_FINISHED = Screened(Status.INTERRUPTED)


@dataclass(frozen=True)
class Steps:
    """What one attempt's steps handed on, as far as they got (a signal may cut it short)."""

    iteration: int
    began: float  # on the engine's clock
    proposal: Proposal | None = None
    propose_seconds: float = 0.0
    collected: Collected | None = None
    outcome: Screened | Judged = NOT_FINISHED
    note: str | None = None  # how the candidate came about, when not from the proposer
    guidance: Guidance | None = None  # what the engine asked the proposer for
    rework_of: int | None = None  # the attempt whose candidate this try fixes
    approval_of: int | None = None  # the parked attempt an approval re-checks
    # Comparisons taken before the one in `outcome`, set aside (`merging`).
    earlier: tuple[EarlierComparison, ...] = ()


def attempt_record(
    steps: Steps,
    before: Incumbent,
    after: Incumbent,
    now: float,
) -> AttemptRecord:
    """The record of an attempt the engine saw through (or that a signal cut short)."""
    outcome, collected = steps.outcome, steps.collected
    measured = outcome.measured if isinstance(outcome, Judged) else None
    metric = measured.metric if measured else None
    measure_seconds = measured.seconds if measured else 0.0
    guard_seconds = outcome.guard_seconds if isinstance(outcome, Judged) else 0.0
    propose_seconds = steps.propose_seconds
    total = now - steps.began
    engine = total - propose_seconds - measure_seconds - guard_seconds
    asked = steps.guidance or Guidance()
    return AttemptRecord(
        hypothesis=asked.hypothesis,
        strategy=asked.strategy,
        iteration=steps.iteration,
        status=outcome.status,
        metric=metric,
        commit=collected.commit if collected else None,
        parent=before.commit,
        files=collected.files if collected else (),
        description=collected.description if collected else "",
        reason=outcome.reason,
        note=steps.note or _head_note(collected),
        diffstat=collected.diffstat if collected else None,
        **_proposal_fields(steps.proposal),
        **_measured_fields(measured, steps.earlier),
        previous_best=before.metric if outcome.status is Status.KEEP else None,
        lines=outcome.lines if isinstance(outcome, Judged) else None,
        holdout=outcome.holdout if isinstance(outcome, Judged) else None,
        rework_of=steps.rework_of,
        approval_of=steps.approval_of,
        earlier=steps.earlier,
        closed=True,
        delta=judged_delta(before.metric, measured),
        best=after.metric,
        timings=Timings(
            _r(propose_seconds), _r(measure_seconds), _r(guard_seconds), _r(engine), _r(total)
        ),
    )


def judged_delta(best: float | None, measured: Evaluation | None) -> float | None:
    """How the candidate compares with the best as its comparison judged it (its level on
    the best's scale, minus the best); a comparison cut short by a failed run gives its
    samples' mean minus the best."""
    if best is None or measured is None or measured.metric is None:
        return None
    if measured.look is None:
        return measured.metric - best
    return judged_level(best, measured.look) - best


def kept_level(best: float | None, measured: Evaluation, direction: str) -> float | None:
    """The recorded best once `measured` is kept: the level its comparison judged it at, so
    that a keep never moves the best against the direction. A simplification (kept as equal
    within noise, not as better) leaves the best where it was."""
    if best is None or measured.look is None:
        return measured.metric if best is None else best
    if measured.verdict is not Verdict.KEEP:
        return best
    return kept_best(best, measured.look, direction)


def in_flight_record(steps: Steps, before: Incumbent, reason: str) -> AttemptRecord:
    """What is known of an attempt once its candidate is committed: what the record of an
    engine killed from here on says."""
    cut = replace(steps, outcome=Screened(Status.INTERRUPTED, reason))
    record = attempt_record(cut, before, before, steps.began)
    return replace(record, closed=False, delta=None, best=None, timings=None)


def baseline_record(
    incumbent: Incumbent, measured: Evaluation, guard: Evaluation, engine_seconds: float
) -> AttemptRecord:
    return AttemptRecord(
        iteration=0,
        status=Status.BASELINE,
        metric=measured.metric,
        commit=incumbent.commit,
        description="baseline",
        samples=tuple(measured.samples),
        metric_runs=measured.runs,
        metrics=ledger_field(measured.secondary, {}),
        judge_cost=_judge_cost(measured),
        timings=Timings(0.0, _r(measured.seconds), _r(guard.seconds), _r(engine_seconds)),
    )


def _r(seconds: float) -> float:
    return round(seconds, 4)


def _judge_cost(measured: Evaluation) -> Cost:
    if not (measured.cost_usd or measured.tokens_in or measured.tokens_out):
        return Cost()
    return Cost(round(measured.cost_usd, 8), measured.tokens_in, measured.tokens_out)


def _proposal_fields(proposal: Proposal | None) -> dict[str, Any]:
    if proposal is None:
        return {}
    return {
        "cost": Cost(proposal.cost_usd, proposal.tokens_in, proposal.tokens_out),
        "proposer_output": proposal.output_path or None,
        "params": proposal.params or None,
    }


def _measured_fields(
    measured: Evaluation | None, earlier: tuple[EarlierComparison, ...] = ()
) -> dict[str, Any]:
    # `metric_runs` is every run the attempt cost: a set-aside comparison's too.
    before = sum(e.metric_runs for e in earlier)
    if measured is None:
        return {"metric_runs": before} if earlier else {}
    return {
        "samples": tuple(measured.samples),
        "incumbent_samples": tuple(measured.incumbent_samples) or None,
        "metric_runs": measured.runs + before,
        "judge_cost": _judge_cost(measured),
        "metrics": ledger_field(measured.secondary, measured.incumbent_secondary),
    }


def _head_note(collected: Collected | None) -> str | None:
    if collected is None or not collected.candidate.head_moved or collected.checkout_changes:
        return None
    return "the proposer moved HEAD; its work was judged as plain changes"


def describe(candidate: Candidate) -> str:
    names = ", ".join(candidate.paths[:3])
    more = f" and {len(candidate.paths) - 3} more" if len(candidate.paths) > 3 else ""
    return f"edit {names}{more}" if names else "no change"
