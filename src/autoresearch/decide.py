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
from collections.abc import Sequence
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
REFERENCE_MIN = 2


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


# Futility: from the second look on, drop a candidate whose gain, projected to max_samples,
# would reach less than this share of the efficacy boundary.
FUTILITY_SHARE = 0.6
CALIBRATION_PATHS = 8000
CALIBRATION_SEED = 20261129


def _null_keep_rate(efficacy: float, max_samples: int, paths: list[list[float]]) -> float:
    """Share of null candidates the sequential procedure keeps (t scale, sigma estimated)."""
    kept = 0
    ref = REFERENCE_MIN
    for draws in paths:
        # draws: the noise estimate's scale, the reference incumbent samples, c1, then
        # (incumbent, candidate) pairs.
        scale = draws[0]
        inc_window = list(draws[1 : ref + 1])
        inc_sum = sum(inc_window)
        cand_sum = draws[ref + 1]
        k = 1
        pos = ref + 2
        fresh = 0
        while True:
            inc_n = len(inc_window)
            g = inc_sum / inc_n - cand_sum / k
            if g <= 0:
                break
            se = scale * math.sqrt(1 / k + 1 / inc_n)
            if fresh >= 1 and g / se >= efficacy:
                kept += 1
                break
            if k >= max_samples:
                break
            if k > 1:
                final_inc = min(inc_n + max_samples - k, max_samples)
                se_final = scale * math.sqrt(1 / max_samples + 1 / final_inc)
                if g / se_final < FUTILITY_SHARE * efficacy:
                    break
            # Interleave: the incumbent again, then the candidate again.
            inc_window.append(draws[pos])
            inc_sum += draws[pos]
            if len(inc_window) > max_samples:
                inc_sum -= inc_window.pop(0)
            cand_sum += draws[pos + 1]
            pos += 2
            k += 1
            fresh += 1
    return kept / len(paths)


DOF_STEPS = (3, 5, 8, 12, 20, 35, 60, 100, 1000)


def _dof_step(dof: int) -> int:
    """Round the noise estimate's degrees of freedom down to a calibrated step."""
    return max((d for d in DOF_STEPS if d <= max(dof, 3)), default=3)


@lru_cache(maxsize=128)
def calibrated_efficacy(max_samples: int, confidence: float, dof: int) -> float:
    """The efficacy boundary (t scale) at which a candidate with no true gain is kept with
    probability 1 - confidence under this very procedure: interleaved looks, binding
    futility, a reference of REFERENCE_MIN incumbent samples (the fewest used), and a noise
    estimate with `dof` degrees of freedom. Found by bisection over a fixed set of simulated
    null paths, so it is deterministic.
    """
    rng = random.Random(CALIBRATION_SEED * 1000 + max_samples * 10 + dof)
    width = REFERENCE_MIN + 1 + 2 * max_samples
    paths = []
    for _ in range(CALIBRATION_PATHS):
        scale = math.sqrt(rng.gammavariate(dof / 2, 2.0) / dof)  # s / sigma, chi-square
        paths.append([scale] + [rng.gauss(0.0, 1.0) for _ in range(width)])
    # Aim one Monte Carlo standard error below the budget, so that the boundary fitted to
    # these paths does not overshoot on new ones.
    alpha = 1.0 - confidence
    alpha -= math.sqrt(alpha * (1 - alpha) / CALIBRATION_PATHS)
    lo, hi = 0.0, 12.0
    for _ in range(20):
        mid = (lo + hi) / 2
        if _null_keep_rate(mid, max_samples, paths) > alpha:
            lo = mid
        else:
            hi = mid
    return hi


def sequential_bounds(rule: DecisionConfig, dof: int) -> float:
    """The efficacy boundary on the t statistic of the gain."""
    return calibrated_efficacy(rule.max_samples, rule.confidence, _dof_step(dof))


def sequential_verdict(
    incumbent: Sequence[float],
    candidate: Sequence[float],
    fresh_incumbent: int,
    direction: str,
    rule: DecisionConfig,
    noise: Noise | None,
) -> Verdict:
    """Decide after each new sample, candidate and incumbent measured interleaved.

    `incumbent` holds the recent samples of the incumbent (up to max_samples, the ones
    re-measured during this evaluation last); `fresh_incumbent` says how many of them were
    taken during it. The statistic is t = gain of the means / standard error, with the
    standard error from the pooled noise estimate; the estimated gain must also exceed
    min_delta, the smallest gain worth keeping. A candidate is kept only after
    at least one fresh incumbent sample, so that a drifting machine cannot turn an old
    reference into a gain.
    """
    if not candidate or not incumbent:
        return Verdict.MORE
    k = len(candidate)
    g = gain(estimate(candidate), estimate(incumbent), direction)
    if g <= min_delta_abs(rule, estimate(incumbent)):
        return Verdict.DISCARD
    if noise is None or noise.sigma <= 0:
        # No spread seen yet: nothing tells luck from gain but more samples.
        return Verdict.MORE if k < rule.max_samples else Verdict.DISCARD
    se = noise.sigma * math.sqrt(1 / k + 1 / len(incumbent))
    efficacy = sequential_bounds(rule, noise.dof)
    if fresh_incumbent >= 1 and g / se >= efficacy:
        return Verdict.KEEP
    if k >= rule.max_samples:
        return Verdict.DISCARD
    if k > 1:
        final_incumbent = min(len(incumbent) + rule.max_samples - k, rule.max_samples)
        se_final = noise.sigma * math.sqrt(1 / rule.max_samples + 1 / final_incumbent)
        if g / se_final < FUTILITY_SHARE * efficacy:
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
        return sequential_verdict(incumbent, candidate, fresh_incumbent, direction, rule, noise)
    raise ValueError(f"unknown decision rule {rule.rule!r}")
