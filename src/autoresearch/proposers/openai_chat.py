"""`kind = "openai"`: a chat model behind an OpenAI-compatible API answers with edit blocks.

The prompt holds the goal, the instructions, the files in scope (trimmed to the context
budget, with a marker), the recent attempts with their outcome and a diff summary, what
worked, what failed, and the open ideas the model noted earlier. The engine, not the model,
decides what is kept; the model never sees the harness, the ledger or a judge's rubric.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from autoresearch.attempt import Status, num
from autoresearch.gitcmd import workspace_files
from autoresearch.isolation.owned import write_text
from autoresearch.llm import ChatClient, ChatSettings, LLMError, api_key
from autoresearch.proposers.base import (
    DESCRIPTION_CHARS,
    REASON_CHARS,
    STRATEGY_ADVICE,
    AttemptNote,
    Outcome,
    Proposal,
    ProposalContext,
    Proposer,
    ProposerSetup,
    clean_text,
)
from autoresearch.proposers.edits import (
    EditRefused,
    description_of,
    ideas_of,
    parse_blocks,
    plan_edits,
    write_edits,
)
from autoresearch.scope import PathMatcher

CHARS_PER_TOKEN = 4  # a conservative average for code and English
REPLY_SHARE = 0.25  # of the context budget, kept free for the answer
IDEAS_KEPT = 12
PING = "Reply with the word OK."  # what `check` sends to see that the endpoint answers
PING_TIMEOUT = 30.0

SYSTEM = """\
You improve a code base one change at a time. An engine measures each change with a fixed
metric and keeps it only if the number gets better; otherwise it is rolled back.

Answer with:
1. A first line `DESCRIPTION: <one line saying what you change and why>`.
2. One or more edit blocks, each exactly in this form:

path/to/file.py
<<<<<<< SEARCH
exact existing lines, copied character for character from the file
=======
the lines that replace them
>>>>>>> REPLACE

An empty SEARCH section creates a new file. Only files in scope may be edited. Each SEARCH
text must appear exactly once in its file. Keep the change focused: one idea per attempt.
3. Optionally, lines `IDEA: <an idea worth trying later>`.
"""


class OpenAIOptions(ChatSettings):
    max_context_tokens: int = Field(default=60000, ge=1000)
    history: int = Field(default=20, ge=0, le=500)


def _scope_files(workspace: Path, scope: PathMatcher, never: PathMatcher) -> list[str]:
    return [p for p in workspace_files(workspace) if scope.matches(p) and not never.matches(p)]


def _read(path: Path, limit: int) -> str | None:
    """A scope file's text, at most `limit` bytes of it (more could not fit the prompt): a
    large file is never held whole."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(limit)
    except OSError:
        return None
    if b"\0" in data[:8192]:
        return None
    return data.decode("utf-8", errors="replace")


def _trim(text: str, budget: int) -> str:
    if len(text) <= budget:
        return text
    lines = text.splitlines(keepends=True)
    kept: list[str] = []
    size = 0
    for line in lines:
        if size + len(line) > budget:
            break
        kept.append(line)
        size += len(line)
    dropped = len(lines) - len(kept)
    return "".join(kept) + f"[... {dropped} more lines trimmed to fit the context budget ...]\n"


def _history_lines(history: list[AttemptNote]) -> tuple[list[str], list[str], list[str]]:
    table, worked, failed = [], [], []
    for note in history:
        if note.iteration == 0:
            continue
        files = ", ".join(note.files[:4]) or "-"
        line = (
            f"- #{note.iteration} {note.status}: metric {num(note.metric)}"
            f" (delta {num(note.delta)}); {note.description or 'no description'}"
            f"; changed {note.diffstat or files}"
        )
        if note.reason and note.status not in (Status.KEEP, Status.DISCARD):
            line += f"; reason: {note.reason[:160]}"
        table.append(line)
        if note.status == Status.KEEP:
            worked.append(f"- {note.description} (metric {num(note.metric)})")
        elif note.status not in (Status.NO_CHANGE, Status.INTERRUPTED):
            failed.append(f"- {note.description or files}: {note.status}")
    return table, worked, failed


