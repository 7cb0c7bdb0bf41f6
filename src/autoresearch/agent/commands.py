"""Commands of the agent-driven mode: `start`, `workspace`, `step`, `mcp`, `setup`, `import`
and `session`. Parsing and printing only; the work is done in the modules they call."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import click

from autoresearch.agent.mcp_command import mcp_
from autoresearch.cli.options import (
    campaign_of,
    campaign_options,
    checkout_root,
    console,
    err_console,
    handle_errors,
    json_option,
)
from autoresearch.cli.output import Shown, emit
from autoresearch.errors import AutoresearchError
from autoresearch.views.render import safe

if TYPE_CHECKING:
    from autoresearch.agent.mode import StepReport


OFFER = (
    "note: an agent you run yourself works outside the sandbox (it could rewrite a "
    'measurement or the ledger); `autoresearch start --agent "<command>"` runs it inside, '
    "where the promises hold as in `run`."
)


@click.command()
@campaign_options
@json_option
@click.option(
    "--hypotheses",
    type=click.Path(path_type=Path),
    default=None,
    help="Markdown list or JSONL of hypotheses to queue; each step shows the next one.",
)
@click.option(
    "--agent",
    "agent",
    default=None,
    metavar="COMMAND",
    help="Then run this agent (e.g. claude) in the sandbox, confined to the workspace; it "
    "calls `step` through the MCP server. Exits with the agent's exit code.",
)
@handle_errors
def start(
    config_path: Path | None,
    campaign_name: str | None,
    as_json: bool,
    hypotheses: Path | None,
    agent: str | None,
) -> None:
    """Set the campaign up for an agent and measure the baseline (resume it if it has
    one): then edit the workspace and call `step`, or, with --agent, have the agent do it
    inside the sandbox."""
    from autoresearch.agent.mode import start as start_campaign

    _refuse_inside("start")
    campaign = campaign_of(config_path, campaign_name)
    if agent is not None:
        from autoresearch.agent.sandboxed import check

        check(campaign, agent)  # refused before the baseline is measured
    if hypotheses is not None:
        from autoresearch.learning.ideas import queue_file

        added = queue_file(campaign, hypotheses)
        if not as_json:
            console.print(f"{len(added)} new hypotheses queued from {safe(str(hypotheses))}")
    report = start_campaign(campaign)
    if agent is None:
        if not as_json:
            err_console.print(OFFER, markup=False, highlight=False)
        _print_step(report, as_json)
    from autoresearch.agent.sandboxed import run_agent

    if report.exit_code != 0 or report.stopped:
        _print_step(report, as_json)
    _show_step(report, as_json)
    if not as_json:
        console.print(f"starting the agent in the sandbox: {safe(agent)}", markup=False)
    sys.exit(run_agent(campaign, agent, campaign.config_path))


def _refuse_inside(command: str) -> None:
    """In the sandbox of `start --agent` the campaign's files are out of reach: a command
    that needs them says what to use instead."""
    import os

    from autoresearch.agent.relay import SOCKET_ENV

    if os.environ.get(SOCKET_ENV):
        raise AutoresearchError(
            f"this is the sandbox of `autoresearch start --agent`, where `{command}` runs "
            "only through the MCP tools: call the tool `" + command + "` of the MCP server "
            "`autoresearch` (its config is in $AUTORESEARCH_MCP_CONFIG)."
        )


@click.command()
@campaign_options
@handle_errors
def workspace(config_path: Path | None, campaign_name: str | None) -> None:
    """Print the path of the campaign's workspace: the folder the agent edits."""
    from autoresearch.agent.mode import workspace_path

    click.echo(str(workspace_path(campaign_of(config_path, campaign_name))))


@click.command()
@click.option(
    "--description", "-d", default="", help="What you changed, in one line (for the log)."
)
@campaign_options
@json_option
@handle_errors
def step(
    description: str, config_path: Path | None, campaign_name: str | None, as_json: bool
) -> None:
    """Judge the edit made in the workspace: screen, commit, measure, keep or roll back,
    log; prints the verdict, the best so far and what to do next."""
    from autoresearch.agent.mode import step as step_campaign

    _refuse_inside("step")
    campaign = campaign_of(config_path, campaign_name)
    _print_step(step_campaign(campaign, description), as_json)


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
    from autoresearch.agent.setup import setup as write_setup

    root = Path.cwd() if user else checkout_root()
    written = write_setup(tool, root, user=user, command=command)
    lines = [f"{item.action:>9}  {safe(str(item.path))}" for item in written]
    emit(Shown([w.to_json() for w in written], lambda: lines), as_json)


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
    from autoresearch.agent.importing import import_pi, import_program

    root = checkout_root()
    if source == "pi" and not (Path.cwd() / source).is_file():
        result = import_pi(root, force, folder.resolve() if folder else None)
    else:
        result = import_program(root, Path(source).resolve(), force)

    def lines() -> Iterable[str]:
        verb = "wrote" if result.written else "kept"
        yield f"{verb} {safe(str(result.config))} ({safe(result.style)})"
        yield "inferred:"
        yield from (f"  {safe(line)}" for line in result.found)
        if result.missing:
            yield "could not infer (decide in the file):"
            yield from (f"  {safe(line)}" for line in result.missing)
        if result.imported_path is not None:
            yield (
                f"imported {result.imported} prior attempts (self-reported, never used in a "
                f"decision) into {safe(str(result.imported_path))}"
            )
        yield (
            "next: check the file; then `autoresearch start` to drive the campaign yourself "
            "(edit the workspace, `autoresearch step`), or add a [proposer] and "
            "`autoresearch check`, `autoresearch run`"
        )

    emit(Shown(result.to_json(), lines), as_json)


