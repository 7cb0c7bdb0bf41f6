"""Decision rules: samples in, verdict out. Pure functions, no I/O.

Rules:
- `strict`: one sample; keep if better (equal is not better).
- `threshold`: one sample; keep if better by more than `min_delta`.
- `repeats`: `repeats` samples of each candidate (and of the baseline); keep if the mean gain
  exceeds max(min_delta, 2 sigma of the difference of the means).
- `sequential`: see `sequential_verdict`.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import Enum
from functools import lru_cache

from autoresearch.config import DecisionConfig, parse_min_delta


class Verdict(Enum):
    KEEP = "keep"
    DISCARD = "discard"
    MORE = "more"  # another sample is needed before deciding


@dataclass(frozen=True)
class Noise:
    """A pooled estimate of the metric's noise: standard deviation and its degrees of freedom."""

    sigma: float
    dof: int


def gain(candidate: float, incumbent: float, direction: str) -> float:
    """How much better `candidate` is than `incumbent` (positive = better)."""
    return incumbent - candidate if direction == "minimize" else candidate - incumbent


def min_delta_abs(rule: DecisionConfig, reference: float) -> float:
    amount, percent = parse_min_delta(rule.min_delta)
    return abs(reference) * amount / 100.0 if percent else amount


def estimate(samples: Sequence[float]) -> float:
    """The number a rule reports for a set of samples."""
    return statistics.fmean(samples)


def samples_needed(rule: DecisionConfig) -> int:
    """Samples of the baseline (and the first batch of each candidate)."""
    if rule.rule == "repeats":
        return rule.repeats
    if rule.rule == "sequential":
        return BASELINE_SAMPLES
    return 1


# The baseline is measured this often under `sequential`, to seed the noise estimate.
BASELINE_SAMPLES = 4
# Unbiased samples of the incumbent needed before a candidate is compared with it; a
# freshly kept incumbent is re-measured this often first.
REFERENCE_MIN = 1


def pooled_noise(groups: Sequence[Sequence[float]]) -> Noise | None:
    """Pool the within-group variance of repeated samples of the same code."""
    ss = 0.0
    dof = 0
    for group in groups:
        if len(group) >= 2:
            mean = statistics.fmean(group)
            ss += sum((x - mean) ** 2 for x in group)
            dof += len(group) - 1
    if dof == 0:
        return None
    return Noise(sigma=math.sqrt(ss / dof), dof=dof)


def normal_cdf(z: float) -> float:
    return 0.5 * math.erfc(-z / math.sqrt(2.0))


