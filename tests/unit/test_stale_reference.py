"""A reference taken long ago no longer judges a candidate: on a machine whose speed
wandered since, the incumbent is measured again first (`sample_book.REFERENCE_HORIZON`)."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest

from autoresearch.attempt import AttemptRecord
from autoresearch.config import DecisionConfig
from autoresearch.stats import sample_book
from autoresearch.stats.decide import Side, Verdict
from autoresearch.stats.sample_book import REFERENCE_HORIZON, SampleBook


class Machine:
    """Runs of a minimize metric whose level is the code's times the machine's speed."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.speed = 1.0

    def run(self, level: float) -> float:
        return level * self.speed + self.rng.gauss(0.0, 0.3)


def book(max_samples: int = 8) -> SampleBook:
    rule = DecisionConfig(max_samples=max_samples).to_rule()  # rule = "auto", the default
    return SampleBook(rule, "minimize")


def compare(
    live: SampleBook,
    incumbent: str,
    commit: str,
    candidate: Callable[[], float],
    remeasure: Callable[[], float],
    ledger: list[dict[str, Any]],
) -> Verdict:
    """One comparison as the evaluator drives it, written to `ledger` as the engine does."""
    reference = live.reference(incumbent)
    test = live.comparison(incumbent)
    samples: list[float] = []
    again: list[float] = []
    while isinstance(side := test.next(), Side):
        if side is Side.INCUMBENT:
            value = remeasure()
            again.append(value)
            live.remeasured(incumbent, value)
        else:
            value = candidate()
            samples.append(value)
        test.add(value)
    live.measured(commit, samples)
    status = "keep" if test.verdict is Verdict.KEEP else "discard"
    if status == "keep":
        live.kept(commit)
    ledger.append(
        {
            "iteration": len(ledger),
            "status": status,
            "commit": commit,
            "parent": incumbent,
            "samples": samples,
            "incumbent_samples": again,
            "reference": reference,  # what it was judged against, for the test alone
        }
    )
    return test.verdict


def campaign_on_a_slowing_machine(seed: int) -> tuple[SampleBook, list[dict[str, Any]], Verdict]:
    """The baseline and six null candidates on a steady machine; then the machine slows
    down 6% over 12 more null candidates and stays there for 24 (each first run looks worse
    than the reference, so none re-measures the incumbent); then a candidate 2% faster
    than the incumbent."""
    machine = Machine(seed)
    live = book()
    baseline = [machine.run(100.0) for _ in range(4)]
    live.baseline("b", baseline)
    ledger: list[dict[str, Any]] = [
        {"iteration": 0, "status": "baseline", "commit": "b", "samples": baseline}
    ]

    def null() -> float:
        return machine.run(100.0)

    for i in range(6):
        compare(live, "b", f"n{i}", null, null, ledger)
    for i in range(36):
        machine.speed = 1.0 + 0.06 * min(i + 1, 12) / 12
        compare(live, "b", f"s{i}", null, null, ledger)
    verdict = compare(live, "b", "gain", lambda: machine.run(98.0), null, ledger)
    return live, ledger, verdict


def test_a_real_gain_is_kept_after_the_machine_slowed_down() -> None:
    """The promise: a candidate 2% faster (seven noise units) is kept, though the incumbent
    runs the campaign had were taken while the machine was 6% faster. Judged against them,
    its first run looks 4% worse and is screened out: 8 of these 10 campaigns lost it."""
    kept = [campaign_on_a_slowing_machine(seed)[2] for seed in range(10)]
    assert kept.count(Verdict.KEEP) >= 9, kept


def test_a_reference_within_the_horizon_is_kept_whole() -> None:
    """On a steady machine a candidate is judged against the incumbent runs the campaign
    already has: nothing is measured again that is recent enough to judge by."""
    machine = Machine(3)
    live = book()
    live.baseline("b", [machine.run(100.0) for _ in range(4)])
    ledger: list[dict[str, Any]] = []
    compare(live, "b", "n0", lambda: machine.run(100.0), lambda: machine.run(100.0), ledger)
    assert live.reference("b") == live.groups["b"][-8:]
    assert live.comparison("b").next() is Side.CANDIDATE


def test_the_reference_expires_after_the_horizon() -> None:
    """Runs of other candidates, none of the incumbent: once `REFERENCE_HORIZON` times
    `max_samples` runs have passed since its last run, the incumbent is measured first."""
    live = book(max_samples=4)
    live.baseline("b", [100.0, 100.2, 99.9, 100.1])
    horizon = REFERENCE_HORIZON * 4
    for i in range(horizon - 1):
        live.measured(f"c{i}", [101.0])
    assert len(live.reference("b")) == 1 and live.comparison("b").next() is Side.CANDIDATE
    live.measured("last", [101.0])
    assert live.reference("b") == [] and live.comparison("b").next() is Side.INCUMBENT


def test_a_resumed_campaign_and_verify_know_the_same_reference(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The ledger alone gives every reference the live campaign judged by: the clock is
    rebuilt record by record, the incumbent's re-measurements before the candidate's."""
    live, ledger, _ = campaign_on_a_slowing_machine(5)
    records = [AttemptRecord.from_json(r) for r in ledger]
    cut_short = 0
    for cut in range(1, len(records)):
        resumed = book()
        resumed.load(records[:cut])
        assert resumed.reference("b") == ledger[cut]["reference"], cut
        with monkeypatch.context() as m:
            m.setattr(sample_book, "REFERENCE_HORIZON", 10**9)  # nothing goes stale
            cut_short += len(resumed.reference("b")) > len(ledger[cut]["reference"])
    assert cut_short > 0  # stale runs were left out, and alike on resume
    full = book()
    full.load(records)
    assert full.clock.times == live.clock.times