file_option = click.option(
    "--file",
    "path",
    type=click.Path(path_type=Path, dir_okay=False),
    default=Path("autoresearch.jsonl"),
    show_default=True,
    help="The session log.",
)


@click.group()
def session() -> None:
    """A session log for agents that measure themselves (self-reported; no engine
    decision reads it)."""


@session.command(name="init")
@file_option
@click.option("--metric", "metric", required=True, help="The primary metric's name.")
@click.option("--direction", type=click.Choice(["higher", "lower"]), required=True)
@click.option("--unit", default="", help="The metric's unit, for display.")
@click.option("--max-runs", type=int, default=None)
@click.option("--max-runtime-seconds", type=float, default=None)
@click.option("--max-cost", type=float, default=None)
@click.option("--convergence-runs", type=int, default=None)
@click.option("--force", is_flag=True, help="Open a new segment in an existing log.")
@handle_errors
def session_init(
    path: Path,
    metric: str,
    direction: str,
    unit: str,
    max_runs: int | None,
    max_runtime_seconds: float | None,
    max_cost: float | None,
    convergence_runs: int | None,
    force: bool,
) -> None:
    """Start the log: its first config record declares the metric and direction."""
    from autoresearch.agent import session as sessions

    entry = sessions.init(
        path,
        metric,
        direction,
        force=force,
        unit=unit,
        max_runs=max_runs,
        max_runtime_seconds=max_runtime_seconds,
        max_cost=max_cost,
        convergence_runs=convergence_runs,
    )
    emit(Shown(entry, compact=True), as_json=True)


@session.command(name="record")
@file_option
@click.option("--metric", "metric", type=float, default=None, help="The measured value.")
@click.option("--status", type=click.Choice(["keep", "discard", "crash", "checks_failed"]))
@click.option("--commit", default=None)
@click.option("--description", default="")
@click.option("--elapsed-seconds", type=float, default=None)
@click.option("--estimated-cost", type=float, default=None)
@click.option("--metric-name", default=None, help="A new primary metric: opens a new segment.")
@click.option("--direction", type=click.Choice(["higher", "lower"]), default=None)
@click.option("--format", "fmt", type=click.Choice(["json", "summary"]), default="summary")
@handle_errors
def session_record(
    path: Path,
    metric: float | None,
    status: str | None,
    commit: str | None,
    description: str,
    elapsed_seconds: float | None,
    estimated_cost: float | None,
    metric_name: str | None,
    direction: str | None,
    fmt: str,
) -> None:
    """Append one run with the status you assigned; prints the session's status."""
    from autoresearch.agent import session as sessions

    if status is None:
        raise click.UsageError("--status is required (keep, discard, crash, checks_failed).")
    data = sessions.record(
        path,
        status,
        metric,
        commit=commit,
        description=description,
        elapsed_seconds=elapsed_seconds,
        estimated_cost=estimated_cost,
        metric_name=metric_name,
        direction=direction,
    )
    _session_out(data, fmt)


@session.command(name="status")
@file_option
@click.option("--format", "fmt", type=click.Choice(["json", "summary"]), default="json")
@handle_errors
def session_status(path: Path, fmt: str) -> None:
    """Best, delta, MAD, confidence, counts, budgets and convergence."""
    from autoresearch.agent import session as sessions

    _session_out(sessions.summary(sessions.read(path)), fmt)


def _session_out(data: dict[str, object], fmt: str) -> None:
    from autoresearch.agent.session import summary_lines

    emit(Shown(data, lambda: summary_lines(data), markup=False), as_json=fmt == "json")


def _show_step(report: StepReport, as_json: bool) -> None:
    from autoresearch.agent.mode import step_lines

    lines = [safe(str(line), one_line=False) for line in step_lines(report)]
    emit(Shown(report.to_json(), lambda: lines), as_json)


def _print_step(report: StepReport, as_json: bool) -> NoReturn:
    _show_step(report, as_json)
    sys.exit(report.exit_code)


COMMANDS: list[click.Command] = [start, workspace, step, mcp_, setup, import_, session]


def register(group: click.Group) -> None:
    for command in COMMANDS:
        group.add_command(command)
