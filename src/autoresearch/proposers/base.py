"""The proposer protocol: the only step of the loop the engine delegates."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from autoresearch.confinement import Confinement
from autoresearch.process import ChildRecord


def _environ() -> dict[str, str]:
    return dict(os.environ)


DESCRIPTION_CHARS = 200  # a description is one line
REASON_CHARS = 1000
READ_LIMIT = 4096  # bytes read of a file a proposer writes its description to


def clean_text(text: str, limit: int) -> str:
    """`text` as a ledger field and a git commit message can hold it: no NUL byte (git
    refuses it), at most `limit` characters. Other control characters stay text; the views
    escape them."""
    return text.replace("\x00", "\ufffd")[:limit]


def read_head(path: Path, limit: int = READ_LIMIT) -> str:
    """The first `limit` bytes of `path` as text, however large the file is; "" when
    unreadable. A line cut at the limit is dropped unless it is the only one."""
    try:
        with path.open("rb") as handle:
            data = handle.read(limit + 1)
    except OSError:
        return ""
    if len(data) > limit:
        data = data[:limit]
        whole, newline, _ = data.rpartition(b"\n")
        data = whole if newline and whole.strip() else data
    return data.decode("utf-8", errors="replace")


@dataclass(frozen=True)
class ProposerSetup:
    """What a proposer kind is built from: the campaign, narrowed to what proposers use.

    A proposer keeps its own state (a study, its ideas) in `state_dir`, names itself in
    messages by `source`, edits only files matching `scope` and not `harness`, and never
    shows the files in `hidden` (the judge's rubric). Commands it runs write their process
    group to `child`, so that an engine killed mid-run has it killed on the next start,
    and run confined by `confinement`.
    """

    name: str  # the campaign's name
    source: str  # the config file, as messages name it
    state_dir: Path  # `.autoresearch/<name>`
    scope: tuple[str, ...]
    harness: tuple[str, ...] = ()
    hidden: tuple[str, ...] = ()
    direction: Literal["minimize", "maximize"] = "minimize"
    options: Mapping[str, Any] = field(default_factory=dict)  # as written in the config
    environ: Mapping[str, str] = field(default_factory=_environ)  # where API keys are read
    child: ChildRecord | None = None
    confinement: Confinement = field(default_factory=Confinement)


@dataclass(frozen=True)
class AttemptNote:
    """What a proposer may learn about an earlier attempt."""

    iteration: int
    status: str  # a `Status` value
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
    # What the engine learned (see guidance.py): the research memory, the strategy when
    # stuck, the hypothesis to try, the ideas backlog, which [[proposer]] is asked.
    memory: str = ""
    strategy: str | None = None
    hypothesis: str | None = None
    ideas: list[str] = field(default_factory=list)
    proposer_index: int = 0


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
    status: str  # a `Status` value
    metric: float | None
    best: float | None
    direction: str
    memory: str = ""  # the research memory after this attempt, for proposers without a prompt


class Proposer(Protocol):
    """Edits files in `ctx.workspace`; the engine finds out what changed from git.

    Optional members, looked up with getattr: `validate(workspace)` checks the settings
    against the files before the campaign starts; `preflight(workspace, offline) -> str`
    checks what the proposer needs (its executable, its endpoint unless `offline`) for
    `check`, says in a few words what was found, and raises `AutoresearchError` when it
    cannot work;
    `runs_commands = False` says the proposer writes only through its own code, so the
    user's checkout need not be watched;
    `exhausted() -> bool`, asked before every attempt, says it has nothing left to try (the
    campaign stops with `space_exhausted`).
    """

    def propose(self, ctx: ProposalContext) -> Proposal: ...

    def observe(self, outcome: Outcome) -> None: ...

    def close(self) -> None: ...
