"""What the engine reports while it runs. Consumers (the terminal, MLflow) get these values
through one callback; the engine knows none of them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from autoresearch.attempt import AttemptRecord


@dataclass(frozen=True)
class Started:
    summary: dict[str, Any]  # the campaign summary as `status --json` prints it
    max_iterations: int
    workspace: str
    resumed: bool


@dataclass(frozen=True)
class PhaseChanged:
    """proposing, checking, measuring (sample k of n, of the candidate or incumbent), guard."""

    phase: str
    iteration: int | None
    sample: int | None = None
    samples: int | None = None
    side: str | None = None  # "incumbent" while the incumbent is re-measured
    slot: int | None = None  # with `[executor] jobs` above 1: which slot's attempt


@dataclass(frozen=True)
class Attempted:
    record: AttemptRecord
    best: float | None
    max_iterations: int


@dataclass(frozen=True)
class Warned:
    message: str


@dataclass(frozen=True)
class Noted:
    """Something the user should know that is not a problem (the decision rule chosen)."""

    message: str


@dataclass(frozen=True)
class Stopped:
    stop_reason: str
    summary: dict[str, Any]
    message: str
    branch: str
    ledger: str


Event = Started | PhaseChanged | Attempted | Warned | Noted | Stopped
Listener = Callable[[Event], None]


def fan_out(*listeners: Listener | None) -> Listener:
    """One listener that hands every event to each of `listeners` in turn."""
    active = [listener for listener in listeners if listener is not None]

    def emit(event: Event) -> None:
        for listener in active:
            listener(event)

    return emit
