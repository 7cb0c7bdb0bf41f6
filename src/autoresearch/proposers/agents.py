"""`kind = "claude" | "codex" | "aider" | "gemini"`: coding-agent CLIs with the right flags.

Each preset runs its tool non-interactively in the workspace, lets it edit files there,
keeps it from committing (the engine commits), bounds its turns or time, and reads the cost
and tokens from its output where the tool reports them.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ConfigDict, Field

from autoresearch.errors import AutoresearchError
from autoresearch.gitcmd import workspace_files
from autoresearch.isolation.confinement import AGENT_STATE
from autoresearch.isolation.process import run_command
from autoresearch.isolation.proxy import ProposerNetwork
from autoresearch.proposers.base import (
    DESCRIPTION_CHARS,
    REASON_CHARS,
    Outcome,
    Proposal,
    ProposalContext,
    Proposer,
    ProposerSetup,
    clean_text,
)
from autoresearch.proposers.command import note_failure, note_refusals
from autoresearch.proposers.edits import description_of
from autoresearch.proposers.network import NetworkOptions, proposer_network
from autoresearch.scope import PathMatcher

PROMPT = '"$(cat "$AUTORESEARCH_PROMPT_FILE")"'


class AgentOptions(NetworkOptions):
    model_config = ConfigDict(extra="forbid", frozen=True)
    model: str | None = None
    extra_args: list[str] = Field(default_factory=list)
    timeout: float = Field(default=1800, gt=0)
    max_turns: int = Field(default=30, ge=1)
    executable: str | None = None  # path or name of the tool, if not the usual one
    # environment names the tool sees beside the allowlist and the agents' usual keys
    pass_env: list[str] = Field(default_factory=list)
    # paths outside the workspace the tool may write when sandboxed, beside its own folders
    writable: list[str] = Field(default_factory=list)


@dataclass
class Usage:
    text: str = ""
    cost_usd: float | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    error: str = ""  # the tool's own report that it failed (an API error, an outage)


def _message(value: Any) -> str:
    """The message of an error the tool reported as a string or as {"message": ...}."""
    if isinstance(value, dict):
        inner = value.get("message", value.get("error"))
        return _message(inner) if inner is not None else json.dumps(value)[:REASON_CHARS]
    return str(value or "").strip()


@dataclass(frozen=True)
class Preset:
    tool: str
    install: str
    build: Callable[[str, AgentOptions, list[str]], str]
    parse: Callable[[str], Usage]
    # What `network = "allow"` lets the tool reach when `allow_hosts` is left out: its
    # model's API (none for a tool that talks to whichever model it is given).
    hosts: tuple[str, ...] = ()


def _json_objects(text: str) -> list[dict[str, Any]]:
    """The JSON objects in a tool's stdout: the whole text, or one per line."""
    try:
        whole = json.loads(text)
        return [whole] if isinstance(whole, dict) else [o for o in whole if isinstance(o, dict)]
    except (json.JSONDecodeError, TypeError):
        pass
    found = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(obj, dict):
                found.append(obj)
    return found


def _text(path: Path) -> str:
    """A log the tool wrote (capped in size by `run_command`), as text."""
    try:
        return path.read_bytes().decode("utf-8", errors="replace")
    except OSError:
        return ""


def _model(options: AgentOptions, flag: str) -> str:
    return f" {flag} {shlex.quote(options.model)}" if options.model else ""


def _extra(options: AgentOptions) -> str:
    return "".join(f" {shlex.quote(a)}" for a in options.extra_args)


# -- Claude Code --------------------------------------------------------------------------


def _claude(exe: str, options: AgentOptions, files: list[str]) -> str:
    return (
        f"{shlex.quote(exe)} -p {PROMPT} --output-format json --permission-mode acceptEdits"
        f" --max-turns {options.max_turns}"
        " --disallowedTools 'Bash(git commit:*)' 'Bash(git push:*)' 'Bash(git reset:*)'"
        f"{_model(options, '--model')}{_extra(options)}"
    )


def _parse_claude(stdout: str) -> Usage:
    usage = Usage()
    for obj in _json_objects(stdout):
        if obj.get("type") not in (None, "result"):
            continue
        usage.text = str(obj.get("result") or usage.text)
        if obj.get("is_error") is True:  # API errors (overloaded, rate limit, auth), exit 0
            said = _message(obj.get("result") or obj.get("error"))
            usage.error = said or str(obj.get("subtype") or "an error without a message")
        cost = obj.get("total_cost_usd", obj.get("cost_usd"))
        if isinstance(cost, int | float):
            usage.cost_usd = float(cost)
        tokens = obj.get("usage")
        if isinstance(tokens, dict):
            usage.tokens_in = int(
                (tokens.get("input_tokens") or 0)
                + (tokens.get("cache_creation_input_tokens") or 0)
                + (tokens.get("cache_read_input_tokens") or 0)
            )
            usage.tokens_out = int(tokens.get("output_tokens") or 0)
    return usage


