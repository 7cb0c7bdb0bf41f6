"""Decision rules: samples in, verdict out. Pure, no I/O, imports nothing from the package.

Rules (`Rule.name`):
- `strict`: one sample; keep if better (equal is not better).
- `threshold`: one sample; keep if better by more than `min_delta`.
- `repeats`: `repeats` samples of each candidate (and of the baseline); keep if the mean gain
  exceeds max(min_delta, 2 sigma of the difference of the means).
- `sequential`: a look after every sample, candidate and incumbent measured in blocks
  A B B A (`Comparison._following`); see `judge` and docs/sequential.md.

`Comparison` is the sampling procedure of every rule: it says which side to measure next
(or gives the verdict) and takes the values measured. The evaluator drives it with real
runs, the calibration of the sequential boundary with simulated ones, the tests and the
benchmarks with theirs.
"""

from __future__ import annotations

import math
import random
import statistics
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import Enum
from functools import lru_cache
from typing import Any, Literal, NamedTuple, Protocol

from autoresearch.stats import calibration, robust

RuleName = Literal["strict", "threshold", "repeats", "sequential", "auto"]
RULE_NAMES: tuple[RuleName, ...] = ("strict", "threshold", "repeats", "sequential", "auto")
Direction = Literal["minimize", "maximize"]
PAIR_FORMS = ("off", "both")


class Verdict(Enum):
    KEEP = "keep"
    DISCARD = "discard"
    MORE = "more"  # another sample is needed before deciding


class Side(Enum):
    """The version of the code a comparison wants measured next."""

    CANDIDATE = "candidate"
    INCUMBENT = "incumbent"


@dataclass(frozen=True)
class Rule:
    """How candidates are judged: the `[decision]` table as a plain value."""

    name: RuleName = "strict"
    min_delta: float = 0.0  # the smallest gain worth keeping
    percent: bool = False  # min_delta is a percentage of the incumbent's value
    repeats: int = 5
    max_samples: int = 8
    confidence: float = 0.95
    # How a side's samples become one number under `sequential` (see `robust`): "mean"
    # (the rule as configured by name), "median" or "time" (what `auto` chooses).
    estimator: str = "mean"
    # `rule = "auto"` under `[metric] noise = "auto"`: the estimator follows the shape of
    # the campaign's noise as it is learned (`noise_model`), `estimator` is where it starts.
    adaptive: bool = False
    # What a sequential keep asks of the interleaved pairs (the j-th candidate run against
    # the incumbent run taken next to it, which a disturbance of consecutive runs hits
    # alike): "off" nothing, "both" that their z reaches the boundary too.
    pairs: str = "off"
    # The earliest candidate sample a sequential keep may come at. 1 everywhere but where
    # the learned noise says otherwise: on noise whose runs sit in separate states, one or
    # two runs of a side can all fall in one, and a boundary that must hold at those looks
    # is far above what later looks need (`noise_model.choose`).
    first_keep: int = 1
    # Where a run carries part of the run before it (heat, caches a version leaves behind),
    # a sequential comparison judges only the runs that follow a run of their own version
    # (`Comparison`): the runs right after the other side read partly as that side, which
    # hides the difference between them. `noise = "auto"` turns it on when the campaign's
    # runs show it (`noise_model.carry_over`).
    carry: bool = False
    # While `noise = "auto"` has not yet measured carry-over (under `carry`): a candidate
    # dropped after its own run is dropped after one more run of the incumbent, which says
    # how much of a worse version a run carries, the candidates most often dropped being
    # the worse ones; and a candidate whose first run, right after the incumbent's, is
    # clearly worse is dropped there (`PROBE_SCREEN_Z`). The calibration is `carry`'s,
    # which the added drop can only make stricter.
    probe: bool = False

    def __post_init__(self) -> None:
        if self.name not in RULE_NAMES:
            raise ValueError(f"unknown decision rule {self.name!r}")
        if self.pairs not in PAIR_FORMS:
            raise ValueError(f"unknown pairs form {self.pairs!r}")
        if self.estimator not in robust.ESTIMATORS:
            raise ValueError(f"unknown estimator {self.estimator!r}")
        if self.probe and not self.carry:
            raise ValueError("probe is a form of carry")
        if not 1 <= self.first_keep <= self.max_samples:
            raise ValueError(f"first_keep {self.first_keep} outside 1..{self.max_samples}")

    def min_delta_abs(self, reference: float) -> float:
        return abs(reference) * self.min_delta / 100.0 if self.percent else self.min_delta

    @property
    def option(self) -> tuple[str, int]:
        """What `noise = "auto"` chooses between: the estimator and the first keep."""
        return self.estimator, self.first_keep

    @property
    def baseline_samples(self) -> int:
        """Samples of the baseline (and the first batch of each candidate)."""
        if self.name == "repeats":
            return self.repeats
        if self.name in ("sequential", "auto"):
            return BASELINE_SAMPLES
        return 1

    @property
    def cap(self) -> int:
        """The most samples of a candidate one comparison takes."""
        return self.max_samples if self.name == "sequential" else self.baseline_samples


class RuleSource(Protocol):
    """Anything that knows its rule (the campaign's decision config)."""

    def to_rule(self) -> Rule: ...


def as_rule(rule: Rule | RuleSource) -> Rule:
    return rule if isinstance(rule, Rule) else rule.to_rule()


@dataclass(frozen=True)
class Noise:
    """A pooled estimate of the metric's noise: standard deviation and its degrees of freedom.

    Under a robust estimator `sigma` is the robust spread, `dof` its effective degrees of
    freedom, and `screen` how far worse (in sigmas) a first sample may look before the
    candidate is dropped at once (0: the usual bar). `gap` is the spacing of the machine's
    speed states (CPU frequency states) the campaign has shown, as a share of the level (a
    run in the next state measures 1 + gap times as much), when the estimator folds runs
    into one state (`robust.fold`); 0: none."""

    sigma: float
    dof: int
    screen: float = 0.0
    gap: float = 0.0


def gain(candidate: float, incumbent: float, direction: str) -> float:
    """How much better `candidate` is than `incumbent` (positive = better)."""
    return incumbent - candidate if direction == "minimize" else candidate - incumbent


def estimate(samples: Sequence[float]) -> float:
    """The number a rule reports for a set of samples."""
    return statistics.fmean(samples)


def _mean(samples: Sequence[float]) -> float:
    # What `estimate` computes (statistics.fmean), without its overhead: the calibration
    # takes hundreds of thousands of looks.
    return math.fsum(samples) / len(samples)


def samples_needed(rule: Rule | RuleSource) -> int:
    """Samples of the baseline (and the first batch of each candidate)."""
    return as_rule(rule).baseline_samples


