"""Robust location and spread for noisy metrics: what one spike cannot move.

Pure, no I/O, imports nothing from the package but its table of factors. `decide` uses it
when a rule's estimator is not the plain mean:

- `median` (symmetric noise): each side's location is its median; the spread is the
  pooled median absolute deviation from each version's median.
- `time` (disturbances only make the number worse: wall-clock timings, throughput): each
  side's location is the mean of its better half, moved back by the better half's expected
  advantage under Gaussian noise (so that sides with different sample counts compare
  without bias); the spread is taken from the better half of each version's samples.

Both spreads are scaled by factors found by simulation so that, on Gaussian noise, they
estimate the standard deviation: the sequential boundary calibrated on Gaussian noise then
holds for them, while a spike (a loaded machine, a garbage collection) moves neither the
location nor the spread. Every factor comes from a fixed seed, so a verdict replays
exactly.
"""

from __future__ import annotations

import decimal
import math
import random
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Literal

from autoresearch.stats.consistency_table import TABLE as CONSISTENCY_TABLE

Estimator = Literal["mean", "median", "robust", "time", "states"]
# "states" is the clipped mean of runs folded into one of the machine's speed states (see
# `fold`): only `noise = "auto"` chooses it, once the campaign has shown the states.
ESTIMATORS: tuple[Estimator, ...] = ("mean", "median", "robust", "time", "states")
# `robust` and `time` average the samples that lie within this many robust sigmas of the
# median (`robust`, both sides) or beyond the better half's mean only on the better side
# plus this much on the worse one (`time`): on Gaussian noise almost every sample, so they
# are nearly as efficient as the mean; a spike is left out.
CLIP = {"robust": 3.0, "time": 2.5}

# Gaussian: median |X| = 0.6745 sigma.
MAD_NORMAL = 0.6744897501960817
# The first-sample screen: spread quantile whose size (in robust sigmas) tells spikes apart
# from Gaussian noise, below which no tolerance is granted, and the steps it is rounded to
# (the sequential boundary is calibrated per step).
SCREEN_QUANTILE = 0.9
SCREEN_STEPS = (0.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 24.0, 32.0, 48.0, 64.0, 96.0, 128.0)
SCREEN_GAUSSIAN = 2.5  # a quantile below this is what Gaussian noise gives: no tolerance
# A version's spread is at least this share of the spread of all but the worst quarter of
# its runs (`_wide`), so that two runs of a four-run baseline that happen to agree cannot
# make the noise vanish; from WIDE_MIN runs, below which a quarter is not one run.
FLOOR_SHARE = 0.5
WIDE_MIN = 4
# Consistency factors are simulated for groups up to this size; a larger group uses this
# size's.
CONSISTENCY_MAX = 64
# The share of the degrees of freedom the noise estimate claims: all of them, since its
# second step is a plain pooled standard deviation of the samples kept.
DOF_SHARE = 1.0


def worse_high(direction: str) -> bool:
    """Whether a disturbance makes the number higher (a timing) or lower (a throughput)."""
    return direction == "minimize"


def _better_first(samples: Sequence[float], direction: str) -> list[float]:
    ordered = sorted(samples)
    return ordered if worse_high(direction) else ordered[::-1]


def median(samples: Sequence[float]) -> float:
    ordered = sorted(samples)
    n = len(ordered)
    mid = n // 2
    return ordered[mid] if n % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def half(n: int) -> int:
    """How many of n samples the `time` estimator averages: the better half, rounded up."""
    return (n + 1) // 2


