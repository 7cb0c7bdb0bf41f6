"""Turn engine events and ledger records into terminal lines and tables."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from autoresearch.attempt import AttemptRecord, Status
from autoresearch.events import Attempted, Event, Started, Stopped, Warned

STATUS_STYLE: dict[Status, str] = {
    Status.BASELINE: "bold cyan",
    Status.KEEP: "bold green",
    Status.DISCARD: "dim",
    Status.CRASH: "red",
    Status.TIMEOUT: "red",
    Status.GUARD_FAILED: "yellow",
    Status.SCOPE_VIOLATION: "magenta",
    Status.NO_CHANGE: "dim",
    Status.TAMPERED: "bold red",
    Status.INTERRUPTED: "yellow",
    Status.PROPOSER_FAILED: "red",
    Status.EDIT_REFUSED: "magenta",
    Status.CHECKOUT_CHANGED: "bold red",
}


def num(value: float | None) -> str:
    return "-" if value is None else f"{value:.6g}"


def signed(value: float | None) -> str:
    return "-" if value is None else f"{value:+.4g}"


def attempt_line(record: AttemptRecord, best: float | None, max_iterations: int) -> str:
    status = str(record.status)
    style = STATUS_STYLE[record.status]
    width = len(str(max_iterations))
    description = record.description
    if record.reason and record.status.shows_reason:
        description = f"{description} [{record.reason}]" if description else record.reason
    return (
        f"{record.iteration!s:>{width}}/{max_iterations} "
        f"[{style}]{status:<15}[/] "
        f"metric {num(record.metric):>10}  "
        f"delta {signed(record.delta):>9}  "
        f"best {num(best):>10}  "
        f"{escape(description[:160])}"
    )


class Printer:
    """Prints one line per attempt and the final summary (an event listener)."""

    def __init__(self, console: Console, quiet: bool = False) -> None:
        self.console = console
        self.quiet = quiet

    def __call__(self, event: Event) -> None:
        match event:
            case Started() if not self.quiet:
                summary = event.summary
                verb = "resuming" if event.resumed else "starting"
                self.console.print(
                    f"[bold]{verb} campaign {summary['name']}[/] ({summary['direction']}, "
                    f"up to {event.max_iterations} attempts) in {escape(event.workspace)}"
                )
            case Attempted() if not self.quiet:
                self.console.print(
                    attempt_line(event.record, event.best, event.max_iterations),
                    highlight=False,
                )
            case Warned():
                self.console.print(f"[yellow]warning:[/] {escape(event.message)}")
            case Stopped():
                self.stop(event)
            case _:
                pass

    def stop_summary(self, result: Any, campaign: Any) -> None:
        """The closing lines after the live view: the same as a plain run's."""
        self.stop(
            Stopped(
                stop_reason=result.stop_reason,
                summary=result.summary,
                message=result.message,
                branch=f"autoresearch/{campaign.name}",
                ledger=str(campaign.state_dir / "ledger.jsonl"),
            )
        )

    def stop(self, event: Stopped) -> None:
        summary = event.summary
        counts = ", ".join(f"{k} {v}" for k, v in sorted(summary["counts"].items()))
        pct = summary.get("improvement_pct")
        gain = "" if pct is None else f" ({pct:+.2f}%)"
        self.console.print(
            f"[bold]stopped:[/] {event.stop_reason}"
            + (f" — {escape(event.message)}" if event.message else "")
        )
        if summary["baseline"] is not None:
            self.console.print(
                f"baseline {num(summary['baseline'])}  best {num(summary['best'])}{gain} "
                f"at attempt {summary['best_iteration']}  [{counts}]",
                highlight=False,
            )
        self.console.print(f"best result: branch {event.branch}; ledger {escape(event.ledger)}")


def attempts_table(
    records: Sequence[AttemptRecord], with_commit: bool = True, width: int = 100
) -> Table:
    """Attempts as a table: number, status, metric, delta, (commit,) description."""
    table = Table(show_edge=False, header_style="bold")
    columns = [
        "#",
        "status",
        "metric",
        "delta",
        *(["commit"] if with_commit else []),
        "description",
    ]
    for column in columns:
        table.add_column(column, justify="right" if column in ("#", "metric", "delta") else "left")
    for record in records:
        description = record.description
        if record.reason and record.status.shows_reason:
            description = f"{description} [{record.reason}]"
        cells = [
            str(record.iteration),
            f"[{STATUS_STYLE[record.status]}]{record.status}[/]",
            num(record.metric),
            signed(record.delta),
        ]
        if with_commit:
            cells.append((record.commit or "")[:10])
        cells.append(escape(description[:width]))
        table.add_row(*cells)
    return table
