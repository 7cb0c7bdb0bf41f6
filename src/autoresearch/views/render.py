"""Turn engine events and ledger records into terminal lines and tables."""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from autoresearch.attempt import AttemptRecord, Status, num
from autoresearch.events import Attempted, Event, Noted, Started, Stopped, Warned
from autoresearch.measure.metrics import shown
from autoresearch.stats.decide import gain as decide_gain

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
    Status.DUPLICATE: "dim",
    Status.CONSTRAINT_FAILED: "yellow",
    Status.OVERFIT: "yellow",
    Status.AWAITING_APPROVAL: "bold blue",
    Status.REJECTED: "dim",
    Status.REWORK: "yellow",
    Status.SUPERSEDED: "dim",
    Status.MERGED: "bold green",
}

# The one table of status colours: the report's chart, report.html and the dashboard draw
# a status the same way (a status not named here is drawn in OTHER_COLOUR).
STATUS_COLOURS: dict[Status, str] = {
    Status.BASELINE: "#1f77b4",
    Status.KEEP: "#2ca02c",
    Status.MERGED: "#2ca02c",
    Status.DISCARD: "#b0b0b0",
    Status.CRASH: "#d62728",
    Status.TIMEOUT: "#ff7f0e",
    Status.GUARD_FAILED: "#bcbd22",
    Status.SCOPE_VIOLATION: "#9467bd",
    Status.TAMPERED: "#000000",
}
OTHER_COLOUR = "#8c564b"
BEST_LINE_COLOUR = "#2ca02c"
# Table rows: kept attempts green, the ones that broke something red.
ROW_BACKGROUNDS: dict[Status, str] = {
    Status.KEEP: "#e8f5e9",
    Status.MERGED: "#e8f5e9",
    Status.CRASH: "#fdecea",
    Status.TAMPERED: "#fdecea",
}


def colour(status: Status) -> str:
    return STATUS_COLOURS.get(status, OTHER_COLOUR)


def spread(samples: Sequence[float] | None) -> float | None:
    """The samples' standard deviation (n - 1), or None for fewer than two."""
    if samples is None or len(samples) < 2:
        return None
    mean = sum(samples) / len(samples)
    return float((sum((x - mean) ** 2 for x in samples) / (len(samples) - 1)) ** 0.5)


def figures(record: AttemptRecord, direction: str) -> dict[str, Any]:
    """What every view shows of an attempt beside the ledger's own fields: its gain in the
    campaign's direction, how many samples its metric is the mean of, and their spread."""
    samples = record.samples
    return {
        "iteration": record.iteration,
        "gain": gain(record.delta, direction),
        "samples": len(samples) if samples else int(record.metric is not None),
        "spread": spread(samples),
    }


# Control characters (terminal escape sequences among them), the marks that reorder text,
# and lone surrogates (bytes that were not UTF-8, a raw C1 control among them), shown as
# visible escapes: a description, a diff or a reason is text, never instructions to a
# terminal. Every command that prints what a candidate or a proposer wrote goes through it.
_UNPRINTABLE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)


def printable(text: str, one_line: bool = True) -> str:
    """`text` safe to print: control characters shown as escapes, on one line by default
    (else only newlines and tabs stay as they are)."""
    if one_line:
        text = text.replace("\r\n", " ").replace("\n", " ").replace("\t", " ")
    return _UNPRINTABLE.sub(_visible, text)


def printable_chunks(chunks: Iterable[bytes]) -> Iterator[str]:
    """A stream of bytes (a diff) as printable text, a chunk at a time: never held whole.
    Bytes that are not UTF-8 are shown as their escapes, a character cut between two
    chunks is decoded whole."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="surrogateescape")
    for chunk in chunks:
        text = decoder.decode(chunk)
        if text:
            yield printable(text, one_line=False)
    rest = decoder.decode(b"", final=True)
    if rest:
        yield printable(rest, one_line=False)


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8: shown as that byte
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def safe(text: str, one_line: bool = True) -> str:
    """`text` for rich's markup: printable, and its brackets never read as a style."""
    return escape(printable(text, one_line))


def signed(value: float | None, noise: float | None = None) -> str:
    """A difference with its sign: to its noise's two significant digits when known."""
    if value is None:
        return "-"
    if noise is None:
        return f"{value:+.4g}"
    text = num(value, noise)
    return text if text.startswith("-") else f"+{text}"


def gain(delta: float | None, direction: str) -> float | None:
    """The one sign convention for "better": a change in the campaign's direction is
    positive (a smaller number when minimizing, a larger one when maximizing). `delta` is
    the raw difference, new minus old, printed beside it."""
    return None if delta is None else decide_gain(delta, 0.0, direction)


def gain_text(
    delta: float | None, direction: str, pct: float | None = None, noise: float | None = None
) -> str:
    """ "gain +3 (+42.86%), delta -3": the improvement first, the raw difference beside it."""
    if delta is None:
        return "gain -"
    share = "" if pct is None else f" ({pct:+.2f}%)"
    return f"gain {signed(gain(delta, direction), noise)}{share}, delta {signed(delta, noise)}"