@lru_cache(maxsize=1024)
def better_half_offset(n: int) -> float:
    """E[mean of the lowest half(n) of n standard normals] (<= 0), by numerical integration
    of the order statistics' expectations."""
    if n <= 1:
        return 0.0
    h = half(n)
    steps = 4000
    lo, hi = -9.0, 9.0
    dx = (hi - lo) / steps
    total = 0.0
    for i in range(1, h + 1):
        # E[X_(i:n)] = n C(n-1, i-1) \int x phi(x) Phi(x)^(i-1) (1-Phi(x))^(n-i) dx
        coef = n * math.comb(n - 1, i - 1)
        acc = 0.0
        for s in range(steps + 1):
            x = lo + s * dx
            cdf = 0.5 * math.erfc(-x / math.sqrt(2.0))
            pdf = math.exp(-x * x / 2) / math.sqrt(2 * math.pi)
            weight = 0.5 if s in (0, steps) else 1.0
            acc += weight * x * pdf * cdf ** (i - 1) * (1 - cdf) ** (n - i)
        total += coef * acc * dx
    return total / h


def base(estimator: str) -> str:
    """The estimator a side's runs are averaged by: `states` averages its folded runs as
    `robust` does."""
    return "robust" if estimator == "states" else estimator


def location(samples: Sequence[float], estimator: str, direction: str, sigma: float) -> float:
    """The number a side's samples stand for under `estimator`."""
    estimator = base(estimator)
    if estimator == "median":
        return median(samples)
    if estimator in CLIP:
        kept = inliers(samples, estimator, direction, sigma)
        if not kept:
            return median(samples) if estimator == "robust" else better_half(samples, direction, 0)
        return math.fsum(kept) / len(kept)
    return math.fsum(samples) / len(samples)


def inliers(samples: Sequence[float], estimator: str, direction: str, sigma: float) -> list[float]:
    """The samples `robust` and `time` average: within CLIP robust sigmas of the median
    (both sides), or not beyond the better half's mean by more than CLIP on the worse side.
    The plain means (`mean`, which `noise = "auto"` may choose) leave none out."""
    estimator = base(estimator)
    if sigma <= 0 or estimator not in CLIP:
        return list(samples)
    edge = CLIP[estimator] * sigma
    if estimator == "robust":
        center = median(samples)
        return [x for x in samples if abs(x - center) <= edge]
    center = better_half(samples, direction, sigma)
    high = worse_high(direction)
    return [x for x in samples if (x - center if high else center - x) <= edge]


def better_half(samples: Sequence[float], direction: str, sigma: float) -> float:
    """The mean of the better half, moved back by its expected advantage on Gaussian noise."""
    best = _better_first(samples, direction)[: half(len(samples))]
    shift = -better_half_offset(len(samples)) * sigma  # >= 0: the better half's advantage
    mean = math.fsum(best) / len(best)
    return mean + shift if worse_high(direction) else mean - shift


def _narrow(group: Sequence[float], estimator: str, direction: str) -> float:
    """One version's spread statistic that a spike in up to half its runs cannot move: the
    gap from its best run to the better half's last (`time`), or its MAD."""
    if estimator == "time":
        best = _better_first(group, direction)
        top = max(2, half(len(group)))
        return abs(best[top - 1] - best[0])
    center = median(group)
    return median([abs(x - center) for x in group])


