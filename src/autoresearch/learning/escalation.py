"""Escalation when stuck: after `[stop] escalate_after` attempts without a keep the strategy
the proposer is asked to follow rotates, and with several `[[proposer]]` tables the next one
takes over; a breaker trip (the same failure `[stop] breaker_after` times) escalates at once.

The step is derived from the ledger alone, so a resumed campaign is at the step it left.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from autoresearch.attempt import AttemptRecord, Status, num
from autoresearch.measure.repeats import breaker_trips, repeated_failure
from autoresearch.proposers.base import STRATEGY_ADVICE as ADVICE

STRATEGIES = ("refine", "pivot", "simplify", "revisit")


def stuck_streak(records: Sequence[AttemptRecord]) -> int:
    """Attempts since the last keep (or the baseline); an interrupted one does not count."""
    streak = 0
    for record in reversed(records):
        if record.status.sets_best:
            break
        if record.status.counts_toward_plateau:
            streak += 1
    return streak


@dataclass(frozen=True)
class Step:
    """Where the escalation stands for the next attempt."""

    level: int  # 0: not escalated
    strategy: str | None  # None: no strategy is asked for (escalation is off)
    proposer: int  # index into the [[proposer]] list
    breaker: str | None  # the failure the last attempts repeated, when the breaker tripped

    def advice(self) -> str:
        return ADVICE[self.strategy] if self.strategy else ""


def step(
    records: Sequence[AttemptRecord], escalate_after: int, breaker_after: int, proposers: int
) -> Step:
    """The strategy and proposer for the next attempt."""
    streak = stuck_streak(records)
    level = (streak // escalate_after if escalate_after > 0 else 0) + breaker_trips(
        records, breaker_after
    )
    enabled = escalate_after > 0 or level > 0
    strategy = STRATEGIES[level % len(STRATEGIES)] if enabled else None
    breaker = repeated_failure(records, breaker_after)
    return Step(level, strategy, min(level, max(proposers - 1, 0)), breaker)


DIMINISHING_WINDOW = 3
SMALL_PCT = 0.5  # of the previous best, when the noise is not known


def diminishing_returns(
    records: Sequence[AttemptRecord], direction: str, noise: float | None
) -> str | None:
    """A note when each of the last keeps gained less than the noise (or, with no noise
    estimate, less than 0.5% of the previous best): the campaign may be done."""
    keeps = [r for r in records if r.status.kept_change]
    recent = keeps[-DIMINISHING_WINDOW:]
    if len(recent) < DIMINISHING_WINDOW:
        return None
    gains: list[float] = []
    for r in recent:
        if r.metric is None or r.previous_best is None:
            return None
        gain = r.previous_best - r.metric if direction == "minimize" else r.metric - r.previous_best
        gains.append(gain)
    if noise is not None and noise > 0:
        if all(g < noise for g in gains):
            shown = ", ".join(num(g) for g in gains)
            return (
                f"diminishing returns: the last {len(gains)} keeps gained {shown}, each less "
                f"than the noise (sigma {num(noise)}); consider stopping or a new direction"
            )
        return None
    small = [
        r.previous_best is not None and abs(g) < SMALL_PCT / 100 * abs(r.previous_best)
        for g, r in zip(gains, recent, strict=True)
    ]
    if all(small):
        return (
            f"diminishing returns: the last {len(gains)} keeps each gained less than "
            f"{SMALL_PCT}% of the best before them; consider stopping or a new direction"
        )
    return None


def search_notes(
    records: Sequence[AttemptRecord], direction: str, noise: float | None
) -> dict[str, str | None]:
    """What `status` says about the search: the strategy the last attempt was asked to
    follow while stuck, and the diminishing-returns note."""
    streak = stuck_streak(records)
    last = next((r for r in reversed(records) if r.status is not Status.BASELINE), None)
    escalation = None
    if last is not None and last.strategy and streak:
        escalation = f"escalation: strategy {last.strategy} ({streak} attempts without a keep)"
    return {
        "escalation": escalation,
        "diminishing_returns": diminishing_returns(records, direction, noise),
    }
