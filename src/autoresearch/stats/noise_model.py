"""The noise a campaign has shown: its residuals, their shape, and the sequential boundary
calibrated on them.

Every version of the code measured more than a few times tells what one run's noise looks
like on this machine: its runs minus their own level are the noise, in the order taken
(`residuals`). Once there are enough of them, the efficacy boundary is calibrated exactly
as `decide` calibrates it on Gaussian draws (the very `Comparison` driven over null
candidates, a newly kept incumbent and the candidates before the calibrated one), but on
noise resampled from these residuals by a stationary block bootstrap, so that bursts of
consecutive runs and persistent states keep their serial structure (`learned_boundaries`).
The shape of the residuals (skew, serial correlation, tails, levels) is described for the
person (`Shape.describe`) and chooses the estimator under `[metric] noise = "auto"`
(`choose_estimator`).

Pure, deterministic (fixed seeds, the residuals in a fixed order), imports nothing of the
package but the statistics.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

from autoresearch.stats import robust
from autoresearch.stats.decide import (
    DETECT_POWER_Z,
    PRIOR_ATTEMPTS,
    Noise,
    Rule,
    Side,
    Start,
    critical_quantile,
    pooled_noise,
    robust_noise,
    sequential_bounds,
)
from autoresearch.stats.robust import densest_half

# A version's unbiased runs before they say something about the noise: with fewer, a
# burst can hold most of them, and centring on their median would turn the clean runs
# into gains the noise never gives.
MIN_RUNS = 4
# Residuals before the learned calibration replaces the Gaussian one, and how much their
# count grows before it is calibrated again.
LEARN_MIN = 8
LEARN_GROWTH = 1.5
# Paths per start state for the estimator in force, and for each other one `noise =
# "auto"` weighs (fewer: its boundary aims one Monte Carlo standard error lower, which
# favours the estimator in force; a switch calibrates the new one on LEARN_PATHS). A
# recalibration stays well under a second on one core.
LEARN_PATHS = 800
TRIAL_PATHS = 400
LEARN_SEED = 20261204
# The noise estimate's degrees of freedom in the simulation: the residuals are taken in
# units of the campaign's own estimate, so it is known there.
KNOWN_DOF = 1000
# The level a simulated path's newly kept incumbent was kept at (the residuals are centred
# on each version's level): what its re-measurements are screened against for spikes, as
# the samples that selected it are in the campaign. Those were kept for looking good, so a
# spike among them is rare; drawing them from the stream would put one there too often.
SELECTED = (0.0,)
# What `choose` weighs: an estimator and the earliest candidate run a keep may come at.
Option = tuple[str, int]


def unbiased(
    groups: Mapping[str, Sequence[float]], selected: Mapping[str, int], least: int = MIN_RUNS
) -> Iterator[tuple[str, list[float]]]:
    """Each version with `least` unbiased runs or more (MIN_RUNS unless a figure needs no
    level to centre on), and those runs in the order taken: what every figure of the noise
    is drawn from. The samples that selected a kept version
    are left out (they were kept for looking good)."""
    for version, samples in groups.items():
        runs = list(samples)[selected.get(version, 0) :]
        if len(runs) >= least:
            yield version, runs


def residuals(
    groups: Mapping[str, Sequence[float]], selected: Mapping[str, int], direction: str
) -> list[float]:
    """Each version's unbiased runs (`unbiased`) minus their level, in the order taken,
    worse side positive, version after version.

    A version's runs are split at a shift of their level (`robust.change_point`), so
    that a machine that changed speed once is not taken for noise that flips between two
    levels. Each segment of at least MIN_RUNS runs is centred on its densest half (a burst
    among them must not move the others) and scaled so that, on Gaussian noise, its
    residuals have the noise's variance (`centred_scale`)."""
    sign = 1.0 if robust.worse_high(direction) else -1.0
    out: list[float] = []
    for _, runs in unbiased(groups, selected):
        cut = robust.change_point(runs)
        for segment in (runs[:cut], runs[cut:]) if cut else (runs,):
            m = len(segment)
            if m < MIN_RUNS:
                continue
            centre = densest_half(segment)
            scale = centred_scale(min(m, 64))
            out.extend(sign * (x - centre) * scale for x in segment)
    return out


