"""The stop rules, checked before every attempt."""

from __future__ import annotations

from dataclasses import dataclass

from autoresearch.attempt import StopReason
from autoresearch.config import CampaignConfig
from autoresearch.store.summary import Summary, reached


@dataclass(frozen=True)
class StopRules:
    max_iterations: int
    direction: str
    target: float | None = None
    plateau: int = 0  # attempts in a row not kept (0: off)
    max_minutes: float = 0.0  # wall clock of one run (0: off)
    max_cost_usd: float | None = None

    @classmethod
    def of(cls, cfg: CampaignConfig, max_iterations: int) -> StopRules:
        return cls(
            max_iterations=max_iterations,
            direction=str(cfg.metric.direction),
            target=cfg.metric.target,
            plateau=cfg.stop.plateau,
            max_minutes=cfg.stop.max_minutes,
            max_cost_usd=cfg.stop.max_cost_usd,
        )


def stop_reason(
    rules: StopRules, summary: Summary, best: float | None, iterations: int, minutes: float
) -> StopReason | None:
    """The first stop rule that holds, or None to go on."""
    if best is not None and reached(best, rules.target, rules.direction):
        return StopReason.TARGET
    if iterations >= rules.max_iterations:
        return StopReason.MAX_ITERATIONS
    if rules.plateau and summary.streak >= rules.plateau:
        return StopReason.PLATEAU
    if rules.max_minutes and minutes >= rules.max_minutes:
        return StopReason.MAX_MINUTES
    if rules.max_cost_usd is not None and summary.cost_usd >= rules.max_cost_usd:
        return StopReason.MAX_COST
    return None
