"""bench/decisions_fast.py reproduces bench/decisions.py: same engine decisions, run for run."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import decisions
import decisions_fast


@pytest.mark.parametrize("rule,scenario", [("sequential", 1), ("repeats", 3)])
def test_replica_matches_the_engine(rule: str, scenario: int) -> None:
    chosen = decisions.SCENARIOS[scenario]
    engine = decisions.run_campaign((chosen, rule, 3, 8, 0))
    replica = decisions_fast.run_campaign(chosen, rule, 3, 8)
    assert replica == pytest.approx(engine)
    assert engine["runs"] > 8  # the rule took repeated samples, so the match is telling


@pytest.mark.parametrize(
    "rule,chosen",
    [
        ("auto", decisions.UNTUNED_SCENARIOS[3]),
        ("auto", decisions.UNTUNED_SCENARIOS[0]),
        ("strict", decisions.STATES_SCENARIOS[-1]),
        ("auto", decisions.ORDER_SCENARIOS[9]),
        ("auto", decisions.ORDER_SCENARIOS[-1]),
    ],
)
def test_replica_matches_the_engine_on_an_untuned_shape(
    rule: str, chosen: decisions.Scenario
) -> None:
    """The level shift halfway follows the attempt (AUTORESEARCH_ITERATION in the engine,
    the replica's own count); the bursts keep one magnitude per burst. The recorded best's
    figures (its moves, its error) come from the engine's ledger and from the replica's
    evaluator alike. The frequency states switch with odds that depend on the state. An
    order artifact remembers the runs before it (in metric.py's state file, the replica's
    state)."""
    engine = decisions.run_campaign((chosen, rule, 3, 8, 0))
    replica = decisions_fast.run_campaign(chosen, rule, 3, 8)
    assert replica == pytest.approx(engine)
    assert engine["runs"] > 8  # the rule took repeated samples, so the match is telling


def test_where_the_runs_went_adds_up_to_the_campaign() -> None:
    """`--runs`: every run is the candidate's, the incumbent's or a baseline's, every
    attempt ends once, and an attempt's candidate runs are the ones counted."""
    from collections import Counter

    from autoresearch.stats.decide import BASELINE_SAMPLES

    chosen = decisions.UNTUNED_SCENARIOS[0]
    where: Counter[tuple[str, int, str]] = Counter()
    by_option: Counter[tuple[str, str]] = Counter()
    row = decisions_fast.run_campaign(chosen, "auto", 3, 8, 0, None, where, by_option)
    candidate, incumbent = where.pop(("candidate", 0, "")), where.pop(("incumbent", 0, ""))
    baseline = row["runs"] - candidate - incumbent
    assert BASELINE_SAMPLES <= baseline < 2 * BASELINE_SAMPLES
    assert incumbent > 0
    assert sum(where.values()) == row["attempts"]
    assert sum(ran * n for (_, ran, _), n in where.items()) == candidate
    assert sum(n for (kind, _, _), n in where.items() if kind == "not better") == row["not_better"]
    assert sum(n for (_, _, how), n in where.items() if how == "keep") == row["keeps"]
    assert all(how != "other" for _, _, how in where)
    # Every attempt under one option, its runs under it: the campaign's runs but the baseline's.
    assert sum(n for (_, what), n in by_option.items() if what == "attempts") == row["attempts"]
    assert sum(n for (_, what), n in by_option.items() if what == "runs") == candidate + incumbent
    assert any("judged after own, probing" in label for label, _ in by_option)
