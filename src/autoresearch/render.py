"""Turn engine events and ledger records into terminal lines and tables."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

STATUS_STYLE = {
    "baseline": "bold cyan",
    "keep": "bold green",
    "discard": "dim",
    "crash": "red",
    "timeout": "red",
    "guard_failed": "yellow",
    "scope_violation": "magenta",
    "no_change": "dim",
    "tampered": "bold red",
    "interrupted": "yellow",
    "proposer_failed": "red",
    "edit_refused": "magenta",
    "checkout_changed": "bold red",
}


def num(value: float | None) -> str:
    return "-" if value is None else f"{value:.6g}"


def signed(value: float | None) -> str:
    return "-" if value is None else f"{value:+.4g}"


def attempt_line(record: dict[str, Any], best: float | None, max_iterations: int) -> str:
    status = str(record.get("status"))
    style = STATUS_STYLE.get(status, "default")
    iteration = record.get("iteration")
    width = len(str(max_iterations))
    description = str(record.get("description") or "")
    reason = record.get("reason")
    if reason and status not in ("keep", "discard", "baseline"):
        description = f"{description} [{reason}]" if description else str(reason)
    return (
        f"{iteration!s:>{width}}/{max_iterations} "
        f"[{style}]{status:<15}[/] "
        f"metric {num(record.get('metric')):>10}  "
        f"delta {signed(record.get('delta')):>9}  "
        f"best {num(best):>10}  "
        f"{_escape(description[:160])}"
    )


def _escape(text: str) -> str:
    return escape(text)


class Printer:
    """Prints one line per attempt and the final summary."""

    def __init__(self, console: Console, quiet: bool = False) -> None:
        self.console = console
        self.quiet = quiet

    def __call__(self, kind: str, data: dict[str, Any]) -> None:
        if kind == "start" and not self.quiet:
            summary = data["summary"]
            verb = "resuming" if data.get("resumed") else "starting"
            self.console.print(
                f"[bold]{verb} campaign {summary['name']}[/] ({summary['direction']}, "
                f"up to {data['max_iterations']} attempts) in {escape(data['workspace'])}"
            )
        elif kind == "attempt" and not self.quiet:
            self.console.print(
                attempt_line(data["record"], data.get("best"), data["max_iterations"]),
                highlight=False,
            )
        elif kind == "warning":
            self.console.print(f"[yellow]warning:[/] {escape(data['message'])}")
        elif kind == "stop":
            self.stop(data)

    def stop_summary(self, result: Any, campaign: Any) -> None:
        """The closing lines after the live view: the same as a plain run's."""
        self.stop(
            {
                "stop_reason": result.stop_reason,
                "summary": result.summary,
                "message": result.message,
                "branch": f"autoresearch/{campaign.name}",
                "ledger": str(campaign.state_dir / "ledger.jsonl"),
            }
        )

    def stop(self, data: dict[str, Any]) -> None:
        summary = data["summary"]
        counts = ", ".join(f"{k} {v}" for k, v in sorted(summary["counts"].items()))
        pct = summary.get("improvement_pct")
        gain = "" if pct is None else f" ({pct:+.2f}%)"
        self.console.print(
            f"[bold]stopped:[/] {data['stop_reason']}"
            + (f" — {escape(data['message'])}" if data.get("message") else "")
        )
        if summary["baseline"] is not None:
            self.console.print(
                f"baseline {num(summary['baseline'])}  best {num(summary['best'])}{gain} "
                f"at attempt {summary['best_iteration']}  [{counts}]",
                highlight=False,
            )
        self.console.print(f"best result: branch {data['branch']}; ledger {escape(data['ledger'])}")


def attempts_table(
    records: list[dict[str, Any]], with_commit: bool = True, width: int = 100
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
        status = str(record.get("status"))
        description = str(record.get("description") or "")
        if record.get("reason") and status not in ("keep", "discard", "baseline"):
            description = f"{description} [{record['reason']}]"
        cells = [
            str(record.get("iteration")),
            f"[{STATUS_STYLE.get(status, 'default')}]{status}[/]",
            num(record.get("metric")),
            signed(record.get("delta")),
        ]
        if with_commit:
            cells.append((record.get("commit") or "")[:10])
        cells.append(_escape(description[:width]))
        table.add_row(*cells)
    return table