def state_residuals(
    groups: Mapping[str, Sequence[float]], selected: Mapping[str, int], direction: str
) -> tuple[list[float], float]:
    """What the `states` estimator is calibrated on: each version's unbiased runs as the
    logarithm of their ratio to the version's level (worse side positive), in the order
    taken, and the typical level. A speed state multiplies a run whatever the code, so the
    states sit at the same place in every version's ratios; and no version is split at a
    change of level, which a stay in the slow state looks like. Empty when a run is not
    positive."""
    sign = 1.0 if robust.worse_high(direction) else -1.0
    out: list[float] = []
    levels: list[float] = []
    for _, runs in unbiased(groups, selected):
        m = len(runs)
        centre = densest_half(runs)
        if min(runs) <= 0 or centre <= 0:
            return [], 0.0
        levels.append(centre)
        scale = centred_scale(min(m, 64))
        out.extend(sign * math.log(x / centre) * scale for x in runs)
    return out, robust.median(levels) if levels else 0.0


@lru_cache(maxsize=128)
def centred_scale(m: int) -> float:
    """The factor that gives the residuals of m Gaussian runs about their densest half
    the variance of one run (a fixed seed: deterministic)."""
    rng = random.Random(7_000_003 * m)
    total = 0.0
    trials = 4000
    for _ in range(trials):
        runs = [rng.gauss(0.0, 1.0) for _ in range(m)]
        centre = densest_half(runs)
        total += math.fsum((x - centre) ** 2 for x in runs) / m
    return math.sqrt(trials / total)


# Speed states (`state_gap`): the share of a version's pairs of runs that must lie in
# different states (each side of the split), how many gaps of the within-state spread
# apart the states must be, how much wider than within a state the spread of the
# between-state differences may be (a burst's losses vary; a frequency state's do not),
# how many pairs of runs are needed, and in how many versions the states must show.
STATE_SHARE = 0.15
STATE_SEPARATION = 8.0
STATE_TIGHTNESS = 1.5
STATE_MIN_PAIRS = 12
STATE_VERSIONS = 3
STATE_STAYS = 2
# Versions whose pairs of runs count (a pair needs no level to be centred on).
STATE_PAIR_RUNS = 2


