"""The ideas backlog and the hypothesis queue.

The backlog is a markdown list in the user's checkout (`autoresearch.ideas.md`, or the file
`ideas` names): the user writes ideas there, the proposer reads them in its prompt and adds
its own by printing `IDEA: ...` lines, which the engine appends (a confined proposer cannot
write the checkout, and must not: only the engine writes this one file there).

The hypothesis queue is what `run --hypotheses F` added: one is popped per attempt and put
in the prompt as the thing to try. The queue is kept in `.autoresearch/<name>/hypotheses.jsonl`;
which ones were tried is read from the ledger (each record names its hypothesis), so a
resumed campaign goes on with the next one. In the agent-driven mode there is no prompt:
`start` and `step` show the agent the next one, and only a step made after it was shown
carries it.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from autoresearch.attempt import AttemptRecord, Status
from autoresearch.config import Campaign
from autoresearch.errors import AutoresearchError, ConfigError
from autoresearch.isolation.owned import append_own, write_text
from autoresearch.proposers.base import IDEA_LINE as _IDEA
from autoresearch.store.ledger import StateFile
from autoresearch.workspace import ensure_state_dir

QUEUE_FILE = "hypotheses.jsonl"
IDEA_CHARS = 300
IDEAS_SHOWN = 20  # newest backlog entries in a prompt
OUTPUT_READ = 1 << 20  # bytes of a proposer's output searched for IDEA lines
IDEAS_PER_ATTEMPT = 5
BACKLOG_READ = 1 << 20  # bytes of the backlog read

_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+(?:\[[ xX]\]\s+)?(.+?)\s*$")
_ORIGIN = re.compile(r"\s*\(attempt \d+\)$")


# Control characters (C0, DEL, C1): the backlog is a file of the user's checkout, which
# `cat` prints raw, so an escape sequence a proposer wrote must never reach it.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _clean(text: str) -> str:
    return " ".join(_CONTROL.sub("", text).split())[:IDEA_CHARS]


def _key(idea: str) -> str:
    return _ORIGIN.sub("", idea).strip().lower()


# -- the backlog ----------------------------------------------------------------------------


def read_backlog(path: Path) -> list[str]:
    """The backlog's list items, in order ("" when there is no file)."""
    try:
        with path.open("rb") as handle:
            text = handle.read(BACKLOG_READ).decode("utf-8", errors="replace")
    except OSError:
        return []
    items = []
    for line in text.splitlines():
        found = _ITEM.match(line)
        if found:
            items.append(_clean(found.group(1)))
    return [i for i in items if i]


def ideas_in_output(path: str | None) -> list[str]:
    """`IDEA:` lines a proposer printed (its saved output), at most a few per attempt."""
    if not path:
        return []
    try:
        with open(path, "rb") as handle:
            data = handle.read(OUTPUT_READ)
    except OSError:
        return []
    text = data.decode("utf-8", errors="replace")
    found: list[str] = []
    for match in _IDEA.finditer(text):
        idea = _clean(match.group(1).strip("`*_ "))
        if idea and _key(idea) not in {_key(f) for f in found}:
            found.append(idea)
    return found[:IDEAS_PER_ATTEMPT]


def append_ideas(path: Path, ideas: Sequence[str], iteration: int | None) -> list[str]:
    """Add the ideas the backlog does not hold yet, tagged with the attempt whose proposer
    had them (none for an idea a person or an agent added); returns those added."""
    known = {_key(i) for i in read_backlog(path)}
    new = []
    for idea in ideas:
        if _key(idea) not in known:
            known.add(_key(idea))
            new.append(idea)
    if not new:
        return []
    if path.is_symlink() or (path.exists() and not path.is_file()):
        raise OSError(f"{path.name} is not a regular file; the engine writes no link")
    try:
        before = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        before = "# Ideas backlog\n\nOne idea per list item; the proposer reads them.\n\n"
    if before and not before.endswith("\n"):
        before += "\n"
    tag = "" if iteration is None else f" (attempt {iteration})"
    added = "".join(f"- {idea}{tag}\n" for idea in new)
    # Written aside and renamed: a kill mid-write never leaves the user's backlog cut short.
    scratch = path.with_name(f".{path.name}.autoresearch-tmp")
    write_text(scratch, before + added)
    os.replace(scratch, path)
    return new


