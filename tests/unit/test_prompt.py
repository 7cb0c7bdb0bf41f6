"""What a proposer is told about earlier attempts, from typed records."""

from __future__ import annotations

from autoresearch.attempt import AttemptRecord, Status
from autoresearch.learning.prompt import build_prompt, history_notes

RECORDS = [
    AttemptRecord(0, Status.BASELINE, metric=7.0, commit="a", description="baseline"),
    AttemptRecord(
        1,
        Status.KEEP,
        metric=4.0,
        delta=-3.0,
        files=("calc.py",),
        description="set N to 7",
        diffstat="calc.py | 2 +-",
        reason="kept",
    ),
    AttemptRecord(2, Status.DISCARD, metric=5.0, delta=1.0, reason="not better"),
    AttemptRecord(3, Status.CRASH, description="N = 0", reason="exit 3"),
]


def prompt(records: list[AttemptRecord]) -> str:
    return build_prompt(
        iteration=len(records),
        goal="fast",
        instructions="",
        scope=["calc.py"],
        harness=["bench.py"],
        direction="minimize",
        metric_command="python bench.py",
        baseline=7.0,
        best=4.0,
        history=history_notes(records),
    )


def test_notes_carry_what_the_records_say() -> None:
    notes = history_notes(RECORDS)
    assert [n.status for n in notes] == ["baseline", "keep", "discard", "crash"]
    assert notes[1].files == ["calc.py"] and notes[1].diffstat == "calc.py | 2 +-"
    assert (notes[3].reason, notes[3].diffstat, notes[3].metric) == ("exit 3", "", None)


def test_the_history_table_shows_every_reason_but_the_baselines() -> None:
    rows = [line for line in prompt(RECORDS).splitlines() if line.startswith("| ")][1:]
    assert rows == [
        "| 0 | baseline | 7 | - | baseline |",
        "| 1 | keep | 4 | -3 | set N to 7 (calc.py | 2 +-) (kept) |",
        "| 2 | discard | 5 | 1 | (not better) |",
        "| 3 | crash | - | - | N = 0 (exit 3) |",
    ]
