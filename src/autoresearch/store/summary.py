"""Campaign summaries read from the ledger: baseline, best, counts, cost, noise, confidence."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from autoresearch.attempt import AttemptRecord, Status
from autoresearch.stats.decide import confidence_better, pooled_noise
from autoresearch.stats.sample_book import sample_groups


def reached(value: float, target: float | None, direction: str) -> bool:
    if target is None:
        return False
    return value <= target if direction == "minimize" else value >= target


@dataclass
class Summary:
    name: str
    direction: str
    baseline: float | None = None
    baseline_commit: str | None = None
    best: float | None = None
    best_iteration: int | None = None
    best_commit: str | None = None
    iterations: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    streak: int = 0  # attempts in a row not kept, from the end
    cost_usd: float = 0.0  # proposer and judge, as recorded
    tokens_in: int = 0
    tokens_out: int = 0
    noise: float | None = None  # pooled standard deviation of repeated samples
    confidence: float | None = None  # P(best is truly better than the baseline)

    def to_json(self) -> dict[str, Any]:
        delta = None
        if self.best is not None and self.baseline is not None:
            delta = self.best - self.baseline
        return {
            "name": self.name,
            "direction": self.direction,
            "baseline": self.baseline,
            "best": self.best,
            "best_iteration": self.best_iteration,
            "best_commit": self.best_commit,
            "delta": delta,
            "improvement_pct": _pct(self.baseline, self.best, self.direction),
            "iterations": self.iterations,
            "counts": self.counts,
            "cost_usd": round(self.cost_usd, 6),
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "noise": self.noise,
            "noise_pct": None
            if self.noise is None or not self.baseline
            else 100.0 * self.noise / abs(self.baseline),
            "confidence": self.confidence,
        }


def _pct(baseline: float | None, best: float | None, direction: str) -> float | None:
    if baseline is None or best is None or baseline == 0:
        return None
    gain = (baseline - best) if direction == "minimize" else (best - baseline)
    return 100.0 * gain / abs(baseline)


def summarize(name: str, direction: str, records: Iterable[AttemptRecord]) -> Summary:
    summary = Summary(name=name, direction=direction)
    counts: Counter[str] = Counter()
    attempts = list(records)
    for record in attempts:
        counts[str(record.status)] += 1
        summary.cost_usd += record.cost_usd
        tokens_in, tokens_out = record.tokens
        summary.tokens_in += tokens_in
        summary.tokens_out += tokens_out
        summary.iterations = max(summary.iterations, record.iteration)
        if record.status is Status.BASELINE:
            summary.baseline = record.metric
            summary.baseline_commit = record.commit
            summary.best = summary.baseline
            summary.best_iteration = 0
            summary.best_commit = summary.baseline_commit
            summary.streak = 0
        elif record.status.sets_best:  # keep, or a combination of winners (merged)
            summary.best = record.best_after
            summary.best_iteration = record.iteration
            summary.best_commit = record.commit
            summary.streak = 0
        elif record.status.counts_toward_plateau:
            summary.streak += 1
    summary.counts = dict(counts)
    groups = sample_groups(attempts)
    noise = pooled_noise(list(groups.values()))
    if noise is not None:
        summary.noise = noise.sigma
        base = groups.get(summary.baseline_commit or "", [])
        best = groups.get(summary.best_commit or "", [])
        if summary.best_iteration and base and best:
            summary.confidence = confidence_better(base, best, direction, noise)
    return summary