# -- Codex --------------------------------------------------------------------------------


def _codex(exe: str, options: AgentOptions, files: list[str]) -> str:
    return (
        f"{shlex.quote(exe)} exec --json --full-auto --skip-git-repo-check"
        f"{_model(options, '--model')}{_extra(options)} {PROMPT}"
    )


def _parse_codex(stdout: str) -> Usage:
    usage = Usage()
    tokens_in = tokens_out = 0
    seen = False
    errors: list[str] = []
    turn_failed = turn_completed = False
    for obj in _json_objects(stdout):
        event = obj if obj.get("type") is not None else obj.get("msg")
        if not isinstance(event, dict):
            event = {}
        kind = event.get("type")
        if kind == "turn.failed":
            turn_failed = True
            errors.append(_message(event.get("error")) or "the turn failed")
        elif kind == "error":
            errors.append(_message(event.get("message") or event.get("error")))
        elif kind in ("turn.completed", "task_complete"):
            turn_completed = True
        found = obj.get("usage")
        msg = obj.get("msg")
        if found is None and isinstance(msg, dict):
            found = msg.get("usage")
        if isinstance(found, dict):
            seen = True
            tokens_in += int(found.get("input_tokens") or 0)
            tokens_out += int(found.get("output_tokens") or 0)
        item = obj.get("item")
        if isinstance(item, dict) and item.get("type") in ("agent_message", "assistant_message"):
            usage.text = str(item.get("text") or usage.text)
    if seen:
        usage.tokens_in, usage.tokens_out = tokens_in, tokens_out
    # An error event the tool recovered from (a retried stream) is followed by a completed
    # turn; a failed turn, or errors and no completed turn, is a failed proposal.
    if turn_failed or (errors and not turn_completed):
        usage.error = next((e for e in reversed(errors) if e), "the turn failed")
    return usage


# -- aider --------------------------------------------------------------------------------


def _aider(exe: str, options: AgentOptions, files: list[str]) -> str:
    listed = "".join(f" {shlex.quote(f)}" for f in files)
    return (
        f"{shlex.quote(exe)} --yes-always --no-auto-commits --no-dirty-commits"
        " --no-check-update --no-show-model-warnings --no-pretty --no-stream"
        f' --message-file "$AUTORESEARCH_PROMPT_FILE"{_model(options, "--model")}'
        f"{_extra(options)}{listed}"
    )


_AIDER_TOKENS = re.compile(
    r"Tokens:\s*([\d.]+)([kKmM]?)\s*sent,\s*([\d.]+)([kKmM]?)\s*received"
    r"(?:\.\s*Cost:\s*\$([\d.]+)\s*message)?"
)


def _scaled(number: str, suffix: str) -> int:
    factor = {"k": 1e3, "m": 1e6}.get(suffix.lower(), 1)
    return round(float(number) * factor)


AIDER_CHATTER = (
    "Tokens:",
    "Applied edit",
    "Aider v",
    "Model:",
    "Git repo:",
    "Repo-map:",
    "Added ",
    "Cost:",
    "Main model:",
    "Weak model:",
    "Use /help",
    "https://",
)


_AIDER_ERROR = re.compile(r"\b\w*(Error|Exception)\b.*")


def _parse_aider(stdout: str) -> Usage:
    said = [
        line
        for line in stdout.splitlines()
        if line.strip() and not line.strip().startswith(AIDER_CHATTER)
    ]
    usage = Usage(text=said[0].strip() if said else "")
    matches = list(_AIDER_TOKENS.finditer(stdout))
    if matches:
        usage.tokens_in = sum(_scaled(m.group(1), m.group(2)) for m in matches)
        usage.tokens_out = sum(_scaled(m.group(3), m.group(4)) for m in matches)
        costs = [float(m.group(5)) for m in matches if m.group(5)]
        usage.cost_usd = sum(costs) if costs else None
    return usage


def _aider_error(stdout: str) -> str:
    """The last line aider printed that names an error (it prints them to stdout); used only
    when it exited non-zero, since its chatter may mention errors it fixed."""
    for line in reversed(stdout.splitlines()):
        match = _AIDER_ERROR.search(line)
        if match:
            return line.strip()
    return ""


# -- Gemini CLI ---------------------------------------------------------------------------


def _gemini(exe: str, options: AgentOptions, files: list[str]) -> str:
    return (
        f"{shlex.quote(exe)} --yolo --output-format json"
        f"{_model(options, '-m')}{_extra(options)} -p {PROMPT}"
    )


def _parse_gemini(stdout: str) -> Usage:
    usage = Usage()
    for obj in _json_objects(stdout):
        usage.text = str(obj.get("response") or usage.text)
        if obj.get("error"):
            usage.error = _message(obj.get("error"))
        stats = obj.get("stats")
        models = stats.get("models") if isinstance(stats, dict) else None
        if isinstance(models, dict):
            tokens_in = tokens_out = 0
            for stats in models.values():
                tokens = stats.get("tokens") if isinstance(stats, dict) else None
                if isinstance(tokens, dict):
                    tokens_in += int(tokens.get("prompt") or 0)
                    tokens_out += int(tokens.get("candidates") or 0)
            usage.tokens_in, usage.tokens_out = tokens_in, tokens_out
    return usage


