"""`kind = "command"`: a shell command edits the workspace (an agent CLI, a script)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from autoresearch.process import CommandResult, run_command
from autoresearch.proposers.base import (
    DESCRIPTION_CHARS,
    REASON_CHARS,
    Outcome,
    Proposal,
    ProposalContext,
    ProposerSetup,
    clean_text,
    read_head,
)


class CommandOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    command: str = Field(min_length=1)
    timeout: float = Field(default=1800, gt=0)


def note_failure(
    proposal: Proposal, result: CommandResult, who: str, timeout: float, message: str = ""
) -> Proposal:
    """Mark `proposal` as timed out or failed when the command was; the reason carries the
    tool's own `message`, else the last line it wrote to stderr, else to stdout."""
    if result.timed_out:
        proposal.timed_out = True
        proposal.reason = f"{who} timed out after {timeout:g} s"
    elif result.returncode != 0:
        proposal.failed = True
        said = message or result.stderr_tail() or last_line(result.stdout_text())
        reason = f"{who} exited with code {result.returncode}" + (f": {said}" if said else "")
        proposal.reason = clean_text(reason, REASON_CHARS)
    return proposal


def last_line(text: str) -> str:
    """The last non-empty line of `text`, stripped."""
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line:
            return line
    return ""


def description_from(text: str) -> str:
    """The proposer's own summary: the last non-empty line it printed, shortened."""
    return clean_text(last_line(text), DESCRIPTION_CHARS)


class CommandProposer:
    def __init__(self, options: CommandOptions, setup: ProposerSetup) -> None:
        self.options = options
        self.child = setup.child

    def propose(self, ctx: ProposalContext) -> Proposal:
        stem = f"{ctx.iteration:04d}-proposer"
        description_file = ctx.log_dir / f"{ctx.iteration:04d}-description.txt"
        description_file.unlink(missing_ok=True)
        env = {**ctx.env, "AUTORESEARCH_DESCRIPTION_FILE": str(description_file)}
        result = run_command(
            self.options.command,
            cwd=ctx.workspace,
            env=env,
            timeout=self.options.timeout,
            stdout_path=ctx.log_dir / f"{stem}.out",
            stderr_path=ctx.log_dir / f"{stem}.err",
            child=self.child,
        )
        description = ""
        if description_file.is_file():  # a regular file only, read to a bound
            description = description_from(read_head(description_file))
        if not description:
            description = description_from(result.stdout_text())
        proposal = Proposal(description=description, output_path=str(result.stdout_path))
        return note_failure(proposal, result, "the proposer", self.options.timeout)

    def observe(self, outcome: Outcome) -> None:
        return None

    def close(self) -> None:
        return None
