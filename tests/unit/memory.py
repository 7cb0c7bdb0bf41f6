"""An executor and a proposer that live in the test process, for in-process engine tests.

The executor computes the metric from the workspace's files with a Python function; the
proposer edits files with Python functions. Git, the ledger and the engine are real.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from autoresearch.attempt import Status
from autoresearch.executors.base import OK, CommandSpec, Executor, Measurement
from autoresearch.proposers.base import Outcome, Proposal, ProposalContext, Proposer

Metric = Callable[[Path], float]  # raises ValueError for a crash
Guard = Callable[[Path], bool]
Edit = Callable[[Path], Proposal | None]


class MemoryExecutor(Executor):
    """Runs `[metric] command = "metric"` and `[guard] command = "guard"` in-process."""

    def __init__(self, metric: Metric, guard: Guard | None = None) -> None:
        self.metric = metric
        self.guard = guard or (lambda workspace: True)
        self.runs: list[tuple[str, Path]] = []
        self.before_run: Callable[[CommandSpec, Path], None] = lambda spec, workspace: None
        self.started = self.closed = 0

    def start(self, setup: object) -> list[str]:
        self.started += 1
        return []

    def close(self) -> None:
        self.closed += 1

    def run(
        self, spec: CommandSpec, *, workspace: Path, env: dict[str, str], log_stem: Path
    ) -> Measurement:
        self.runs.append((spec.command, workspace))
        self.before_run(spec, workspace)
        out = log_stem.with_suffix(".out")
        out.parent.mkdir(parents=True, exist_ok=True)
        if not spec.parse:
            passed = self.guard(workspace)
            out.write_text("guard\n")
            outcome = OK if passed else Status.CRASH
            return Measurement(outcome, None, 0.01, "" if passed else "exited with code 1", out)
        try:
            value = self.metric(workspace)
        except ValueError as exc:
            out.write_text(f"{exc}\n")
            return Measurement(Status.CRASH, None, 0.01, f"exited with code 1: {exc}", out)
        out.write_text(f"score: {value}\n")
        return Measurement(OK, value, 0.01, "", out)


class DisturbedExecutor(MemoryExecutor):
    """A `MemoryExecutor` on a machine that disturbs every metric run: `disturb` turns the
    code's value into the one measured (in the order taken; `log_stem` names the run)."""

    def disturb(self, value: float, log_stem: Path) -> float:
        raise NotImplementedError

    def run(
        self, spec: CommandSpec, *, workspace: Path, env: dict[str, str], log_stem: Path
    ) -> Measurement:
        measured = super().run(spec, workspace=workspace, env=env, log_stem=log_stem)
        if not spec.parse or measured.value is None:
            return measured
        value = self.disturb(measured.value, log_stem)
        measured.stdout_path.write_text(f"score: {value}\n")
        return Measurement(measured.outcome, value, measured.seconds, "", measured.stdout_path)


class ScriptedProposer(Proposer):
    """Plays one edit per attempt, in order; the last one repeats. `runs_commands` is
    False: it writes only through its own code."""

    runs_commands = False

    def __init__(self, *edits: Edit) -> None:
        self.edits = list(edits)
        self.contexts: list[ProposalContext] = []
        self.outcomes: list[Outcome] = []
        self.closed = 0

    def propose(self, ctx: ProposalContext) -> Proposal:
        self.contexts.append(ctx)
        edit = self.edits[min(len(self.contexts), len(self.edits)) - 1]
        return edit(ctx.workspace) or Proposal(description=f"edit {len(self.contexts)}")

    def observe(self, outcome: Outcome) -> None:
        self.outcomes.append(outcome)

    def close(self) -> None:
        self.closed += 1


def set_n(value: str, description: str = "") -> Edit:
    """An edit that sets `N = value` in calc.py."""

    def edit(workspace: Path) -> Proposal:
        path = workspace / "calc.py"
        lines = path.read_text().splitlines()
        path.write_text(
            "\n".join(f"N = {value}" if ln.startswith("N =") else ln for ln in lines) + "\n"
        )
        return Proposal(description=description or f"set N to {value}")

    return edit


def score(workspace: Path) -> float:
    """The toy metric: |N - 3|, a crash when N is not a number."""
    for line in (workspace / "calc.py").read_text().splitlines():
        if line.startswith("N ="):
            raw = line.split("=", 1)[1].strip()
            try:
                return abs(float(raw) - 3)
            except ValueError:
                raise ValueError(f"N is {raw}") from None
    raise ValueError("no N")
