"""The candidate queue: everything measured without a fresh proposal, in one ordered list.

A candidate found in flight after a kill (by the sequential run or by a slot), a guard
rework's try, a change a person approved, and a parallel winner measured again (merged
onto a newer incumbent, or alone after its combination lost) are all one kind of entry,
tagged with why it is there. The engine drains the queue before it asks the proposer for a
new change; the attempt procedure reads the entry and nothing else to know what to do.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum

from autoresearch.attempt import AttemptRecord, Incumbent
from autoresearch.checks.rework import Rework
from autoresearch.engine.recording import Collected, Steps


class Why(StrEnum):
    RESUMED = "resumed"  # committed when an engine (or one of its slots) was killed
    REWORK = "rework"  # the guard refused a better candidate: the proposer tries to fix it
    APPROVED = "approved"  # a parked change a person approved, re-checked on the best
    MERGE = "merge"  # a parallel winner's change merged onto a newer incumbent
    ALONE = "alone"  # that combination lost: the winner's own change, measured alone


@dataclass(frozen=True)
class Again:
    """A winner measured again against a newer incumbent: the attempt keeps its number
    and its record is written once, when the last measurement is in."""

    steps: Steps
    start: Incumbent  # what it is measured against now
    combined: tuple[int, ...] = ()  # the attempts whose changes it holds
    alone: str = ""  # how the winner did alone, for the record of its combinations
    original: Collected | None = None  # the winner's own change, before any merge
    retried_alone: bool = False


@dataclass(frozen=True)
class Queued:
    why: Why
    record: AttemptRecord | None = None  # RESUMED, APPROVED: the candidate (its `commit`)
    rework: Rework | None = None  # REWORK, or a RESUMED candidate that was its try
    again: Again | None = None  # MERGE, ALONE

    @property
    def asks_proposer(self) -> bool:
        """A rework's try is the proposer's fix; every other entry is measured as it is."""
        return self.why is Why.REWORK

    @property
    def finishes_attempt(self) -> bool:
        """It completes an attempt already under way (or the one an approval asked for):
        measured whatever the stop rules say."""
        return self.again is not None or self.why is Why.APPROVED

    @property
    def note(self) -> str | None:
        """How the candidate came about, for its record."""
        if self.again is not None:
            return self.again.steps.note
        if self.record is None:
            return None
        if self.why is Why.APPROVED:
            of = self.record.iteration
            return f"approved: attempt {of}'s change, re-checked on the best"
        return f"the candidate of attempt {self.record.iteration}, measured on resume"


class CandidateQueue:
    def __init__(self) -> None:
        self.entries: deque[Queued] = deque()

    def push(self, entry: Queued, *, front: bool = False) -> None:
        if entry.why is Why.REWORK:
            # One rework is under way at a time: a newer one replaces a waiting one.
            self.entries = deque(e for e in self.entries if e.why is not Why.REWORK)
        if front:
            self.entries.appendleft(entry)
        else:
            self.entries.append(entry)

    def pop(self, *, finishing_only: bool = False) -> Queued | None:
        """The next entry; with `finishing_only`, the next that completes an attempt."""
        for entry in self.entries:
            if entry.finishes_attempt or not finishing_only:
                self.entries.remove(entry)
                return entry
        return None

    def rework(self) -> Rework | None:
        """The rework waiting for its try, if any."""
        return next((e.rework for e in self.entries if e.why is Why.REWORK), None)

    def __iter__(self) -> Iterator[Queued]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)
