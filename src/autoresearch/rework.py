"""`[guard] rework = N`: a better candidate whose guard fails goes back to the proposer.

The attempt is recorded as `rework`; the next attempt starts from its candidate (not the
incumbent), and the proposer's prompt carries the guard's output. Up to N tries; the try
that still fails the guard when none are left is `guard_failed`, and everything rolls back
to the incumbent. Each try is an attempt of its own whose `rework_of` names the attempt it
builds on. What is measured and judged is always the whole change against the incumbent.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path

from autoresearch.attempt import AttemptRecord, Status
from autoresearch.proposers.base import ProposalContext

FEEDBACK_LINES = 60
TAIL_BYTES = 32768


@dataclass(frozen=True)
class Rework:
    of: int  # the attempt whose candidate the next try starts from
    commit: str
    tries: int  # tries used, this next one included
    feedback: str  # the guard's output


def after(record: AttemptRecord, previous: Rework | None, logs: Path) -> Rework | None:
    """The rework the next attempt does, if `record` sent its candidate back."""
    if record.status is not Status.REWORK or record.commit is None:
        return None
    tries = (previous.tries if previous else 0) + 1
    return Rework(record.iteration, record.commit, tries, guard_output(logs, record.iteration))


def left(limit: int, current: Rework | None) -> int:
    """Tries still to come after the attempt running now."""
    return max(0, limit - (current.tries if current else 0))


def guard_output(logs: Path, iteration: int) -> str:
    """The end of what the guard printed on that attempt (stdout, then stderr)."""
    lines: list[str] = []
    for suffix in (".out", ".err"):
        path = logs / f"{iteration:04d}-guard{suffix}"
        try:
            with open(path, "rb") as handle:
                handle.seek(0, os.SEEK_END)
                handle.seek(max(0, handle.tell() - TAIL_BYTES))
                text = handle.read().decode("utf-8", errors="replace")
        except OSError:
            continue
        lines += [line.rstrip() for line in text.splitlines() if line.strip()]
    return "\n".join(lines[-FEEDBACK_LINES:])


def context(ctx: ProposalContext, rework: Rework, limit: int) -> ProposalContext:
    """The proposer's context for a rework try: its files are the failed candidate's, and
    the prompt says what the guard printed."""
    note = (
        f"\n\n## Rework {rework.tries} of {limit}: the guard failed\n\n"
        f"The workspace holds the change of attempt {rework.of}, which improved the metric "
        "but failed the guard (the checks that must keep passing). Fix it on top of that "
        "change, without undoing the improvement. The guard printed:\n\n"
        f"```\n{rework.feedback or '(nothing)'}\n```\n"
    )
    prompt = ctx.prompt + note
    try:
        ctx.prompt_file.write_text(prompt, encoding="utf-8")
    except OSError:
        pass  # the prompt in the context is what proposers read first
    return replace(ctx, prompt=prompt)
