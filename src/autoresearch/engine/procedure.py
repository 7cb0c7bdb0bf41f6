"""One attempt, the same for the sequential run and for every slot (`[executor] jobs`).

    ready -> propose (or replay a queued candidate) -> collect -> screen -> measure -> review

`run_attempt` runs those steps in the place an attempt runs (`Place`: a workspace, an
evaluator, a proposer), on whichever thread owns that place, and returns what they
produced; it decides nothing about the campaign. The engine's thread concludes every
attempt the same way (keep or merge, record, learn, observe) and then puts the place back
with `release`. Sequential mode is one place, the engine's own, run on the engine's thread.
"""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from autoresearch.attempt import AttemptRecord, Incumbent, Screened, Status
from autoresearch.checks import rework as reworks
from autoresearch.checks.review import Review
from autoresearch.config import Campaign
from autoresearch.engine.lifecycle import Interrupted
from autoresearch.engine.proposing import CheckoutWatch, ask
from autoresearch.engine.queue import Queued, Why
from autoresearch.engine.recording import Collected, Judged, Steps, describe, in_flight_record
from autoresearch.engine.screening import Rules, screen
from autoresearch.engine.startup import LOST_REASON
from autoresearch.errors import GitError, WorkspaceHijacked
from autoresearch.learning.guidance import Guidance, Guide
from autoresearch.learning.prompt import proposal_context
from autoresearch.measure.evaluation import Evaluator
from autoresearch.measure.repeats import TreeIndex
from autoresearch.proposers.base import Proposal, Proposer
from autoresearch.workspace import Workspace
from autoresearch.workspace.refused import write_refused_diff

STOPPED = "stopped by a signal during the attempt"
Phase = Callable[..., None]


@dataclass
class Place:
    """Where an attempt runs: the engine's own workspace, or a slot's."""

    campaign: Campaign
    workspace: Workspace
    evaluator: Evaluator
    proposer: Proposer
    review: Review
    rules: Rules
    trees: TreeIndex
    guide: Guide
    logs: Path
    phase: Phase
    clock: Callable[[], float]
    cancelled: threading.Event = field(default_factory=threading.Event)
    known: Callable[[AttemptRecord], None] = lambda record: None
    index: int = 0
    at: str | None = None  # the commit the workspace shows; None: make it afresh


@dataclass(frozen=True)
class Task:
    iteration: int
    start: Incumbent  # the attempt starts from it and is measured against it
    began: float  # on the engine's clock
    records: tuple[AttemptRecord, ...] = ()  # the ledger as the proposal sees it
    queued: Queued | None = None


@dataclass(frozen=True)
class Ran:
    """What `run_attempt` gives the engine's thread to conclude."""

    steps: Steps
    stopped_by: Interrupted | None = None  # a signal cut it short
    hijacked: bool = False  # the workspace is not the engine's any more: leave it
    disk_full: bool = False  # the engine's disk is full: the campaign halts once it is logged


def run_attempt(place: Place, task: Task) -> Ran:
    queued = task.queued
    if queued is not None and queued.again is not None:
        return _measure_again(place, task, queued.again.steps)
    rework = queued.rework if queued is not None else None
    approved = queued.record if queued is not None and queued.why is Why.APPROVED else None
    steps = Steps(
        task.iteration,
        task.began,
        rework_of=rework.of if rework else None,
        approval_of=approved.iteration if approved else None,
    )
    try:
        _ready(place, task.start.commit)
        if queued is None or queued.asks_proposer:
            proposal, seconds, watch, guidance = _propose(place, task, rework)
        else:
            assert queued.record is not None
            proposal, seconds, watch = _replay(place, queued.record)
            guidance = Guidance(hypothesis=queued.record.hypothesis)
        note = queued.note if queued is not None else None
        steps = replace(
            steps, proposal=proposal, propose_seconds=seconds, note=note, guidance=guidance
        )
        _check_cancelled(place)  # the proposer was stopped, not failed
        collected = _collect(place, task, proposal, watch)
        steps = replace(steps, collected=collected)
        if collected.commit is not None:  # a kill from here on must not lose it
            place.known(in_flight_record(steps, task.start, LOST_REASON))
        changes = list(collected.checkout_changes)
        screened = screen(proposal, collected.candidate, changes, place.rules)
        # Files measured before are not measured again; a queued candidate (a rework try
        # starts from its refused candidate on purpose) is judged as it comes.
        if screened is None and queued is None:
            screened = place.trees.screen(collected.candidate.tree)
        if screened is not None and not screened.status.stores_content:
            place.workspace.forget(task.iteration)  # its content is not kept under a ref
        if screened is not None and screened.status in REFUSED_SHOWN:
            _keep_refused_diff(place, task, collected)
        if screened is None:
            _check_cancelled(place)  # what screening found stands, cancelled or not
        outcome = screened or _stopped(
            place, _measure(place, task, collected, rework, approved=approved is not None)
        )
        steps = replace(steps, outcome=outcome)
        place.workspace.check()
    except WorkspaceHijacked as exc:
        return Ran(replace(steps, outcome=Screened(Status.TAMPERED, str(exc))), hijacked=True)
    except Interrupted as exc:
        return Ran(replace(steps, outcome=Screened(Status.INTERRUPTED, STOPPED)), stopped_by=exc)
    except (MemoryError, OSError, GitError) as exc:
        if steps.proposal is None:
            raise  # the place could not be made ready: no attempt of the proposer's yet
        return Ran(replace(steps, outcome=_out_of_resources(steps, exc)), disk_full=disk_full(exc))
    return Ran(steps)