def state_gap(groups: Mapping[str, Sequence[float]], selected: Mapping[str, int]) -> float:
    """The spacing of the machine's speed states, as a share of the level (a run in the
    slower of two CPU frequency states measures 1 + gap times as much), when the
    campaign's runs sit in such states; 0.0 when they do not, or when a run is not
    positive (no speed state explains it).

    The logarithms of every two unbiased runs of one version differ by the noise within a
    state, or by the gap between states plus that noise. The sorted differences are split
    at their widest jump with at least STATE_SHARE on each side; states are found when the
    upper group sits STATE_SEPARATION within-state sigmas out, is nearly as tight as the
    lower one (bursts of contention differ by varied amounts, states by one), comes from
    STATE_VERSIONS versions or more (the machine's states show in every version measured
    long enough; a burst in the one or two it overlaps, a change of the machine's speed in
    the one measured across it), and holds runs: two runs or more of STATE_STAYS versions,
    or visits the machine comes back to (below).

    The pairs come from every version with STATE_PAIR_RUNS unbiased runs or more: where
    most candidates are dropped after two or three runs, versions measured four times are
    too few to show the states until late in the campaign."""
    diffs: list[tuple[float, str]] = []
    # Not split at a change of level (`residuals` is): to `change_point`, a stay in the
    # slow state is one.
    for version, runs in unbiased(groups, selected, STATE_PAIR_RUNS):
        if min(runs) <= 0:
            return 0.0
        logs = [math.log(x) for x in runs]
        diffs.extend((abs(a - b), version) for i, a in enumerate(logs) for b in logs[i + 1 :])
    n = len(diffs)
    if n < STATE_MIN_PAIRS:
        return 0.0
    diffs.sort()
    low = max(1, math.ceil(STATE_SHARE * n))
    split = max(range(low, n - low + 1), key=lambda i: (diffs[i][0] - diffs[i - 1][0], -i))
    within = [d for d, _ in diffs[:split]]
    between = [d for d, _ in diffs[split:]]
    # |a - b| of two runs in one state: half-normal with scale sigma * sqrt(2).
    sigma = robust.median(within) / (robust.MAD_NORMAL * math.sqrt(2.0))
    gap = robust.median(between)
    spread = robust.median([abs(d - gap) for d in between]) / robust.MAD_NORMAL
    if sigma <= 0 or gap < STATE_SEPARATION * sigma:
        return 0.0
    if spread > STATE_TIGHTNESS * math.sqrt(2.0) * sigma:
        return 0.0
    if len({version for _, version in diffs[split:]}) < STATE_VERSIONS:
        return 0.0
    # A state holds runs and the machine comes back to it: in STATE_STAYS versions or more,
    # two runs or more sit a state away from the version's level, or the runs of one
    # version measured long go there and back STATE_STAYS times beyond once. One run a state
    # away in each version is a spike that comes back (a cold cache right after each keep),
    # and a burst of contention is one visit of varied size, not a state.
    stays = returns = 0
    for _, runs in unbiased(groups, selected):
        centre = math.log(densest_half(runs))
        away = [abs(math.log(x) - centre) > gap / 2 for x in runs]
        stays += sum(away) >= 2
        visits = sum(1 for i, out in enumerate(away) if out and (i == 0 or not away[i - 1]))
        returns += max(0, visits - 1)
    if stays < STATE_STAYS and returns < STATE_STAYS:
        return 0.0
    return math.expm1(gap)


# Carry-over (`carry_over`): how sure, in standard errors, the campaign must be that a run
# after the other version's reads partly as that version, how large a share of the
# difference it must carry before judging only the runs that follow their own version pays
# (that halves the runs judged: it pays where a run carries more than 1 - 1/sqrt(2) of it),
# and how many readings (a side of a comparison with runs of both kinds) must show it.
CARRY_Z = 3.0
CARRY_SHARE = 0.3
CARRY_READINGS = 12
# Readings before the comparisons can show that runs carry too little to matter (the
# share's upper bound, at CARRY_BOUND standard errors, below CARRY_SHARE); past
# CARRY_ENOUGH readings what is not found is taken as absent.
CARRY_ABSENT_READINGS = 6
CARRY_BOUND = 2.0
CARRY_ENOUGH = 2 * CARRY_READINGS
# How far from the fitted line, in a reading's own noise, a reading counts in full, and
# how often the fit is winsorised again at most (`_huber_slope`).
CARRY_CLIP = 2.0
CARRY_ITERATIONS = 20
# The incumbent's runs after its own from its earlier comparisons that a reading compares
# with (the latest: the machine may have drifted since the first).
CARRY_EARLIER = 8
# A comparison's runs in order: (side, value, whether it followed a run of its own side).
Runs = Sequence[tuple[Side, float, bool]]


@dataclass(frozen=True)
class Carry:
    """What the campaign's comparisons say of carry-over: the share of the other
    version's difference a run right after it carries, its z, and from how many readings
    (a side of a comparison with runs after the other side's and after its own)."""

    share: float
    z: float
    readings: int
    # The share at CARRY_BOUND standard errors above it: the most the readings allow.
    upper: float = 1.0

    @property
    def found(self) -> bool:
        if self.readings < CARRY_READINGS or self.share < CARRY_SHARE:
            return False
        return self.z >= CARRY_Z

    @property
    def absent(self) -> bool:
        """The readings show that a run carries too little of the one before to matter."""
        if self.found or self.readings < CARRY_ABSENT_READINGS:
            return False
        return self.upper < CARRY_SHARE or self.readings >= CARRY_ENOUGH

    def bound(self) -> str:
        return (
            f"a run right after the other version's carries at most {100 * self.upper:.0f}% "
            f"of the difference between them ({self.readings} readings)"
        )

    def describe(self) -> str:
        return (
            f"a run right after the other version's carries {100 * self.share:.0f}% of the "
            f"difference between them (z {self.z:.1f}, {self.readings} readings)"
        )