def normal_ppf(p: float) -> float:
    """Inverse of the standard normal CDF (Acklam's rational approximation, |err| < 1e-9)."""
    if not 0.0 < p < 1.0:
        raise ValueError("p must be in (0, 1)")
    a = (
        -3.969683028665376e01,
        2.209460984245205e02,
        -2.759285104469687e02,
        1.383577518672690e02,
        -3.066479806614716e01,
        2.506628277459239e00,
    )
    b = (
        -5.447609879822406e01,
        1.615858368580409e02,
        -1.556989798598866e02,
        6.680131188771972e01,
        -1.328068155288572e01,
    )
    c = (
        -7.784894002430293e-03,
        -3.223964580411365e-01,
        -2.400758277161838e00,
        -2.549732539343734e00,
        4.374664141464968e00,
        2.938163982698783e00,
    )
    d = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e00, 3.754408661907416e00)
    low = 0.02425
    if p < low:
        q = math.sqrt(-2 * math.log(p))
        x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) / (
            (((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1
        )
    elif p > 1 - low:
        q = math.sqrt(-2 * math.log(1 - p))
        x = -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) / (
            (((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1
        )
    else:
        q = p - 0.5
        r = q * q
        x = (
            (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5])
            * q
            / (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1)
        )
    # One Newton step against the exact CDF.
    e = normal_cdf(x) - p
    return x - e * math.sqrt(2 * math.pi) * math.exp(x * x / 2)


def t_quantile(p: float, dof: int) -> float:
    """Student-t quantile from the normal one (Cornish-Fisher expansion; fine for dof >= 3)."""
    z = normal_ppf(p)
    if dof >= 1000:
        return z
    v = float(max(dof, 1))
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    g4 = (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160
    return z + g1 / v + g2 / v**2 + g3 / v**3 + g4 / v**4


def t_cdf(t: float, dof: int) -> float:
    """Student-t CDF by bisection on `t_quantile` (monotone; good to ~1e-6)."""
    lo, hi = 1e-12, 1 - 1e-12
    for _ in range(60):
        mid = (lo + hi) / 2
        if t_quantile(mid, dof) < t:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


# A candidate that does not look better is dropped at once, except against a single
# reference sample (right after a keep), where a real gain too often looks like none: there
# it must look clearly worse (z below this).
SINGLE_REFERENCE_DROP = -1.0


def drop_bar(reference_samples: int) -> float:
    return SINGLE_REFERENCE_DROP if reference_samples < 2 else 0.0


# Futility: from the second candidate sample on, drop a candidate whose gain, projected to
# max_samples, would reach less than this share of the efficacy boundary. The share rises
# from the first value (second sample) to the second (last sample): early looks are noisy,
# late ones have little left to learn.
FUTILITY_SHARES = (0.55, 1.0)
CALIBRATION_PATHS = 8000
CALIBRATION_SEED = 20261129


def futility_share(k: int, max_samples: int) -> float:
    """The futility bar's share of the efficacy boundary at k candidate samples (0: none)."""
    if k < 2:
        return 0.0
    first, last = FUTILITY_SHARES
    if max_samples <= 2:
        return first
    return first + (last - first) * (k - 2) / (max_samples - 2)


def _projection(k: int, n: int, max_samples: int) -> float:
    """se at max_samples (with as many more incumbent samples) / se now."""
    final_n = min(n + max_samples - k, max_samples)
    return math.sqrt(1 / max_samples + 1 / final_n) / math.sqrt(1 / k + 1 / n)


class _NullPath:
    """A candidate with no true gain, measured in the engine's order from fixed draws.

    `draws[0]` is the noise estimate's scale (s / sigma); the others are standard normal
    samples taken in turn from `pos` on: the first candidate sample, then incumbent and
    candidate alternately. `reference` is what the evaluation starts with, the last `fresh`
    of it taken just now.
    """

    def __init__(self, draws: list[float], reference: list[float], fresh: int, pos: int):
        self.draws = draws
        self.reference = list(reference)
        self.fresh = fresh
        self.pos = pos

    def looks(self, max_samples: int) -> Iterator[tuple[float, float]]:
        """Yield (z, futility bar as a share of the boundary) at every look, until the path
        stops whatever the boundary: z at or below the drop bar, or the last look."""
        scale = self.draws[0]
        cand_sum = self.draws[self.pos]
        self.pos += 1
        k = 1
        measure_incumbent = True
        while True:
            n = len(self.reference)
            z = (sum(self.reference) / n - cand_sum / k) / (scale * math.sqrt(1 / k + 1 / n))
            yield z, futility_share(k, max_samples) * _projection(k, n, max_samples)
            if z <= drop_bar(n) or (k >= max_samples and self.fresh >= max_samples):
                return
            value = self.draws[self.pos]
            self.pos += 1
            if measure_incumbent:
                self.reference = [*self.reference, value][-max_samples:]
                self.fresh += 1
            else:
                cand_sum += value
                k += 1
            measure_incumbent = not measure_incumbent


def _critical_boundary(path: _NullPath, max_samples: int) -> float:
    """The largest efficacy boundary at which this null path would be kept (0: never).

    A path is kept at a look when z >= boundary (with a fresh incumbent sample) and dropped
    when z falls below the futility bar, which scales with the boundary. Kept(boundary) is
    monotone, so the critical boundary is the best look's min(z, the futility headroom of
    the looks before it).
    """
    best = 0.0
    headroom = math.inf  # the largest boundary the earlier looks let through
    for z, bar in path.looks(max_samples):
        if path.fresh >= 1:
            best = max(best, min(z, headroom))
        if bar > 0:
            headroom = min(headroom, z / bar)
        if headroom <= best:
            break
    return best


def _null_attempt(path: _NullPath, boundary: float, max_samples: int) -> bool:
    """Evaluate the null path's candidate at a fixed boundary; whether it was (wrongly)
    kept. The next candidate inherits the reference, with no fresh sample."""
    kept = False
    for z, bar in path.looks(max_samples):
        if path.fresh >= 1 and z >= boundary:
            kept = True
            break
        if z < bar * boundary:
            break
    path.fresh = 0
    return kept


class Start(Enum):
    """Where a candidate's evaluation starts from, by the reference it inherits."""

    AFTER_KEEP = "after keep"  # REFERENCE_MIN fresh samples of a newly kept incumbent
    PARTIAL = "partial"  # fewer than max_samples carried over from earlier evaluations
    FULL = "full"  # max_samples carried over


def start_state(carried: int, max_samples: int) -> Start:
    if carried <= 0:
        return Start.AFTER_KEEP
    return Start.FULL if carried >= max_samples else Start.PARTIAL


# Null candidates evaluated before the calibrated one, as a campaign reaches each start
# state: right after a keep none; with a partial reference one; with a full one several.
PRIOR_ATTEMPTS = {Start.AFTER_KEEP: 0, Start.PARTIAL: 1, Start.FULL: 4}


@lru_cache(maxsize=256)
def calibrated_efficacy(
    max_samples: int, confidence: float, dof: int, start: Start = Start.AFTER_KEEP
) -> float:
    """The efficacy boundary (t scale) at which a candidate with no true gain is kept with
    probability at most 1 - confidence under this very procedure: a look after every
    sample, interleaved incumbent samples, binding futility, and a noise estimate with
    `dof` degrees of freedom.

    Each start state has its own boundary, because the reference differs. Right after a
    keep it is the new incumbent's fresh re-measurements. Later it was carried over from
    earlier evaluations, which stopped when the comparison turned against their candidate,
    more often when the incumbent's samples came out lucky, so it leans in the incumbent's
    favour, the more so the more evaluations it outlived. The state is simulated as it
    arises: a newly kept incumbent, then PRIOR_ATTEMPTS null candidates dropped in turn (the
    first at the after-keep boundary, later ones at the partial one), then the calibrated
    one; paths on which a prior candidate is kept never reach the state and are left out. Each
    state has its own fixed set of paths, so the boundary is deterministic.
    """
    alpha = 1.0 - confidence
    # Aim one Monte Carlo standard error below the budget, so that the boundary fitted to
    # these paths does not overshoot on new ones.
    alpha -= math.sqrt(alpha * (1 - alpha) / CALIBRATION_PATHS)
    index = list(Start).index(start)
    rng = random.Random(CALIBRATION_SEED * 1000 + max_samples * 10 + dof * 7 + index)
    attempt_width = 2 * max_samples + 1
    prior = PRIOR_ATTEMPTS[start]
    # The candidates before: the first right after the keep, the others partial.
    boundaries = [
        calibrated_efficacy(
            max_samples, confidence, dof, Start.AFTER_KEEP if i == 0 else Start.PARTIAL
        )
        for i in range(prior)
    ]
    critical = []
    for _ in range(CALIBRATION_PATHS):
        scale = math.sqrt(rng.gammavariate(dof / 2, 2.0) / dof)  # s / sigma, chi-square
        draws = [scale] + [
            rng.gauss(0.0, 1.0) for _ in range(REFERENCE_MIN + (prior + 1) * attempt_width)
        ]
        path = _NullPath(draws, draws[1 : 1 + REFERENCE_MIN], REFERENCE_MIN, 1 + REFERENCE_MIN)
        # A prior candidate kept makes a new incumbent: the path never reaches the state.
        if not any(_null_attempt(path, boundary, max_samples) for boundary in boundaries):
            critical.append(_critical_boundary(path, max_samples))
    critical.sort(reverse=True)
    # Kept iff critical >= boundary: just above the (allowed + 1)-th largest keeps
    # `allowed` paths.
    allowed = int(alpha * len(critical))
    return math.nextafter(critical[allowed], math.inf)


DOF_STEPS = (3, 5, 8, 12, 20, 35, 60, 100, 1000)


def _dof_step(dof: int) -> int:
    """Round the noise estimate's degrees of freedom down to a calibrated step."""
    return max((d for d in DOF_STEPS if d <= max(dof, 3)), default=3)


def sequential_bounds(rule: DecisionConfig, dof: int, carried: int = 0) -> float:
    """The efficacy boundary on the t statistic of the gain."""
    start = start_state(carried, rule.max_samples)
    return calibrated_efficacy(rule.max_samples, rule.confidence, _dof_step(dof), start)


def sequential_verdict(
    incumbent: Sequence[float],
    candidate: Sequence[float],
    fresh_incumbent: int,
    direction: str,
    rule: DecisionConfig,
    noise: Noise | None,
    carried: int = 0,
) -> Verdict:
    """Decide after every sample, candidate and incumbent measured in turn.

    `incumbent` holds the incumbent's reference samples (up to max_samples, the ones taken
    during this evaluation last); `fresh_incumbent` says how many of them were taken during
    it, and `carried` how many it had from earlier evaluations when this one began (0 right
    after a keep). The statistic is z = gain of the means / its standard error, the standard
    error from the pooled noise estimate. Keep when z crosses the calibrated efficacy boundary, the
    estimated gain exceeds min_delta and at least one incumbent sample is fresh (so that a
    drifting machine cannot turn an old reference into a gain). Drop when the candidate does
    not look better at all, when it is confidently short of min_delta, when the projected
    statistic falls below the futility bar, or after max_samples of each.
    """
    if not candidate or not incumbent:
        return Verdict.MORE
    k = len(candidate)
    max_samples = rule.max_samples
    g = gain(estimate(candidate), estimate(incumbent), direction)
    delta = min_delta_abs(rule, estimate(incumbent))
    if noise is None or noise.sigma <= 0:
        # Exact samples: only min_delta and drift are left to rule out.
        if g <= delta:
            return Verdict.DISCARD
        return Verdict.KEEP if fresh_incumbent >= 1 else Verdict.MORE
    n = len(incumbent)
    se = noise.sigma * math.sqrt(1 / k + 1 / n)
    # The boundary stays fixed through an evaluation, as calibrated: it follows the noise
    # estimate's degrees of freedom before this evaluation's own samples joined it.
    efficacy = sequential_bounds(rule, noise.dof - (k - 1) - fresh_incumbent, carried)
    z = g / se
    if fresh_incumbent >= 1 and z >= efficacy and g > delta:
        return Verdict.KEEP
    if z <= drop_bar(n) or (delta > 0 and g + efficacy * se <= delta):
        return Verdict.DISCARD
    if k >= max_samples and fresh_incumbent >= max_samples:
        return Verdict.DISCARD
    share = futility_share(k, max_samples)
    if share > 0 and z < share * efficacy * _projection(k, n, max_samples):
        return Verdict.DISCARD
    return Verdict.MORE


def confidence_better(
    incumbent: Sequence[float], candidate: Sequence[float], direction: str, noise: Noise | None
) -> float | None:
    """P(candidate is truly better), from the t statistic of the gain of the means."""
    if not candidate or not incumbent or noise is None or noise.sigma <= 0:
        return None
    se = noise.sigma * math.sqrt(1 / len(candidate) + 1 / len(incumbent))
    return t_cdf(gain(estimate(candidate), estimate(incumbent), direction) / se, noise.dof)


def decide(
    incumbent: Sequence[float],
    candidate: Sequence[float],
    direction: str,
    rule: DecisionConfig,
    noise: Noise | None = None,
    fresh_incumbent: int = 0,
    carried: int = 0,
) -> Verdict:
    if not candidate or not incumbent:
        return Verdict.MORE
    g = gain(estimate(candidate), estimate(incumbent), direction)
    if rule.rule == "strict":
        return Verdict.KEEP if g > 0 else Verdict.DISCARD
    if rule.rule == "threshold":
        threshold = min_delta_abs(rule, estimate(incumbent))
        return Verdict.KEEP if g > threshold and g > 0 else Verdict.DISCARD
    if rule.rule == "repeats":
        if len(candidate) < rule.repeats:
            return Verdict.MORE
        var_c = statistics.variance(candidate) if len(candidate) > 1 else 0.0
        var_i = statistics.variance(incumbent) if len(incumbent) > 1 else 0.0
        sigma_delta = math.sqrt(var_c / len(candidate) + var_i / len(incumbent))
        threshold = max(min_delta_abs(rule, estimate(incumbent)), 2 * sigma_delta)
        return Verdict.KEEP if g > threshold and g > 0 else Verdict.DISCARD
    if rule.rule == "sequential":
        return sequential_verdict(
            incumbent, candidate, fresh_incumbent, direction, rule, noise, carried
        )
    raise ValueError(f"unknown decision rule {rule.rule!r}")