# What the proposer did is shown for these, though their content never enters the repository
REFUSED_SHOWN = frozenset({Status.SCOPE_VIOLATION, Status.TAMPERED, Status.EDIT_REFUSED})


def _keep_refused_diff(place: Place, task: Task, collected: Collected) -> None:
    """Keep, as text in the campaign folder, what a refused candidate changed: `diff N` and
    `show N` read it there. Made before the roll-back, from the folder itself."""
    candidate = collected.candidate
    if not candidate.changes:
        return
    try:
        text = place.workspace.refused_diff(
            task.start.commit, candidate, place.rules.caps.max_bytes
        )
        write_refused_diff(place.campaign.state_dir, task.iteration, text)
    except (OSError, GitError):
        pass  # the verdict stands without its text; `diff N` then names the paths only


def disk_full(exc: BaseException) -> bool:
    """Whether `exc` says the disk (or the user's quota on it) is full."""
    codes = (errno.ENOSPC, errno.EDQUOT)
    if isinstance(exc, OSError):
        return exc.errno in codes
    return any(os.strerror(code) in str(exc) for code in codes)


def _out_of_resources(steps: Steps, exc: BaseException) -> Screened:
    """A resource the engine ran out of while it took the candidate in (memory, the disk,
    file descriptors, a git command on a huge object) refuses that candidate; while it was
    measured, the measurement crashed. Either way the attempt is recorded and rolled back,
    and the campaign goes on (or halts, for a full disk)."""
    if isinstance(exc, MemoryError):
        what = "out of memory"
    elif isinstance(exc, OSError):
        name = errno.errorcode.get(exc.errno or 0, "OSError")
        what = f"{exc.strerror or exc} ({name})"
    else:
        what = str(exc)
    collected = steps.collected
    if collected is None or collected.commit is None:
        return Screened(Status.EDIT_REFUSED, f"the engine could not take the change in: {what}")
    return Screened(Status.CRASH, f"the engine could not measure the change: {what}")


def release(place: Place, ran: Ran, start: Incumbent, now: Incumbent) -> str | None:
    """Put the place back for its next attempt: at `now` when its candidate became the
    incumbent, otherwise at the `start` it came from (the next attempt's `_ready` moves it
    on). Returns why the fast way failed, if it did."""
    if ran.hijacked:
        place.at = None  # nothing is rolled back: the folder is not the engine's any more
        return None
    steps = ran.steps
    collected = steps.collected
    candidate = collected.candidate if collected else None
    kept = collected is not None and collected.commit is not None and collected.commit == now.commit
    target = now.commit if kept else start.commit
    try:
        if ran.disk_full:  # what the candidate wrote goes before git needs room to write
            place.workspace.drop_untracked()
        if kept:
            place.workspace.move_head(target)
        fast = steps.outcome.status.fast_roll_back
        problem = place.workspace.roll_back(candidate, target, kept=kept, fast=fast)
    except GitError as exc:
        place.at = None  # made afresh before the place's next attempt
        return f"{exc}; the workspace is made afresh before the next attempt"
    place.at = target
    return problem


def _ready(place: Place, commit: str) -> None:
    """The workspace shows exactly `commit` before the proposer starts."""
    if place.at != commit:
        place.workspace.reset_to(commit)
        place.at = commit


def _check_cancelled(place: Place) -> None:
    if place.cancelled.is_set():
        raise Interrupted()


def _stopped(place: Place, outcome: Judged) -> Judged:
    """A run that failed because the engine killed it (a signal, a halt) was stopped,
    not a crash of the candidate."""
    cut = outcome.status in (Status.CRASH, Status.TIMEOUT, Status.GUARD_FAILED)
    if cut and place.cancelled.is_set():
        return replace(outcome, status=Status.INTERRUPTED, reason=STOPPED)
    return outcome


