"""The live view, fed typed events directly and rendered onto a recording terminal."""

from __future__ import annotations

import io

from rich.console import Console

from autoresearch.attempt import AttemptRecord, Cost, Status, Timings
from autoresearch.events import Attempted, PhaseChanged, Started, Stopped, Warned
from autoresearch.views.live import LiveView, sparkline

SUMMARY = {"name": "toy", "direction": "minimize", "baseline": None, "best": None}


def shown(view: LiveView) -> str:
    render = Console(file=io.StringIO(), width=120, record=True, color_system=None)
    render.print(view.render())
    return render.export_text()


def test_sparkline() -> None:
    assert sparkline([]) == ""
    line = sparkline([3.0, 2.0, 1.0, 1.0])
    assert line[0] == "█" and line[-1] == "▁" and len(line) == 4


def test_live_view_shows_progress_phase_and_attempts() -> None:
    console = Console(file=io.StringIO(), force_terminal=True, width=120, color_system=None)
    keep = AttemptRecord(
        1,
        Status.KEEP,
        metric=4.0,
        delta=-3.0,
        description="set N to 7",
        cost=Cost(usd=0.25),
        judge_cost=Cost(usd=0.25),
        timings=Timings(total=1.0),
    )
    with LiveView(console) as view:
        view(Started(SUMMARY, max_iterations=4, workspace="/w", resumed=False))
        view(Attempted(AttemptRecord(0, Status.BASELINE, metric=7.0), 7.0, 4))
        view(PhaseChanged("measuring", 1, sample=2, samples=8))
        view(Attempted(keep, 4.0, 4))
        text = shown(view)
        assert "1/4" in text and "ETA" in text and "cost $0.5000" in text
        assert "baseline 7" in text and "best 4" in text and "delta -3" in text
        assert "measuring #1 (sample 2 of up to 8)" in text
        assert "set N to 7" in text and "keep" in text
        view(PhaseChanged("measuring", 2, sample=1, samples=8, side="incumbent"))
        assert "measuring #2 (incumbent sample 1 of up to 8)" in shown(view)
        view(PhaseChanged("proposing", 2))
        assert "phase: proposing #2 " in shown(view)  # no sample detail left over
        view(Warned("disk is slow"))
        view(Stopped("target", SUMMARY, "reached 4", "autoresearch/toy", "l"))
        text = shown(view)
    assert "warning: disk is slow" in text and "stopped: target — reached 4" in text
    assert "ETA" not in text and "phase: stopped #2" in text


def test_the_baseline_gives_no_attempt_time() -> None:
    console = Console(file=io.StringIO(), width=120, color_system=None)
    view = LiveView(console)
    view(Started(SUMMARY, max_iterations=2, workspace="/w", resumed=True))
    baseline = AttemptRecord(0, Status.BASELINE, metric=7.0, timings=Timings(measure=3.0))
    view(Attempted(baseline, 7.0, 2))
    view(Attempted(AttemptRecord(1, Status.INTERRUPTED), 7.0, 2))
    assert view.attempt_times == [] and view.baseline == 7.0 and view.cost == 0.0


def test_live_view_shows_every_slot() -> None:
    console = Console(file=io.StringIO(), force_terminal=True, width=120, color_system=None)
    with LiveView(console) as view:
        view(Started(SUMMARY, 10, "/tmp/ws", False))
        view(PhaseChanged("proposing", 3, slot=0))
        view(PhaseChanged("measuring", 4, sample=1, samples=1, slot=1))
        text = shown(view)
        assert "slot 0: #3 proposing" in text and "slot 1: #4 measuring" in text
        view(Attempted(AttemptRecord(3, Status.DISCARD, metric=5.0, slot=0), None, 10))
        text = shown(view)
        assert "slot 0:" not in text and "slot 1: #4 measuring" in text
