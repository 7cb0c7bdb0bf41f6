"""`rule = "auto"`: the decision rule chosen from the baseline's repeated samples.

The baseline is measured BASELINE_SAMPLES times. Identical values mean an exact metric: one
run per attempt, kept only when better (by more than `min_delta` when one is set), equal is
not better. Any spread means a noisy metric: the sequential rule with a robust estimator
(the median, or the better half under `[metric] noise = "time"`), so that a spike neither
hides a real gain nor poses as one.

The choice is a function of the baseline's recorded samples alone, so a resumed campaign and
`verify` make it again from the ledger. A baseline with a single sample predates `auto` (the
default was `strict`): it is read as `strict`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from autoresearch.stats import robust
from autoresearch.stats.decide import Rule


def resolve(rule: Rule, baseline: Sequence[float], direction: str = "minimize") -> Rule:
    """The rule that decides after a baseline with these samples."""
    if rule.name != "auto":
        return rule
    if len(baseline) <= 1:
        return replace(rule, name="strict", estimator="mean")
    if max(baseline) == min(baseline):
        return replace(rule, name="threshold" if rule.min_delta > 0 else "strict", estimator="mean")
    estimator = rule.estimator if rule.estimator != "mean" else "robust"
    # A keep asks the interleaved pairs too: a burst that hits consecutive runs hits both
    # runs of a pair and cancels in its gain.
    return replace(rule, name="sequential", estimator=estimator, pairs="both")


def describe(configured: Rule, chosen: Rule, baseline: Sequence[float], direction: str) -> str:
    """What `auto` chose and why, in one line (said at start, shown by `status`)."""
    if configured.name != "auto":
        return f"{chosen.name} (set in the config)"
    if len(baseline) <= 1:
        return "strict (a baseline of one sample: a campaign from before rule = auto)"
    if chosen.name != "sequential":
        delta = " by more than min_delta" if chosen.name == "threshold" else ""
        return (
            f"{chosen.name}: the baseline's {len(baseline)} runs were identical, an exact "
            f"metric: one run per attempt, kept only if better{delta} (equal is not better)"
        )
    found = robust.robust_sigma([baseline], chosen.estimator, direction)
    center = robust.median(baseline)
    spread = ""
    if found is not None and center:
        spread = f" (robust sigma {100 * found[0] / abs(center):.2g}% of the value)"
    how = {
        "time": "the better half of each side's runs (noise = time: disturbances only make "
        "it worse)",
        "mean": "the plain means of each side's runs and their pooled standard deviation",
        "states": "the clipped means of each side's runs folded into one of the machine's "
        "speed states (the interleaved pairs tell which state a gain is in)",
    }.get(
        chosen.estimator,
        "means without the runs beyond 3 robust sigmas of the median, a MAD-based spread",
    )
    if chosen.adaptive:
        how += (
            " (noise = auto: the estimator follows the shape of the campaign's own noise, "
            "and the boundary is calibrated on its own runs, once there are enough)"
        )
    if chosen.first_keep > 1:
        how += f", kept no earlier than run {chosen.first_keep} (the noise sits in states)"
    return (
        f"sequential, robust: the baseline's {len(baseline)} runs differ{spread}; candidates "
        f"and the incumbent are measured in turn, up to {chosen.max_samples} runs each, "
        f"compared by {how}, kept at {chosen.confidence:g} confidence"
        + (ONE_WAY_HINT
           if chosen.estimator != "time" and not chosen.adaptive
           and robust.one_sided(baseline, direction)
           else "")
    )  # fmt: skip


ONE_WAY_HINT = (
    "; its runs spike only on the worse side: if disturbances can only make this number "
    'worse (a timing, a throughput), set [metric] noise = "time", which trusts each side\'s '
    "better runs and keeps a real gain whose runs drew a spike"
)


def recommend(values: Sequence[float], direction: str, noise: str = "symmetric") -> tuple[str, str]:
    """The rule and min_delta `check --repeat N` recommends for runs of the unchanged code:
    exact values want one run per attempt; noisy ones the robust sequential rule, with
    min_delta at one robust sigma (a smaller gain takes more runs than it is worth)."""
    if len(values) < 2:
        return "auto", "0"
    if max(values) == min(values):
        return "auto (an exact metric: one run per attempt, as strict)", "0"
    estimator = "time" if noise == "time" else "robust"
    found = robust.robust_sigma([values], estimator, direction)
    center = robust.median(values)
    if found is None or not center:
        return "auto (noisy: the robust sequential rule)", "0"
    pct = 100 * found[0] / abs(center)
    shown = f"{pct:.2g}" if pct >= 0.01 else "0.01"
    rule = "auto (noisy: the robust sequential rule)"
    if noise != "time" and robust.one_sided(values, direction):
        rule = (
            'auto, with [metric] noise = "time" (the runs spike only on the worse side, as '
            "timings do)"
        )
    return rule, f"{float(shown):g}%"