def _wide(group: Sequence[float], estimator: str, direction: str) -> float:
    """The spread of all but the worst quarter of a version's runs (one at least): from the
    best run to the last of those (`time`, whose disturbances are all on the worse side),
    else the shortest window holding that many. Two runs that happen to agree cannot zero
    it, as they zero `_narrow` of four runs. 0 under four runs."""
    m = len(group)
    if m < WIDE_MIN:
        return 0.0
    k = m - max(1, m // 4)
    if estimator == "time":
        best = _better_first(group, direction)
        return abs(best[k - 1] - best[0])
    ordered = sorted(group)
    return min(ordered[i + k - 1] - ordered[i] for i in range(m - k + 1))


def _group_scale(group: Sequence[float], estimator: str, direction: str) -> float:
    """One version's spread statistic, before the factor `consistency` gives: the narrow one,
    but never below FLOOR_SHARE of the wide one (each first scaled to estimate sigma)."""
    m = min(len(group), CONSISTENCY_MAX)
    narrow = _narrow(group, estimator, direction) * _factor(m, estimator, 0)
    if m < WIDE_MIN:
        return narrow
    return max(narrow, FLOOR_SHARE * _wide(group, estimator, direction) * _factor(m, estimator, 1))


def _factor(m: int, estimator: str, which: int) -> float:
    """The consistency factor of `_narrow` (0), `_wide` (1) or `_group_scale` (2) for m
    runs (2 <= m <= CONSISTENCY_MAX), from the table."""
    return CONSISTENCY_TABLE[("time" if estimator == "time" else "robust", m)][which]


@lru_cache(maxsize=512)
def simulated_factors(m: int, estimator: str) -> tuple[float, float, float]:
    """The factors that make `_narrow`, `_wide` and `_group_scale` of m Gaussian samples
    median-unbiased estimates of sigma, by simulation with a fixed seed (deterministic;
    `consistency_table` holds them for every m the pool uses)."""
    time = estimator == "time"

    def middle(stat: Callable[[list[float]], float]) -> float:
        rng = random.Random(1_000_003 * m + (1 if time else 0))
        stats = sorted(stat([rng.gauss(0.0, 1.0) for _ in range(m)]) for _ in range(4001))
        found = stats[len(stats) // 2]
        return 1.0 / found if found > 0 else 1.0

    narrow = middle(lambda g: _narrow(g, estimator, "minimize"))
    if m < WIDE_MIN:
        return narrow, 1.0, 1.0
    wide = middle(lambda g: _wide(g, estimator, "minimize"))
    both = middle(
        lambda g: max(
            narrow * _narrow(g, estimator, "minimize"),
            FLOOR_SHARE * wide * _wide(g, estimator, "minimize"),
        )
    )
    return narrow, wide, both


def consistency(m: int, estimator: str) -> float:
    """The factor that makes `_group_scale` of m Gaussian samples a median-unbiased
    estimate of sigma."""
    return _factor(min(m, CONSISTENCY_MAX), estimator, 2)


def _weighted_median(pairs: list[tuple[float, float]]) -> float:
    pairs.sort()
    total = sum(w for _, w in pairs)
    running = 0.0
    for value, weight in pairs:
        running += weight
        if running >= total / 2:
            return value
    return pairs[-1][0]


def robust_sigma(
    groups: Sequence[Sequence[float]], estimator: str, direction: str
) -> tuple[float, int] | None:
    """The pooled robust spread of repeated samples of the same code, and its degrees of
    freedom.

    Two steps: a robust start (the weighted median of each version's scaled spread
    statistic, which a minority of spiked versions cannot move), then the pooled standard
    deviation of the samples that `location` keeps at that spread (spikes left out), which
    on Gaussian noise is nearly as efficient as the plain one."""
    estimator = base(estimator)
    pairs: list[tuple[float, float]] = []
    for group in groups:
        m = len(group)
        if m < 2:
            continue
        scale = _group_scale(group, estimator, direction) * consistency(m, estimator)
        pairs.append((scale, m - 1))
    if not pairs:
        return None
    start = _weighted_median(pairs)
    dofs = sum(int(w) for _, w in pairs)
    step = tied_resolution(groups)
    least = step / math.sqrt(12.0)  # the rounding's own noise
    if estimator == "median" or max(start, step) <= 0:
        return max(start, least), dofs
    # Runs one printed digit apart are never left out as spikes of each other.
    edge = max(start, step / 2)
    ss = 0.0
    dof = 0
    for group in groups:
        if len(group) < 2:
            continue
        kept = inliers(group, estimator, direction, edge)
        if len(kept) < 2:
            continue
        mean = math.fsum(kept) / len(kept)
        ss += sum((x - mean) ** 2 for x in kept)
        dof += len(kept) - 1
    if dof == 0 or ss <= 0:
        return max(start, least), dofs
    return max(math.sqrt(ss / dof), least), dof


def tied_resolution(groups: Sequence[Sequence[float]]) -> float:
    """The step between the values runs can take where runs tie though they differ (a
    metric printed to few digits, a count, a clock that ticks coarsely), 0 where no
    version's runs tie. Such runs are noisy at least by their rounding (the step over
    sqrt(12)), and runs a step apart are neighbours, not spikes: without this, three tied
    runs of four leave every robust spread at 0, and a noisy metric would be judged as an
    exact one. The step is the last printed digit's unit, or the coarser grid every value
    sits on (`grid`)."""
    for group in groups:
        if 1 < len(set(group)) < len(group):
            values = [x for version in groups for x in version]
            unit = min(resolution(x) for x in values)
            return grid(values, unit)
    return 0.0


# Distinct values needed before runs are taken to sit on a grid coarser than their last
# digit: three values on multiples of 2 units happen by chance one time in four, five one
# time in sixteen.
GRID_VALUES = 5


def grid(values: Sequence[float], unit: float) -> float:
    """The coarsest step, a whole number of `unit`s, that every one of `values` sits on
    (a metric printed to 2 units, a timer that ticks every 4 ms read to the ms): the
    greatest common divisor of their differences, once GRID_VALUES distinct values show it;
    `unit` otherwise."""
    if unit <= 0:  # the least digit of 5e-324 underflows: no grid to read
        return unit
    # A value too many units from zero to count (a digit of 1e-300 beside runs of 100) is
    # on every grid of that digit: it says nothing of a coarser one.
    counts = sorted({round(q) for x in values if math.isfinite(q := x / unit)})
    if len(counts) < GRID_VALUES:
        return unit
    step = 0
    for count in counts[1:]:
        step = math.gcd(step, count - counts[0])
    return unit * max(step, 1)


@lru_cache(maxsize=4096)
def resolution(value: float) -> float:
    """The last printed digit's unit of `value` as it was read (0.001 for 0.912, 1 for
    150.0 or 1200), never above 1."""
    if not math.isfinite(value):
        return 1.0
    exponent = decimal.Decimal(repr(value)).normalize().as_tuple().exponent
    return 10.0 ** min(int(exponent), 0)


def screen_tolerance(
    groups: Sequence[Sequence[float]], estimator: str, direction: str, sigma: float
) -> float:
    """How far worse (in robust sigmas) a candidate's first sample may look before it is
    dropped at once: 0 when the worse-side deviations look Gaussian, else the size of the
    campaign's typical spike (their SCREEN_QUANTILE), rounded up to a calibrated step."""
    if sigma <= 0:
        return 0.0
    estimator = base(estimator)
    worse: list[float] = []
    for group in groups:
        if len(group) < 2:
            continue
        center = better_half(group, direction, sigma) if estimator == "time" else median(group)
        for x in group:
            d = (x - center) if worse_high(direction) else (center - x)
            if estimator != "time":
                d = abs(d)
            if d > 0:
                worse.append(d / sigma)
    if len(worse) < 2:
        return 0.0
    worse.sort()
    q = worse[min(len(worse) - 1, int(SCREEN_QUANTILE * len(worse)))]
    if q <= SCREEN_GAUSSIAN:
        return 0.0
    return min((step for step in SCREEN_STEPS if step >= q), default=SCREEN_STEPS[-1])


# Runs whose worse side reaches this many times further from the median than the better
# side look like a timing's: disturbances that only make the number worse. Gaussian noise
# looks so in 7% of 4 runs and 1.4% of 10, so it is only ever said, never acted on.
ONE_SIDED_RATIO = 4.0


def one_sided(samples: Sequence[float], direction: str) -> bool:
    """Whether repeated runs of the same code spike only on their worse side."""
    if len(samples) < 4:
        return False
    center = median(samples)
    low, high = center - min(samples), max(samples) - center
    worse, better = (high, low) if worse_high(direction) else (low, high)
    return worse > 0 and worse >= ONE_SIDED_RATIO * better


def standard_deviation(groups: Sequence[Sequence[float]]) -> float | None:
    """The pooled within-version standard deviation (for reports beside the robust one)."""
    ss = 0.0
    dof = 0
    for group in groups:
        if len(group) >= 2:
            mean = math.fsum(group) / len(group)
            ss += sum((x - mean) ** 2 for x in group)
            dof += len(group) - 1
    return math.sqrt(ss / dof) if dof else None


# A shift of the incumbent's re-measurements this large (in robust sigmas of the difference
# of the two segments' medians) is a change of the machine, not noise: the reference starts
# again after it. High, because every split point is tried.
CHANGE_Z = 4.5
CHANGE_MIN_SEGMENT = 3


def change_point(samples: Sequence[float]) -> int:
    """Where the last shift of level in `samples` (in time order) happened: the index the
    samples after the shift start at, 0 when there is none.

    The noise is measured by the successive differences (a shift spoils one of them, a
    spike two), so the shift itself does not hide in an inflated spread."""
    n = len(samples)
    if n < 2 * CHANGE_MIN_SEGMENT:
        return 0
    steps = [abs(samples[i + 1] - samples[i]) for i in range(n - 1)]
    sigma = median(steps) / (MAD_NORMAL * math.sqrt(2.0))
    if sigma <= 0:
        return 0
    best, cut = 0.0, 0
    for i in range(CHANGE_MIN_SEGMENT, n - CHANGE_MIN_SEGMENT + 1):
        before, after = samples[:i], samples[i:]
        # The median's standard error on Gaussian noise is about 1.25 sigma / sqrt(n).
        se = 1.25 * sigma * math.sqrt(1 / len(before) + 1 / len(after))
        z = abs(median(after) - median(before)) / se
        if z > best:
            best, cut = z, i
    return cut if best >= CHANGE_Z else 0


def densest_half(runs: Sequence[float]) -> float:
    """The mean of the half of `runs` that lies closest together (the shortest half): a
    version's level however many of its runs a burst or a slow state moved, as long as
    its undisturbed runs agree, where the median of four runs two of which were spiked
    lies halfway to the spikes."""
    ordered = sorted(runs)
    h = (len(ordered) + 1) // 2
    start = min(range(len(ordered) - h + 1), key=lambda i: (ordered[i + h - 1] - ordered[i], i))
    return math.fsum(ordered[start : start + h]) / h


def state_of(value: float, centre: float, gap: float) -> int:
    """How many speed states `value` lies above the state of `centre`, on a machine whose
    states are a factor 1 + `gap` apart (a CPU frequency state makes every run take that
    much longer, whatever the code: the gap scales with the level). 0 for a value or a
    centre that is not positive, which no speed state explains."""
    if value <= 0 or centre <= 0 or gap <= 0:
        return 0
    return round(math.log(value / centre) / math.log1p(gap))


def in_state(value: float, states: int, gap: float) -> float:
    """`value` as it would have measured `states` speed states lower."""
    return value / (1.0 + gap) ** states


def fold(samples: Sequence[float], centre: float, gap: float) -> list[float]:
    """The runs moved by whole speed states into the state of `centre`: on a machine whose
    speed sits in states a factor 1 + `gap` apart (CPU frequency states), what each run
    would have measured in that one state. A change smaller than half a state keeps its
    size; a larger one is taken for a smaller one in the next state (the interleaved
    pairs tell which, see `decide`)."""
    return [in_state(x, state_of(x, centre, gap), gap) for x in samples]


def fold_group(group: Sequence[float], gap: float) -> list[float]:
    """One version's runs folded into the state its densest half sits in."""
    if gap <= 0 or len(group) < 2:
        return list(group)
    return fold(group, densest_half(group), gap)
