"""`autoresearch mcp`: the agent-driven mode as an MCP server over stdio.

Any MCP client (Claude Code, Codex, Gemini CLI, ...) runs a campaign with the tools `start`,
`step`, `status`, `log`, `show` and `diff`: the same calls as the commands of the same
names, with typed inputs and outputs. The client's agent edits the workspace; `step` has
the engine judge the edit. No tool takes a number from the agent.

`confirm` and `ideas` are wired through `OPTIONAL_TOOLS`: each names the module and the
function that implement it; while that module does not exist, the tool is listed and says
that it is not available in this version, so a client sees the whole surface either way.

The tools are plain functions of `CampaignTools` (tested without the SDK); `make_server`
registers them with the official `mcp` SDK (`pip install 'autoresearch[mcp]'`).
"""

from __future__ import annotations

import functools
import importlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from pydantic import BaseModel, Field

from autoresearch import __version__
from autoresearch.agent.pause import LOCK_NAME, PAUSE_ENV, Root, paused
from autoresearch.errors import AutoresearchError

if TYPE_CHECKING:
    from autoresearch.config import Campaign

SERVER_NAME = "autoresearch"
LOG_LIMIT = 200
DIFF_CHARS = 200_000

INSTRUCTIONS = """\
autoresearch judges code changes: you edit, the engine measures and decides.
1. Call `start` once: it sets the campaign up, measures the baseline, and gives the
   workspace folder. Edit files only there, only those in the campaign's scope.
2. Make ONE change, then call `step` with a one-line description. The engine screens it,
   commits it, measures it in its sandbox, keeps it only if it is really better, else rolls
   the workspace back. Read `status`, `reason` and `next` in its answer. After a `rework`
   (better, but the guard failed) the change stays in the workspace: fix it there, then
   `step` again; `rework` says what the guard printed and how many tries are left.
3. Never run the metric yourself and never report a number: only `step` measures. Never
   edit the harness (the benchmark, tests, the config): that halts the campaign.
4. When an answer names a `hypothesis`, your next change tests it (the next `step` is
   recorded against it); `memory_file` says what worked and what failed so far.
5. Repeat until `stopped` is true; then `diff` shows the best change.
"""


class AttemptView(BaseModel):
    """One attempt as the ledger holds it."""

    iteration: int
    status: str
    metric: float | None = None
    delta: float | None = None
    best: float | None = None
    description: str = ""
    reason: str | None = None
    files: list[str] = Field(default_factory=list)
    commit: str | None = None
    kept: bool = False
    self_reported: bool = False
    rework_of: int | None = None  # the attempt whose candidate this try fixed


class ReworkView(BaseModel):
    """A better candidate whose guard failed, waiting in the workspace for a fix."""

    of: int  # the attempt whose change the workspace holds
    commit: str
    next_try: int  # the number of the next step's try
    tries: int  # tries the config allows
    left: int  # tries left, the next step's included
    guard_output: str = ""  # the end of what the guard printed


class StepResult(BaseModel):
    """What `start` and `step` return: the verdict, the best so far, what to do next."""

    campaign: str
    workspace: str
    direction: str
    attempt: AttemptView | None = None
    baseline: float | None = None
    best: float | None = None
    best_iteration: int | None = None
    iterations: int = 0
    stopped: bool = False
    stop_reason: str | None = None
    message: str = ""
    next: str
    warnings: list[str] = Field(default_factory=list)
    rework: ReworkView | None = None
    # The hypothesis the next step is recorded against (make the change that tests it),
    # and the research memory file (what worked, what failed and why).
    hypothesis: str | None = None
    memory_file: str | None = None


class StatusResult(BaseModel):
    campaign: str
    direction: str
    state: str  # running, waiting (for the next step), stopped
    stop_reason: str | None = None
    baseline: float | None = None
    best: float | None = None
    best_iteration: int | None = None
    delta: float | None = None
    improvement_pct: float | None = None
    iterations: int = 0
    max_iterations: int | None = None
    attempt_counts: dict[str, int] = Field(default_factory=dict)
    workspace: str | None = None
    branch: str
    ledger: str


class LogResult(BaseModel):
    campaign: str
    attempts: list[AttemptView]
    total: int


class ShowResult(BaseModel):
    attempt: AttemptView
    record: dict[str, Any]
    logs: list[str]


class DiffResult(BaseModel):
    iteration: int | None
    diff: str
    truncated: bool = False


class Unavailable(BaseModel):
    """A tool whose feature this version does not have yet."""

    available: bool = False
    tool: str
    message: str


