"""The noise estimate cannot vanish on a noisy metric: two runs of a four-run baseline that
happen to agree, or runs that tie because the metric is printed to few digits, leave every
robust spread statistic at or near 0, and a campaign that believes its noise is nothing
keeps a run that is better by chance and drops a real gain whose first run drew a spike.
`robust.FLOOR_SHARE` and `robust.tied_resolution` keep the estimate honest; these tests
attack the promise: what is kept is really better."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from autoresearch.config import parse_config
from autoresearch.stats import robust
from autoresearch.stats.consistency_table import TABLE
from autoresearch.stats.decide import Rule, Verdict
from autoresearch.stats.sample_book import SampleBook
from autoresearch.testing.comparisons import drive


def rule(noise: str, direction: str) -> Rule:
    config = parse_config(
        "t",
        {
            "name": "t",
            "scope": ["a.py"],
            "metric": {"command": "true", "direction": direction, "noise": noise},
        },
    )
    return config.decision.to_rule()


def timing(rng: random.Random, level: float) -> float:
    """One run of a timing printed to the microsecond (ms, 3 decimals): Gaussian noise
    of 0.6% and, on one run in six, a disturbance of 3-8% that only makes it slower."""
    value = level * (1.0 + rng.gauss(0.0, 0.006))
    if rng.random() < 1 / 6:
        value *= 1.0 + rng.uniform(0.03, 0.08)
    return float(f"{value:.3f}")


def runs(
    draw: Callable[[random.Random, float], float],
    rng: random.Random,
    level: float,
    first: float | None = None,
) -> Callable[[], float]:
    """A version's runs at `level`, the first of them `first` when given (a disturbance)."""
    taken: list[float] = []

    def run() -> float:
        value = float(f"{first:.3f}") if first is not None and not taken else draw(rng, level)
        taken.append(value)
        return value

    return run


# Four baseline runs of such a timing whose two fastest agree to the printed digit: the
# better half's gap, which the `time` spread starts from, is 0.
AGREEING_BASELINE = [150.123, 150.123, 151.0, 155.0]


@pytest.mark.parametrize("noise", ["time", "auto"])
def test_nothing_is_kept_by_chance_after_two_baseline_runs_agreed(noise: str) -> None:
    """The promise: null candidates (the incumbent's code renamed) are not kept. Before
    the floor the noise read as exactly 0 under `time`, the metric as exact, and any null
    whose first run came out faster than 150.123 was kept at once."""
    kept = 0
    compared = 0
    for seed in range(8):
        rng = random.Random(seed)
        live = SampleBook(rule(noise, "minimize"), "minimize")
        live.baseline("b", list(AGREEING_BASELINE))
        for i in range(12):
            compared += 1
            verdict, _, _ = drive(
                live, "b", f"n{i}", runs(timing, rng, 151.0), runs(timing, rng, 151.0)
            )
            if verdict is Verdict.KEEP:
                kept += 1
                break  # a kept null is the new incumbent: the campaign is spoilt
    assert kept <= 0.05 * compared, f"{kept} of {compared} null candidates kept"


@pytest.mark.parametrize("noise", ["time", "auto"])
def test_a_real_speedup_is_not_screened_out_after_two_baseline_runs_agreed(noise: str) -> None:
    """The promise: a 4% speedup whose first run drew a disturbance is kept. Before the
    floor, under `time` a noise of about 0 made that run thousands of sigmas worse, and the
    speedup was dropped after it in 10 of these 10 campaigns. (Two of them draw a second
    disturbance on its second run too: dropped, as two disturbed runs of two may be.)"""
    kept = 0
    for seed in range(10):
        rng = random.Random(100 + seed)
        live = SampleBook(rule(noise, "minimize"), "minimize")
        live.baseline("b", list(AGREEING_BASELINE))

        verdict, _, _ = drive(
            live,
            "b",
            "fast",
            runs(timing, rng, 145.0, first=145.0 * 1.05),
            runs(timing, rng, 151.0),
        )
        kept += verdict is Verdict.KEEP
    assert kept >= 8, f"the speedup was kept in {kept} of 10 campaigns"


def accuracy(rng: random.Random, level: float) -> float:
    """An accuracy on 1,000 examples (three digits) whose training varies by 0.06 points:
    most runs of the same code tie."""
    return round(level + rng.gauss(0.0, 0.0006), 3)


def test_a_metric_whose_runs_tie_is_not_judged_as_exact() -> None:
    """The promise: on a metric printed to few digits, whose baseline runs mostly tie, a
    null candidate is not kept for the one digit it happened to gain, and a real gain of
    three digits is. Before the resolution floor, three tied runs of four made every
    robust spread 0, and the first null one digit better was kept."""
    nulls_kept = 0
    nulls = 0
    gains = 0
    for seed in range(10):
        rng = random.Random(200 + seed)
        live = SampleBook(rule("auto", "maximize"), "maximize")
        live.baseline("b", [0.912, 0.912, 0.912, 0.913])
        incumbent = "b"
        for i in range(10):
            nulls += 1
            verdict, _, _ = drive(
                live, incumbent, f"n{i}", runs(accuracy, rng, 0.912), runs(accuracy, rng, 0.912)
            )
            if verdict is Verdict.KEEP:
                nulls_kept += 1
                incumbent = f"n{i}"
        verdict, _, _ = drive(
            live, incumbent, "gain", runs(accuracy, rng, 0.915), runs(accuracy, rng, 0.912)
        )
        gains += verdict is Verdict.KEEP
    assert nulls_kept <= 0.05 * nulls, f"{nulls_kept} of {nulls} null candidates kept"
    assert gains >= 9, f"a gain of three digits kept in {gains} of 10 campaigns"