# The baseline is measured this often under `sequential`, to seed the noise estimate.
# The judge's version, stamped on every ledger record: bumped whenever a change to the rule
# can give another verdict on the same recorded samples (2: the boundary learned from the
# campaign's own noise, a reference moved only by three agreeing runs, and under `auto` a
# keep asked of the interleaved pairs too; 3: "confidently short of min_delta" allows what
# the drop bar allows, and `auto` weighs a later first keep; 4: the spike screen spares
# every look before the first keep; 5: `auto` weighs folding runs into one speed state
# where the noise sits in states a fixed gap apart; 6: a candidate's runs faster than the
# fastest speed state are not folded; 7: a reference run older than the horizon in runs of
# the campaign is left out, `sample_book.REFERENCE_HORIZON`; 8: runs in blocks A B B A; 9:
# speed states found from every version measured twice and from the incumbent's returns
# to a state, `noise_model.state_gap`; 10: under `noise = "auto"`, runs judged only after a
# run of their own version where the campaign's runs carry the one before,
# `noise_model.carry_over`; 11: and from the start, until the comparisons show how much a
# run carries; 12: a reference no comparison measured in the last
# `sample_book.UNMEASURED_COMPARISONS` has gone stale; 13: a version's spread is never
# below half that of all but its worst quarter of runs, nor below the rounding of runs
# printed to few digits, `robust.FLOOR_SHARE`, `robust.tied_resolution`; 14: the
# interleaved pairs' own spread for a candidate whose runs vary more than the incumbent's,
# `pair_spread`; 15: where runs are judged after their own version, a later first keep
# is chosen only where it detects clearly smaller gains, `noise_model.LATER_KEEP_MARGIN`;
# 16: runs that tie are read on the coarsest grid all the campaign's values sit on, not
# only their last digit, `robust.grid`; 17: while a campaign probes for carry-over, a
# candidate whose first run is clearly worse is dropped there, `PROBE_SCREEN_Z`).
# `verify` holds a record to today's rule only when today's judge wrote it, and the
# calibrated boundaries are cached per judge version.
JUDGE_VERSION = 17
# Under `states`, a folded gain within 1/STATE_NEAR of a state is read as it folds; a
# larger one waits for the interleaved pairs to say which state it is in.
STATE_NEAR = 3.0
BASELINE_SAMPLES = 4
# Unbiased samples of the incumbent needed before a candidate is compared with it; a
# freshly kept incumbent is re-measured this often first.
REFERENCE_MIN = 1
# A reference this short is screened against the incumbent's known level: one spiked run
# would move any estimator of so few samples.
REFERENCE_SETTLED = 3
# How far worse than the incumbent's known level (in robust sigmas) a fresh run is before
# it is taken for a spike, and how many such runs one comparison sets aside (each answered
# with another run) before it takes them as the incumbent's new level. Not widened to the
# campaign's typical spike (the first-sample screen's step): on a campaign that spikes
# often, that step grows to the spikes' own size and would let every one of them through.
SPIKE_SIGMAS = 4.0
SPIKE_RERUNS = 2
# Beyond this quantile of the scatter that the campaign's noise gives the interleaved pairs,
# their own spread judges a candidate whose runs vary more than the incumbent's
# (`pair_spread`, `varies_more`).
PAIR_SCATTER_QUANTILE = 0.95
# Under `Rule.carry`, the runs of one side taken in a row: the first follows the other
# side's and is not judged, so a block of three judges two runs in three.
CARRY_BLOCK = 3
# Under `Rule.probe`, how far below zero the z of the candidate's first run (right after
# the incumbent's, so carrying at most the incumbent's level) must be for it to drop the
# candidate: clearly worse, so that a real gain whose first run a burst or a switch of
# version slows is rarely lost, while the clearly worse changes, most of those dropped,
# cost two runs instead of a block and the held run. At -2 the probe dropped more but
# lasted longer (its readings come from the blocks) and took more runs on every shape measured.
PROBE_SCREEN_Z = -3.0


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


@dataclass(frozen=True)
class Pool:
    """The samples of every version of the code measured so far, one group per version.

    The incumbent's group (`incumbent`, its index; None when it has none yet) grows with
    the samples a comparison takes of it, and the candidate's samples join as a group of
    their own: the noise estimate at a look pools them all.
    """

    groups: tuple[tuple[float, ...], ...] = ()
    incumbent: int | None = None
    estimator: str = "mean"
    direction: str = "minimize"
    gap: float = 0.0  # the speed states' spacing (a share) under the `states` estimator

    @classmethod
    def of(
        cls,
        groups: Mapping[str, Sequence[float]],
        incumbent: str,
        estimator: str = "mean",
        direction: str = "minimize",
        gap: float = 0.0,
    ) -> Pool:
        keys = list(groups)
        return cls(
            tuple(tuple(groups[key]) for key in keys),
            keys.index(incumbent) if incumbent in groups else None,
            estimator,
            direction,
            gap,
        )

    def noise(self, fresh: Sequence[float], candidate: Sequence[float]) -> Noise | None:
        groups: list[Sequence[float]] = list(self.groups)
        if fresh:
            if self.incumbent is None:
                groups.append(fresh)
            else:
                groups[self.incumbent] = (*groups[self.incumbent], *fresh)
        if candidate:
            groups.append(candidate)
        if self.estimator == "mean":
            return pooled_noise(groups)
        return robust_noise(groups, self.estimator, self.direction, self.gap)


def robust_noise(
    groups: Sequence[Sequence[float]], estimator: str, direction: str, gap: float = 0.0
) -> Noise | None:
    """The robust counterpart of `pooled_noise` (see `robust`), with the screen tolerance.
    Under `states` each version's runs are folded into one speed state first: the noise
    left is what a comparison within one state meets."""
    if estimator != "states":
        gap = 0.0
    if gap > 0:
        groups = [robust.fold_group(group, gap) for group in groups]
    found = robust.robust_sigma(groups, estimator, direction)
    if found is None:
        return None
    sigma, dof = found
    screen = robust.screen_tolerance(groups, estimator, direction, sigma)
    return Noise(sigma, max(1, int(dof * robust.DOF_SHARE)), screen, gap)


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


def screened_samples(estimator: str) -> int:
    """Up to how many candidate samples the spike tolerance applies: until one spike can
    no longer move the estimator (the better one of two under `time`, three for a median)."""
    return {"time": 1, "median": 2, "robust": 2}.get(robust.base(estimator), 0)


def futility_share(k: int, max_samples: int, first_keep: int = 1) -> float:
    """The futility bar's share of the efficacy boundary at k candidate samples (0: none):
    from the second sample on, and never before a keep could come."""
    if k < max(2, first_keep):
        return 0.0
    first, last = FUTILITY_SHARES
    if max_samples <= 2:
        return first
    return first + (last - first) * (k - 2) / (max_samples - 2)


def _projection(k: int, n: int, max_samples: int) -> float:
    """se at max_samples (with as many more incumbent samples) / se now."""
    # The reference never shrinks: a comparison whose fresh runs were set aside as spikes
    # may take more than max_samples candidate runs.
    final_n = max(n, min(n + max_samples - k, max_samples))
    return math.sqrt(1 / max_samples + 1 / final_n) / math.sqrt(1 / k + 1 / n)


@lru_cache(maxsize=4096)
def _geometry(
    k: int, n: int, max_samples: int, first_keep: int = 1
) -> tuple[float, float, float, float]:
    """What a look with k candidate and n reference samples needs besides the values:
    the standard error's factor sqrt(1/k + 1/n), the drop bar, the futility share and
    the projection. Cached: the calibration takes hundreds of thousands of looks."""
    return (
        math.sqrt(1 / k + 1 / n),
        drop_bar(n),
        futility_share(k, max_samples, first_keep),
        _projection(k, n, max_samples),
    )


