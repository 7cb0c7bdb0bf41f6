"""Summaries of the records: baseline, best, counts and the streak."""

from __future__ import annotations

from autoresearch.attempt import AttemptRecord, Status
from autoresearch.store.summary import summarize


def test_summary_counts_and_streak() -> None:
    records = [
        AttemptRecord(0, Status.BASELINE, metric=5, commit="a"),
        AttemptRecord(1, Status.KEEP, metric=4, commit="b"),
        AttemptRecord(2, Status.DISCARD, metric=6),
        AttemptRecord(3, Status.INTERRUPTED),
        AttemptRecord(4, Status.CRASH),
    ]
    summary = summarize("t", "minimize", records)
    assert (summary.baseline, summary.best, summary.best_iteration) == (5, 4, 1)
    assert summary.best_commit == "b" and summary.iterations == 4 and summary.streak == 2
    assert summary.counts == {"baseline": 1, "keep": 1, "discard": 1, "interrupted": 1, "crash": 1}