def build_messages(
    ctx: ProposalContext, files: dict[str, str], ideas: list[str], options: OpenAIOptions
) -> list[dict[str, str]]:
    better = "lower" if ctx.direction == "minimize" else "higher"
    head = [
        f"# Goal\n\n{ctx.goal or 'Improve the metric.'}\n",
        f"# Metric\n\n`{ctx.metric_command}`; {better} is better. Baseline {num(ctx.baseline)},"
        f" best so far {num(ctx.best)}. This is attempt {ctx.iteration}.\n",
    ]
    if ctx.instructions.strip():
        head.append(f"# Instructions\n\n{ctx.instructions.strip()}\n")
    head.append(
        "# Files you may edit (scope)\n\n" + "\n".join(f"- `{s}`" for s in ctx.scope) + "\n"
    )
    recent = ctx.history[-options.history :] if options.history else []
    table, worked, failed = _history_lines(recent)
    tail: list[str] = []
    if table:
        tail.append("# Recent attempts\n\n" + "\n".join(table) + "\n")
    if worked:
        tail.append("# What worked\n\n" + "\n".join(worked) + "\n")
    if failed:
        tail.append("# What did not work\n\n" + "\n".join(failed[-10:]) + "\n")
    if ctx.memory:
        memory = ctx.memory.split("\n", 1)[1] if ctx.memory.startswith("# ") else ctx.memory
        tail.append("# Research memory (measured by the engine)\n\n" + memory.strip() + "\n")
    ideas = [*ideas, *(i for i in ctx.ideas if i not in ideas)]
    if ideas:
        tail.append("# Open ideas\n\n" + "\n".join(f"- {i}" for i in ideas) + "\n")
    if ctx.strategy:
        tail.append(f"# Strategy now: {ctx.strategy}\n\n{STRATEGY_ADVICE[ctx.strategy]}\n")
    if ctx.hypothesis:
        tail.append(f"# The hypothesis to try now\n\n{ctx.hypothesis}\n")
    tail.append("Propose the next change now.\n")
    budget = int(options.max_context_tokens * (1 - REPLY_SHARE) * CHARS_PER_TOKEN)
    budget -= len(SYSTEM) + sum(len(p) for p in head) + sum(len(p) for p in tail)
    budget = max(budget, 0)
    sections: list[str] = []
    total = sum(len(t) for t in files.values())
    for name, text in files.items():
        share = budget if total <= budget else int(budget * len(text) / max(total, 1))
        body = _trim(text, share) if total > budget else text
        sections.append(
            f"## {name}\n\n```\n{body}```\n"
            if body.endswith("\n")
            else f"## {name}\n\n```\n{body}\n```\n"
        )
    files_part = "# Current files\n\n" + ("\n".join(sections) if sections else "(none yet)\n")
    user = "\n".join([*head, files_part, *tail])
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


class ChatProposer(Proposer):
    # Writes files only through the engine's own code: the user's checkout is safe.
    runs_commands = False

    def __init__(self, options: OpenAIOptions, setup: ProposerSetup) -> None:
        self.options = options
        self.key = api_key(options, setup.source, "proposer", setup.environ)
        self.client = ChatClient(options, self.key)
        self.scope = PathMatcher(list(setup.scope))
        self.harness = PathMatcher(list(setup.harness))
        # Never shown nor edited: the harness and the judge's rubric.
        self.never = PathMatcher([*setup.harness, *setup.hidden])
        self.ideas_path = setup.state_dir / "ideas.md"

    def preflight(self, workspace: Path, offline: bool) -> str:
        """One short request: the endpoint answers, the key and the model are accepted."""
        where = f"openai, model {self.options.model} at {self.options.base_url}"
        if offline:
            return f"{where} (not contacted: --offline)"
        quick = self.options.model_copy(
            update={"request_timeout": min(self.options.request_timeout, PING_TIMEOUT)}
        )
        reply = ChatClient(quick, self.key).complete([{"role": "user", "content": PING}])
        return f"{where} answered in {reply.seconds:.1f} s"

    def _ideas(self) -> list[str]:
        try:
            text = self.ideas_path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        return [line[2:].strip() for line in text.splitlines() if line.startswith("- ")]

    def _remember(self, ideas: list[str]) -> None:
        merged = [i for i in self._ideas() if i not in ideas] + ideas
        merged = merged[-IDEAS_KEPT:]
        self.ideas_path.parent.mkdir(parents=True, exist_ok=True)
        self.ideas_path.write_text("".join(f"- {i}\n" for i in merged), encoding="utf-8")

    def propose(self, ctx: ProposalContext) -> Proposal:
        files: dict[str, str] = {}
        # UTF-8 takes at most 4 bytes a character: more than this never reaches the prompt.
        limit = int(self.options.max_context_tokens * CHARS_PER_TOKEN * 4)
        for name in _scope_files(ctx.workspace, self.scope, self.never):
            text = _read(ctx.workspace / name, limit)
            if text is not None:
                files[name] = text
        messages = build_messages(ctx, files, self._ideas(), self.options)
        stem = ctx.log_dir / f"{ctx.iteration:04d}-proposer"
        write_text(stem.with_suffix(".request.md"), "\n\n".join(m["content"] for m in messages))
        try:
            reply = self.client.complete(messages)
        except LLMError as exc:
            return Proposal(failed=True, reason=clean_text(str(exc), REASON_CHARS))
        out = stem.with_suffix(".out")
        write_text(out, reply.text)
        proposal = Proposal(
            description=clean_text(description_of(reply.text), DESCRIPTION_CHARS),
            cost_usd=reply.cost_usd,
            tokens_in=reply.tokens_in,
            tokens_out=reply.tokens_out,
            output_path=str(out),
        )
        ideas = ideas_of(reply.text)
        if ideas:
            self._remember(ideas)
        try:
            planned = plan_edits(parse_blocks(reply.text), ctx.workspace, self.scope, self.never)
        except EditRefused as exc:
            proposal.refused = True
            proposal.reason = clean_text(str(exc), REASON_CHARS)
            return proposal
        write_edits(planned)
        return proposal

    def observe(self, outcome: Outcome) -> None:
        return None

    def close(self) -> None:
        return None