# tool name -> (module under `autoresearch.`, factory, summary). The factory takes the
# `CampaignTools` and returns the tool: a function with typed arguments that returns a
# pydantic model and raises `AutoresearchError` for what the user can fix.
OPTIONAL_TOOLS: dict[str, tuple[str, str, str]] = {
    "confirm": (
        "measure.confirm",
        "mcp_confirm",
        "Re-measure the best result against the baseline to confirm the gain.",
    ),
    "ideas": (
        "learning.ideas",
        "mcp_ideas",
        "Read or add to the campaign's ideas backlog (what to try next).",
    ),
}


def _view(record: Any) -> AttemptView:
    from autoresearch.attempt import Status, without_holdout

    record = without_holdout(record)  # the agent is a program: no holdout numbers
    return AttemptView(
        iteration=record.iteration,
        status=str(record.status),
        metric=record.metric,
        delta=record.delta,
        best=record.best,
        description=record.description,
        reason=record.reason,
        files=list(record.files),
        commit=record.commit,
        kept=record.status in (Status.KEEP, Status.BASELINE),
        self_reported=bool(record.extra.get("self_reported")),
        rework_of=record.rework_of,
    )


class CampaignTools:
    """The MCP tools as plain calls on one repository (and config file)."""

    def __init__(self, root: Path, config: Path | None = None, pause: Root | None = None) -> None:
        self.root = root
        self.config = config
        # A sandboxed agent's processes, held still while `start` and `step` work on its
        # workspace (`pause.py`).
        self.pause = pause

    def campaign(self) -> Campaign:
        # Loaded at the first call, not at the server's start: the client waits for that.
        from autoresearch.config import load_campaign

        return load_campaign(self.root, self.config)

    def start(self) -> StepResult:
        from autoresearch.agent.mode import start

        campaign = self.campaign()
        with paused(self.pause, campaign.state_dir / LOCK_NAME):
            report = start(campaign)
        return StepResult.model_validate(_step_json(report.to_json()))

    def step(self, description: str = "") -> StepResult:
        from autoresearch.agent.mode import step

        campaign = self.campaign()
        with paused(self.pause, campaign.state_dir / LOCK_NAME):
            report = step(campaign, description)
        return StepResult.model_validate(_step_json(report.to_json()))

    def status(self) -> StatusResult:
        from autoresearch.views.status import campaign_status, find_state_dir

        state_dir = find_state_dir(self.root, self.config)
        data = campaign_status(state_dir)
        if data["running"]:
            state = "running"
        elif data.get("waiting"):
            state = "waiting"
        else:
            state = "stopped"
        workspace = state_dir / "worktree"
        return StatusResult(
            campaign=str(data["name"]),
            direction=str(data["direction"]),
            state=state,
            stop_reason=data.get("stop_reason"),
            baseline=data.get("baseline"),
            best=data.get("best"),
            best_iteration=data.get("best_iteration"),
            delta=data.get("delta"),
            improvement_pct=data.get("improvement_pct"),
            iterations=int(data.get("iterations") or 0),
            max_iterations=data.get("max_iterations"),
            attempt_counts=dict(data.get("attempt_counts") or {}),
            workspace=str(workspace) if workspace.is_dir() else None,
            branch=str(data["branch"]),
            ledger=str(data["ledger"]),
        )

    def log(self, last: int = 20) -> LogResult:
        from autoresearch.views.status import find_state_dir, read_records

        state_dir = find_state_dir(self.root, self.config)
        records = read_records(state_dir)
        last = max(1, min(last, LOG_LIMIT))
        return LogResult(
            campaign=state_dir.name,
            attempts=[_view(r) for r in records[-last:]],
            total=len(records),
        )

    def show(self, iteration: int) -> ShowResult:
        from autoresearch.attempt import without_holdout
        from autoresearch.store.ledger import stored_object
        from autoresearch.store.results import attempt, attempt_logs
        from autoresearch.views.status import find_state_dir

        state_dir = find_state_dir(self.root, self.config)
        record = attempt(state_dir, iteration)
        return ShowResult(
            attempt=_view(record),
            record=stored_object(without_holdout(record)),
            # The holdout's logs are left out: what it printed is for people only.
            logs=[str(p) for p in attempt_logs(state_dir, iteration) if "-holdout-" not in p.name],
        )

    def diff(self, iteration: int | None = None) -> DiffResult:
        from autoresearch.store.results import attempt, campaign_diff
        from autoresearch.store.results import diff as attempt_diff
        from autoresearch.views.status import find_state_dir

        state_dir = find_state_dir(self.root, self.config)
        if iteration is None:
            text = campaign_diff(self.root, state_dir)
        else:
            text = attempt_diff(self.root, attempt(state_dir, iteration))
        return DiffResult(
            iteration=iteration, diff=text[:DIFF_CHARS], truncated=len(text) > DIFF_CHARS
        )

    def optional(self, name: str) -> Callable[[CampaignTools], Callable[..., Any]] | None:
        """The factory of an optional tool, or None while it does not exist."""
        module, function, _ = OPTIONAL_TOOLS[name]
        try:
            found = getattr(importlib.import_module(f"autoresearch.{module}"), function)
        except (ImportError, AttributeError):
            return None
        return found if callable(found) else None

    def unavailable(self, name: str) -> Unavailable:
        return Unavailable(
            tool=name,
            message=(
                f"`{name}` is not available in this version of autoresearch; use `status`, "
                "`log` and `diff`, and keep making changes with `step`."
            ),
        )


