"""Terminal lines and tables from typed records, and the printer fed events directly."""

from __future__ import annotations

import io

from rich.console import Console

from autoresearch.attempt import AttemptRecord, Status
from autoresearch.events import Attempted, PhaseChanged, Started, Stopped, Warned
from autoresearch.views.render import STATUS_STYLE, Printer, attempt_line, attempts_table

SUMMARY = {
    "name": "toy",
    "direction": "minimize",
    "baseline": 7.0,
    "best": 4.0,
    "best_iteration": 1,
    "improvement_pct": 42.857142857142854,
    "counts": {"keep": 1, "baseline": 1, "crash": 1},
}


def printed(quiet: bool, *events: object) -> str:
    out = io.StringIO()
    printer = Printer(Console(file=out, width=200, color_system=None), quiet=quiet)
    for event in events:
        printer(event)  # type: ignore[arg-type]
    return out.getvalue()


def test_every_status_has_a_style() -> None:
    assert set(STATUS_STYLE) == set(Status)


def test_attempt_line_shows_the_reason_beside_the_description() -> None:
    crash = AttemptRecord(7, Status.CRASH, description="try", reason="exit 3")
    discard = AttemptRecord(8, Status.DISCARD, metric=5.0, delta=1.0, reason="not better")
    bare = AttemptRecord(9, Status.NO_CHANGE, reason="nothing changed")
    assert attempt_line(crash, 4.0, 12) == (
        " 7/12 [red]crash          [/] metric          -  gain         - (delta -)  "
        "best          4  try \\[exit 3]"
    )
    assert attempt_line(discard, 4.0, 12).endswith("best          4  not better")
    assert "gain        -1 (delta +1)" in attempt_line(discard, 4.0, 12)
    assert attempt_line(bare, None, 12).endswith("best          -  nothing changed")


def test_printer_prints_start_attempts_warnings_and_the_stop() -> None:
    record = AttemptRecord(1, Status.KEEP, metric=4.0, delta=-3.0, description="set N to 7")
    text = printed(
        False,
        Started(SUMMARY, max_iterations=3, workspace="/w", resumed=True),
        PhaseChanged("measuring", 1, sample=1, samples=3),
        Attempted(record, best=4.0, max_iterations=3),
        Warned("slow [disk]"),
        Stopped("target", SUMMARY, "reached it", "autoresearch/toy", "/l/ledger.jsonl"),
    )
    assert text.splitlines() == [
        "resuming campaign toy (minimize, up to 3 attempts) in /w",
        "1/3 keep            metric          4  gain        +3 (delta -3)  best          4  "
        "set N to 7",
        "warning: slow [disk]",
        "stopped: target — reached it",
        "baseline 7  best 4 (gain +3 (+42.86%), delta -3) at attempt 1  "
        "[baseline 1, crash 1, keep 1]",
        "best result: branch autoresearch/toy; ledger /l/ledger.jsonl",
    ]


def test_quiet_printer_prints_only_warnings_and_the_stop() -> None:
    record = AttemptRecord(1, Status.KEEP, metric=4.0)
    text = printed(
        True,
        Started(SUMMARY, max_iterations=3, workspace="/w", resumed=False),
        Attempted(record, best=4.0, max_iterations=3),
        Warned("w"),
        Stopped("max_iterations", {**SUMMARY, "baseline": None}, "", "b", "l"),
    )
    assert text.splitlines() == [
        "warning: w",
        "stopped: max_iterations",
        "best result: branch b; ledger l",
    ]


def test_table_cells() -> None:
    records = [
        AttemptRecord(0, Status.BASELINE, metric=7.0, commit="a" * 40),
        AttemptRecord(1, Status.SCOPE_VIOLATION, description="x", reason="outside: y"),
    ]
    console = Console(file=io.StringIO(), width=120, record=True, color_system=None)
    console.print(attempts_table(records))
    shown = console.export_text()
    assert "aaaaaaaaaa " in shown and "baseline" in shown and "x [outside: y]" in shown
    console.print(attempts_table(records, with_commit=False))
    assert "commit" not in console.export_text()