def carry_over(
    sequences: Iterable[tuple[str, Runs]],
    direction: str,
    sigma: float,
    start: Mapping[str, Sequence[float]] | None = None,
) -> Carry:
    """How much of the other version's difference a run taken right after it carries, from
    the comparisons' runs in the order taken, each with the incumbent it was against.

    In a comparison, a side's runs that follow the other side's read worse than those
    that follow its own by d. Where a run carries a share c of the difference from the run
    before, d is c x (other - own): for the incumbent c x the candidate's difference, for
    the candidate minus that. Each side with runs of both kinds gives one reading (the
    candidate's sign turned; the incumbent's runs that follow its own include those of its
    earlier comparisons, so that a comparison cut short still reads), regressed on the
    sides' difference over the same runs, whose plain means make it uncorrelated with d on
    any noise that hits runs alike whatever their order. The slope is c / (1 - c) (the
    difference over all runs is itself shrunk by c); each side's readings are centred on
    their own mean, so that a constant cost of a switch of version, or of a repeat, is no
    carry. The first run of each comparison is left out: the version before it is not
    known. `sigma` (one run's noise) sets the least their standard error can be. The difference
    is itself measured, with noise: where a large carry leaves it small beside that noise,
    the share reads low (a share of 0.8 reads about 0.5), which only delays the switch."""
    sign = 1.0 if robust.worse_high(direction) else -1.0
    readings: dict[Side, list[tuple[float, float, float]]] = {side: [] for side in Side}
    # Each incumbent's runs after its own, so far (`start`: those before the first
    # comparison, the baseline's).
    earlier = {version: [sign * v for v in runs] for version, runs in (start or {}).items()}
    for incumbent, runs in sequences:
        split: dict[tuple[Side, bool], list[float]] = {}
        for side, value, follows in list(runs)[1:]:
            split.setdefault((side, follows), []).append(sign * value)
        before = earlier.setdefault(incumbent, [])
        own = {
            Side.CANDIDATE: split.get((Side.CANDIDATE, True), []),
            Side.INCUMBENT: [*split.get((Side.INCUMBENT, True), []), *before[-CARRY_EARLIER:]],
        }
        after = {side: split.get((side, False), []) for side in Side}
        before.extend(split.get((Side.INCUMBENT, True), []))
        sides = {side: [*after[side], *own[side]] for side in Side}
        if not sides[Side.CANDIDATE] or not sides[Side.INCUMBENT]:
            continue
        delta = statistics.fmean(sides[Side.CANDIDATE]) - statistics.fmean(sides[Side.INCUMBENT])
        for side, turn in ((Side.CANDIDATE, -1.0), (Side.INCUMBENT, 1.0)):
            if after[side] and own[side]:
                d = statistics.fmean(after[side]) - statistics.fmean(own[side])
                weight = 1.0 / len(after[side]) + 1.0 / len(own[side])
                readings[side].append((turn * d, delta, weight))
    groups = [found for found in readings.values() if len(found) >= 2]
    count = sum(len(found) for found in groups)
    fitted = _huber_slope(groups, sigma) if count >= 3 else None
    if fitted is None:
        return Carry(0.0, 0.0, count)
    slope, centred = fitted
    # The slope's standard error from the readings' own scatter about the fit (White's,
    # scaled for the two fitted means), never below what `sigma` alone gives: a machine
    # that spikes scatters them more than its Gaussian part says.
    den = math.fsum(x * x for _, x, _ in centred)
    scatter = math.fsum((x * (o - slope * x)) ** 2 for o, x, _ in centred) * count / (count - 2)
    floor = math.fsum(sigma * sigma * weight * x * x for _, x, weight in centred)
    se = math.sqrt(max(scatter, floor)) / den
    share = slope / (1.0 + slope) if slope > -1.0 else 0.0
    top = slope + CARRY_BOUND * se
    upper = top / (1.0 + top) if top > 0.0 else 0.0
    return Carry(share, slope / se if se > 0 else 0.0, count, upper)


