"""What a command prints: one value that renders itself as JSON (`--json`) or as lines for a
person, and one helper that prints it. A command builds its `Shown` and calls `emit`; it
never chooses between the two itself."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

import click
from rich.console import RenderableType

from autoresearch.cli.options import console


class Output(Protocol):
    def to_json(self) -> Any: ...

    def lines(self) -> Iterable[RenderableType]: ...


@dataclass(frozen=True)
class Shown:
    """A command's result: the data `--json` prints, and how it reads for a person."""

    data: Any
    render: Callable[[], Iterable[RenderableType]] = tuple
    compact: bool = False  # one line of JSON: an answer scripts read
    markup: bool = True  # False: the lines are plain text, printed as they are

    def to_json(self) -> Any:
        return self.data

    def lines(self) -> Iterable[RenderableType]:
        return self.render()


def emit(output: Output, as_json: bool, *, compact: bool = False) -> None:
    if as_json:
        one_line = compact or (isinstance(output, Shown) and output.compact)
        click.echo(json.dumps(output.to_json(), indent=None if one_line else 2))
        return
    if isinstance(output, Shown) and not output.markup:
        for line in output.lines():
            click.echo(str(line))
        return
    for line in output.lines():
        console.print(line, highlight=False)