class Look(NamedTuple):
    """What a comparison saw at one look (after a sample)."""

    candidate: int  # candidate samples so far
    reference: int  # reference samples compared with
    fresh: int  # incumbent samples taken during this comparison
    gain: float  # of the means, positive = the candidate is better
    z: float | None = None  # gain / its standard error (sequential with noise only)
    futility: float = 0.0  # the futility bar, as a share of the efficacy boundary
    efficacy: float | None = None  # the efficacy boundary this look was judged at
    ref_mean: float = 0.0  # the reference's mean, for relative gains and min_delta
    threshold: float | None = None  # the gain to beat (threshold and repeats rules)
    bar: float | None = None  # the drop bar on z this look was judged at (sequential)
    level: float = 0.0  # the candidate's location, as the gain was taken from it
    paired: float | None = None  # z of the interleaved pairs' gains (Rule.pairs)
    keep_z: float | None = None  # the statistic the boundary is compared with to keep


def judged_level(best: float, look: Look) -> float:
    """The candidate's level as its comparison judged it, on the scale of the recorded best
    `best`: the best moved by the judged gain, as a share of the reference where the two have
    the same sign (a timing's gain scales with the machine's speed when it was measured),
    in units otherwise. Against a reference that is the best itself (one-sample rules,
    `repeats`) it is exactly the candidate's own location."""
    reference, level = look.ref_mean, look.level
    if reference == best:
        return level
    moved = level - reference
    if reference and best and (reference > 0) == (best > 0):
        moved *= best / reference
    return best + moved


def kept_best(best: float, look: Look, direction: str) -> float:
    """The recorded best once the rule kept the candidate of `look`: the level its
    comparison judged it at, but never better than its own runs' location, and never worse
    than `best`.

    Both bounds keep the number honest. The judged gain is measured against the
    incumbent's reference, which a burst of contention can inflate (and the gains chained
    from keep to keep would carry every such error on); the candidate's own location is
    what its runs showed, on the machine as it was then (slower after a neighbour started,
    which may leave the best where it was). The worse of the two is recorded, and a keep
    never moves the best against `direction`."""
    judged = judged_level(best, look)
    level = judged if gain(judged, look.level, direction) < 0 else look.level
    return best if gain(level, best, direction) < 0 else level


def judge(
    rule: Rule,
    direction: str,
    reference: Sequence[float],
    candidate: Sequence[float],
    fresh: int = 0,
    noise: Noise | None = None,
    carried: int = 0,
    efficacy: float | None = None,
    open_walk: bool = False,
    pairs: Sequence[float] = (),
    known: Sequence[float] = (),
) -> tuple[Verdict, Look | None]:
    """The rule's verdict on the samples so far, and what it looked at.

    `reference` holds the incumbent samples a candidate is compared with; under
    `sequential` its last `fresh` were taken during this comparison, and `carried` says how
    many it had from earlier comparisons when this one began (0 right after a keep).

    Sequential: z = gain of the means / its standard error, the standard error from the
    pooled noise estimate. Keep when z crosses the efficacy boundary, the estimated gain
    exceeds min_delta and at least one incumbent sample is fresh (so that a drifting
    machine cannot turn an old reference into a gain). Drop when the candidate does not
    look better at all, when it is confidently short of min_delta, when the projected
    statistic falls below the futility bar, or after max_samples of each. The boundary is
    `efficacy` when given, else calibrated for the start state; `open_walk` judges with no
    boundary at all (never keep, no futility): only the stops no boundary changes.
    `known` is what else the incumbent is known by (under `states`: which speed states
    it has shown).
    """
    if not candidate or not reference:
        return Verdict.MORE, None
    k = len(candidate)
    n = len(reference)
    if rule.name == "sequential" and rule.estimator != "mean":
        sigma = noise.sigma if noise is not None else 0.0
        gap = noise.gap if noise is not None and rule.estimator == "states" else 0.0
        # A run that is not positive is no speed state's: such runs are judged unfolded.
        if gap > 0 and min(*reference, *candidate) > 0:
            return _within_states(
                rule, direction, reference, candidate, fresh, noise, carried, efficacy,
                open_walk, pairs, gap, known,
            )  # fmt: skip
        ref_mean = robust.location(reference, rule.estimator, direction, sigma)
        level = robust.location(candidate, rule.estimator, direction, sigma)
        g = gain(level, ref_mean, direction)
        own = varies_more(candidate, reference[len(reference) - fresh :] if fresh else [])
        return _sequential(
            rule, g, ref_mean, k, n, fresh, noise, carried, efficacy, open_walk, level, pairs,
            own_spread=own,
        )  # fmt: skip
    ref_mean = _mean(reference)
    level = _mean(candidate)
    g = gain(level, ref_mean, direction)
    if rule.name == "sequential":
        return _sequential(
            rule, g, ref_mean, k, n, fresh, noise, carried, efficacy, open_walk, level, pairs
        )
    if rule.name == "strict":
        look = Look(k, n, fresh, g, ref_mean=ref_mean, threshold=0.0, level=level)
        return (Verdict.KEEP if g > 0 else Verdict.DISCARD), look
    threshold = rule.min_delta_abs(ref_mean)
    if rule.name == "repeats":
        if k < rule.repeats:
            return Verdict.MORE, Look(k, n, fresh, g, ref_mean=ref_mean, level=level)
        var_c = statistics.variance(candidate) if k > 1 else 0.0
        var_i = statistics.variance(reference) if n > 1 else 0.0
        threshold = max(threshold, 2 * math.sqrt(var_c / k + var_i / n))
    look = Look(k, n, fresh, g, ref_mean=ref_mean, threshold=threshold, level=level)
    return (Verdict.KEEP if g > threshold and g > 0 else Verdict.DISCARD), look


def _within_states(
    rule: Rule,
    direction: str,
    reference: Sequence[float],
    candidate: Sequence[float],
    fresh: int,
    noise: Noise | None,
    carried: int,
    efficacy: float | None,
    open_walk: bool,
    pairs: Sequence[float],
    gap: float,
    known: Sequence[float] = (),
) -> tuple[Verdict, Look]:
    """The sequential verdict on a machine whose speed sits in states a factor 1 + `gap`
    apart: both sides' runs folded into one state, the fastest the incumbent has shown (in
    `reference` and `known`, its other runs), so that a run in a slow state is compared as
    the fast one would have measured it.

    Folding alone cannot tell a gain from a loss one gap away (a change 10% slower looks
    5% faster among states 15% apart). Two things can, and a keep asks both:
    - the interleaved pairs: most pairs' two runs share a state, so their raw gains sit at
      the true gain. The gain moves by the whole gaps that more pairs point to than point
      to none, and a keep needs two or more pairs, more than point anywhere else, to agree;
    - a candidate run in the fastest state at the level claimed for it: the slower
      reading of its runs would put that run faster than any state. The fastest state is
      known once the incumbent has shown two."""
    sigma = noise.sigma if noise is not None else 0.0
    # A state count times `slower` is how many states slower: a slow state measures more
    # when the number is a time, less when it is a throughput.
    slower = 1 if robust.worse_high(direction) else -1
    centre = robust.densest_half(reference)
    states = [slower * robust.state_of(x, centre, gap) for x in (*known, *reference)]
    centre = robust.in_state(centre, -slower * min(states), gap)
    # Until the incumbent has shown a second state, its fastest may still be a slow one.
    shown_two = max(states) > min(states)
    ref_mean = robust.location(robust.fold(reference, centre, gap), "robust", direction, sigma)
    # The candidate's runs are folded around their own centre, moved to the state nearest
    # the reference's: a gain near half a state must not split them between two states.
    # But never from beyond the fastest state once the incumbent has shown two: no state
    # runs faster than the fastest, so a candidate's runs faster still are its gain.
    mid = robust.densest_half(candidate)
    beyond = slower * robust.state_of(mid, centre, gap) < 0
    own = mid if beyond and shown_two else robust.fold([mid], centre, gap)[0]
    level = robust.location(robust.fold(candidate, own, gap), "robust", direction, sigma)
    g = gain(level, ref_mean, direction)
    # One state, in the metric's units at the incumbent's level: what a pair whose runs
    # fell in different states is off by.
    step = gap * abs(centre)
    votes = Counter(round((p - g) / step) for p in pairs)
    # The nearest reading has a vote of its own while the folded gain is within a third of
    # a state (changes are mostly smaller than that); ties go to the smaller move. So one
    # pair whose runs fell in different states moves nothing. Beyond it, noise and the
    # size of the change decide which way a run folds, and the pairs alone say.
    nearest = abs(g) <= step / STATE_NEAR
    votes[0] += nearest
    shift, count = max(votes.items(), key=lambda kv: (kv[1], -abs(kv[0]), kv[0]))
    if shift == 0:
        count -= nearest
    others = [n for k, n in votes.items() if k != shift]
    agree = count >= 2 and count > max(others, default=0)
    level = robust.in_state(level, slower * shift, gap)
    g = gain(level, ref_mean, direction)
    # How many states slower than the claimed level each candidate run is: 0 is a run in
    # the fastest state, which the reading one gap slower cannot give.
    seen = [slower * robust.state_of(x, level, gap) for x in candidate]
    confirmed = agree and min(seen) == 0 and shown_two
    return _sequential(
        rule, g, ref_mean, len(candidate), len(reference), fresh, noise, carried, efficacy,
        open_walk, level, [p - step * round((p - g) / step) for p in pairs],
        ambiguous=not confirmed, unsettled=not (nearest or agree),
    )  # fmt: skip