def _step_json(data: dict[str, Any]) -> dict[str, Any]:
    data = dict(data)
    data.pop("exit_code", None)
    attempt = data.get("attempt")
    if isinstance(attempt, dict):
        keep = set(AttemptView.model_fields)
        data["attempt"] = {k: v for k, v in attempt.items() if k in keep}
    return data


P = ParamSpec("P")
R = TypeVar("R")


def guarded(call: Callable[P, R]) -> Callable[P, R]:
    """`call` with the user's errors as the SDK's tool errors: one sentence for the agent,
    no traceback."""
    from mcp.server.mcpserver.exceptions import ToolError

    @functools.wraps(call)  # the SDK reads the tool's typed signature through it
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return call(*args, **kwargs)
        except AutoresearchError as exc:
            raise ToolError(str(exc)) from None

    return run


def make_server(root: Path, config: Path | None = None, pause: Root | None = None) -> Any:
    """The MCP server with every tool registered; `.run("stdio")` serves it."""
    try:
        from mcp.server.mcpserver import MCPServer
    except ImportError:
        raise AutoresearchError(
            "the MCP server needs the mcp package; install it with pip install 'autoresearch[mcp]'."
        ) from None
    tools = CampaignTools(root, config, pause)
    server = MCPServer(SERVER_NAME, instructions=INSTRUCTIONS, version=__version__)

    @server.tool(name="start")
    def start_tool() -> StepResult:
        """Set the campaign up and measure its baseline (or resume it). Returns the
        workspace folder to edit and what to do next."""
        return guarded(tools.start)()

    @server.tool(name="step")
    def step_tool(description: str = "") -> StepResult:
        """Have the engine judge the change you made in the workspace: it screens, commits,
        measures, keeps it only if really better (else rolls back) and logs it. Pass a
        one-line description of the change. Never report numbers yourself."""
        return guarded(tools.step)(description)

    @server.tool(name="status")
    def status_tool() -> StatusResult:
        """The campaign's state, baseline, best and counts."""
        return guarded(tools.status)()

    @server.tool(name="log")
    def log_tool(last: int = 20) -> LogResult:
        """The last attempts (at most 200), oldest first."""
        return guarded(tools.log)(last)

    @server.tool(name="show")
    def show_tool(iteration: int) -> ShowResult:
        """One attempt in full, with the paths of the logs it left."""
        return guarded(tools.show)(iteration)

    @server.tool(name="diff")
    def diff_tool(iteration: int | None = None) -> DiffResult:
        """The campaign's change (its base to the best result), or attempt N's own change."""
        return guarded(tools.diff)(iteration)

    for name, (_, _, summary) in OPTIONAL_TOOLS.items():
        _register_optional(server, tools, name, summary)
    return server


def _register_optional(
    server: Any,
    tools: CampaignTools,
    name: str,
    summary: str,
) -> None:
    factory = tools.optional(name)
    if factory is not None:
        server.add_tool(guarded(factory(tools)), name=name)
        return

    def unavailable() -> Unavailable:
        return tools.unavailable(name)

    server.add_tool(unavailable, name=name, description=f"{summary} (not available yet)")


def serve(root: Path, config: Path | None = None) -> None:
    # Set by `start --agent` for the servers of its sandbox; not passed on to the commands
    # the engine runs.
    sandbox = os.environ.pop(PAUSE_ENV, None)
    pause = Root.from_env(sandbox) if sandbox else None
    make_server(root, config, pause).run("stdio")