def holdout_text(record: AttemptRecord) -> str:
    data = record.holdout or {}
    if data.get("value") is None:
        return ""
    return f" (holdout {num(data['value'])} vs {num(data.get('incumbent'))})"


def attempt_line(
    record: AttemptRecord, best: float | None, max_iterations: int, direction: str = "minimize"
) -> str:
    status = str(record.status)
    style = STATUS_STYLE[record.status]
    width = len(str(max_iterations))
    description = record.description
    if record.reason and record.status.shows_reason:
        description = f"{description} [{record.reason}]" if description else record.reason
    if record.metrics:
        description = f"{description} {{{shown(record.metrics)}}}"
    description += holdout_text(record)
    return (
        f"{record.iteration!s:>{width}}/{max_iterations} "
        f"[{style}]{status:<15}[/] "
        f"metric {num(record.metric):>10}  "
        f"gain {signed(gain(record.delta, direction)):>9} (delta {signed(record.delta)})  "
        f"best {num(best):>10}  "
        f"{safe(description[:160])}"
    )


class Printer:
    """Prints one line per attempt and the final summary (an event listener)."""

    def __init__(self, console: Console, quiet: bool = False) -> None:
        self.console = console
        self.quiet = quiet
        self.direction = "minimize"

    def __call__(self, event: Event) -> None:
        match event:
            case Started():
                summary = event.summary
                self.direction = str(summary.get("direction") or "minimize")
                if self.quiet:
                    return
                verb = "resuming" if event.resumed else "starting"
                self.console.print(
                    f"[bold]{verb} campaign {safe(str(summary['name']))}[/] "
                    f"({summary['direction']}, up to {event.max_iterations} attempts) in "
                    f"{safe(event.workspace)}"
                )
            case Attempted() if not self.quiet:
                line = attempt_line(event.record, event.best, event.max_iterations, self.direction)
                self.console.print(line, highlight=False)
            case Warned():
                self.console.print(f"[yellow]warning:[/] {safe(event.message)}")
            case Noted():
                self.console.print(safe(event.message))
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
        direction = str(summary.get("direction") or self.direction)
        delta = summary.get("delta")
        if delta is None and summary.get("best") is not None and summary["baseline"] is not None:
            delta = summary["best"] - summary["baseline"]
        change = gain_text(delta, direction, summary.get("improvement_pct"))
        self.console.print(
            f"[bold]stopped:[/] {event.stop_reason}"
            + (f" — {safe(event.message)}" if event.message else "")
        )
        if summary["baseline"] is not None:
            self.console.print(
                f"baseline {num(summary['baseline'])}  best {num(summary['best'])} ({change}) "
                f"at attempt {summary['best_iteration']}  {escape(f'[{counts}]')}",
                highlight=False,
            )
        self.console.print(f"best result: branch {safe(event.branch)}; ledger {safe(event.ledger)}")


def imported_table(entries: Sequence[dict[str, Any]]) -> Table:
    """Attempts brought in by `import pi` (self-reported), as `log` shows them."""
    table = Table(show_edge=False, header_style="bold", title="imported (self-reported)")
    for column in ("run", "status", "metric", "commit", "description"):
        table.add_column(column, justify="right" if column in ("run", "metric") else "left")
    for entry in entries:
        metric = entry.get("metric")
        name = entry.get("metric_name")
        value = num(metric) if isinstance(metric, int | float) else ""
        table.add_row(
            safe(str(entry.get("run") or entry.get("imported") or "")),
            safe(str(entry.get("status") or "")),
            f"{value} {safe(str(name))}" if value and name else value,
            safe(str(entry.get("commit") or "")[:12]),
            safe(str(entry.get("description") or "")),
        )
    return table


def attempts_table(
    records: Sequence[AttemptRecord],
    with_commit: bool = True,
    width: int = 100,
    direction: str = "minimize",
    noise: float | None = None,
) -> Table:
    """Attempts as a table: number, status, metric, gain, delta, (commit,) description;
    numbers to the digits `noise` supports when it is known."""
    table = Table(show_edge=False, header_style="bold")
    columns = [
        "#",
        "status",
        "metric",
        "gain",
        "delta",
        *(["commit"] if with_commit else []),
        "description",
    ]
    numeric = ("#", "metric", "gain", "delta")
    for column in columns:
        table.add_column(column, justify="right" if column in numeric else "left")
    for record in records:
        description = record.description
        if record.reason and record.status.shows_reason:
            description = f"{description} [{record.reason}]"
        if record.metrics:
            description = f"{description} {{{shown(record.metrics)}}}"
        description += holdout_text(record)
        cells = [
            str(record.iteration),
            f"[{STATUS_STYLE[record.status]}]{record.status}[/]",
            num(record.metric, noise),
            signed(gain(record.delta, direction), noise),
            signed(record.delta, noise),
        ]
        if with_commit:
            cells.append(safe((record.commit or "")[:10]))
        cells.append(safe(description[:width]))
        table.add_row(*cells)
    return table
