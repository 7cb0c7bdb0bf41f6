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


@dataclass(frozen=True)
class Shown:
    """A command's result: the data `--json` prints, and how it reads for a person."""

    data: Any
    render: Callable[[], Iterable[RenderableType]] = tuple
    compact: bool = False  # one line of JSON: an answer scripts read
    markup: bool = True  # False: the lines are plain text, printed as they are


def emit(shown: Shown, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(shown.data, indent=None if shown.compact else 2))
    elif shown.markup:
        for line in shown.render():
            console.print(line, highlight=False)
    else:
        for line in shown.render():
            click.echo(str(line))
