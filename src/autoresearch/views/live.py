"""The live terminal view of `autoresearch run` (rich), fed by the engine's events."""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.panel import Panel
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from autoresearch.attempt import AttemptRecord, Status, num
from autoresearch.events import (
    Attempted,
    Event,
    Noted,
    PhaseChanged,
    Started,
    Stopped,
    Warned,
)
from autoresearch.views.render import attempts_table, gain_text, printable, safe

SPARKS = "▁▂▃▄▅▆▇█"
RECENT = 8


def sparkline(values: list[float], width: int = 40) -> str:
    values = values[-width:]
    if not values:
        return ""
    low, high = min(values), max(values)
    span = high - low or 1.0
    return "".join(
        SPARKS[min(int((v - low) / span * (len(SPARKS) - 1)), len(SPARKS) - 1)] for v in values
    )


def duration(seconds: float) -> str:
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class LiveView:
    """Keeps the engine's state from its events and renders one panel."""

    def __init__(
        self,
        console: Console,
        name: str = "",
        direction: str = "minimize",
        max_iterations: int = 0,
    ) -> None:
        """`name`, `direction` and `max_iterations` are known before the engine starts:
        the first frame already shows them."""
        self.console = console
        self.started = time.monotonic()
        self.name = name
        self.direction = direction
        self.max_iterations = max_iterations
        self.records: list[AttemptRecord] = []
        self.phase = "starting"
        self.iteration: int | None = None
        self.detail = ""
        self.best: float | None = None
        self.baseline: float | None = None
        self.cost = 0.0
        self.attempt_times: list[float] = []
        self.stopped: Stopped | None = None
        self.warnings: list[str] = []
        # With several jobs: each slot's attempt, phase and when the attempt began.
        self.slots: dict[int, tuple[int | None, str, float]] = {}
        self.live = Live(self.render(), console=console, refresh_per_second=4, transient=False)

    def __enter__(self) -> LiveView:
        self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.live.update(self.render())
        self.live.__exit__(None, None, None)

    def __call__(self, event: Event) -> None:
        match event:
            case Started():
                self.name = event.summary["name"]
                self.direction = event.summary["direction"]
                self.max_iterations = event.max_iterations
                self.baseline = event.summary.get("baseline")
                self.best = event.summary.get("best")
            case PhaseChanged() if event.slot is not None:
                since = self.slots.get(event.slot, (None, "", 0.0))
                began = since[2] if since[0] == event.iteration else time.monotonic()
                self.slots[event.slot] = (event.iteration, event.phase, began)
            case PhaseChanged():
                self.phase = event.phase
                self.iteration = event.iteration
                if event.samples:
                    side = "incumbent " if event.side == "incumbent" else ""
                    self.detail = f"{side}sample {event.sample} of up to {event.samples}"
                else:
                    self.detail = ""
            case Attempted():
                if event.record.slot is not None:
                    self.slots.pop(event.record.slot, None)
                self.attempted(event)
            case Warned():
                self.warnings.append(event.message)
            case Noted():
                self.live.console.print(safe(event.message))
            case Stopped():
                self.stopped = event
                self.phase = "stopped"
        self.live.update(self.render())

    def attempted(self, event: Attempted) -> None:
        record = event.record
        self.records.append(record)
        self.best = event.best
        if record.status is Status.BASELINE:
            self.baseline = record.metric
        elif record.timings is not None and record.timings.total is not None:
            self.attempt_times.append(record.timings.total)
        self.cost += record.cost_usd

    def render(self) -> Panel:
        done = max((r.iteration for r in self.records), default=0)
        total = max(self.max_iterations, 1)
        remaining = max(self.max_iterations - done, 0)
        eta = ""
        if self.attempt_times and remaining and not self.stopped:
            per = sum(self.attempt_times) / len(self.attempt_times)
            eta = f"  ETA {duration(per * remaining)}"
        head = Table.grid(padding=(0, 2))
        head.add_row(
            Text(f"{done}/{self.max_iterations}", style="bold"),
            ProgressBar(total=total, completed=min(done, total), width=40),
            Text(
                f"elapsed {duration(time.monotonic() - self.started)}{eta}"
                + (f"  cost ${self.cost:.4f}" if self.cost else "")
            ),
        )
        delta = None if self.best is None or self.baseline is None else self.best - self.baseline
        pct = None
        if delta is not None and self.baseline:
            pct = 100.0 * (-delta if self.direction == "minimize" else delta) / abs(self.baseline)
        values = [r.metric for r in self.records if r.metric is not None]
        info = Table.grid(padding=(0, 2))
        info.add_row(
            Text(f"baseline {num(self.baseline)}"),
            Text(f"best {num(self.best)}"),
            Text(gain_text(delta, self.direction, pct)),
            Text(sparkline(values), style="cyan"),
        )
        phase = self.phase if self.iteration is None else f"{self.phase} #{self.iteration}"
        if self.detail:
            phase += f" ({self.detail})"
        recent = attempts_table(
            self.records[-RECENT:], with_commit=False, width=70, direction=self.direction
        )
        parts: list[Any] = [head, info]
        if self.slots:
            now = time.monotonic()
            for slot, (iteration, doing, began) in sorted(self.slots.items()):
                took = duration(now - began)
                parts.append(Text(f"slot {slot}: #{iteration} {doing} ({took})", style="yellow"))
        else:
            parts.append(Text(f"phase: {phase}", style="yellow"))
        parts.append(recent)
        for warning in self.warnings[-2:]:
            parts.append(Text(f"warning: {printable(warning)}", style="yellow"))
        if self.stopped:
            message = printable(self.stopped.message)
            parts.append(
                Text(
                    f"stopped: {self.stopped.stop_reason}" + (f" — {message}" if message else ""),
                    style="bold",
                )
            )
        title = f"autoresearch · {safe(self.name)} ({self.direction})"
        return Panel(Group(*parts), title=title, border_style="blue")