# -- the hypothesis queue -------------------------------------------------------------------


def parse_hypotheses(path: Path) -> list[str]:
    """Hypotheses from a markdown list (`- try X`) or JSONL (`{"hypothesis": "try X"}` or a
    JSON string per line). Raises ConfigError naming the file and what to fix."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot be read ({exc}); check the --hypotheses path.") from None
    lines = text.splitlines()
    first = next((ln.strip() for ln in lines if ln.strip()), "")
    items: list[str] = []
    if path.suffix == ".jsonl" or first.startswith(("{", '"')):
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except json.JSONDecodeError:
                raise ConfigError(
                    f"{path}: line {number} is not JSON; write one object per line like "
                    '{"hypothesis": "try X"}.'
                ) from None
            if isinstance(value, dict):
                value = value.get("hypothesis", value.get("idea", value.get("text")))
            if not isinstance(value, str) or not value.strip():
                raise ConfigError(
                    f'{path}: line {number} has no "hypothesis" text; write one object per '
                    'line like {"hypothesis": "try X"}.'
                )
            items.append(_clean(value))
    else:
        for line in lines:
            found = _ITEM.match(line)
            if found and _clean(found.group(1)):
                items.append(_clean(found.group(1)))
    if not items:
        raise ConfigError(
            f"{path}: holds no hypotheses; write one per markdown list item ('- try X') or "
            'one JSON object per line ({"hypothesis": "try X"}).'
        )
    return items


def queued(state_dir: Path) -> list[str]:
    try:
        text = (state_dir / QUEUE_FILE).read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    out = []
    for line in text.splitlines():
        try:
            value = json.loads(line)
        except json.JSONDecodeError:
            continue  # a torn last line: the append was cut short
        if isinstance(value, dict) and isinstance(value.get("hypothesis"), str):
            out.append(value["hypothesis"])
    return out


def queue_hypotheses(state_dir: Path, items: Sequence[str]) -> list[str]:
    """Append the hypotheses not queued yet; returns those added."""
    have = set(queued(state_dir))
    new = [h for h in dict.fromkeys(items) if h not in have]
    if new:
        state_dir.mkdir(parents=True, exist_ok=True)
        lines = "".join(json.dumps({"hypothesis": h}, ensure_ascii=False) + "\n" for h in new)
        with append_own(state_dir / QUEUE_FILE) as handle:
            handle.write(lines.encode("utf-8"))
    return new


def queue_file(campaign: Campaign, path: Path) -> list[str]:
    """Queue the hypotheses of `path` for `campaign`; returns those not queued before."""
    items = parse_hypotheses(path)
    ensure_state_dir(campaign.root)
    return queue_hypotheses(campaign.state_dir, items)


def tried(records: Sequence[AttemptRecord]) -> set[str]:
    """Hypotheses an attempt was seen through with (an interrupted one is tried again)."""
    return {r.hypothesis for r in records if r.hypothesis and r.status is not Status.INTERRUPTED}


def next_hypothesis(state_dir: Path, records: Sequence[AttemptRecord]) -> str | None:
    done = tried(records)
    return next((h for h in queued(state_dir) if h not in done), None)


# In the agent-driven mode the agent makes the change itself: a hypothesis is its to test
# only once `start` or `step` has shown it. state.json keeps the one shown last.
SHOWN_KEY = "hypothesis_shown"


def mark_shown(state_dir: Path, hypothesis: str | None) -> None:
    """Note the hypothesis the agent was just shown (None: it was shown none)."""
    state = StateFile(state_dir)
    if state.read().get(SHOWN_KEY) != hypothesis:
        state.update(True, **{SHOWN_KEY: hypothesis})


def shown_hypothesis(state_dir: Path, records: Sequence[AttemptRecord]) -> str | None:
    """The hypothesis the agent was shown before this step, while it is still untried:
    the step that follows is the one that tests it."""
    shown = StateFile(state_dir).read().get(SHOWN_KEY)
    if not isinstance(shown, str) or shown in tried(records):
        return None
    return shown if shown in queued(state_dir) else None


@dataclass(frozen=True)
class Entry:
    """One hypothesis or backlog idea, with how it came out."""

    source: str  # "hypothesis" or "backlog"
    text: str
    outcome: str  # "pending", or the status of the attempt that tried it
    iteration: int | None = None
    metric: float | None = None
    delta: float | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "source": self.source,
            "text": self.text,
            "outcome": self.outcome,
            "iteration": self.iteration,
            "metric": self.metric,
            "delta": self.delta,
        }


def entries(state_dir: Path, backlog: Path | None, records: Sequence[AttemptRecord]) -> list[Entry]:
    """Every queued hypothesis and backlog idea with its outcome: the attempt that tried a
    hypothesis; for a backlog idea, the attempt whose description or hypothesis is it."""
    by_hypothesis: dict[str, AttemptRecord] = {}
    for r in records:
        if r.hypothesis and r.status is not Status.INTERRUPTED:
            by_hypothesis.setdefault(r.hypothesis, r)
    out = []
    for h in queued(state_dir):
        out.append(_entry("hypothesis", h, by_hypothesis.get(h)))
    if backlog is not None:
        for idea in read_backlog(backlog):
            key = _key(idea)
            match = next(
                (
                    x
                    for x in records
                    if x.status is not Status.INTERRUPTED
                    and key in {_key(x.hypothesis or ""), _key(x.description)}
                ),
                None,
            )
            out.append(_entry("backlog", _ORIGIN.sub("", idea), match))
    return out


def _entry(source: str, text: str, r: AttemptRecord | None) -> Entry:
    if r is None:
        return Entry(source, text, "pending")
    return Entry(source, text, str(r.status), r.iteration, r.metric, r.delta)


def listing(root: Path, config: Path | None) -> list[Entry]:
    """`autoresearch ideas`: the campaign of `config` (or the only one), its queue, its
    backlog and the ledger's outcomes."""
    from autoresearch.config import load_campaign
    from autoresearch.store.ledger import Ledger
    from autoresearch.store.locate import find_state_dir

    state_dir = find_state_dir(root, config)
    backlog: Path | None = root / "autoresearch.ideas.md"
    try:
        cfg = load_campaign(root, config).config
        backlog = root / cfg.ideas if cfg.ideas else None
    except AutoresearchError:
        pass  # no config: the default backlog, if there is one
    return entries(state_dir, backlog, Ledger(state_dir).read())


