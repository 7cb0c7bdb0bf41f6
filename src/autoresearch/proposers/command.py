"""`kind = "command"`: a shell command edits the workspace (an agent CLI, a script)."""

from __future__ import annotations

import os
import shlex
import shutil
from pathlib import Path

from pydantic import ConfigDict, Field

from autoresearch.errors import AutoresearchError
from autoresearch.isolation.process import CommandResult, run_command
from autoresearch.isolation.proxy import ProposerNetwork, Tally
from autoresearch.proposers.base import (
    DESCRIPTION_CHARS,
    REASON_CHARS,
    Outcome,
    Proposal,
    ProposalContext,
    Proposer,
    ProposerSetup,
    clean_text,
    is_idea,
    read_head,
)
from autoresearch.proposers.network import NetworkOptions, proposer_network


class CommandOptions(NetworkOptions):
    model_config = ConfigDict(extra="forbid", frozen=True)
    command: str = Field(min_length=1)
    timeout: float = Field(default=1800, gt=0)
    # environment names the command sees beside the allowlist (its own API keys, say)
    pass_env: list[str] = Field(default_factory=list)
    # paths outside the workspace the command may write when sandboxed (`~` allowed)
    writable: list[str] = Field(default_factory=list)


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


def note_refusals(proposal: Proposal, tally: Tally, log_name: str) -> None:
    """What the proxy refused the proposer, on the proposal for the engine to report."""
    if not tally.refused:
        return
    proposal.network_refused = tally.refused
    targets = ", ".join(tally.refused_targets)
    more = ", ..." if tally.refused > len(tally.refused_targets) else ""
    proposal.network_note = (
        f"the proxy refused {tally.refused} request(s) of the proposer to hosts not in "
        f"allow_hosts ({targets}{more}); see logs/{log_name}"
    )


def regular_file(path: Path) -> bool:
    """A regular file, not a link to one (what a command leaves is never followed)."""
    return path.is_file() and not path.is_symlink()


def last_line(text: str) -> str:
    """The last non-empty line of `text`, stripped."""
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line:
            return line
    return ""


def description_from(text: str) -> str:
    """The proposer's own summary: the last non-empty line it printed, shortened. `IDEA:`
    lines are suggestions for later attempts (collected into the backlog), not a summary
    of this one: they are passed over."""
    kept = "\n".join(line for line in text.splitlines() if not is_idea(line))
    return clean_text(last_line(kept), DESCRIPTION_CHARS)


# Words that start a command but are not programs on PATH: nothing to look up.
SHELL_WORDS = frozenset(
    {
        *("cd", "export", "source", ".", "eval", "exec", "if", "for", "while", "until"),
        *("case", "{", "(", "[", "[[", "test", "true", "false", "set", "unset", "echo"),
        *("printf", "read", "time", "env", "nice", "timeout", "command", "builtin"),
    }
)
INTERPRETERS = ("bash", "sh", "zsh", "dash", "python", "python3", "node", "ruby", "perl")


def executable_problem(command: str, workspace: Path) -> tuple[str, str | None]:
    """What `command` starts (as `check` reports it), and why it cannot start, if it cannot:
    its program is not on PATH, or the script an interpreter is given does not exist."""
    try:
        words = shlex.split(command, comments=True)
    except ValueError as exc:
        return command, f"bash cannot parse it ({exc})"
    while words and "=" in words[0] and not words[0].startswith("="):
        words = words[1:]  # VAR=value prefixes
    if not words or words[0] in SHELL_WORDS or any(c in words[0] for c in "$`"):
        return command, None  # starts with shell syntax: not checked
    program = words[0]
    if "/" in program:
        path = Path(program) if Path(program).is_absolute() else workspace / program
        if not (path.is_file() and os.access(path, os.X_OK)):
            return program, f"{program} is not an executable file"
        found = str(path)
    else:
        which = shutil.which(program)
        if which is None:
            return program, f"{program} is not installed or not on PATH"
        found = which
    name = Path(program).name
    # `bash propose.sh`: the script must exist where the proposer runs. After an option
    # (`bash -lc '...'`, `python -m pkg`) the next word may be anything: not checked.
    script = words[1] if len(words) > 1 else ""
    plain = script and not script.startswith("-") and not any(c in script for c in "$` \n")
    if name.rstrip("0123456789.") in INTERPRETERS and plain:
        target = Path(script) if Path(script).is_absolute() else workspace / script
        if not target.exists():
            return found, f"{script}, given to {name}, does not exist"
        return f"{found} {script}", None
    return found, None


class CommandProposer(Proposer):
    def __init__(self, options: CommandOptions, setup: ProposerSetup) -> None:
        self.options = options
        self.child = setup.child
        self.confinement = setup.confinement
        self.confined = setup.confinement.isolating
        self.network = proposer_network(options, setup.confinement, setup.source)

    def preflight(self, workspace: Path, offline: bool) -> str:
        found, problem = executable_problem(self.options.command, workspace)
        if problem:
            raise AutoresearchError(f"the proposer command cannot start: {problem}.")
        return f"command, runs {found}"

    def reach(self) -> tuple[ProposerNetwork, ...]:
        return (self.network,)

    def propose(self, ctx: ProposalContext) -> Proposal:
        stem = f"{ctx.iteration:04d}-proposer"
        confined = self.confinement.prepare(
            ctx.workspace,
            ctx.env,
            readonly=(ctx.prompt_file,),
            writable=self.options.writable,
            pass_env=self.options.pass_env,
            network=self.network,
            log=ctx.log_dir / f"{stem}-network.log",
        )
        description_file = confined.description_file
        env = {**confined.env, "AUTORESEARCH_DESCRIPTION_FILE": str(description_file)}
        with confined:
            result = run_command(
                self.options.command,
                cwd=ctx.workspace,
                env=env,
                timeout=self.options.timeout,
                stdout_path=ctx.log_dir / f"{stem}.out",
                stderr_path=ctx.log_dir / f"{stem}.err",
                child=self.child,
                wrap=confined.wrap,
                launch=confined.launch,
            )
        description = ""
        if regular_file(description_file):  # never a link, read to a bound
            description = description_from(read_head(description_file))
        if not description:
            description = description_from(result.stdout_text())
        proposal = Proposal(description=description, output_path=str(result.stdout_path))
        note_refusals(proposal, confined.close(), f"{stem}-network.log")
        return note_failure(proposal, result, "the proposer", self.options.timeout)

    def observe(self, outcome: Outcome) -> None:
        return None

    def close(self) -> None:
        return None