def _huber_slope(
    groups: Sequence[Sequence[tuple[float, float, float]]], sigma: float
) -> tuple[float, list[tuple[float, float, float]]] | None:
    """The slope of readings (o, x, weight) on x, each group centred on its own means,
    fitted by Huber's M-estimator (iterated winsorising: a reading further from the line
    than CARRY_CLIP times its own noise, `sigma` x sqrt(weight), counts as that far): a
    machine that slows one run in seven by a fifth puts that run into a reading and into
    its difference at once, and least squares would follow it. The slope, and the
    readings as last winsorised and centred; None where x does not vary."""
    pseudo = [[o for o, _, _ in group] for group in groups]
    slope = 0.0
    centred: list[tuple[float, float, float]] = []
    for _ in range(CARRY_ITERATIONS):
        centred, means = [], []
        for group, values in zip(groups, pseudo, strict=True):
            o_mean = statistics.fmean(values)
            x_mean = statistics.fmean(x for _, x, _ in group)
            means.append((o_mean, x_mean))
            centred.extend(
                (p - o_mean, x - x_mean, w) for p, (_, x, w) in zip(values, group, strict=True)
            )
        den = math.fsum(x * x for _, x, _ in centred)
        if den <= 0:
            return None
        before = slope
        slope = math.fsum(o * x for o, x, _ in centred) / den
        for at, (group, (o_mean, x_mean)) in enumerate(zip(groups, means, strict=True)):
            clipped = []
            for o, x, w in group:
                line = o_mean + slope * (x - x_mean)
                limit = CARRY_CLIP * sigma * math.sqrt(w)
                clipped.append(line + max(-limit, min(limit, o - line)))
            pseudo[at] = clipped
        if abs(slope - before) < 1e-9:
            break
    return slope, centred


def _autocorrelation(values: Sequence[float], lag: int) -> float:
    n = len(values)
    if n <= lag + 1:
        return 0.0
    mean = math.fsum(values) / n
    var = math.fsum((x - mean) ** 2 for x in values)
    if var <= 0:
        return 0.0
    cov = math.fsum((values[i] - mean) * (values[i + lag] - mean) for i in range(n - lag))
    return cov / var


