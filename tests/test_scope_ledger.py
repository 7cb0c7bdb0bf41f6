"""Scope globs, summaries, and decisions. The ledger's own tests are tests/unit/test_ledger.py."""

from __future__ import annotations

import pytest

from autoresearch.attempt import AttemptRecord, Status
from autoresearch.config import DecisionConfig
from autoresearch.decide import Verdict, decide
from autoresearch.scope import PathMatcher
from autoresearch.summary import summarize


@pytest.mark.parametrize(
    "patterns,path,expected",
    [
        (["calc.py"], "calc.py", True),
        (["calc.py"], "sub/calc.py", False),
        (["src/**/*.py"], "src/a.py", True),
        (["src/**/*.py"], "src/x/y/a.py", True),
        (["src/**/*.py"], "src/a.txt", False),
        (["src"], "src/deep/file", True),
        (["src/"], "src/deep/file", True),
        (["src"], "srcx/file", False),
        (["*.py"], "a.py", True),
        (["*.py"], "d/a.py", False),
        (["**/*.py"], "d/e/a.py", True),
        (["**/*.py"], "a.py", True),
        (["data_?.csv"], "data_1.csv", True),
        (["[ab].txt"], "b.txt", True),
        (["[!ab].txt"], "c.txt", True),
        (["./calc.py"], "calc.py", True),
        ([".github/**"], ".github/workflows/x.yml", True),
    ],
)
def test_path_matcher(patterns: list[str], path: str, expected: bool) -> None:
    assert PathMatcher(patterns).matches(path) is expected


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


def test_strict_and_threshold_rules() -> None:
    strict = DecisionConfig(rule="strict")
    assert decide([5.0], [4.0], "minimize", strict) is Verdict.KEEP
    assert decide([5.0], [5.0], "minimize", strict) is Verdict.DISCARD
    assert decide([5.0], [6.0], "maximize", strict) is Verdict.KEEP
    threshold = DecisionConfig(rule="threshold", min_delta="10%")
    assert decide([100.0], [95.0], "minimize", threshold) is Verdict.DISCARD
    assert decide([100.0], [89.0], "minimize", threshold) is Verdict.KEEP
    absolute = DecisionConfig(rule="threshold", min_delta=0.5)
    assert decide([1.0], [1.6], "maximize", absolute) is Verdict.KEEP
    assert decide([1.0], [1.4], "maximize", absolute) is Verdict.DISCARD
