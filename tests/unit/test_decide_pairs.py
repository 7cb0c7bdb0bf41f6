"""The interleaved pairs' statistic (`Rule.pairs`): what both runs of a pair share cancels,
and the keep asks the pairs too."""

from __future__ import annotations

from autoresearch.stats.decide import Comparison, Noise, Rule, Side, Verdict


def drive(rule: Rule, candidate: float, incumbent: float) -> Comparison:
    """A comparison against a reference carried over from a slower machine, whose candidate
    and fresh incumbent runs come out equal: the same code on the machine as it is now."""
    test = Comparison(rule, "minimize", [101.5] * 8, Noise(1.0, 1000), 8, efficacy=1.5)
    while isinstance(side := test.next(), Side):
        test.add(candidate if side is Side.CANDIDATE else incumbent)
    return test


def test_a_shift_both_runs_of_each_pair_share_is_no_gain_to_the_pairs() -> None:
    sides = drive(Rule("sequential", estimator="mean"), 100.0, 100.0)
    both = drive(Rule("sequential", estimator="mean", pairs="both"), 100.0, 100.0)
    # The sides see the old reference's level as a gain; the pairs see none.
    assert sides.verdict is Verdict.KEEP
    assert both.verdict is Verdict.DISCARD
    assert both.look is not None and both.look.paired == 0.0


def test_a_real_gain_is_kept_by_the_pairs_too() -> None:
    both = drive(Rule("sequential", estimator="mean", pairs="both"), 97.0, 100.0)
    assert both.verdict is Verdict.KEEP
    assert both.look is not None and both.look.paired is not None and both.look.paired > 0
    assert both.pair_gains() and both.pair_gains() == [3.0] * len(both.pair_gains())
