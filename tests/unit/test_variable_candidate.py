"""A change that makes its own runs vary more than the incumbent's (a cache it thrashes,
allocations a collector pays for at random) is judged at the campaign's noise, which is
pooled over every version: a few lucky runs of it look like a gain. From its second run
on, where its runs vary more than the incumbent's runs of the same comparison, the
interleaved pairs' own scatter says so (`decide.pair_spread`, `decide.varies_more`); these
tests attack that promise, and hold what it must not cost where every version shares the
noise or bursts of contention hit both sides.

What cannot be promised, and is not asserted: a keep after the candidate's first run (one
run says nothing of its own scatter)."""

from __future__ import annotations

import random

import pytest

from autoresearch.stats import decide
from autoresearch.stats.decide import (
    Comparison,
    Noise,
    Rule,
    Side,
    Verdict,
    chi2_quantile,
    pair_spread,
    varies_more,
)

# What `noise = "auto"` judges with on symmetric noise: the clipped mean, the pairs asked too.
RULE = Rule("sequential", estimator="robust", pairs="both")
COMPARISONS = 1000


def compare(seed: int, times: float, gain: float, slow: float = 0.0) -> Comparison:
    """One comparison right after a keep (the incumbent known by four runs), the noise
    known (sigma 1 at level 100), the candidate's runs `times` as variable, and a share
    `slow` of them slower by 2 to 8 sigma."""
    rng = random.Random(seed)
    prior = [100 + rng.gauss(0, 1) for _ in range(4)]
    test = Comparison(RULE, "minimize", [], Noise(1.0, 60), 0, prior=prior)
    while isinstance(side := test.next(), Side):
        if side is Side.CANDIDATE:
            extra = rng.uniform(2.0, 8.0) if slow and rng.random() < slow else 0.0
            test.add(100 - gain + rng.gauss(0, times) + extra)
        else:
            test.add(100 + rng.gauss(0, 1))
    return test


def test_a_change_whose_runs_vary_three_times_as_much_is_not_kept_once_its_pairs_show_it() -> None:
    """The promise: a change no better than the incumbent, whose runs vary three times as
    much, is kept after its second run or later in fewer than 1 in 10 comparisons. Judged
    at the pooled noise (version 13) it was 12.2% of these comparisons (9.1% now; in all,
    26.8%, was 29.9%: see the module's note)."""
    late = sum(
        1
        for seed in range(COMPARISONS)
        if (test := compare(seed, 3.0, 0.0)).verdict is Verdict.KEEP and len(test.candidate) >= 2
    )
    assert late < 0.10 * COMPARISONS, f"{late} of {COMPARISONS} kept from the second run on"


@pytest.mark.parametrize(("gain", "least"), [(0.0, None), (1.5, 0.58)])
def test_where_every_version_shares_the_noise_nothing_changes(
    gain: float, least: float | None
) -> None:
    """The price: on noise every version shares, null candidates are still kept at most 5%
    of the time (the boundary is calibrated with the pairs' spread as it is now taken), and a
    gain of 1.5 sigma is kept as often as before (60.5% of these comparisons under version
    13, 60.2% now)."""
    kept = sum(compare(seed, 1.0, gain).verdict is Verdict.KEEP for seed in range(COMPARISONS))
    if least is None:
        assert kept <= 0.05 * COMPARISONS, f"{kept} of {COMPARISONS} null candidates kept"
    else:
        assert kept >= least * COMPARISONS, f"the gain was kept in {kept} of {COMPARISONS}"


def test_pairs_that_scatter_as_the_noise_gives_keep_the_expected_spread() -> None:
    expected = 2.0**0.5
    assert pair_spread([0.5], 0.5, expected) == expected  # one pair: nothing of its own
    assert pair_spread([0.0, 1.0, -1.0, 0.5], 0.1, expected) == expected
    wide = [9.0, -9.0, 8.0, -8.0]
    # Far beyond the noise: the pairs' own spread, each deviation clipped at 3 expected.
    edge = 3 * expected
    assert pair_spread(wide, 0.0, expected) == pytest.approx((4 * edge**2 / 3) ** 0.5)
    # One spike among pairs that agree does not widen it past what clipping allows.
    assert pair_spread([0.1, 0.0, -0.1, 40.0], 0.0, expected) == pytest.approx(
        max(expected, ((0.02 + edge**2) / 3) ** 0.5)
    )


