"""A parallel winner measured against an incumbent that was replaced since it started.

A winner is never kept on that evidence: its change is merged onto the new incumbent (a
three-way merge with `git merge-tree`); a conflict makes it `superseded`, otherwise the
combination is queued to be measured against the new incumbent and kept (as `merged`,
naming the attempts combined) only if it beats it; if it does not, the winner's own change
is queued to be measured alone against that incumbent and kept if it beats it, so that the
best single winner is what stays when the gains do not add up.
"""

from __future__ import annotations

import subprocess
from dataclasses import replace

from autoresearch.attempt import EarlierComparison, Incumbent, Status
from autoresearch.engine.procedure import STOPPED, Task
from autoresearch.engine.queue import Again, Queued, Why
from autoresearch.engine.recording import NOT_FINISHED, Collected, Judged, Steps
from autoresearch.errors import GitError
from autoresearch.gitcmd import IDENTITY
from autoresearch.measure.evaluation import Evaluation
from autoresearch.workspace import Workspace


def merged(
    workspace: Workspace,
    name: str,
    task: Task,
    steps: Steps,
    current: Incumbent,
    since: list[int],
    *,
    cancelled: bool,
) -> Queued | Steps:
    """The winner's change on top of `current`, queued to be measured again; or its steps
    concluded as `superseded` (or `interrupted`)."""
    outcome, collected = steps.outcome, steps.collected
    assert isinstance(outcome, Judged) and collected is not None
    assert collected.commit is not None
    names = ", ".join(f"#{i}" for i in since) or "a newer incumbent"
    if cancelled:
        return replace(steps, outcome=Judged(Status.INTERRUPTED, STOPPED, outcome.measured))
    tree = merge_tree(workspace, current.commit, collected.commit)
    if tree is None or tree == current.tree:
        why = "conflicts with" if tree is None else "is already in"
        reason = f"a winner against {task.start.commit[:12]}, but its change {why} {names}"
        return replace(steps, outcome=Judged(Status.SUPERSEDED, reason, outcome.measured))
    message = (
        f"autoresearch {name} #{task.iteration}: {collected.description} (combined with {names})"
    )
    commit = workspace.git.run(
        "commit-tree", tree, "-p", current.commit, "-F", "-",
        input=message.encode(), extra_env=IDENTITY,
    ).strip()  # fmt: skip
    workspace.record_ref(task.iteration, commit)
    candidate = replace(collected.candidate, tree=tree)
    combination = replace(
        collected,
        commit=commit,
        candidate=candidate,
        diffstat=workspace.diffstat(current.commit, commit),
    )
    before = _again(task)
    earlier = before.combined[:-1] if before and before.combined else ()
    combined = tuple(dict.fromkeys((*earlier, *since, task.iteration)))
    alone = (before.alone if before else "") or (
        f"a winner against {task.start.commit[:12]} ({metric_text(outcome.measured)})"
    )
    note = (
        f"{alone}; its change merged onto {current.commit[:12]} (with {names}) and measured again"
    )
    again = Again(
        measured_again(steps, task, combination, note),
        current,
        combined=combined,
        alone=alone,
        original=(before.original if before else None) or collected,
        retried_alone=before.retried_alone if before else False,
    )
    return Queued(Why.MERGE, again=again)


def alone(workspace: Workspace, task: Task, steps: Steps, current: Incumbent) -> Queued | None:
    """A combination that did not beat the incumbent: the winner's own change against it,
    so that what is kept is the best single winner when the gains do not add up. Once per
    attempt; None when there is nothing left to try."""
    before = _again(task)
    outcome = steps.outcome
    if before is None or not before.combined or before.retried_alone:
        return None
    original = before.original
    if original is None or original.commit is None or original.candidate.tree == current.tree:
        return None
    assert isinstance(outcome, Judged)
    workspace.record_ref(task.iteration, original.commit)
    names = ", ".join(f"#{i}" for i in before.combined if i != task.iteration)
    note = (
        f"{before.alone}; merged onto {current.commit[:12]} (with {names}) it measured "
        f"{metric_text(outcome.measured)} ({outcome.status}: {outcome.reason}), so it was "
        f"measured again alone against {current.commit[:12]}"
    )
    again = Again(
        measured_again(steps, task, original, note),
        current,
        alone=before.alone,
        original=original,
        retried_alone=True,
    )
    return Queued(Why.ALONE, again=again)


def measured_again(steps: Steps, task: Task, collected: Collected, note: str) -> Steps:
    """The attempt's steps to measure `collected` again: not yet judged, and carrying the
    comparison just set aside (after any before it), so that its runs are not lost."""
    outcome, measured_commit = steps.outcome, steps.collected
    assert isinstance(outcome, Judged) and measured_commit is not None
    measured = outcome.measured
    earlier = steps.earlier
    if measured_commit.commit is not None and (measured.samples or measured.incumbent_samples):
        this = EarlierComparison(
            measured_commit.commit,
            task.start.commit,
            tuple(measured.samples),
            tuple(measured.incumbent_samples),
            measured.runs,
        )
        earlier = (*earlier, this)
    return replace(steps, collected=collected, outcome=NOT_FINISHED, note=note, earlier=earlier)


def _again(task: Task) -> Again | None:
    return task.queued.again if task.queued is not None else None


def metric_text(measured: Evaluation) -> str:
    value = measured.metric
    return "no metric" if value is None else f"{value:.6g}"


def merge_tree(workspace: Workspace, incumbent: str, candidate: str) -> str | None:
    """The tree of `candidate`'s change merged onto `incumbent` (their merge base is the
    incumbent the candidate started from), or None when they conflict."""
    git = workspace.git
    proc = subprocess.run(
        [*git.prefix, "merge-tree", "--write-tree", "--no-messages", incumbent, candidate],
        cwd=git.cwd,
        env=git.env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
    )
    if proc.returncode == 1:
        return None  # a conflict
    if proc.returncode != 0:
        detail = proc.stderr.decode(errors="replace").strip()
        raise GitError(f"git merge-tree failed: {detail or proc.returncode}")
    return proc.stdout.decode().split("\n", 1)[0].strip()
