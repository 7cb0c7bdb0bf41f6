"""Commands of the agent-driven mode: `start`, `workspace`, `step`, `mcp`, `setup`, `import`
and `session`. Parsing and printing only; the work is done in the modules they call."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from autoresearch.cli import _root, console, handle_errors
from autoresearch.config import CONFIG_FILE, load_campaign
from autoresearch.render import safe

config_option = click.option(
    "--config",
    "config_path",
    type=click.Path(path_type=Path),
    default=None,
    help=f"Config file (default: {CONFIG_FILE} or [tool.autoresearch] in pyproject.toml).",
)
json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON.")


@click.command()
@config_option
@json_option
@handle_errors
def start(config_path: Path | None, as_json: bool) -> None:
    """Set the campaign up for an agent and measure the baseline (resume it if it has
    one): then edit the workspace and call `step`."""
    from autoresearch.agent_mode import start as start_campaign
    from autoresearch.agent_mode import step_lines

    report = start_campaign(load_campaign(_root(), config_path))
    _print(report.to_json() if as_json else step_lines(report))
    sys.exit(report.exit_code)


@click.command()
@config_option
@handle_errors
def workspace(config_path: Path | None) -> None:
    """Print the path of the campaign's workspace: the folder the agent edits."""
    from autoresearch.agent_mode import workspace_path

    click.echo(str(workspace_path(load_campaign(_root(), config_path))))


@click.command()
@click.option(
    "--description", "-d", default="", help="What you changed, in one line (for the log)."
)
@config_option
@json_option
@handle_errors
def step(description: str, config_path: Path | None, as_json: bool) -> None:
    """Judge the edit made in the workspace: screen, commit, measure, keep or roll back,
    log; prints the verdict, the best so far and what to do next."""
    from autoresearch.agent_mode import step as step_campaign
    from autoresearch.agent_mode import step_lines

    report = step_campaign(load_campaign(_root(), config_path), description)
    _print(report.to_json() if as_json else step_lines(report))
    sys.exit(report.exit_code)


@click.command(name="mcp")
@config_option
@handle_errors
def mcp_(config_path: Path | None) -> None:
    """Serve the campaign's tools (start, step, status, log, show, diff, ...) to an MCP
    client over stdio. Needs: pip install 'autoresearch[mcp]'."""
    from autoresearch.mcp_server import serve

    serve(_root(), config_path)


@click.command()
@click.argument("tool", type=click.Choice(["claude-code", "codex", "gemini"]))
@click.option(
    "--user", is_flag=True, help="Write the user's own files (home folder), not the project's."
)
@click.option(
    "--command",
    "command",
    default="autoresearch",
    show_default=True,
    help="The command the tool runs to start the MCP server (`<command> mcp`).",
)
@json_option
@handle_errors
def setup(tool: str, user: bool, command: str, as_json: bool) -> None:
    """Teach a coding agent the agent-driven loop (a skill or an AGENTS.md / GEMINI.md
    section) and register the MCP server in its config. Safe to run again."""
    from autoresearch.agent_setup import setup as write_setup

    root = Path.cwd() if user else _root()
    written = write_setup(tool, root, user=user, command=command)
    if as_json:
        click.echo(json.dumps([w.to_json() for w in written], indent=2))
        return
    for item in written:
        console.print(f"{item.action:>9}  {safe(str(item.path))}", highlight=False)


@click.command(name="import")
@click.argument("source")
@click.option(
    "--from",
    "folder",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="`import pi`: the folder holding the session's files (default: the repository).",
)
@click.option("--force", is_flag=True, help="Replace an existing autoresearch.toml.")
@json_option
@handle_errors
def import_(source: str, folder: Path | None, force: bool, as_json: bool) -> None:
    """Write autoresearch.toml from a program file (karpathy-style, or Goal / Metric /
    Guard / Config sections), or from a pi-autoresearch session (`import pi`, which also
    brings its history in as imported, self-reported attempts)."""
    from autoresearch.importing import import_pi, import_program

    root = _root()
    if source == "pi" and not (Path.cwd() / source).is_file():
        result = import_pi(root, force, folder.resolve() if folder else None)
    else:
        result = import_program(root, Path(source).resolve(), force)
    if as_json:
        click.echo(json.dumps(result.to_json(), indent=2))
        return
    console.print(f"wrote {safe(str(result.config))} from a {safe(result.style)}", highlight=False)
    console.print("inferred:", highlight=False)
    for line in result.found:
        console.print(f"  {safe(line)}", highlight=False)
    if result.missing:
        console.print("could not infer (decide in the file):", highlight=False)
        for line in result.missing:
            console.print(f"  {safe(line)}", highlight=False)
    if result.imported_path is not None:
        console.print(
            f"imported {result.imported} prior attempts (self-reported, never used in a "
            f"decision) into {safe(str(result.imported_path))}",
            highlight=False,
        )
    console.print("next: check the file, then `autoresearch check`", highlight=False)


def _print(out: object) -> None:
    if isinstance(out, dict):
        click.echo(json.dumps(out, indent=2))
        return
    assert isinstance(out, list)
    for line in out:
        console.print(safe(str(line), one_line=False), highlight=False)


COMMANDS = [start, workspace, step, mcp_, setup, import_]


def register(group: click.Group) -> None:
    for command in COMMANDS:
        group.add_command(command)
