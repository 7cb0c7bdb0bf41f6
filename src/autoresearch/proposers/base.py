"""The proposer protocol: the only step of the loop the engine delegates."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from autoresearch.isolation.confinement import Confinement
from autoresearch.isolation.process import ChildRecord
from autoresearch.isolation.proxy import ProposerNetwork


def _environ() -> dict[str, str]:
    return dict(os.environ)


DESCRIPTION_CHARS = 200  # a description is one line
# A line a proposer prints to suggest an idea for the backlog (ideas.py), not its summary.
IDEA_LINE = re.compile(r"^[\s>*_`#-]*IDEA\s*:\s*(.+?)\s*$", re.MULTILINE)
REASON_CHARS = 1000
READ_LIMIT = 4096  # bytes read of a file a proposer writes its description to


# What a `ProposalContext.strategy` asks of the proposer (escalation.py picks the strategy).
STRATEGY_ADVICE = {
    "refine": (
        "Refine: build on what worked (see the research memory); try a careful variation "
        "of the changes that were kept."
    ),
    "pivot": (
        "Pivot: the recent attempts did not improve the metric. Work on a different part of "
        "the code, or a different kind of change, than the dead ends listed in the memory; "
        "do not retry them."
    ),
    "simplify": (
        "Simplify: instead of adding, remove or simplify something (a branch, a layer, an "
        "option); a smaller change that keeps or improves the metric is welcome."
    ),
    "revisit": (
        "Revisit: among the dead ends tried before the last kept change, pick one whose "
        "premise has changed since (the code it was tried on is different now) and try it "
        "again in a new form."
    ),
}


def is_idea(line: str) -> bool:
    """An `IDEA: ...` line: a suggestion for the backlog, not a proposer's summary."""
    return IDEA_LINE.match(line) is not None


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
    # Requests the proposer's proxy refused (`[proposer] network = "allow"`), and what the
    # engine says of them.
    network_refused: int = 0
    network_note: str = ""


@dataclass(frozen=True)
class Outcome:
    """The engine's verdict on an attempt, reported back to the proposer."""

    iteration: int
    status: str  # a `Status` value
    metric: float | None
    best: float | None
    direction: str
    memory: str = ""  # the research memory after this attempt, for proposers without a prompt


class Proposer:
    """Edits files in `ctx.workspace`; the engine finds out what changed from git.

    Subclass it: `propose` is the one method a kind must write; every other member is a
    declared capability or a hook whose default is the safe answer, so a kind says what it
    is by what it overrides, and a misspelt name fails loudly (the conformance suite in
    `autoresearch.testing` checks each declaration against what the kind really does).

    Declarations (class attributes, or set per instance in `__init__`):

    `runs_commands`: it starts processes, which could write anywhere the user can, so the
    user's checkout is watched while it works. False: it writes only through its own code.
    `confined`: those processes run sealed in the sandbox (nothing outlives them).
    `parallel_safe`: one instance may serve several slots at once (it keeps its own lock);
    otherwise each slot gets its own, or the slots take turns with one handed in.
    `edits_in_place`: the agent-driven mode: the proposal is the edit already made in the
    workspace, which the engine takes over (`reopen_workspace`) instead of making afresh.
    """

    runs_commands: bool = True
    confined: bool = False
    parallel_safe: bool = False
    edits_in_place: bool = False

    def propose(self, ctx: ProposalContext) -> Proposal:
        raise NotImplementedError

    def observe(self, outcome: Outcome) -> None:
        """Hears the verdict on its proposal."""

    def close(self) -> None:
        """Releases what it holds; called once when the run ends."""

    def validate(self, workspace: Path) -> None:
        """Checks the settings against the files before the campaign starts; raises
        `ConfigError` when they cannot work."""

    def preflight(self, workspace: Path, offline: bool) -> str:
        """For `check`: what the proposer needs (its executable, its endpoint unless
        `offline`), said in a few words; raises `AutoresearchError` when it cannot work."""
        return ""

    def reach(self) -> tuple[ProposerNetwork, ...]:
        """What the commands it runs may reach on the network (`[proposer] network`), for
        `check` and the start; empty when it runs none or does not say."""
        return ()

    def exhausted(self) -> bool:
        """Asked before every attempt: True when it has nothing left to try (the campaign
        stops with `space_exhausted`)."""
        return False

    def reopen_workspace(self, workspace: Any, start: str) -> bool:
        """With `edits_in_place`: take the workspace over as it stands (True), or let the
        engine make it afresh (False)."""
        return False

    @property
    def edited_on_candidate(self) -> bool:
        """Under a guard rework, the edit found now was made on top of the candidate sent
        back: the engine must not overwrite it with the bare candidate."""
        return False

    @property
    def sealed(self) -> bool:
        """Nothing it starts outlives it: its commands sealed by the sandbox, or its writes
        its own code. Only then may the kernel's account of a folder stand for it."""
        return not self.edits_in_place and (not self.runs_commands or self.confined)


class Adapted(Proposer):
    """A proposer written against the bare `propose`/`observe`/`close` protocol: it declares
    nothing, so it gets the safe defaults (it may run commands, unconfined, one slot)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def propose(self, ctx: ProposalContext) -> Proposal:
        proposal: Proposal = self.inner.propose(ctx)
        return proposal

    def observe(self, outcome: Outcome) -> None:
        self.inner.observe(outcome)

    def close(self) -> None:
        self.inner.close()


def as_proposer(proposer: Any) -> Proposer:
    """`proposer` as the engine uses it: a `Proposer`, or one adapted to its defaults."""
    return proposer if isinstance(proposer, Proposer) else Adapted(proposer)