@pytest.mark.parametrize(("dof", "exact"), [(1, 2.7055), (2, 4.6052), (4, 7.7794), (7, 12.017)])
def test_the_chi_square_quantile_is_close(dof: int, exact: float) -> None:
    assert chi2_quantile(0.9, dof) == pytest.approx(exact, rel=0.03)


def bursty(seed: int, gain: float) -> Comparison:
    """One comparison as `compare`, on a machine where a burst of contention (+2 to +8
    sigma) lasts 3-5 consecutive runs, whichever side they are: it splits pairs and
    scatters them as a variable candidate does."""
    rng = random.Random(seed)
    prior = [100 + rng.gauss(0, 1) for _ in range(4)]
    test = Comparison(RULE, "minimize", [], Noise(1.0, 60), 0, prior=prior)
    left, size = 0, 0.0
    while isinstance(side := test.next(), Side):
        if left == 0 and rng.random() < 0.06:
            left, size = rng.randint(3, 5), rng.uniform(2.0, 8.0)
        extra = size if left else 0.0
        left = max(0, left - 1)
        level = 100 - gain if side is Side.CANDIDATE else 100.0
        test.add(level + rng.gauss(0, 1) + extra)
    return test


def test_bursts_that_hit_both_sides_cost_no_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Bursts hit the incumbent's runs as often as the candidate's, so the candidate's runs
    do not vary more than the incumbent's: on 2,000 comparisons of a gain of 1.5 sigma the
    runs are within 1% of those the pooled noise alone takes (0.3% more; taken whenever the
    pairs scatter, 3.2% more)."""
    runs = sum(len(bursty(seed, 1.5).taken) for seed in range(2 * COMPARISONS))
    monkeypatch.setattr(decide, "varies_more", lambda candidate, fresh: False)
    pooled = sum(len(bursty(seed, 1.5).taken) for seed in range(2 * COMPARISONS))
    assert runs <= 1.01 * pooled, (runs, pooled)


def test_only_a_candidate_that_varies_more_than_the_incumbent_is_judged_by_its_pairs() -> None:
    assert not varies_more([1.0], [])  # one run: nothing of its own
    assert varies_more([1.0, 5.0], [2.0])  # too few incumbent runs to tell
    assert varies_more([1.0, 5.0], [2.0, 2.5])
    assert not varies_more([1.0, 1.5], [2.0, 6.0])


@pytest.mark.xfail(
    strict=True,
    reason="a known cost: the pairs' scatter is read on both sides (docs/sequential.md, "
    "'The pairs' scatter on their better side: measured, not adopted')",
)
def test_a_candidate_only_sometimes_slower_is_judged_at_the_campaigns_noise(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A candidate whose runs are sometimes slower (one in five, a collector's pause or a
    burst on its runs only) varies more than the incumbent, but its pairs scatter on the
    worse side only, which cannot fool a keep: on 2,000 comparisons of a gain of 1.5 sigma,
    the runs are within 1% of those the pooled noise alone takes and the gain is kept as
    often. Not held today: reading the scatter on both sides takes 3.4% more runs and keeps
    it in 36.0% against 38.1%; the better-side reading that holds it cost capture on other
    shapes."""
    tests = [compare(seed, 1.0, 1.5, slow=0.2) for seed in range(2 * COMPARISONS)]
    monkeypatch.setattr(decide, "varies_more", lambda candidate, fresh: False)
    pooled = [compare(seed, 1.0, 1.5, slow=0.2) for seed in range(2 * COMPARISONS)]
    runs = sum(len(test.taken) for test in tests)
    kept = sum(test.verdict is Verdict.KEEP for test in tests)
    assert runs <= 1.01 * sum(len(test.taken) for test in pooled)
    assert kept >= 0.99 * sum(test.verdict is Verdict.KEEP for test in pooled)
