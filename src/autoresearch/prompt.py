"""The text a proposer is given: goal, instructions, scope and what earlier attempts taught."""

from __future__ import annotations

from autoresearch.proposers.base import AttemptNote

HISTORY_LIMIT = 30


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.6g}"


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
) -> str:
    lines = [f"# Improvement campaign, attempt {iteration}", ""]
    lines += ["## Goal", "", goal or "(no goal given: improve the metric)", ""]
    better = "lower" if direction == "minimize" else "higher"
    lines += [
        "## How the result is judged",
        "",
        f"The metric command `{metric_command}` is run after your change; {better} is better.",
        f"Baseline: {_num(baseline)}. Best so far: {_num(best)}.",
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
            if note.reason and note.status not in ("keep", "discard", "baseline"):
                text = f"{text} ({note.reason[:80]})".strip()
            lines.append(
                f"| {note.iteration} | {note.status} | {_num(note.metric)} | "
                f"{_num(note.delta)} | {text} |"
            )
        lines.append("")
    lines += [
        "## When you are done",
        "",
        "Print one short line that describes your change; it is recorded as its description.",
        "",
    ]
    return "\n".join(lines)
