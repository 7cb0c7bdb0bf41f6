"""The gain of one version over another from interleaved pairs of runs: a distribution-free
estimate and confidence interval (pure, no I/O).

Each pair measures A and B back to back (in alternating order, so a trend of the machine
hits both alike); the gain of B over A in pair i is d_i. The estimate is the median of the d_i, the
interval the sign test's (two order statistics of the d_i): it holds for any noise whose
pair differences have the true gain as their median, spikes included, and a spiked pair
moves the interval's ends by one order statistic at most.

A measurement may take its pairs in looks (`plan`: 10 pairs, then 10 more where the first 10
leave a gain open): each look's interval is then taken at the level that keeps the chance
that any of them misses within 1 - level (Bonferroni's split), so the interval reported at
whichever look the measurement stops covers at least the level it states, whatever made it
stop.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from autoresearch.stats.decide import gain, normal_cdf
from autoresearch.stats.robust import median


@dataclass(frozen=True)
class PairedGain:
    pairs: int
    estimate: float  # of B's gain over A (positive: B is better), metric units
    low: float  # the confidence interval
    high: float
    level: float  # the interval's coverage: at least the level asked for, when n allows
    confidence: float  # 1 - p of the one-sided sign test that B is better
    reference: float  # A's median, for percentages

    @property
    def confirmed(self) -> bool:
        """B is better with the interval's confidence: the whole interval is a gain."""
        return self.low > 0

    def pct(self, value: float) -> float | None:
        return percent(value, self.reference)


def percent(value: float | None, reference: float | None) -> float | None:
    """`value` as a share of `reference`, in percent; None without either."""
    if value is None or not reference:
        return None
    return 100.0 * value / abs(reference)


def _binomial_cdf(k: int, n: int) -> float:
    """P(Bin(n, 1/2) <= k)."""
    if k < 0:
        return 0.0
    if n > 1000:
        return float(normal_cdf((k + 0.5 - n / 2) / math.sqrt(n / 4)))
    return float(sum(math.comb(n, i) for i in range(min(k, n) + 1)) / 2**n)


def _order(n: int, level: float) -> int:
    """The largest k with P(Bin(n, 1/2) <= k) <= (1 - level) / 2: the interval runs from the
    (k+1)-th smallest difference to the (k+1)-th largest. Too few pairs for the level (fewer
    than 6 for 95%): 0, the smallest to the largest, said with the coverage it really has."""
    k = -1
    while _binomial_cdf(k + 1, n) <= (1 - level) / 2:
        k += 1
    return max(k, 0)


def _coverage(n: int, level: float) -> float:
    return 1.0 - 2.0 * _binomial_cdf(_order(n, level), n)


def _look_level(level: float, plan: Sequence[int]) -> float:
    return 1.0 - (1.0 - level) / max(1, len(plan))


def plan_level(plan: Sequence[int], level: float = 0.95) -> float:
    """The coverage a measurement taking its pairs in `plan`'s looks guarantees: one minus
    the chances, together, that the interval at any look misses."""
    each = _look_level(level, plan)
    return max(0.0, 1.0 - math.fsum(1.0 - _coverage(n, each) for n in plan))


def paired_gain(
    a: Sequence[float],
    b: Sequence[float],
    direction: str,
    level: float = 0.95,
    plan: Sequence[int] = (),
) -> PairedGain:
    """B's gain over A from pairs (a[i], b[i]); `plan`: the pair counts of the looks the
    measurement may take, of which this is one (none: this is the only look)."""
    if len(a) != len(b) or not a:
        raise ValueError("paired_gain needs as many samples of A as of B, at least one")
    d = sorted(gain(y, x, direction) for x, y in zip(a, b, strict=True))
    n = len(d)
    looks = tuple(plan) or (n,)
    if n not in looks:
        raise ValueError(f"{n} pairs is not one of the looks {looks}")
    k = _order(n, _look_level(level, looks))
    low, high = d[k], d[n - 1 - k]
    better = sum(1 for x in d if x > 0)
    worse = sum(1 for x in d if x < 0)
    # One-sided sign test of "B is better", ties left out.
    confidence = 1.0 - _binomial_cdf(worse, better + worse) if better + worse else 0.5
    return PairedGain(n, median(d), low, high, plan_level(looks, level), confidence, median(a))


def worth_more(found: PairedGain) -> bool:
    """The pairs so far leave a gain open: the interval holds 0 and the estimate is a
    gain. More pairs can then confirm it; where the estimate is none, they would not."""
    return not found.confirmed and found.estimate > 0


def in_looks(
    plan: Sequence[int],
    direction: str,
    take: Callable[[int], tuple[Sequence[float], Sequence[float]]],
) -> tuple[list[float], list[float], PairedGain]:
    """A measurement in the looks of `plan`: the first look's pairs, then each next look's
    only where the pairs so far leave a gain open (`worth_more`). `take(n)`: n more pairs,
    A's runs and B's. The runs of both, and the gain at the look it stopped."""
    a: list[float] = []
    b: list[float] = []
    found: PairedGain | None = None
    for pairs in plan:
        if found is not None and not worth_more(found):
            break
        more_a, more_b = take(pairs - len(a))
        a.extend(more_a)
        b.extend(more_b)
        found = paired_gain(a, b, direction, plan=plan)
    if found is None:
        raise ValueError("a measurement needs at least one look")
    return a, b, found


def looks(pairs: int, up_to: int | None) -> tuple[int, ...]:
    """The looks of a measurement of `pairs` pairs that may go on to `up_to`."""
    return (pairs, up_to) if up_to is not None and up_to > pairs else (pairs,)


def pairs_for(level: float = 0.95) -> int:
    """The fewest pairs whose sign-test interval covers `level`."""
    n = 1
    while plan_level((n,), level) < level:
        n += 1
    return n


# A measurement's pairs when none are asked for: this many, and as many more where they
# leave a gain open; and the most it takes when asked.
DEFAULT_PAIRS = 10
MOST_REPEAT = 1000
MOST_PAIRS = 2000


def pairs_asked(
    repeat: int | None, up_to: int | None, names: tuple[str, str] = ("repeat", "up_to")
) -> tuple[int, int]:
    """The pairs of the first look and the most pairs: a number of pairs given alone is
    exactly that many; none given, DEFAULT_PAIRS and as many more; `up_to` lets the first
    look go on to it. `names`: how the user calls the two, for the sentence that refuses
    them (ValueError)."""
    name, most_name = names
    if repeat is not None and not 1 <= repeat <= MOST_REPEAT:
        raise ValueError(f"{name} must be between 1 and {MOST_REPEAT}, not {repeat}.")
    if up_to is not None and not 1 <= up_to <= MOST_PAIRS:
        raise ValueError(f"{most_name} must be between 1 and {MOST_PAIRS}, not {up_to}.")
    if repeat is None:
        if up_to is None:
            return DEFAULT_PAIRS, 2 * DEFAULT_PAIRS
        return min(DEFAULT_PAIRS, up_to), up_to
    if up_to is None:
        return repeat, repeat
    if up_to < repeat:
        raise ValueError(
            f"{most_name} {up_to} is fewer than {name} {repeat}: give at least as many."
        )
    return repeat, up_to
