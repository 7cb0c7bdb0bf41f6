"""What a command prints: one value that renders itself as JSON (`--json`) or as lines for a
person, and one helper that prints it. A command builds its `Shown` and calls `emit`; it
never chooses between the two itself."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import click
from rich.console import RenderableType

from autoresearch.cli.options import console
from autoresearch.views.render import printable


@dataclass(frozen=True)
class Shown:
    """A command's result: the data `--json` prints, and how it reads for a person."""

    data: Any
    render: Callable[[], Iterable[RenderableType]] = tuple
    compact: bool = False  # one line of JSON: an answer scripts read
    markup: bool = True  # False: the lines are plain text, printed as they are


def emit(shown: Shown, as_json: bool) -> None:
    """Print `shown`. JSON escapes every control character itself; a line of text has
    them shown as escapes here too, whatever its command did: a value read from the
    ledger, a log or a candidate is never an instruction to the terminal."""
    if as_json:
        click.echo(json.dumps(shown.data, indent=None if shown.compact else 2))
    elif shown.markup:
        for line in shown.render():
            shown_line = printable(line, one_line=False) if isinstance(line, str) else line
            console.print(shown_line, highlight=False)
    else:
        for line in shown.render():
            click.echo(printable(str(line), one_line=False))
