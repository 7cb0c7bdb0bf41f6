"""Decision rules: samples in, verdict out. Pure functions, no I/O."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from enum import Enum

from autoresearch.config import DecisionConfig, parse_min_delta


class Verdict(Enum):
    KEEP = "keep"
    DISCARD = "discard"
    MORE = "more"  # another pair of samples is needed before deciding


def gain(candidate: float, incumbent: float, direction: str) -> float:
    """How much better `candidate` is than `incumbent` (positive = better)."""
    return incumbent - candidate if direction == "minimize" else candidate - incumbent


def min_delta_abs(rule: DecisionConfig, reference: float) -> float:
    amount, percent = parse_min_delta(rule.min_delta)
    return abs(reference) * amount / 100.0 if percent else amount


def estimate(samples: Sequence[float]) -> float:
    """The number a rule reports for a set of samples."""
    return statistics.fmean(samples)


def decide(
    incumbent: Sequence[float],
    candidate: Sequence[float],
    direction: str,
    rule: DecisionConfig,
) -> Verdict:
    if not candidate or not incumbent:
        return Verdict.MORE
    g = gain(estimate(candidate), estimate(incumbent), direction)
    if rule.rule == "strict":
        return Verdict.KEEP if g > 0 else Verdict.DISCARD
    if rule.rule == "threshold":
        threshold = min_delta_abs(rule, estimate(incumbent))
        return Verdict.KEEP if g > threshold and g > 0 else Verdict.DISCARD
    raise ValueError(f"unknown decision rule {rule.rule!r}")


def samples_needed(rule: DecisionConfig) -> int:
    """Samples taken of a candidate (and of the baseline) before `decide` is asked."""
    return 1
