"""Secondary metrics, a composite primary and the constraints a kept candidate meets.

One metric run can report several numbers: `METRIC name=value` lines, a regex on stdout,
a key of a file it wrote. `Readings` reads them all after each run (before the
measurement folder is cleaned), computes the composite `[metric] score` when there is
one, and `check` holds a candidate's samples against `max`, `min` and `no_regress`. The
regression test is noise-aware like the primary's rule: a candidate fails `no_regress`
only when it is worse than the tolerance by more than the noise of the samples explains.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from autoresearch.attempt import Status
from autoresearch.config.criteria import SecondaryMetric
from autoresearch.executors.base import Measurement
from autoresearch.measure.expression import Expression, ExpressionError
from autoresearch.measure.readout import (
    METRIC_LINE,
    MetricParseError,
    extract_number,
    file_metric,
    inside,
    metric_line,
    read_bounded,
)
from autoresearch.stats.decide import estimate, gain, pooled_noise, t_quantile

Samples = dict[str, list[float]]


class Readings:
    """What to read after each metric run: the declared metrics and the composite's names."""

    def __init__(self, metrics: Sequence[SecondaryMetric], score: str | None) -> None:
        self.metrics = list(metrics)
        self.score = Expression(score) if score else None

    def __bool__(self) -> bool:
        return bool(self.metrics) or self.score is not None

    def read(self, stdout_path: Path, folder: Path, budget: float) -> dict[str, float]:
        """Every declared metric's value for one run; MetricParseError names the one
        that could not be read."""
        try:
            text = read_bounded(stdout_path)
        except MetricParseError:
            text = ""
        values: dict[str, float] = {}
        for metric in self.metrics:
            try:
                values[metric.name] = read_one(metric, text, folder, budget)
            except MetricParseError as exc:
                raise MetricParseError(f"metric {metric.name!r} {exc}") from None
        if self.score is not None:
            lines = {m.group(1): m.group(2) for m in METRIC_LINE.finditer(text)}
            for name in self.score.names:
                if name not in values and name in lines:
                    try:
                        values[name] = metric_line(text, name)
                    except MetricParseError as exc:
                        raise MetricParseError(f"metric {name!r} {exc}") from None
        return values

    def composite(self, values: Mapping[str, float]) -> float:
        """The `[metric] score` from one run's values."""
        assert self.score is not None
        try:
            return self.score.evaluate(values)
        except ExpressionError as exc:
            raise MetricParseError(f"score {exc}") from None


def read_one(metric: SecondaryMetric, stdout: str, folder: Path, budget: float) -> float:
    if metric.file is not None:
        return file_metric(inside(folder, metric.file), metric.key, metric.pattern, budget)
    if metric.pattern is not None:
        return extract_number(stdout, metric.pattern, budget)
    return metric_line(stdout, metric.name)


@dataclass(frozen=True)
class Violation:
    metric: str
    reason: str


def check(
    metrics: Sequence[SecondaryMetric],
    candidate: Mapping[str, Sequence[float]],
    incumbent: Mapping[str, Sequence[float]],
    confidence: float = 0.95,
) -> Violation | None:
    """The first constraint the candidate's samples break, or None."""
    for metric in metrics:
        samples = list(candidate.get(metric.name, ()))
        if not samples:
            continue
        value = estimate(samples)
        if metric.max is not None and value > metric.max:
            return Violation(metric.name, f"{metric.name} {value:.4g} > max {metric.max:.4g}")
        if metric.min is not None and value < metric.min:
            return Violation(metric.name, f"{metric.name} {value:.4g} < min {metric.min:.4g}")
        reference = list(incumbent.get(metric.name, ()))
        if metric.no_regress is not None and metric.direction and reference:
            found = regression(metric, samples, reference, confidence)
            if found:
                return Violation(metric.name, found)
    return None


def regression(
    metric: SecondaryMetric,
    samples: Sequence[float],
    reference: Sequence[float],
    confidence: float = 0.95,
) -> str | None:
    """Why `samples` regress `metric` beyond its `no_regress` tolerance against the
    incumbent's `reference` samples, beyond noise; None when they do not."""
    assert metric.direction is not None
    amount, percent = metric.tolerance()
    ref = estimate(reference)
    allowed = abs(ref) * amount / 100.0 if percent else amount
    worse = -gain(estimate(samples), ref, metric.direction)  # > 0: worse
    noise = pooled_noise([list(samples), list(reference)])
    margin = 0.0
    if noise is not None and noise.sigma > 0:
        se = noise.sigma * math.sqrt(1 / len(samples) + 1 / len(reference))
        margin = t_quantile(confidence, noise.dof) * se
    if worse <= allowed + margin:
        return None
    shown = metric.no_regress if isinstance(metric.no_regress, str) else f"{amount:g}"
    pct = f" ({100 * worse / abs(ref):.1f}%)" if ref else ""
    noise_note = f", beyond noise {margin:.4g}" if margin else ""
    return (
        f"{metric.name} regressed by {worse:.4g}{pct}: {estimate(samples):.4g} vs the "
        f"incumbent's {ref:.4g}, more than no_regress {shown}{noise_note}"
    )


def values_of(samples: Mapping[str, Sequence[float]]) -> dict[str, float]:
    return {name: estimate(list(s)) for name, s in samples.items() if s}


def ledger_field(candidate: Samples, incumbent: Samples) -> dict[str, Any] | None:
    """The attempt record's `metrics`: per name its value, samples and the incumbent's
    samples taken during the comparison."""
    if not candidate and not incumbent:
        return None
    out: dict[str, Any] = {}
    for name in dict.fromkeys([*candidate, *incumbent]):
        entry: dict[str, Any] = {}
        if candidate.get(name):
            entry["value"] = statistics.fmean(candidate[name])
            entry["samples"] = list(candidate[name])
        if incumbent.get(name):
            entry["incumbent_samples"] = list(incumbent[name])
        out[name] = entry
    return out


def samples_from(field: Mapping[str, Any] | None, key: str = "samples") -> Samples:
    """The samples of each metric in a record's `metrics` field."""
    out: Samples = {}
    for name, entry in (field or {}).items():
        if isinstance(entry, dict) and isinstance(entry.get(key), list):
            out[name] = [float(v) for v in entry[key]]
    return out


def shown(field: Mapping[str, Any] | None, limit: int = 4) -> str:
    """`mem_mb=120 latency=3.2` for a table cell."""
    parts = []
    for name, entry in (field or {}).items():
        if isinstance(entry, dict) and entry.get("value") is not None:
            parts.append(f"{name}={float(entry['value']):.4g}")
    more = f" +{len(parts) - limit}" if len(parts) > limit else ""
    return " ".join(parts[:limit]) + more


def checked_readings(
    readings: Readings, measured: Measurement, folder: Path, budget: float
) -> Measurement:
    """A `check` run with the secondary metrics read and the composite computed: a metric
    that cannot be read is a crash there as it would be in the campaign."""
    if not readings or not measured.ok:
        return measured
    try:
        values = readings.read(measured.stdout_path, folder, budget)
        value = readings.composite(values) if readings.score is not None else measured.value
    except MetricParseError as exc:
        return replace(measured, outcome=Status.CRASH, value=None, reason=f"metric {exc}")
    return replace(measured, value=value)