def _sequential(
    rule: Rule,
    g: float,
    ref_mean: float,
    k: int,
    n: int,
    fresh: int,
    noise: Noise | None,
    carried: int,
    efficacy: float | None,
    open_walk: bool,
    level: float,
    pairs: Sequence[float] = (),
    ambiguous: bool = False,
    unsettled: bool = False,
    own_spread: bool = False,
) -> tuple[Verdict, Look]:
    delta = rule.min_delta_abs(ref_mean)
    max_samples = rule.max_samples
    done = k >= max_samples and fresh >= max_samples
    if noise is None or noise.sigma <= 0:
        # Exact samples: only min_delta and drift are left to rule out.
        look = Look(k, n, fresh, g, ref_mean=ref_mean, threshold=delta, level=level)
        if g <= delta:
            return Verdict.DISCARD, look
        if open_walk:
            return (Verdict.DISCARD if done else Verdict.MORE), look
        return (Verdict.KEEP if fresh >= 1 else Verdict.MORE), look
    factor, bar, share, projection = _geometry(k, n, max_samples, rule.first_keep)
    if noise.screen > 0:
        if k <= max(screened_samples(rule.estimator), rule.first_keep - 1):
            # One spike on the candidate's first sample(s) must not drop a real gain: only
            # a loss beyond the campaign's typical spike does. Nor may runs too few to keep
            # on (before `first_keep`, chosen where a side's first runs can all fall in a
            # slow state) drop it for a loss its states explain.
            bar = min(bar, -noise.screen)
    elif k == 1 and g < -SPIKE_SIGMAS * noise.sigma:
        # A first run worse by more than the noise has shown (no spike screen yet) is as
        # likely a disturbance as the change: answered with another run, as a spiked
        # re-measurement of the incumbent is, not taken as the candidate's level.
        bar = -math.inf
    if unsettled:
        # Which speed state the gain is in is not known yet (`_within_states`): a loss
        # read on it may be a gain one state over. Only the last run drops it.
        bar, share = -math.inf, 0.0
    se = noise.sigma * factor
    z = g / se
    paired = None
    if rule.pairs != "off" and pairs:
        paired = paired_z(pairs, noise.sigma, own_spread)
    keep_z = z
    if paired is not None:
        keep_z = min(z, paired)
    if ambiguous:
        # The pairs do not say which speed state the gain is in: no keep yet.
        keep_z = min(keep_z, 0.0)
    if open_walk:
        look = Look(
            k, n, fresh, g, z, share * projection, None, ref_mean, bar=bar, level=level,
            paired=paired, keep_z=keep_z,
        )  # fmt: skip
        return (Verdict.DISCARD if z <= bar or done else Verdict.MORE), look
    if efficacy is None:
        # The boundary stays fixed through a comparison, as calibrated: it follows the
        # noise estimate's degrees of freedom before this comparison's samples joined it.
        efficacy = sequential_bounds(rule, noise.dof - (k - 1) - fresh, carried, noise.screen)
    look = Look(
        k, n, fresh, g, z, share * projection, efficacy, ref_mean, delta, bar, level, paired,
        keep_z,
    )  # fmt: skip
    if fresh >= 1 and k >= rule.first_keep and keep_z >= efficacy and g > delta:
        return Verdict.KEEP, look
    if z <= bar or short_of_min_delta(g, se, efficacy, bar, delta) or done:
        return Verdict.DISCARD, look
    if share > 0 and z < share * efficacy * projection:
        return Verdict.DISCARD, look
    return Verdict.MORE, look


def short_of_min_delta(g: float, se: float, efficacy: float, bar: float, delta: float) -> bool:
    """The gain is confidently short of min_delta `delta`. Where the drop bar lets a
    worse-looking sample through (a single reference, the spike screen), the same allowance
    widens the margin: otherwise the screen would spare a spiked first run only for
    min_delta to drop it."""
    return delta > 0 and g + (efficacy - min(bar, 0.0)) * se <= delta


def paired_z(pairs: Sequence[float], sigma: float, own_spread: bool = False) -> float:
    """The interleaved pairs' statistic: the clipped mean of the pair gains over its
    standard error, sqrt(2) runs' sigma over sqrt(pairs) (what independent runs give; a
    disturbance both runs of a pair share cancels in the gain), or with `own_spread` the
    pairs' own spread where they scatter clearly more (`pair_spread`)."""
    expected = math.sqrt(2.0) * sigma
    centre = robust.location(pairs, "robust", "maximize", expected)
    spread = pair_spread(pairs, centre, expected) if own_spread else expected
    return centre / (spread / math.sqrt(len(pairs)))


def varies_more(candidate: Sequence[float], fresh: Sequence[float]) -> bool:
    """The candidate's runs, two or more, vary more than the incumbent's runs of the same
    comparison (or too few of those were taken to tell): only then may the pairs' own
    spread judge it (`pair_spread`). A burst of contention that splits a pair widens the
    pairs' scatter too, but it hits the incumbent's runs as often as the candidate's."""
    if len(candidate) < 2:
        return False
    return len(fresh) < 2 or statistics.pvariance(candidate) > statistics.pvariance(fresh)