def ticks(rng: random.Random, level: float) -> float:
    """A timing read from a clock that ticks every 4 ms, printed to the ms (three places in
    seconds): the run's own noise is about one tick, so most runs of the same code land on
    one of three ticks, and every value is a multiple of 0.004 though it reads to 0.001."""
    return round(round(level * (1.0 + rng.gauss(0.0, 0.03)) / 0.004) * 0.004, 3)


@pytest.mark.parametrize("noise", ["auto", "symmetric"])
def test_runs_on_a_coarser_grid_than_their_digits_are_not_judged_exact(noise: str) -> None:
    """The promise: on a timing whose runs sit on 4 ms ticks though printed to the ms, a
    null candidate is not kept for the tick it happened to gain, and a gain of three ticks
    is. Taking the last digit for the step left runs one tick apart as spikes of each
    other, a spread far below the noise, and under `noise = "symmetric"` kept 7 null
    candidates of 120."""
    nulls_kept = 0
    nulls = 0
    gains = 0
    for seed in range(10):
        rng = random.Random(300 + seed)
        live = SampleBook(rule(noise, "minimize"), "minimize")
        live.baseline("b", [ticks(rng, 0.132) for _ in range(4)])
        incumbent = "b"
        level = 0.132
        for i in range(12):
            nulls += 1
            verdict, _, _ = drive(
                live, incumbent, f"n{i}", runs(ticks, rng, level), runs(ticks, rng, level)
            )
            if verdict is Verdict.KEEP:
                nulls_kept += 1
                incumbent = f"n{i}"
        verdict, _, _ = drive(
            live, incumbent, "gain", runs(ticks, rng, level - 0.012), runs(ticks, rng, level)
        )
        gains += verdict is Verdict.KEEP
    assert nulls_kept <= 0.05 * nulls, f"{nulls_kept} of {nulls} null candidates kept"
    assert gains >= 8, f"a gain of three ticks kept in {gains} of 10 campaigns"


def test_the_grid_is_read_from_enough_values() -> None:
    # Every value a multiple of 4 ms, five distinct: the step is the tick.
    assert robust.tied_resolution([[0.132, 0.132, 0.136], [0.128, 0.124, 0.14]]) == (
        pytest.approx(0.004)
    )
    # An offset grid: 2 units apart from 99, not from 0.
    assert robust.grid([99.0, 101.0, 103.0, 97.0, 105.0], 1.0) == 2.0
    # Four values on even units happen by chance one time in eight: the printed digit.
    assert robust.tied_resolution([[98.0, 100.0, 100.0, 102.0], [96.0]]) == 1.0
    # One value off the grid: the digit.
    assert robust.grid([98.0, 100.0, 102.0, 104.0, 105.0], 1.0) == 1.0


@pytest.mark.parametrize(
    "runs",
    [
        [5e-324, 5e-324, 1.0, 2.0],  # a least digit that underflows to 0
        [1.2345678901234567e-300] * 2 + [100.0, 200.0, 300.0, 400.0, 500.0],  # 1e318 digits
    ],
)
def test_ties_at_the_floats_extremes_are_judged_not_raised(runs: list[float]) -> None:
    """A metric's runs may be any float it prints: the rounding read from them never
    divides by zero or counts past the floats' range, and the noise is still estimated."""
    assert robust.tied_resolution([runs]) >= 0.0
    assert robust.robust_sigma([runs], "robust", "minimize") is not None


def test_the_spread_of_two_agreeing_runs_is_floored_by_the_others() -> None:
    for estimator in ("time", "robust"):
        found = robust.robust_sigma([AGREEING_BASELINE], estimator, "minimize")
        assert found is not None
        assert found[0] > 0.1, (estimator, found)  # about 0.5: the 151.0 run is noise


def test_an_exact_metric_stays_exact_and_ties_floor_at_the_rounding() -> None:
    # Runs that never differ within a version: an exact metric, whatever the digits.
    assert robust.robust_sigma([[0.912] * 4, [0.915] * 3], "robust", "maximize") == (0.0, 5)
    # Runs a digit apart are neighbours, not spikes; the rounding is the least noise.
    sigma, _ = robust.robust_sigma([[0.912, 0.912, 0.912, 0.913]], "robust", "maximize") or (0, 0)
    assert sigma == pytest.approx(0.0005)
    sigma, _ = robust.robust_sigma([[0.912, 0.912, 0.912, 0.915]], "robust", "maximize") or (0, 0)
    assert sigma == pytest.approx(0.001 / 12**0.5)
    # Full-precision runs never tie: no floor from the digits.
    assert robust.tied_resolution([[0.1 + 0.2, 0.3, 0.31]]) == 0.0


@pytest.mark.parametrize(
    ("value", "step"),
    [(0.912, 0.001), (150.0, 1.0), (1200.0, 1.0), (150.12, 0.01), (1e-05, 1e-05), (2.5e-07, 1e-08)],
)
def test_the_printed_resolution_is_read_from_the_value(value: float, step: float) -> None:
    assert robust.resolution(value) == pytest.approx(step)


@pytest.mark.parametrize("size", [2, 4, 5, 9])
@pytest.mark.parametrize("kind", ["robust", "time"])
def test_the_table_of_factors_is_what_the_simulation_gives(kind: str, size: int) -> None:
    assert TABLE[(kind, size)] == robust.simulated_factors(size, kind)


def test_the_table_covers_every_size_the_pool_uses() -> None:
    sizes = range(2, robust.CONSISTENCY_MAX + 1)
    assert {(kind, m) for kind in ("robust", "time") for m in sizes} == set(TABLE)
