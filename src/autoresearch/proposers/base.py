"""The proposer protocol: the only step of the loop the engine delegates."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol


@dataclass(frozen=True)
class AttemptNote:
    """What a proposer may learn about an earlier attempt."""

    iteration: int
    status: str
    metric: float | None
    delta: float | None
    description: str
    files: list[str]
    reason: str = ""
    diffstat: str = ""


@dataclass(frozen=True)
class ProposalContext:
    iteration: int
    workspace: Path
    goal: str
    instructions: str
    scope: list[str]
    harness: list[str]
    direction: str
    metric_command: str
    best: float | None
    baseline: float | None
    history: list[AttemptNote]
    prompt: str
    prompt_file: Path
    log_dir: Path
    env: dict[str, str] = field(default_factory=dict)


@dataclass
class Proposal:
    """The proposer's account of its attempt. What changed is found out from git."""

    description: str = ""
    failed: bool = False
    timed_out: bool = False
    refused: bool = False  # the proposer's edits were refused (e.g. outside the scope)
    reason: str = ""
    cost_usd: float | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    output_path: str | None = None
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Outcome:
    """The engine's verdict on an attempt, reported back to the proposer."""

    iteration: int
    status: str
    metric: float | None
    best: float | None
    direction: str


class Proposer(Protocol):
    """Edits files in `ctx.workspace`; the engine finds out what changed from git.

    Optional members, looked up with getattr: `validate(workspace)` checks the settings
    against the files before the campaign starts, and `runs_commands = False` says the
    proposer writes only through its own code, so the user's checkout need not be watched.
    """

    def propose(self, ctx: ProposalContext) -> Proposal: ...

    def observe(self, outcome: Outcome) -> None: ...

    def close(self) -> None: ...