def pair_spread(pairs: Sequence[float], centre: float, expected: float) -> float:
    """The spread of one pair's gain: what two independent runs at the campaign's noise
    give (`expected`, sqrt(2) sigmas), or the pairs' own where they scatter clearly more.

    The campaign's noise is pooled over every version, and a change may make its own runs
    vary more than the incumbent's (a cache it thrashes, allocations a collector pays for
    at random): judged at the pooled noise, a few lucky runs of such a candidate look like
    a gain. Its pairs then scatter more than two runs at the pooled noise do. Their own
    spread is taken once their scatter (each deviation clipped where the clipped mean
    leaves a run out, so that one spike cannot widen it much) lies beyond the
    PAIR_SCATTER_QUANTILE of what the expected spread gives; below it, the expected one,
    so that on noise every version shares the rule spends few runs on it. One pair says
    nothing of its own scatter: a keep after the candidate's first run still assumes the
    campaign's noise."""
    m = len(pairs)
    if m < 2:
        return expected
    edge = robust.CLIP["robust"] * expected
    scatter = math.fsum(min(abs(p - centre), edge) ** 2 for p in pairs)
    if scatter <= chi2_quantile(PAIR_SCATTER_QUANTILE, m - 1) * expected**2:
        return expected
    return math.sqrt(scatter / (m - 1))


@lru_cache(maxsize=64)
def chi2_quantile(p: float, dof: int) -> float:
    """The chi-square quantile (Wilson-Hilferty; within 3% from 1 degree of freedom)."""
    h = 2.0 / (9.0 * dof)
    return dof * (1.0 - h + normal_ppf(p) * math.sqrt(h)) ** 3


