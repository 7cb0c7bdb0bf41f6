"""The text a proposer is given: goal, instructions, scope and what earlier attempts taught."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from autoresearch.attempt import AttemptRecord, Status, num, without_holdout
from autoresearch.config import Campaign
from autoresearch.isolation.owned import write_text
from autoresearch.learning.guidance import Guidance
from autoresearch.proposers.base import AttemptNote, ProposalContext
from autoresearch.store.summary import summarize

HISTORY_LIMIT = 30


def build_prompt(
    *,
    iteration: int,
    goal: str,
    instructions: str,
    scope: list[str],
    harness: list[str],
    direction: str,
    metric_command: str,
    baseline: float | None,
    best: float | None,
    history: list[AttemptNote],
    guidance: str = "",
) -> str:
    lines = [f"# Improvement campaign, attempt {iteration}", ""]
    lines += ["## Goal", "", goal or "(no goal given: improve the metric)", ""]
    better = "lower" if direction == "minimize" else "higher"
    lines += [
        "## How the result is judged",
        "",
        f"The metric command `{metric_command}` is run after your change; {better} is better.",
        f"Baseline: {num(baseline)}. Best so far: {num(best)}.",
        "A change is kept only if it makes the metric better; otherwise it is rolled back.",
        "",
    ]
    if instructions.strip():
        lines += ["## Instructions", "", instructions.strip(), ""]
    lines += ["## Files you may change, create or delete", ""]
    lines += [f"- `{pattern}`" for pattern in scope]
    lines += [
        "",
        "Changes to any other file are rolled back and the attempt is wasted.",
    ]
    if harness:
        lines += ["Never touch the evaluation harness: " + ", ".join(f"`{h}`" for h in harness)]
    lines += [
        "Make ONE focused change, do not commit, and leave the files edited in place.",
        "",
    ]
    recent = history[-HISTORY_LIMIT:]
    if recent:
        lines += ["## Earlier attempts (most recent last)", ""]
        lines += ["| # | status | metric | delta | description |", "|---|---|---|---|---|"]
        for note in recent:
            text = (note.description or "").replace("|", "/").replace("\n", " ")[:120]
            if note.diffstat:
                text = f"{text} ({note.diffstat[:80]})".strip()
            if note.reason and Status(note.status).shows_reason:
                text = f"{text} ({note.reason[:80]})".strip()
            lines.append(
                f"| {note.iteration} | {note.status} | {num(note.metric)} | "
                f"{num(note.delta)} | {text} |"
            )
        lines.append("")
        last = recent[-1]
        if Status(last.status) is not Status.KEEP and last.reason:
            lines += [
                "## Why the last attempt was not kept",
                "",
                f"Attempt {last.iteration} ended as `{last.status}`: {last.reason[:1000]}",
                "",
            ]
    if guidance:
        lines += [guidance.rstrip(), ""]
    lines += [
        "## When you are done",
        "",
        "Print one short line that describes your change; it is recorded as its description.",
        "",
    ]
    return "\n".join(lines)


JUDGE_METRIC = "an LLM judge's score (0-100)"


def history_notes(records: Sequence[AttemptRecord]) -> list[AttemptNote]:
    return [
        AttemptNote(
            iteration=r.iteration,
            status=str(r.status),
            metric=r.metric,
            delta=r.delta,
            description=r.description,
            files=list(r.files),
            reason=r.reason or "",
            diffstat=r.diffstat or "",
        )
        for r in map(without_holdout, records)
    ]


def proposal_context(
    campaign: Campaign,
    records: Sequence[AttemptRecord],
    iteration: int,
    best: float | None,
    workspace: Path,
    log_dir: Path,
    guidance: Guidance | None = None,
) -> ProposalContext:
    """Everything a proposer may know for this attempt; the prompt file is written too."""
    cfg = campaign.config
    instructions = ""
    if cfg.instructions:
        instructions = (campaign.root / cfg.instructions).read_text(
            encoding="utf-8", errors="replace"
        )
    summary = summarize(cfg.name, str(cfg.metric.direction), records)
    facts: dict[str, Any] = {
        "iteration": iteration,
        "goal": cfg.goal,
        "instructions": instructions,
        "scope": list(cfg.scope),
        "harness": list(cfg.harness),
        "direction": cfg.metric.direction,
        "metric_command": cfg.metric.command or JUDGE_METRIC,
        "baseline": summary.baseline,
        "best": best,
        "history": history_notes(records),
    }
    # A file name that is not UTF-8 must not stop the prompt from being written.
    guide = guidance or Guidance()
    text = build_prompt(**facts, guidance=guide.prompt_section() if guidance else "")
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    prompt_file = campaign.state_dir / "prompts" / f"{iteration:04d}.md"
    prompt_file.parent.mkdir(parents=True, exist_ok=True)
    write_text(prompt_file, text)
    # The whole environment: the proposer's confinement reduces it to the allowlist plus
    # the names agents read their keys from (see confinement.py).
    env = dict(os.environ)
    env.update(
        AUTORESEARCH_ITERATION=str(iteration),
        AUTORESEARCH_WORKSPACE=str(workspace),
        AUTORESEARCH_CAMPAIGN=cfg.name,
        AUTORESEARCH_PROMPT_FILE=str(prompt_file),
    )
    return ProposalContext(
        workspace=workspace,
        prompt=text,
        prompt_file=prompt_file,
        log_dir=log_dir,
        env=env,
        memory=guide.memory,
        strategy=guide.strategy,
        hypothesis=guide.hypothesis,
        ideas=list(guide.ideas),
        proposer_index=guide.step.proposer,
        **facts,
    )
