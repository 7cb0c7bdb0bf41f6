"""`autoresearch mcp`: the command alone, importable without the rest of the command line.

An MCP client starts the server each session and waits for its answer to `initialize`, so
the server's start path imports only what serving needs: this module, `mcp_server` and the
SDK. `autoresearch.cli` hands a command line that starts with `mcp` to `light_main`
without loading the other commands (and the engine they import); the full command line
registers the same command.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from autoresearch.errors import AutoresearchError

F = TypeVar("F", bound=Callable[..., Any])


def _errors(func: F) -> F:
    """The user's errors as one line and their exit code (as every command's), without
    the full command line's error handler and what it imports."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except AutoresearchError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(exc.exit_code)
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            sys.exit(130)

    return wrapper  # type: ignore[return-value]


@click.command(name="mcp")
@click.option(
    "--config",
    "config_path",
    type=click.Path(path_type=Path),
    default=None,
    help="Config file (default: autoresearch.toml or [tool.autoresearch] in pyproject.toml).",
)
@click.option(
    "--connect",
    "connect",
    type=click.Path(path_type=Path),
    default=None,
    metavar="SOCKET",
    help="Relay stdio to the server of a sandboxed session (`start --agent`) at SOCKET.",
)
@click.option(
    "--name",
    "campaign_name",
    default=None,
    metavar="NAME",
    help="The campaign (its `name`), when the repository has several: the config its last "
    "run read; default: the one whose workspace you are in, else the config's.",
)
@_errors
def mcp_(config_path: Path | None, connect: Path | None, campaign_name: str | None = None) -> None:
    """Serve the campaign's tools (start, step, status, log, show, diff, ...) to an MCP
    client over stdio (in the sandbox of `start --agent`: relay to its server). Needs:
    pip install 'autoresearch[mcp]'."""
    from autoresearch.agent import relay

    # Inside the sandbox of `start --agent` the campaign is out of reach: a server
    # registered there (`setup --user`, say) relays to the session's own.
    sandboxed = os.environ.get(relay.SOCKET_ENV)
    if connect is None and sandboxed:
        connect = Path(sandboxed)
    if connect is not None:
        sys.exit(relay.main([str(connect)]))
    from autoresearch.agent.mcp_handshake import serve_answering_early
    from autoresearch.store.place import current_folder, place_of, recorded_config

    # From the campaign's workspace (or any folder below the checkout) too.
    place = place_of(current_folder())
    config = place.config(config_path)
    wanted = campaign_name or place.campaign
    if config is None and wanted is not None:
        config = recorded_config(place.root, wanted)
    root = place.root

    def run() -> None:
        from autoresearch.agent.mcp_server import serve

        serve(root, config)

    serve_answering_early(run)


def light_main() -> click.Group:
    """The command line with `mcp` alone, under the name of the full one."""
    group = click.Group(name="main")
    group.add_command(mcp_)
    return group
