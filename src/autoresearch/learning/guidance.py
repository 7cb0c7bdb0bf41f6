"""What the engine learned, handed to the next proposal: the research memory, the strategy
when stuck, the hypothesis to try, the ideas backlog; and, after each attempt, the memory
file and the ideas the proposer printed.

Everything is derived from the ledger and files the engine owns (the backlog being the one
file it writes in the user's checkout); nothing is taken from a proposer's claims but the
ideas it offers, which are only ever suggestions shown to the next proposal.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from autoresearch.attempt import AttemptRecord
from autoresearch.config import Campaign
from autoresearch.learning.escalation import Step, step
from autoresearch.learning.ideas import (
    IDEAS_SHOWN,
    append_ideas,
    ideas_in_output,
    mark_shown,
    next_hypothesis,
    read_backlog,
    shown_hypothesis,
)
from autoresearch.learning.memory import MEMORY_FILE, memory_text, write_memory


@dataclass(frozen=True)
class Guidance:
    """What the next attempt is given beyond the goal and the history."""

    memory: str = ""
    step: Step = field(default_factory=lambda: Step(0, None, 0, None))
    hypothesis: str | None = None
    ideas: tuple[str, ...] = ()

    @property
    def strategy(self) -> str | None:
        return self.step.strategy

    def prompt_section(self) -> str:
        """Markdown sections for a prompt, most binding first."""
        lines: list[str] = []
        if self.hypothesis:
            lines += [
                "## The hypothesis to try in this attempt",
                "",
                self.hypothesis,
                "",
                "Make the change that tests this hypothesis, and nothing else.",
                "",
            ]
        if self.step.breaker:
            lines += [
                "## Stop repeating yourself",
                "",
                "The last attempts all ended the same way: "
                + self.step.breaker[:600].replace("\n", " "),
                "Do something different this time.",
                "",
            ]
        if self.strategy:
            lines += [f"## Strategy now: {self.strategy}", "", self.step.advice(), ""]
        if self.memory:
            body = self.memory.split("\n", 1)[1] if self.memory.startswith("# ") else self.memory
            lines += ["## Research memory (from the ledger)", "", body.strip(), ""]
        if self.ideas:
            lines += ["## Ideas backlog", ""]
            lines += [f"- {i}" for i in self.ideas]
            lines.append("")
        lines += [
            "## Ideas for later",
            "",
            "To suggest ideas worth trying in later attempts, print lines that start with "
            "`IDEA:`; the engine adds them to the ideas backlog.",
            "",
        ]
        return "\n".join(lines)


class Guide:
    """Builds each attempt's guidance and records what an attempt taught."""

    def __init__(self, campaign: Campaign) -> None:
        self.campaign = campaign
        cfg = campaign.config
        self.backlog: Path | None = campaign.root / cfg.ideas if cfg.ideas else None
        self.proposers = max(len(cfg.proposers), 1)
        # The ledger only grows: the memory of its first n records is made once, though the
        # file, the proposer's outcome and the next prompt all ask for it.
        self._memory: tuple[int, int | None, str] | None = None
        # The agent-driven mode (a proposer that never sees a prompt): an attempt carries a
        # hypothesis only when `start` or `step` showed it to the agent before (`offer`).
        self.only_shown = False

    def next(self, records: Sequence[AttemptRecord]) -> Guidance:
        cfg = self.campaign.config
        where = step(records, cfg.stop.escalate_after, cfg.stop.breaker_after, self.proposers)
        ideas = read_backlog(self.backlog)[-IDEAS_SHOWN:] if self.backlog else []
        state_dir = self.campaign.state_dir
        hypothesis = (
            shown_hypothesis(state_dir, records)
            if self.only_shown
            else next_hypothesis(state_dir, records)
        )
        return Guidance(
            memory=self.memory(records),
            step=where,
            hypothesis=hypothesis,
            ideas=tuple(ideas),
        )

    def memory(self, records: Sequence[AttemptRecord]) -> str:
        key = (len(records), records[-1].iteration if records else None)
        if self._memory is None or self._memory[:2] != key:
            cfg = self.campaign.config
            text = memory_text(cfg.name, str(cfg.metric.direction), records)
            self._memory = (*key, text)
        return self._memory[2]

    def learn(self, records: Sequence[AttemptRecord], output_path: str | None) -> list[str]:
        """After an attempt: rewrite memory.md, add the ideas the proposer printed to the
        backlog. Returns what to tell the user."""
        write_memory(self.campaign.state_dir, self.memory(records))
        if self.backlog is None or not records:
            return []
        ideas = ideas_in_output(output_path)
        if not ideas:
            return []
        try:
            added = append_ideas(self.backlog, ideas, records[-1].iteration)
        except OSError as exc:
            # A backlog that cannot be written loses suggestions, not the campaign.
            return [f"the ideas backlog cannot be written ({exc}); ideas not kept"]
        return [f"idea added to the backlog: {idea}" for idea in added]


@dataclass(frozen=True)
class Offer:
    """What the agent-driven mode shows the agent beside a verdict: the hypothesis its next
    change should test, and the research memory file."""

    hypothesis: str | None
    memory_file: Path

    def to_json(self) -> dict[str, str | None]:
        return {"hypothesis": self.hypothesis, "memory_file": str(self.memory_file)}

    def lines(self) -> list[str]:
        out = []
        if self.hypothesis:
            out.append(
                f"hypothesis to test in your next change: {self.hypothesis} (make the change "
                "that tests it, and nothing else; the next step is recorded against it)"
            )
        out.append(f"research memory: {self.memory_file} (what worked, what failed and why)")
        return out


def offer(campaign: Campaign, records: Sequence[AttemptRecord], more: bool) -> Offer:
    """For `start` and `step`: the next untried hypothesis, noted as shown so that the step
    that follows carries it (none when `more` is false: no step follows, or the next one is
    a fix of a candidate sent back), and the memory file, written if there is none yet."""
    state_dir = campaign.state_dir
    hypothesis = next_hypothesis(state_dir, records) if more else None
    mark_shown(state_dir, hypothesis)
    path = state_dir / MEMORY_FILE
    if not path.is_file():
        cfg = campaign.config
        write_memory(state_dir, memory_text(cfg.name, str(cfg.metric.direction), records))
    return Offer(hypothesis, path)
