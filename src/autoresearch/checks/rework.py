"""`[guard] rework = N`: a better candidate whose guard fails goes back to the proposer.

The attempt is recorded as `rework`; the next attempt starts from its candidate (not the
incumbent), and the proposer's prompt carries the guard's output. Up to N tries; the try
that still fails the guard when none are left is `guard_failed`, and everything rolls back
to the incumbent. Each try is an attempt of its own whose `rework_of` names the attempt it
builds on. What is measured and judged is always the whole change against the incumbent.

The ledger is the truth of it: an engine that opens a campaign reads the rework under way
from the records (`pending`), so a stopped and resumed `run`, and the agent-driven mode's
`step` (one attempt a process), go on with the same candidate, the same count of tries.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from autoresearch.attempt import AttemptRecord, Status
from autoresearch.measure.evaluation import log_tail
from autoresearch.proposers.base import ProposalContext

FEEDBACK_LINES = 60
TAIL_BYTES = 32768


@dataclass(frozen=True)
class Rework:
    of: int  # the attempt whose candidate the next try starts from
    commit: str
    tries: int  # tries used, this next one included
    feedback: str  # the guard's output


def after(
    record: AttemptRecord, previous: Rework | None, logs: Path, hide: Iterable[str] = ()
) -> Rework | None:
    """The rework the next attempt does, if `record` sent its candidate back. `hide`: the
    values the guard saw that the proposer must not (`[sandbox] pass_env`)."""
    if record.status is not Status.REWORK or record.commit is None:
        return None
    tries = (previous.tries if previous else 0) + 1
    feedback = guard_output(logs, record.iteration, hide)
    return Rework(record.iteration, record.commit, tries, feedback)


def pending(
    records: Sequence[AttemptRecord], incumbent: str, logs: Path, hide: Iterable[str] = ()
) -> Rework | None:
    """The rework the next attempt does, read from the ledger: the last attempt sent its
    candidate back and nothing concluded it since. An interrupted try and a decision on a
    parked candidate conclude nothing; a rework whose incumbent is not the current one any
    more (its candidate was built on another) is void."""
    for record in reversed(records):
        if record.status is Status.INTERRUPTED or record.approval_of is not None:
            continue
        if record.status is not Status.REWORK or record.commit is None:
            return None
        if record.parent != incumbent:
            return None
        output = guard_output(logs, record.iteration, hide)
        return Rework(record.iteration, record.commit, _tries(records, record), output)
    return None


def _tries(records: Sequence[AttemptRecord], record: AttemptRecord) -> int:
    """Tries used once `record` sent its candidate back: one for each `rework` record on
    its chain of `rework_of` links, itself included (as `after` counts them)."""
    by_iteration = {r.iteration: r for r in records}
    tries, seen = 0, set()
    current: AttemptRecord | None = record
    while current is not None and current.status is Status.REWORK:
        if current.iteration in seen:  # a hand-edited ledger: never loop
            break
        seen.add(current.iteration)
        tries += 1
        of = current.rework_of
        current = by_iteration.get(of) if of is not None else None
    return tries


def left(limit: int, current: Rework | None) -> int:
    """Tries still to come after the attempt running now."""
    return max(0, limit - (current.tries if current else 0))


def guard_output(logs: Path, iteration: int, hide: Iterable[str] = ()) -> str:
    """The end of what the guard printed on that attempt (stdout, then stderr), without
    the values in `hide`."""
    paths = [logs / f"{iteration:04d}-guard{suffix}" for suffix in (".out", ".err")]
    return "\n".join(log_tail(paths, TAIL_BYTES, hide)[-FEEDBACK_LINES:])


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
