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


def test_pairs_that_disagree_beyond_the_noise_vouch_for_no_keep() -> None:
    """A change 4% slower (runs at 104) against an incumbent at 100 whose runs stay 15% slow
    three times: those agreeing runs become its new level, so the sides read the loss as a
    gain of 10%. The two pairs read -3.4% and +7.7%: a disturbance hit one of them, and
    which is not known. Their average (+2%) is no evidence; the less favourable one is."""
    rule = Rule("sequential", max_samples=8, estimator="robust", pairs="both", first_keep=3)
    noise = Noise(1.26, 1000, 12.0)
    test = Comparison(rule, "minimize", [98.7, 115.8, 116.0], noise, 3, prior=[96.5])
    test.efficacy = 1.82
    c, i = Side.CANDIDATE, Side.INCUMBENT
    for side, value in ((c, 103.95), (i, 100.5), (c, 105.43), (i, 114.28), (c, 104.30)):
        assert test.next() is side
        test.add(value)
        assert test.verdict is not Verdict.KEEP, value
    assert test.look is not None and test.look.paired is not None and test.look.paired < 0
