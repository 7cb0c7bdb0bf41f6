"""MkDocs hook: the command reference, generated from the CLI's own help at build time, so
that it cannot drift from the code. A page holding `<!-- cli-reference -->` gets, in its
place, every command's usage and options as click prints them."""

from __future__ import annotations

from typing import Any

import click

MARKER = "<!-- cli-reference -->"


def _walk(command: click.Command, path: list[str]) -> list[tuple[list[str], click.Command]]:
    found = [(path, command)]
    if isinstance(command, click.Group):
        for name in sorted(command.list_commands(click.Context(command))):
            sub = command.get_command(click.Context(command), name)
            if sub is not None and not sub.hidden:
                found += _walk(sub, [*path, name])
    return found


def reference() -> str:
    from autoresearch.cli import main

    parts = []
    for path, command in _walk(main, ["autoresearch"]):
        name = " ".join(path)
        with click.Context(command, info_name=name) as ctx:
            text = command.get_help(ctx)
        parts.append(f"### `{name}`\n\n```text\n{text}\n```\n")
    return "\n".join(parts)


def on_page_markdown(markdown: str, **_: Any) -> str:
    if MARKER in markdown:
        return markdown.replace(MARKER, reference())
    return markdown