class Comparison:
    """One candidate against the incumbent, sample by sample: the sampling procedure of
    every rule.

    `next()` names the side to measure (`Side`) or gives the verdict (KEEP or DISCARD);
    `add(value)` takes the value measured on the side it named. The order:

    - `strict`, `threshold`: one candidate sample;
    - `repeats`: `repeats` candidate samples;
    - `sequential`: an incumbent with fewer than REFERENCE_MIN reference samples (freshly
      kept: the samples that selected it are biased) is measured first; then the two
      sides in blocks A B B A (`_following`), with a look after every sample.

    `reference` is the incumbent samples the candidate is compared with (under
    `sequential` its last `max_samples` unbiased ones), `noise` the noise estimate (fixed,
    or a `Pool` that the comparison's own samples join), `carried` how many reference
    samples earlier comparisons left behind (the start state). `efficacy` fixes the
    sequential boundary instead of the calibrated one; `open_walk` judges with none (see
    `judge`).

    `prior` is what else the incumbent is known by: the samples that selected it when it
    was kept (biased in its favour, so never compared with). A reference sample worse than
    that level by more than the campaign's spike scale is a spike (`_left_out`): it is left
    out of the comparison, and a fresh one is answered with another run of the incumbent,
    up to SPIKE_RERUNS; runs that agree with each other are the incumbent's new level. So
    one disturbed re-measurement never becomes the reference a candidate is judged
    against.
    """

    def __init__(
        self,
        rule: Rule,
        direction: str,
        reference: Sequence[float] = (),
        noise: Noise | Pool | None = None,
        carried: int = 0,
        *,
        efficacy: float | None = None,
        open_walk: bool = False,
        prior: Sequence[float] = (),
    ) -> None:
        self.rule = rule
        self.prior = list(prior)
        self.set_aside = 0  # fresh incumbent runs answered with another as spikes
        self._scale: float | None = None  # the spike scale, once asked for
        self._level: float | None = None  # the median of `prior`, once asked for
        # `_left_out` for the reference as it stands: asked at every look and after every
        # incumbent run, it changes only when the reference or the set-asides do.
        self._changes = 0  # how often the reference was changed
        self._spikes: tuple[tuple[int, int], list[bool] | None] | None = None
        self.direction = direction
        self.noise_source = noise
        self.carried = carried
        self.efficacy = efficacy
        self.open_walk = open_walk
        self.sequential = rule.name == "sequential"
        if self.sequential:
            self.reference: list[float] = list(reference)[-rule.max_samples :]
        elif reference:
            self.reference = list(reference)
        else:
            raise ValueError(f"the {rule.name} rule needs samples of the incumbent")
        self.candidate: list[float] = []
        self.fresh: list[float] = []  # incumbent samples taken during this comparison
        # The runs this comparison took, in order, but the incumbent runs it set aside as
        # spikes: what the interleaved pairs are formed from; each with whether it
        # followed a run of its own side (under `Rule.carry` only those are judged).
        self.runs: list[tuple[Side, float, bool]] = []
        # Every run taken, set-asides included, as (side, value, follows a run of its own
        # side): what the campaign learns carry-over from (`noise_model.carry_over`). The
        # first follows a run of the comparison before, whose version is not known here.
        self.taken: list[tuple[Side, float, bool]] = []
        self.look: Look | None = None
        self._held: Verdict | None = None  # a drop held for one more run (`Rule.probe`)
        self._batch = rule.repeats if rule.name == "repeats" else 1
        self._next: Side | Verdict = self._first()

    def next(self) -> Side | Verdict:
        return self._next

    @property
    def verdict(self) -> Verdict:
        """KEEP or DISCARD once decided, MORE before."""
        return self._next if isinstance(self._next, Verdict) else Verdict.MORE

    def noise(self) -> Noise | None:
        """The noise estimate with this comparison's samples so far."""
        source = self.noise_source
        if isinstance(source, Pool):
            return source.noise(self.fresh, self.candidate)
        return source

    def add(self, value: float) -> Look | None:
        """Take the value measured on the side `next()` named; the look it led to, if any."""
        side = self._next
        if not isinstance(side, Side):
            raise RuntimeError(f"the comparison is decided ({side.value}); nothing to add")
        follows = bool(self.taken) and self.taken[-1][0] is side
        self.taken.append((side, value, follows))
        if self._held is not None:
            self.runs.append((side, value, False))
            self._next = self._held
            return None
        if self.rule.carry and not follows:
            # A run right after the other side's may carry part of it: it sets up the
            # next run of its side and is not judged.
            self.runs.append((side, value, False))
            self._next = self._carry_following()
            if self.rule.probe and side is Side.CANDIDATE and not self.candidate:
                return self._screen_first(value)
            return None
        if side is Side.INCUMBENT:
            self.fresh.append(value)
            reference = self.reference
            reference.append(value)
            if len(reference) > self.rule.max_samples:
                del reference[0]
            self._changes += 1
            if self.set_aside < SPIKE_RERUNS and self._spike():
                self.set_aside += 1
                return None  # answered with another run of the incumbent
            self.runs.append((side, value, follows))
            if not self.candidate:
                self._next = self._carry_following() if self.rule.carry else self._first()
                return None
        else:
            self.candidate.append(value)
            self.runs.append((side, value, follows))
            if len(self.candidate) < self._batch:
                return None
        verdict, look = self._judge()
        self.look = look
        if verdict is Verdict.DISCARD and self.rule.probe and side is Side.CANDIDATE:
            self._held = verdict
            self._next = Side.INCUMBENT
        elif verdict is not Verdict.MORE:
            self._next = verdict
        elif self.rule.carry:
            self._next = self._carry_following()
        elif self.sequential:
            self._next = self._following()
        else:
            self._next = Side.CANDIDATE
        return look

    def _screen_first(self, value: float) -> Look | None:
        """While the campaign probes for carry-over (`Rule.probe`), the candidate's first
        run, right after the incumbent's, is judged as a first run is where every run is
        judged, and a drop there with z at most PROBE_SCREEN_Z is held for the incumbent
        run the probe asks; anything else is forgotten and the block goes on. A run can
        carry at most the incumbent's level, so a candidate that looks clearly worse after
        it is worse still; the added way to be dropped can only lower how often a
        candidate that is not better is kept, and the boundary, `carry`'s, still holds."""
        verdict, look = self._judge([value])
        clearly = look is not None and look.z is not None and look.z <= PROBE_SCREEN_Z
        if verdict is not Verdict.DISCARD or not clearly:
            return None
        self.candidate.append(value)
        self.look = look
        self._held = verdict
        self._next = Side.INCUMBENT
        return look

    def _first(self) -> Side:
        if self.sequential and len(self.compared()[0]) < REFERENCE_MIN:
            return Side.INCUMBENT
        return Side.CANDIDATE

    def _following(self) -> Side:
        """The side of the next run: in blocks of four, A B B A (A the side measured first),
        so that every two pairs each side has run first and second once. A machine that
        alternates (every other run slower), or a run that pays for the one before it,
        then hits both sides alike; strict alternation would hand one side every fast
        run. Runs set aside as spikes are not counted: their rerun takes their place."""
        first = self.runs[0][0]
        if len(self.runs) % 4 in (0, 3):
            return first
        return Side.INCUMBENT if first is Side.CANDIDATE else Side.CANDIDATE

    def _carry_following(self) -> Side:
        """The side of the next run under `Rule.carry`: in blocks of CARRY_BLOCK runs of
        one side, A A A B B B, whose first run follows the other side's and is not judged.
        The incumbent while the reference is short."""
        side = self.runs[-1][0]
        block = 0
        for earlier, _, _ in reversed(self.runs):
            if earlier is not side:
                break
            block += 1
        if block < CARRY_BLOCK:
            return side
        if len(self.compared()[0]) < REFERENCE_MIN:
            return Side.INCUMBENT
        return Side.INCUMBENT if side is Side.CANDIDATE else Side.CANDIDATE

    def known_noise(self) -> Noise | None:
        """The noise known before this comparison: its own runs, spikes among them, must
        not widen the scale that judges them."""
        source = self.noise_source
        return source.noise([], []) if isinstance(source, Pool) else source

    def _spike_scale(self) -> float:
        """How far worse than the incumbent's known level a run is before it is a spike
        (0: no screen: not the sequential rule, nothing else known of the incumbent, or
        exact samples). Fixed for the comparison once asked for."""
        if self._scale is None:
            noise = self.known_noise() if self.sequential and self.prior else None
            sigma = noise.sigma if noise is not None else 0.0
            self._scale = SPIKE_SIGMAS * sigma if noise and sigma > 0 else 0.0
        return self._scale

    def _left_out(self) -> list[bool] | None:
        """Which reference samples are spikes, or None when none is left out (`_spiked`)."""
        key = (self._changes, self.set_aside)
        if self._spikes is None or self._spikes[0] != key:
            self._spikes = (key, self._spiked())
        return self._spikes[1]

    def _spiked(self) -> list[bool] | None:
        """Which reference samples are spikes, or None when none is left out.

        A sample worse than the level the incumbent was kept at (the median of `prior`)
        by more than the spike scale is a spike, unless REFERENCE_SETTLED or more such
        samples agree with each other, the latest among them: then they are the
        incumbent's new level (the machine changed, or the samples that selected it were
        luckier than most), and all are taken. Once
        REFERENCE_SETTLED samples agree with the known level, the estimator itself is
        robust to what is left, and the reference is taken whole; so it is when nothing but
        spikes is left after SPIKE_RERUNS reruns, which bounds what a comparison spends."""
        scale = self._spike_scale()
        if scale <= 0:
            return None
        gap = self._gap()
        if self._level is None:
            self._level = robust.densest_half(self.prior) if gap else robust.median(self.prior)
        level = self._level
        values = robust.fold(self.reference, level, gap) if gap else self.reference
        spiked = [gain(v, level, self.direction) < -scale for v in values]
        spikes = [v for v, out in zip(values, spiked, strict=True) if out]
        # Agreeing spikes are a new level only once REFERENCE_SETTLED of them agree (two in
        # a row are what a burst of contention or a slow state gives), and only while it
        # lasts: when the latest run is back at the known level, they were a burst.
        agreeing = (
            len(spikes) >= REFERENCE_SETTLED
            and max(spikes) - min(spikes) <= 2 * scale
            and spiked[-1]
        )
        kept = len(self.reference) - len(spikes)
        if not spikes or agreeing or kept >= REFERENCE_SETTLED:
            return None
        if not kept and self.set_aside >= SPIKE_RERUNS:
            return None  # nothing but spikes after the reruns: taken as they are
        return spiked

    def _gap(self) -> float:
        """The speed states' spacing runs are folded by (0: none)."""
        source = self.noise_source
        if self.rule.estimator != "states" or source is None:
            return 0.0
        return source.gap

    def _spike(self) -> bool:
        """The fresh run just added is left out as a spike."""
        spiked = self._left_out()
        return spiked is not None and spiked[-1]

    def compared(self) -> tuple[list[float], int, int]:
        """The reference the candidate is judged against (spikes left out), how many of
        its samples are fresh, and how many were carried from earlier comparisons: with
        no spike, exactly the comparison's own reference, fresh and carried counts."""
        spiked = self._left_out()
        if spiked is None:
            return self.reference, len(self.fresh), self.carried
        used = [v for v, out in zip(self.reference, spiked, strict=True) if not out]
        fresh = min(len(self.fresh), len(self.reference))
        fresh_used = fresh - sum(spiked[len(spiked) - fresh :]) if fresh else 0
        return used, fresh_used, min(self.carried, len(used) - fresh_used)

    def pair_gains(self) -> list[float]:
        """The gains of the interleaved pairs: each candidate run against the incumbent run
        taken next to it (consecutive runs of opposite sides, paired in order)."""
        gains: list[float] = []
        waiting: tuple[Side, float] | None = None
        for side, value, follows in self.runs:
            if self.rule.carry and not follows:
                continue
            if waiting is None or waiting[0] is side:
                waiting = (side, value)
                continue
            c, i = (value, waiting[1]) if side is Side.CANDIDATE else (waiting[1], value)
            gains.append(gain(c, i, self.direction))
            waiting = None
        return gains

    @property
    def held(self) -> bool:
        """A drop is decided and waits only for the incumbent run `Rule.probe` asks."""
        return self._held is not None and self._next is Side.INCUMBENT

    def release(self) -> None:
        """Give a held drop without its incumbent run (that run failed: it would only have
        told how much a run carries)."""
        if self._held is None:
            raise RuntimeError("no drop is held")
        self._next = self._held

    def feed(self, candidate: Sequence[float], incumbent: Sequence[float]) -> tuple[int, int]:
        """Give the comparison recorded runs in the order it asks for them, until it
        decides or asks for one that was not recorded (a held drop whose incumbent run
        was not recorded is given, as the evaluator gave it): how many of each side it
        took."""
        queues = {Side.CANDIDATE: candidate, Side.INCUMBENT: incumbent}
        taken = {Side.CANDIDATE: 0, Side.INCUMBENT: 0}
        while isinstance(side := self.next(), Side):
            if taken[side] >= len(queues[side]):
                if self.held:
                    self.release()
                break
            self.add(queues[side][taken[side]])
            taken[side] += 1
        return taken[Side.CANDIDATE], taken[Side.INCUMBENT]

    def _judge(self, candidate: Sequence[float] | None = None) -> tuple[Verdict, Look | None]:
        """The verdict on the candidate's judged runs, or on `candidate` in their place."""
        reference, fresh, carried = self.compared()
        return judge(
            self.rule,
            self.direction,
            reference,
            self.candidate if candidate is None else candidate,
            fresh,
            self.noise(),
            carried,
            self.efficacy,
            self.open_walk,
            self.pair_gains() if self.rule.pairs != "off" or self._gap() else (),
            self.prior,
        )