PRESETS: dict[str, Preset] = {
    "claude": Preset(
        "claude",
        "npm install -g @anthropic-ai/claude-code",
        _claude,
        _parse_claude,
        ("api.anthropic.com",),
    ),
    "codex": Preset(
        "codex",
        "npm install -g @openai/codex",
        _codex,
        _parse_codex,
        ("api.openai.com", "chatgpt.com", "auth.openai.com"),
    ),
    "aider": Preset(
        "aider", "python -m pip install aider-install && aider-install", _aider, _parse_aider
    ),
    "gemini": Preset(
        "gemini",
        "npm install -g @google/gemini-cli",
        _gemini,
        _parse_gemini,
        (
            "generativelanguage.googleapis.com",
            "cloudcode-pa.googleapis.com",
            "oauth2.googleapis.com",
        ),
    ),
}


class AgentProposer(Proposer):
    def __init__(self, kind: str, options: AgentOptions, setup: ProposerSetup) -> None:
        self.preset = PRESETS[kind]
        self.kind = kind
        self.options = options
        self.child = setup.child
        self.confinement = setup.confinement
        self.confined = setup.confinement.isolating
        self.hidden = PathMatcher(list(setup.hidden))
        self.network = proposer_network(
            options, setup.confinement, setup.source, self.preset.hosts, f"the {kind} agent"
        )
        exe = options.executable or self.preset.tool
        found = shutil.which(exe)
        if found is None:
            raise AutoresearchError(
                f"{self.preset.tool} (the '{kind}' proposer) is not installed or not on PATH; "
                f"install it with `{self.preset.install}`, or set proposer.executable."
            )
        self.exe = found

    def preflight(self, workspace: Path, offline: bool) -> str:
        if not os.access(self.exe, os.X_OK):
            raise AutoresearchError(f"{self.exe} (the '{self.kind}' proposer) is not executable.")
        model = f", model {self.options.model}" if self.options.model else ""
        return f"{self.kind}, runs {self.exe}{model}"

    def reach(self) -> tuple[ProposerNetwork, ...]:
        return (self.network,)

    def command(self, files: list[str]) -> str:
        return self.preset.build(self.exe, self.options, files)

    def propose(self, ctx: ProposalContext) -> Proposal:
        files: list[str] = []
        if self.preset.tool == "aider":  # aider edits only the files it is given
            scope, harness = PathMatcher(ctx.scope), PathMatcher(ctx.harness)
            files = [
                f
                for f in workspace_files(ctx.workspace)
                if scope.matches(f) and not harness.matches(f) and not self.hidden.matches(f)
            ]
        stem = ctx.log_dir / f"{ctx.iteration:04d}-proposer"
        confined = self.confinement.prepare(
            ctx.workspace,
            ctx.env,
            readonly=(ctx.prompt_file, Path(self.exe).resolve()),
            writable=(*AGENT_STATE.get(self.kind, ()), *self.options.writable),
            pass_env=self.options.pass_env,
            network=self.network,
            log=ctx.log_dir / f"{stem.name}-network.log",
        )
        with confined:
            result = run_command(
                self.command(files),
                cwd=ctx.workspace,
                env=confined.env,
                timeout=self.options.timeout,
                stdout_path=stem.with_suffix(".out"),
                stderr_path=stem.with_suffix(".err"),
                child=self.child,
                wrap=confined.wrap,
                launch=confined.launch,
            )
        stdout, stderr = result.stdout_text(), _text(result.stderr_path)
        usage = self.preset.parse(stdout)
        description = description_of(usage.text) if usage.text else ""
        proposal = Proposal(
            description=clean_text(description, DESCRIPTION_CHARS),
            cost_usd=usage.cost_usd,
            tokens_in=usage.tokens_in,
            tokens_out=usage.tokens_out,
            output_path=str(result.stdout_path),
        )
        note_refusals(proposal, confined.close(), f"{stem.name}-network.log")
        tool = self.preset.tool
        error = usage.error or self.preset.parse(stderr).error
        if error and not result.timed_out and result.returncode == 0:
            # The tool says it failed but exits 0 (claude's is_error, codex's turn.failed):
            # a failed proposal, never "no change".
            proposal.failed = True
            proposal.reason = clean_text(f"{tool} reported an error: {error}", REASON_CHARS)
            return proposal
        if not error and tool == "aider":
            error = _aider_error(stdout) or _aider_error(stderr)
        return note_failure(proposal, result, tool, self.options.timeout, error)

    def observe(self, outcome: Outcome) -> None:
        return None

    def close(self) -> None:
        return None
