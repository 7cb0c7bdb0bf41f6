"""The single-sample rules: strict and threshold, relative and absolute."""

from __future__ import annotations

from autoresearch.config import DecisionConfig
from autoresearch.stats.decide import Verdict, decide


def test_strict_and_threshold_rules() -> None:
    strict = DecisionConfig(rule="strict")
    assert decide([5.0], [4.0], "minimize", strict) is Verdict.KEEP
    assert decide([5.0], [5.0], "minimize", strict) is Verdict.DISCARD
    assert decide([5.0], [6.0], "maximize", strict) is Verdict.KEEP
    threshold = DecisionConfig(rule="threshold", min_delta="10%")
    assert decide([100.0], [95.0], "minimize", threshold) is Verdict.DISCARD
    assert decide([100.0], [89.0], "minimize", threshold) is Verdict.KEEP
    absolute = DecisionConfig(rule="threshold", min_delta=0.5)
    assert decide([1.0], [1.6], "maximize", absolute) is Verdict.KEEP
    assert decide([1.0], [1.4], "maximize", absolute) is Verdict.DISCARD
