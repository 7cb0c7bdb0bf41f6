"""`[decision] simplicity`: code is a cost. A gain must pay for the lines it changes, and
a change that leaves the metric where it was (within noise) while removing code is kept.

The diff size is git's `--numstat` between the incumbent and the candidate (binary files
count as one line each). A change that removes at least as many lines as it adds is never
charged: it makes the code smaller. Otherwise the charge is every changed line (added +
removed), as `git diff --stat` counts them; `lines_per_unit` lines are paid by one unit of
gain, in the metric's units or, with `percent = true`, in percent of the incumbent.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from autoresearch.config.criteria import SimplicityConfig
from autoresearch.stats.decide import Rule, estimate, gain, pooled_noise, t_quantile


@dataclass(frozen=True)
class Lines:
    added: int
    removed: int

    @property
    def changed(self) -> int:
        return self.added + self.removed

    @property
    def shrinks(self) -> bool:
        return self.removed > self.added

    def to_json(self, config: SimplicityConfig) -> dict[str, Any]:
        """The record's `lines`: the size and the price, so `verify` can redo the sum."""
        return {
            "added": self.added,
            "removed": self.removed,
            "lines_per_unit": config.lines_per_unit,
            "percent": config.percent,
        }

    @classmethod
    def of(cls, recorded: dict[str, Any]) -> tuple[Lines, SimplicityConfig]:
        lines = cls(int(recorded.get("added", 0)), int(recorded.get("removed", 0)))
        price = SimplicityConfig(
            lines_per_unit=float(recorded.get("lines_per_unit", 100.0)),
            percent=bool(recorded.get("percent", True)),
        )
        return lines, price


def parse_numstat(text: str) -> Lines:
    added = removed = 0
    for line in text.splitlines():
        parts = line.split("\t", 2)
        if len(parts) < 3:
            continue
        a, r = parts[0], parts[1]
        added += int(a) if a.isdigit() else 1  # "-" for a binary file
        removed += int(r) if r.isdigit() else 1
    return Lines(added, removed)


def settings(value: bool | SimplicityConfig) -> SimplicityConfig | None:
    """The simplicity settings in force, None when off."""
    if value is True:
        return SimplicityConfig()
    return value if isinstance(value, SimplicityConfig) else None


def within_noise(
    candidate: Sequence[float], incumbent: Sequence[float], direction: str, rule: Rule
) -> tuple[bool, str]:
    """Whether the candidate's mean equals the incumbent's within the noise of the samples
    (and within min_delta): the test for a simplification, from the samples alone, so that
    `verify` re-derives it from the ledger."""
    if not candidate or not incumbent:
        return False, "no samples to compare"
    ref = estimate(incumbent)
    g = gain(estimate(candidate), ref, direction)
    noise = pooled_noise([list(candidate), list(incumbent)])
    margin = 0.0
    if noise is not None and noise.sigma > 0:
        se = noise.sigma * math.sqrt(1 / len(candidate) + 1 / len(incumbent))
        margin = t_quantile(rule.confidence, noise.dof) * se
    bar = max(margin, rule.min_delta_abs(ref))
    word = "better" if g > 0 else "worse"
    if abs(g) <= bar:
        what = f"{abs(g):.4g} {word}, within noise {bar:.4g}" if g else "equal"
        return True, what
    return False, f"{abs(g):.4g} {word}, beyond noise {bar:.4g}"


def required_gain(config: SimplicityConfig, lines: Lines) -> float:
    """The gain (units or percent) these lines must bring; 0 for a change that shrinks."""
    if lines.removed >= lines.added:
        return 0.0
    return lines.changed / config.lines_per_unit


def pays(
    config: SimplicityConfig, lines: Lines, candidate: float, incumbent: float, direction: str
) -> str | None:
    """Why the gain does not pay for the lines, or None when it does."""
    need = required_gain(config, lines)
    if need <= 0:
        return None
    g = gain(candidate, incumbent, direction)
    if config.percent:
        if not incumbent:
            return None  # no scale to take a percentage of
        got = 100.0 * g / abs(incumbent)
        unit, got_text, need_text = "%", f"{got:.3g}%", f"{need:.3g}%"
    else:
        got, unit, got_text, need_text = g, "", f"{g:.4g}", f"{need:.4g}"
    if got >= need:
        return None
    per = f"1{unit}" if unit else "one unit"
    return (
        f"gain {got_text} does not pay for {lines.changed} changed lines "
        f"(+{lines.added}/-{lines.removed}): simplicity asks {need_text} at "
        f"{config.lines_per_unit:g} lines per {per}"
    )