def block_length(values: Sequence[float]) -> float:
    """The mean block length of the bootstrap: twice the lag beyond which the residuals'
    autocorrelations are indistinguishable from none (the first step of Politis and
    White's rule), 1 (independent draws) when even the first is."""
    n = len(values)
    if n < 8:
        return 1.0
    bound = 2.0 * math.sqrt(math.log10(n) / n)
    window = max(5, int(math.sqrt(math.log10(n))))
    for m in range(0, n // 4):
        if all(abs(_autocorrelation(values, m + k)) < bound for k in range(1, window + 1)):
            return float(max(1, min(2 * m, n // 4)))
    return float(max(1, n // 4))


def bootstrap(rng: random.Random, values: Sequence[float], mean_block: float) -> Iterator[float]:
    """An endless stationary block bootstrap of `values` (circular): runs of consecutive
    residuals, of geometric length with mean `mean_block`, from random starts."""
    n = len(values)
    restart = 1.0 / mean_block
    draw = rng.random
    at = int(draw() * n)
    while True:
        yield values[at]
        jump = draw() < restart
        at = int(draw() * n) if jump else (at + 1) % n


@dataclass(frozen=True)
class Learned:
    """The boundary calibrated on a campaign's own residuals, per start state, and what it
    was calibrated from."""

    count: int  # `residual_count` when it was calibrated
    estimator: str
    screen: float
    block: float  # the bootstrap's mean block length
    boundaries: tuple[float, float, float]  # by Start, in order
    first_keep: int = 1
    gap: float = 0.0  # the speed states' spacing the `states` estimator folds by

    @property
    def option(self) -> Option:
        return self.estimator, self.first_keep

    def efficacy(self, start: Start) -> float:
        return self.boundaries[list(Start).index(start)]


def residual_count(groups: Mapping[str, Sequence[float]], selected: Mapping[str, int]) -> int:
    """How many runs `residuals` may draw on (versions with MIN_RUNS unbiased runs or more):
    what tells when to calibrate again, without finding every change point."""
    return sum(len(runs) for _, runs in unbiased(groups, selected))


def learned_boundaries(
    rule: Rule,
    scaled: Sequence[float],
    screen: float,
    count: int,
    paths: int = LEARN_PATHS,
    gap: float = 0.0,
    level: float = 0.0,
) -> Learned:
    """The efficacy boundary of each start state at which a null candidate is kept with
    probability at most 1 - confidence by `Comparison` itself, when the runs' noise is
    `scaled` (residuals in units of the campaign's noise estimate) resampled in blocks.

    Both sides draw from one stream in the order the comparison takes its runs, as on a
    machine whose disturbances follow time, not the version measured. The states are
    calibrated in turn, each path a newly kept incumbent and the null candidates before
    the calibrated one (dropped at the boundaries already found), as `decide._calibrate`
    does on Gaussian draws. Under the `states` estimator `scaled` are the runs themselves
    about `level` (their states a factor 1 + `gap` apart), in units of the noise within a
    state."""
    sim = Rule(
        "sequential",
        max_samples=rule.max_samples,
        confidence=rule.confidence,
        estimator=rule.estimator,
        pairs=rule.pairs,
        first_keep=rule.first_keep,
        carry=rule.carry,
    )
    return _learned(sim, tuple(scaled), screen, count, paths, gap, level)


# A campaign asks for the same boundaries again where nothing new was learned: a resume
# and `verify` replay every learn step, and `noise = "auto"` weighs the option in force at
# each. The simulation is deterministic in its inputs, so they key it.
@lru_cache(maxsize=256)
def _learned(
    sim: Rule,
    values: tuple[float, ...],
    screen: float,
    count: int,
    paths: int,
    gap: float,
    level: float,
) -> Learned:
    block = block_length(values)
    noise = Noise(1.0, KNOWN_DOF, screen, gap if sim.estimator == "states" else 0.0)
    found: dict[Start, float] = {}
    for start in Start:
        before = [
            found[Start.AFTER_KEEP] if i == 0 else found[Start.PARTIAL]
            for i in range(PRIOR_ATTEMPTS[start])
        ]
        seed = f"{LEARN_SEED}/{count}/{paths}/{start.name}/{sim.estimator}"
        rng = random.Random(seed if sim.first_keep == 1 else f"{seed}/{sim.first_keep}")

        def drawn(rng: random.Random = rng) -> Iterator[tuple[Noise, Iterator[float]]]:
            for _ in range(paths):
                # Drawn as the path takes them: most paths end after a few runs.
                yield noise, bootstrap(rng, values, block)

        prior = (level,) if level else SELECTED
        found[start] = critical_quantile(sim, before, drawn(), paths, prior)
    return Learned(
        count,
        sim.estimator,
        screen,
        block,
        (found[Start.AFTER_KEEP], found[Start.PARTIAL], found[Start.FULL]),
        sim.first_keep,
        gap if sim.estimator == "states" else 0.0,
    )


# What `noise = "auto"` chooses from, in order of preference on a tie: the clipped mean
# (symmetric noise with spikes), the better half (disturbances on the worse side only),
# the plain mean (noise whose every run is a draw of it: states, wide mixtures). The
# clipped mean of runs folded into one speed state is weighed too once the campaign's
# runs show states a fixed gap apart (`state_gap`).
CHOICES = ("robust", "time", "mean")
STATES = "states"
# A switch of estimator needs this much smaller a detectable gain than the one in force:
# the estimate of each has Monte Carlo error, and flapping between them helps no one.
SWITCH_MARGIN = 0.9


@dataclass(frozen=True)
class Shape:
    """What the residuals look like, in units of their robust sigma."""

    runs: int
    skew: float  # the worse side's 90% spread over the better side's (1: symmetric)
    serial: float  # lag-1 autocorrelation (0: independent runs; bursts and states > 0)
    tails: float  # share of runs beyond 3 robust sigmas (0.3% on Gaussian noise)
    levels: float  # the spread over the spread of successive runs (1: no persistent levels)

    @classmethod
    def of(cls, values: Sequence[float]) -> Shape:
        n = len(values)
        ordered = sorted(values)
        centre = robust.median(ordered)
        sigma = robust.median([abs(x - centre) for x in ordered]) / robust.MAD_NORMAL
        steps = [abs(values[i + 1] - values[i]) for i in range(n - 1)]
        local = robust.median(steps) / (robust.MAD_NORMAL * math.sqrt(2.0)) if steps else 0.0

        def q(p: float) -> float:
            return ordered[min(n - 1, int(p * n))]

        better = centre - q(0.1)
        return cls(
            n,
            (q(0.9) - centre) / better if better > 0 else 1.0,
            _autocorrelation(values, 1),
            sum(1 for x in values if abs(x - centre) > 3 * sigma) / n if sigma > 0 else 0.0,
            sigma / local if local > 0 else 1.0,
        )

    def describe(self) -> str:
        """One line for a person: what stands out, or that nothing does."""
        traits = []
        if self.skew >= 2.0:
            traits.append(f"right-skewed (the worse side {self.skew:.1f}x the better)")
        elif self.skew <= 0.5:
            # 0 where most runs tie on the worse side (a metric printed to few digits).
            ratio = f"{1 / self.skew:.1f}x the worse" if self.skew > 0 else "wider; the worse ties"
            traits.append(f"left-skewed (the better side {ratio})")
        if self.serial >= 0.25:
            traits.append(
                f"serially correlated (lag-1 {self.serial:.2f}: bursts or persistent states)"
            )
        if self.tails >= 0.02:
            traits.append(f"{100 * self.tails:.0f}% of runs beyond 3 robust sigmas")
        if self.levels >= 2.0:
            traits.append(f"runs at separate levels ({self.levels:.1f}x the run-to-run spread)")
        found = "; ".join(traits) if traits else "close to Gaussian"
        return f"{self.runs} residuals: {found}"


@dataclass(frozen=True)
class Choice:
    """The estimator `noise = "auto"` chose, the boundaries calibrated for it, and why."""

    learned: Learned
    shape: Shape
    detectable: dict[Option, float]  # by option: the gain it keeps 4 times in 5, in units


def detectable(rule: Rule, boundary: float, sigma: float) -> float:
    """The gain (in units) a comparison that starts full keeps 4 times in 5 at `boundary`."""
    return (boundary + DETECT_POWER_Z) * sigma * math.sqrt(2.0 / rule.max_samples)


def noise_of(
    groups: Sequence[Sequence[float]], estimator: str, direction: str, gap: float = 0.0
) -> Noise | None:
    """The campaign's noise estimate as a comparison under `estimator` starts from it."""
    if estimator == "mean":
        return pooled_noise(groups)
    return robust_noise(groups, estimator, direction, gap)


def boundaries(rule: Rule, noise: Noise, learned: Learned) -> tuple[float, float, float]:
    """Per start state, the larger of the boundary learned on the residuals and the one
    calibrated on Gaussian draws at the noise estimate's degrees of freedom: a bootstrap of
    a few dozen residuals has not met the tails that the Gaussian calibration's uncertain
    sigma stands for, and Gaussian draws have not met the campaign's bursts."""
    carried = {Start.AFTER_KEEP: 0, Start.PARTIAL: 1, Start.FULL: rule.max_samples}
    return tuple(  # type: ignore[return-value]
        max(
            learned.efficacy(start),
            sequential_bounds(rule, noise.dof, carried[start], noise.screen),
        )
        for start in Start
    )


# The earliest keep `noise = "auto"` weighs beside the first run: on noise with states,
# a later first keep lowers the boundary every later look is held to.
FIRST_KEEPS = (1, 3)
# Where runs are judged after their own version (`Rule.carry`), a later first keep is
# chosen only where the gain it detects is at most this share of the first run's option's.
LATER_KEEP_MARGIN = 0.9


def choose(
    rule: Rule,
    groups: Mapping[str, Sequence[float]],
    selected: Mapping[str, int],
    direction: str,
) -> Choice | None:
    """Calibrate the boundary on the campaign's residuals for each of FIRST_KEEPS with the
    estimator in force or, under `noise = "auto"` (`rule.adaptive`), with each of CHOICES,
    and keep the option that detects the smallest gain at its calibrated boundary (the one
    in force unless another is clearly better; under `Rule.carry` a later first keep by
    LATER_KEEP_MARGIN). None: too few residuals, or no noise to
    speak of."""
    found = residuals(groups, selected, direction)
    if len(found) < LEARN_MIN:
        return None
    count = residual_count(groups, selected)
    versions = list(groups.values())
    held: Option = rule.option
    # A fixed estimator (`noise = "symmetric"` or `"time"`) still weighs the first keep:
    # the user chose what a side's runs mean, not how early the noise lets a keep come.
    estimators: tuple[str, ...] = CHOICES if rule.adaptive else (rule.estimator,)
    gap = state_gap(groups, selected) if rule.adaptive else 0.0
    relative, usual = state_residuals(groups, selected, direction) if gap else ([], 0.0)
    if gap > 0 and usual > 0 and len(relative) >= LEARN_MIN:
        estimators += (STATES,)
    options = [(e, k) for e in estimators for k in FIRST_KEEPS if k <= rule.max_samples]
    results: dict[Option, tuple[Learned, float, Noise]] = {}

    def calibrate(option: Option, noise: Noise, paths: int) -> tuple[Learned, float, Noise]:
        estimator, first_keep = option
        trial = replace(rule, name="sequential", estimator=estimator, first_keep=first_keep)
        if estimator == STATES:
            # Runs about a level of `centre` noise units, each its version's ratio to its
            # level: the states multiply them as the machine does.
            centre = usual / noise.sigma
            scaled = [centre * math.exp(r) for r in relative]
            learned = learned_boundaries(
                trial, scaled, noise.screen, count, paths, noise.gap, centre
            )
        else:
            scaled = [r / noise.sigma for r in found]
            learned = learned_boundaries(trial, scaled, noise.screen, count, paths)
        learned = replace(learned, boundaries=boundaries(trial, noise, learned))
        # Every start state's boundary counts: one right after each keep that only a
        # full reference escapes is paid at every keep.
        typical = math.fsum(learned.boundaries) / len(learned.boundaries)
        return learned, detectable(trial, typical, noise.sigma), noise

    noises = {e: noise_of(versions, e, direction, gap) for e in {e for e, _ in options}}
    for option in options:
        noise = noises[option[0]]
        if noise is None or noise.sigma <= 0:
            continue
        results[option] = calibrate(option, noise, LEARN_PATHS if option == held else TRIAL_PATHS)
    if not results:
        return None

    def weighed(option: Option) -> float:
        # Where runs are judged after their own version, a later first keep's spared looks
        # take each candidate's first two blocks of three, most of them candidates that are
        # not better: it pays only where it detects clearly smaller gains. (Where every run
        # is judged they take one run more, and the guard they give a change whose runs
        # vary more than the incumbent's is worth it.)
        later = option[1] > 1 and rule.carry
        return results[option][1] / (LATER_KEEP_MARGIN if later else 1.0)

    best = min(results, key=lambda o: (weighed(o), options.index(o)))
    if held in results and weighed(best) > SWITCH_MARGIN * weighed(held):
        best = held
    if best != held:
        results[best] = calibrate(best, results[best][2], LEARN_PATHS)
    return Choice(results[best][0], Shape.of(found), {o: r[1] for o, r in results.items()})