def explain(rule: Rule, verdict: Verdict, look: Look | None) -> str:
    """Why the rule reached `verdict` at `look`, with the statistic and the threshold:
    "z 1.42 < 2.10 after 3 runs", "first run 5.2% worse than the incumbent", ..."""
    if look is None or verdict is Verdict.MORE:
        return ""
    k, g = look.candidate, look.gain
    runs = f"after {k} run{'' if k == 1 else 's'}"
    if g == 0:
        return f"equal is not better ({runs})" if k > 1 else "equal is not better"
    relative = _relative(g, look.ref_mean)
    first = "first run" if k == 1 else f"mean of {k} runs"
    if look.z is None or look.efficacy is None:  # one-sample rules, repeats, exact metrics
        threshold = look.threshold or 0.0
        if g < 0 or (verdict is Verdict.KEEP and threshold <= 0):
            return f"{first} {relative} than the incumbent"
        sign = ">" if verdict is Verdict.KEEP else "<="
        what = "the bar (min_delta, 2 sigma)" if rule.name == "repeats" else "min_delta"
        return f"gain {g:.4g} {sign} {what} {threshold:.4g} {runs} ({relative})"
    z, efficacy = look.z, look.efficacy
    if verdict is Verdict.KEEP:
        return f"z {z:.2f} >= {efficacy:.2f} {runs} ({relative})"
    bar = look.bar if look.bar is not None else drop_bar(look.reference)
    if z <= bar:
        if k == 1:
            return _screened(look, bar)
        return f"z {z:.2f} <= {bar:g} {runs}: not better"
    delta = look.threshold or 0.0
    if short_of_min_delta(g, g / z, efficacy, bar, delta):
        return f"gain {g:.4g} confidently short of min_delta {delta:.4g} {runs}"
    if k >= rule.max_samples and look.fresh >= rule.max_samples:
        if z < efficacy:
            return f"z {z:.2f} < {efficacy:.2f} {runs} (max_samples)"
        # The sides' z reached the boundary: what else a keep asks was missing.
        if look.paired is not None and look.paired < efficacy:
            return (
                f"the interleaved pairs' z {look.paired:.2f} < {efficacy:.2f} {runs} "
                f"(max_samples; the sides' z {z:.2f})"
            )
        return f"gain {g:.4g} not above min_delta {delta:.4g} {runs} (max_samples; z {z:.2f})"
    return f"z {z:.2f} < futility bar {look.futility * efficacy:.2f} {runs}"


def _screened(look: Look, bar: float) -> str:
    """Why a candidate was dropped after one run: how much worse it was, and how much worse
    a first run may look at this noise (the screen's bar times the standard error), with
    the noise of one run beside it, so that a drop inside the metric's own spread reads as
    what it is."""
    g, z, reference = look.gain, look.z or 0.0, look.ref_mean
    se = g / z if z else 0.0
    sigma = se / math.sqrt(1 / look.candidate + 1 / look.reference)
    worse = _relative(g, reference)
    statistic = f"z {z:.2f} <= {bar:g}, one run's noise {_size(sigma, reference)}"
    allowed = -bar * se
    if allowed <= 0:
        return f"screened out after 1 run: {worse}; the screen allows no loss ({statistic})"
    return (
        f"screened out after 1 run: {worse}, beyond the {_size(allowed, reference)} spread "
        f"the screen allows at this noise ({statistic})"
    )


def _size(amount: float, reference: float) -> str:
    """An amount as a share of the reference ("2.1%"), or in units when the reference is 0."""
    if not reference:
        return f"{abs(amount):.3g}"
    pct = 100 * abs(amount) / abs(reference)
    return f"{pct:.2g}%" if pct < 10 else f"{pct:.0f}%"


def _relative(g: float, reference: float) -> str:
    word = "better" if g > 0 else "worse"
    if not reference:
        return f"{abs(g):.4g} {word}"
    pct = 100 * abs(g) / abs(reference)
    return f"{pct:.1f}% {word}" if pct < 100 else f"{pct:.0f}% {word}"


def decide(
    incumbent: Sequence[float],
    candidate: Sequence[float],
    direction: str,
    rule: Rule | RuleSource,
    noise: Noise | None = None,
    fresh_incumbent: int = 0,
    carried: int = 0,
) -> Verdict:
    """The rule's verdict at one look (see `judge`); `Comparison` takes the looks in turn."""
    verdict, _ = judge(
        as_rule(rule), direction, incumbent, candidate, fresh_incumbent, noise, carried
    )
    return verdict


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


def _prior_attempt(test: Comparison, draws: Iterator[float]) -> Verdict:
    """Drive a null candidate's comparison to its verdict, exactly as the evaluator does."""
    while True:
        side = test.next()
        if isinstance(side, Verdict):
            return side
        test.add(next(draws))


def _critical_boundary(test: Comparison, draws: Iterator[float]) -> float:
    """The largest efficacy boundary at which this null comparison would be kept (0: never).

    `test` walks open (no boundary), so it runs until a stop that no boundary changes. At
    a boundary b the comparison is kept at a look when z >= b (with a fresh incumbent
    sample) and dropped when z falls below the futility bar, which scales with b.
    Kept(b) is monotone, so the critical boundary is the best look's min(z, the futility
    headroom of the looks before it).
    """
    best = 0.0
    headroom = math.inf  # the largest boundary the earlier looks let through
    while isinstance(test.next(), Side):
        look = test.add(next(draws))
        if look is None:
            continue
        assert look.z is not None
        if look.fresh >= 1 and look.candidate >= test.rule.first_keep:
            keep_z = look.z if look.keep_z is None else look.keep_z
            best = max(best, min(keep_z, headroom))
        if look.futility > 0:
            headroom = min(headroom, look.z / look.futility)
        if headroom <= best:
            break
    return best


@lru_cache(maxsize=256)
def calibrated_efficacy(
    max_samples: int,
    confidence: float,
    dof: int,
    start: Start = Start.AFTER_KEEP,
    estimator: str = "mean",
    screen: float = 0.0,
    pairs: str = "off",
    first_keep: int = 1,
    carry: bool = False,
) -> float:
    """See `_calibrate`; boundaries are also kept on disk (`calibration`), since each takes
    up to seconds and a campaign needs several (`noise = "auto"` weighs every estimator)."""
    key = f"{max_samples}/{confidence!r}/{dof}/{start.name}/{estimator}/{screen!r}"
    if pairs != "off":
        key += f"/pairs-{pairs}"
    if first_keep != 1:
        key += f"/first-{first_keep}"
    if carry:
        key += "/carry"
    return calibration.cached(
        key,
        lambda: _calibrate(
            max_samples, confidence, dof, start, estimator, screen, pairs, first_keep, carry
        ),
        JUDGE_VERSION,
    )