# -- the MCP tool -----------------------------------------------------------------------------


class IdeasResult(BaseModel):
    added: list[str]  # what `add` put in the backlog ("" when it held it already)
    ideas: list[dict[str, Any]]  # source, text, outcome, iteration, metric, delta


def mcp_ideas(tools: Any) -> Callable[..., IdeasResult]:
    """The `ideas` tool of `autoresearch mcp`: the backlog and the hypotheses with their
    outcomes; `add` appends an idea to the backlog first (written by the engine, as with
    `IDEA:` lines)."""
    root: Path = tools.root
    config: Path | None = tools.config

    def ideas(add: str = "") -> IdeasResult:
        """The ideas backlog and the hypothesis queue, each with how it came out; pass
        `add` to put one more idea in the backlog (what to try next)."""
        added: list[str] = []
        idea = _clean(add)
        if idea:
            from autoresearch.config import load_campaign

            cfg = load_campaign(root, config).config
            if not cfg.ideas:
                raise AutoresearchError(
                    'this campaign has no ideas backlog (ideas = ""); set `ideas` in its config.'
                )
            # Added by the agent, not by a proposer's attempt: no attempt tag.
            added = append_ideas(root / cfg.ideas, [idea], None)
        return IdeasResult(added=added, ideas=[e.to_json() for e in listing(root, config)])

    return ideas