def _propose(
    place: Place, task: Task, rework: reworks.Rework | None
) -> tuple[Proposal, float, CheckoutWatch, Guidance]:
    """Ask the proposer for one change while the user's checkout is watched."""
    place.phase("proposing", task.iteration)
    cfg = place.campaign.config
    records = list(task.records)
    guidance = place.guide.next(records)
    ctx = proposal_context(
        place.campaign,
        records,
        task.iteration,
        task.start.metric,
        place.workspace.path,
        place.logs,
        guidance,
    )
    proposer = place.proposer
    if rework is not None:  # the try starts from the candidate the guard refused
        # An agent's edit was made on top of it (`step` left it in the workspace).
        if not proposer.edited_on_candidate:
            place.workspace.load_tree(rework.commit)
        ctx = reworks.context(ctx, rework, cfg.guard.rework if cfg.guard else 0)
    # A confined proposer cannot see the checkout: there is nothing to watch.
    watched = cfg.sandbox.watch_checkout and proposer.runs_commands and not proposer.confined
    watch = CheckoutWatch(place.campaign.root, list(cfg.share), watched)
    place.workspace.proposer_runs_commands(proposer.runs_commands or proposer.edits_in_place)
    place.workspace.watch(proposer.sealed)
    began = place.clock()
    proposal = ask(proposer, ctx, place.logs / f"{task.iteration:04d}-proposer-error.txt")
    return proposal, place.clock() - began, watch, guidance


def _replay(place: Place, queued: AttemptRecord) -> tuple[Proposal, float, CheckoutWatch]:
    """Put a queued candidate back in the workspace, as if its proposer had just made it
    (its proposer's cost is on its own record already)."""
    assert queued.commit is not None
    place.workspace.load_tree(queued.commit)
    watch = CheckoutWatch(place.campaign.root, [], enabled=False)
    return Proposal(description=queued.description), 0.0, watch


def _collect(place: Place, task: Task, proposal: Proposal, watch: CheckoutWatch) -> Collected:
    """Find out from git what changed, and commit it as the attempt's candidate."""
    place.phase("checking", task.iteration)
    watch.scan_after()
    start, workspace = task.start, place.workspace
    rules = place.rules
    candidate = workspace.collect(start.commit, start.tree, admit=rules.admits, caps=rules.caps)
    changed = watch.changes()
    if changed:
        return Collected(candidate, proposal.description, checkout_changes=tuple(changed))
    description = proposal.description or describe(candidate)
    if not candidate.changes:
        return Collected(candidate, description)
    if not candidate.staged:  # refused paths: named, never stored, so no commit
        named = ", ".join(f"{c.path} ({c.status})" for c in candidate.changes[:8])
        return Collected(candidate, description, diffstat=named)
    message = f"autoresearch {place.campaign.name} #{task.iteration}: {description}"
    commit = workspace.commit(candidate, start.commit, message, task.iteration)
    # Counted when git named the changes; else asked of git now.
    diffstat = candidate.diffstat
    if diffstat is None:
        diffstat = workspace.diffstat(start.commit, commit)
    return Collected(candidate, description, commit, diffstat)


def _measure(
    place: Place,
    task: Task,
    collected: Collected,
    rework: reworks.Rework | None,
    *,
    approved: bool,
) -> Judged:
    """Measure against the start until the rule decides, then the checks after the
    verdict (review.py)."""
    assert collected.commit is not None
    measured = place.evaluator.evaluate(
        task.iteration, collected.candidate, collected.commit, task.start.commit
    )
    if measured.failure:
        return Judged(Status(measured.failure), measured.reason, measured)
    guard = place.campaign.config.guard
    # An approved change is re-checked as it stands: no rework for it.
    limit = guard.rework if guard is not None and not approved else 0
    return place.review.judge(
        task.iteration,
        collected.commit,
        collected.files,
        measured,
        task.start,
        reworks.left(limit, rework),
        approved=approved,
    )


def _measure_again(place: Place, task: Task, steps: Steps) -> Ran:
    """A winner's change, committed already, measured against a newer incumbent."""
    assert steps.collected is not None
    try:
        _check_cancelled(place)
        judged = _measure(place, task, steps.collected, None, approved=False)
        return Ran(replace(steps, outcome=_stopped(place, judged)))
    except Interrupted as exc:
        return Ran(replace(steps, outcome=Screened(Status.INTERRUPTED, STOPPED)), stopped_by=exc)