def calibrate_key(key: str) -> float:
    """The boundary a key of the calibration cache names, computed afresh (how a cached or
    shipped value is checked)."""
    samples, confidence, dof, start, estimator, screen, *rest = key.split("/")
    options: dict[str, Any] = {}
    for part in rest:
        if part.startswith("pairs-"):
            options["pairs"] = part.removeprefix("pairs-")
        elif part.startswith("first-"):
            options["first_keep"] = int(part.removeprefix("first-"))
        elif part == "carry":
            options["carry"] = True
        else:
            raise ValueError(f"calibration key {key!r}: unknown part {part!r}")
    return _calibrate(
        int(samples),
        float(confidence),
        int(dof),
        Start[start],
        estimator,
        float(screen),
        **options,
    )


def _calibrate(
    max_samples: int,
    confidence: float,
    dof: int,
    start: Start = Start.AFTER_KEEP,
    estimator: str = "mean",
    screen: float = 0.0,
    pairs: str = "off",
    first_keep: int = 1,
    carry: bool = False,
) -> float:
    """The efficacy boundary (t scale) at which a candidate with no true gain is kept with
    probability at most 1 - confidence by `Comparison` itself: a look after every sample,
    interleaved incumbent samples, binding futility, and a noise estimate with `dof`
    degrees of freedom.

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
    index = list(Start).index(start)
    seed: int | str = CALIBRATION_SEED * 1000 + max_samples * 10 + dof * 7 + index
    if estimator != "mean":
        seed = f"{CALIBRATION_SEED}/{max_samples}/{dof}/{index}/{estimator}/{screen}"
    if first_keep != 1:
        seed = f"{seed}/first-{first_keep}"
    if carry:
        seed = f"{seed}/carry"
    rng = random.Random(seed)
    prior = PRIOR_ATTEMPTS[start]
    # The candidates before: the first right after the keep, the others partial.
    boundaries = [
        calibrated_efficacy(
            max_samples,
            confidence,
            dof,
            Start.AFTER_KEEP if i == 0 else Start.PARTIAL,
            estimator,
            screen,
            pairs,
            first_keep,
            carry,
        )
        for i in range(prior)
    ]
    rule = Rule(
        "sequential",
        max_samples=max_samples,
        confidence=confidence,
        estimator=estimator,
        pairs=pairs,
        first_keep=first_keep,
        carry=carry,
    )
    draws_per_path = draws_needed(rule, start)

    def gaussian() -> Iterator[tuple[Noise, Iterator[float]]]:
        for _ in range(CALIBRATION_PATHS):
            noise = Noise(math.sqrt(rng.gammavariate(dof / 2, 2.0) / dof), dof, screen)  # s/sigma
            yield noise, iter([rng.gauss(0.0, 1.0) for _ in range(draws_per_path)])

    return critical_quantile(rule, boundaries, gaussian(), CALIBRATION_PATHS)


def draws_needed(rule: Rule, start: Start) -> int:
    """How many runs one calibration path can take at most: the newly kept incumbent's
    re-measurement, the prior null candidates and the calibrated one (under `Rule.carry`
    every judged run may follow one that is not)."""
    runs = REFERENCE_MIN + (PRIOR_ATTEMPTS[start] + 1) * (2 * rule.max_samples + 1)
    return 2 * runs if rule.carry else runs


def critical_quantile(
    rule: Rule,
    boundaries: Sequence[float],
    paths: Iterable[tuple[Noise, Iterator[float]]],
    count: int,
    prior: Sequence[float] = (),
) -> float:
    """The boundary at which at most 1 - confidence of the null candidates of `paths` are
    kept by `Comparison` itself (less one Monte Carlo standard error of `count` paths).

    Each path is a noise estimate and the runs of one stretch of a campaign in the order
    they are taken, candidate and incumbent alike: a newly kept incumbent (known at the
    level `prior`, the samples that selected it, which screen its re-measurements for
    spikes), then one null candidate per boundary of `boundaries` (dropped at its boundary,
    else the path never reaches the state calibrated), then the calibrated candidate, which
    walks open."""
    alpha = 1.0 - rule.confidence
    # Aim one Monte Carlo standard error below the budget, so that the boundary fitted to
    # these paths does not overshoot on new ones.
    alpha -= math.sqrt(alpha * (1 - alpha) / count)
    critical = []
    for noise, draws in paths:
        selected = list(prior)
        reference: list[float] = []
        for boundary in boundaries:
            test = Comparison(
                rule,
                "minimize",
                reference,
                noise,
                len(reference),
                efficacy=boundary,
                prior=selected,
            )
            # A prior candidate kept makes a new incumbent: the path never reaches the state.
            if _prior_attempt(test, draws) is Verdict.KEEP:
                break
            reference = test.reference
        else:
            walk = Comparison(
                rule, "minimize", reference, noise, len(reference), open_walk=True, prior=selected
            )
            critical.append(_critical_boundary(walk, draws))
    critical.sort(reverse=True)
    # Kept iff critical >= boundary: just above the (allowed + 1)-th largest keeps
    # `allowed` paths.
    allowed = int(alpha * len(critical))
    return math.nextafter(critical[allowed], math.inf)


DOF_STEPS = (3, 5, 8, 12, 20, 35, 60, 100, 1000)


def _dof_step(dof: int) -> int:
    """Round the noise estimate's degrees of freedom down to a calibrated step."""
    return max((d for d in DOF_STEPS if d <= max(dof, 3)), default=3)


# A gain is "detectable" when the sequential rule keeps it this often (80%: the usual power
# of a test); its one-sided normal quantile.
DETECT_POWER_Z = 0.8416
# The gains users look for when they set no min_delta (the upper end of 1-5%).
WANTED_GAIN_PCT = 5.0


def detectable_gain(rule: Rule | RuleSource, noise: Noise | None) -> float | None:
    """The smallest true gain the sequential rule keeps 4 times in 5 with `max_samples` runs
    a side at this noise (None: another rule, or an exact metric, where any gain is
    seen). The boundary is the calibrated one of a comparison that starts full."""
    rule = as_rule(rule)
    if rule.name != "sequential" or noise is None or noise.sigma <= 0:
        return None
    n = rule.max_samples
    efficacy = sequential_bounds(rule, noise.dof, n, noise.screen)
    return (efficacy + DETECT_POWER_Z) * noise.sigma * math.sqrt(2 / n)


def sequential_bounds(
    rule: Rule | RuleSource, dof: int, carried: int = 0, screen: float = 0.0
) -> float:
    """The efficacy boundary on the t statistic of the gain."""
    rule = as_rule(rule)
    start = start_state(carried, rule.max_samples)
    # On Gaussian draws there are no states to fold: `states` is `robust` there.
    rule = replace(rule, estimator=robust.base(rule.estimator))
    if rule.estimator == "mean" and rule.pairs == "off" and rule.first_keep == 1 and not rule.carry:
        return calibrated_efficacy(rule.max_samples, rule.confidence, _dof_step(dof), start)
    return calibrated_efficacy(
        rule.max_samples,
        rule.confidence,
        _dof_step(dof),
        start,
        rule.estimator,
        screen,
        rule.pairs,
        rule.first_keep,
        rule.carry,
    )


def confidence_better(
    incumbent: Sequence[float], candidate: Sequence[float], direction: str, noise: Noise | None
) -> float | None:
    """P(candidate is truly better), from the t statistic of the gain of the means."""
    if not candidate or not incumbent or noise is None or noise.sigma <= 0:
        return None
    se = noise.sigma * math.sqrt(1 / len(candidate) + 1 / len(incumbent))
    return t_cdf(gain(estimate(candidate), estimate(incumbent), direction) / se, noise.dof)
