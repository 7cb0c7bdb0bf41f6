"""The attempt record reads every ledger written so far and writes exactly its keys."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autoresearch.attempt import AttemptRecord, Status

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "ledger_v1"
LEDGERS = ["ledger.jsonl", "toy_full.jsonl", "sequential.jsonl"]


def lines(name: str) -> list[dict[str, object]]:
    text = (FIXTURES / name).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@pytest.mark.parametrize("name", LEDGERS)
def test_old_ledger_lines_round_trip_byte_for_byte(name: str) -> None:
    for data in lines(name):
        record = AttemptRecord.from_json(data)
        assert record.prev_hash == data.pop("prev_hash")
        again = record.to_json()
        assert set(again) == set(data)
        # Same values, and the same line once the keys are put in the same order.
        assert json.dumps({k: again[k] for k in data}) == json.dumps(data)


def test_fixture_ledgers_cover_every_common_status() -> None:
    seen = {AttemptRecord.from_json(d).status for n in LEDGERS for d in lines(n)}
    assert seen >= {
        Status.BASELINE,
        Status.KEEP,
        Status.DISCARD,
        Status.CRASH,
        Status.GUARD_FAILED,
        Status.SCOPE_VIOLATION,
        Status.NO_CHANGE,
        Status.PROPOSER_FAILED,
        Status.INTERRUPTED,
    }


def test_unknown_keys_survive_a_round_trip() -> None:
    data = {"iteration": 3, "status": "discard", "metric": 1.5, "from_the_future": [1, 2]}
    again = AttemptRecord.from_json(data).to_json()
    assert again["from_the_future"] == [1, 2]


def test_status_strings_are_the_ledger_strings() -> None:
    assert [str(s) for s in Status] == [
        "baseline",
        "keep",
        "discard",
        "crash",
        "timeout",
        "guard_failed",
        "scope_violation",
        "no_change",
        "tampered",
        "proposer_failed",
        "edit_refused",
        "interrupted",
        "checkout_changed",
        "duplicate",
        "constraint_failed",
        "overfit",
        "awaiting_approval",
        "rejected",
        "rework",
        "superseded",
        "merged",
    ]
    assert Status("keep") is Status.KEEP and Status.KEEP == "keep"


def test_status_properties() -> None:
    assert {s for s in Status if s.halts} == {Status.TAMPERED, Status.CHECKOUT_CHANGED}
    assert {s for s in Status if s.sets_best} == {Status.BASELINE, Status.KEEP, Status.MERGED}
    plateau = {s for s in Status if s.counts_toward_plateau}
    assert Status.INTERRUPTED not in plateau and Status.DISCARD in plateau
    assert not (plateau & {Status.KEEP, Status.BASELINE})
    assert not any(s.measured and s.rolls_back_unmeasured for s in Status)
    assert not Status.DISCARD.is_failure and Status.CRASH.is_failure
    # With several jobs: a superseded winner and a kept combination are measured outcomes.
    assert Status.SUPERSEDED.measured and Status.MERGED.measured
    assert not Status.SUPERSEDED.is_failure and not Status.MERGED.is_failure
    assert Status.SUPERSEDED.counts_toward_plateau and not Status.MERGED.counts_toward_plateau


def test_a_set_aside_comparison_round_trips_and_counts_in_the_book() -> None:
    """The runs of a comparison an attempt went through before its own are in its record,
    and the book rebuilt from the ledger holds what the live book was given, in order."""
    from autoresearch.stats.decide import Rule
    from autoresearch.stats.sample_book import SampleBook, sample_groups

    data = {
        "iteration": 2,
        "status": "keep",
        "metric": 9.0,
        "commit": "w",
        "parent": "b",
        "samples": [9.0, 9.1],
        "incumbent_samples": [10.0],
        "earlier": [
            {
                "commit": "w",
                "parent": "a",
                "samples": [9.2],
                "incumbent_samples": [10.4, 10.2],
                "metric_runs": 3,
            }
        ],
    }
    record = AttemptRecord.from_json(data)
    assert record.to_json()["earlier"] == data["earlier"]
    rule = Rule("sequential")
    live = SampleBook(rule, "minimize")
    for value in (10.4, 10.2):
        live.remeasured("a", value)
    live.measured("w", [9.2])
    live.remeasured("b", 10.0)
    live.measured("w", [9.0, 9.1])
    live.kept("w")
    book = SampleBook(rule, "minimize")
    book.take(record)
    assert book.groups == live.groups == {"a": [10.4, 10.2], "w": [9.2, 9.0, 9.1], "b": [10.0]}
    # What `status` and the summary pool their noise from: the same runs in the same order
    # (the noise model reads the versions one after the other).
    assert list(sample_groups([record]).items()) == list(live.groups.items())
    assert book.clock.times == live.clock.times
    assert (book.selected, book.own) == (live.selected, live.own)
