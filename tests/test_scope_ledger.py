"""Scope globs, the ledger's durability, and decisions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autoresearch.config import DecisionConfig
from autoresearch.decide import Verdict, decide
from autoresearch.ledger import Ledger, line_hash
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


def test_ledger_appends_chain_and_tsv(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path)
    ledger.append({"iteration": 0, "status": "baseline", "metric": 1.0, "description": "a\tb"})
    ledger.append({"iteration": 1, "status": "keep", "metric": 0.5})
    lines = (tmp_path / "ledger.jsonl").read_text().splitlines()
    assert json.loads(lines[0])["prev_hash"] is None
    assert json.loads(lines[1])["prev_hash"] == line_hash(lines[0])
    tsv = (tmp_path / "results.tsv").read_text().splitlines()
    assert tsv[1].split("\t") == ["0", "", "1", "", "baseline", "a b"]


def test_torn_last_line_is_quarantined(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path)
    ledger.append({"iteration": 0, "status": "baseline", "metric": 1.0})
    with open(tmp_path / "ledger.jsonl", "a") as handle:
        handle.write('{"iteration": 1, "sta')
    assert len(ledger.records()) == 1
    message = ledger.repair()
    assert message and "ledger.torn" in message
    assert (tmp_path / "ledger.torn").read_text() == '{"iteration": 1, "sta\n'
    assert (tmp_path / "ledger.jsonl").read_text().endswith("}\n")
    assert ledger.repair() is None


def test_missing_newline_after_complete_record_is_repaired(tmp_path: Path) -> None:
    (tmp_path / "ledger.jsonl").write_text('{"iteration": 0, "status": "baseline"}')
    ledger = Ledger(tmp_path)
    assert ledger.repair() is None
    ledger.append({"iteration": 1, "status": "discard"})
    assert [r["iteration"] for r in ledger.records()] == [0, 1]


def test_summary_counts_and_streak() -> None:
    records = [
        {"iteration": 0, "status": "baseline", "metric": 5, "commit": "a"},
        {"iteration": 1, "status": "keep", "metric": 4, "commit": "b"},
        {"iteration": 2, "status": "discard", "metric": 6},
        {"iteration": 3, "status": "interrupted", "metric": None},
        {"iteration": 4, "status": "crash", "metric": None},
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
