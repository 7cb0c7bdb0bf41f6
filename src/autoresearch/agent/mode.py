"""The agent-driven mode: an interactive agent edits the workspace, the engine judges.

`start` sets the campaign up and measures the baseline; the agent then edits the files of
the campaign's workspace by hand and calls `step`, which runs one attempt of the same
`Engine` with a proposer (`HandEdits`) whose proposal is the edit already made: collect,
screen, commit, measure in the sandbox, decide, keep or roll back, record, stop rules,
under the same lock and into the same ledger as `run`. The agent never reports a number.

The engine would make the workspace afresh when it opens the campaign; `HandEdits` takes it
over as the agent left it instead (`Workspace.reopen`), snapshots the edit as a git tree,
and sets it aside only while the judge is fingerprinted when it touches a harness file.
Where the workspace cannot be taken over, the tree is put back as the proposal after the
workspace is made afresh, or as it was when no attempt was made (a stop rule held, or only
`start` ran).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from autoresearch.attempt import AttemptRecord, Status
from autoresearch.checks.rework import Rework
from autoresearch.config import Campaign
from autoresearch.engine import Engine
from autoresearch.engine.lifecycle import RunResult
from autoresearch.errors import AutoresearchError, GitError
from autoresearch.events import Event, Warned
from autoresearch.executors import Executor
from autoresearch.isolation.owned import real_dir, refuse_links, remove
from autoresearch.learning.guidance import Offer, offer
from autoresearch.proposers.base import Outcome, Proposal, ProposalContext, Proposer, clean_text
from autoresearch.scope import PathMatcher
from autoresearch.store.ledger import Ledger, StateFile
from autoresearch.workspace import Workspace

DESCRIPTION_CHARS = 200
# Stop reasons after which a `step` is refused until the campaign is resumed with `start`.
HALTS = ("tampered", "checkout_changed")


class NotStarted(AutoresearchError):
    pass


def _changed(workspace: Workspace, start: str, tree: str) -> list[str]:
    out = workspace.git.run_bytes(
        "diff-tree", "-r", "-z", "--no-renames", "--name-only", f"{start}^{{tree}}", tree
    )
    return [p.decode("utf-8", "surrogateescape") for p in out.split(b"\0") if p]


def snapshot_edits(workspace: Workspace, start: str, checked_index: bool = False) -> str | None:
    """The tree of the workspace's files as they stand (what `collect` would commit), or
    None when there is no workspace yet.

    Written through a throwaway index seeded from the engine's own (for its stat cache),
    so the engine's index and the files are not touched."""
    if not real_dir(workspace.path) or not real_dir(workspace.gitdir):
        return None
    refuse_links(workspace.root, workspace.state_dir)
    index = workspace.state_dir / "hand-edits.index"
    remove(index)
    env = {"GIT_INDEX_FILE": str(index)}
    git = workspace.git
    try:
        if (workspace.gitdir / "index").is_file():
            shutil.copy2(workspace.gitdir / "index", index)  # its times too: racy entries
            # Flags set in that index (assume-unchanged, skip-worktree) would hide a change
            # (`Workspace.reopen` has looked already when `checked_index`).
            flagged = "" if checked_index else git.run("ls-files", "-v", "-z", extra_env=env)
            if any(e[:1].islower() or e[:1] == "S" for e in flagged.split("\0") if e):
                remove(index)
                git.run("read-tree", start, extra_env=env)
        else:
            git.run("read-tree", start, extra_env=env)
        git.run("add", "-A", extra_env=env)
        return git.run("write-tree", extra_env=env).strip()
    except GitError as exc:
        raise AutoresearchError(
            f"cannot read the workspace {workspace.path} ({exc}); run `autoresearch start` "
            "to make it afresh (edits in it are lost)."
        ) from None
    finally:
        remove(index)


class HandEdits(Proposer):
    """A proposer whose proposal is the edit the agent already made in the workspace.

    The engine asks it to take the workspace over (`reopen_workspace`) instead of making
    it afresh; where that cannot be, the edit is held as a tree, `propose` puts it back
    for the engine to collect, and `close` puts it back unmeasured when no attempt was
    made."""

    runs_commands = False  # nothing runs while the engine waits: there is nothing to watch
    edits_in_place = True

    def __init__(
        self, description: str = "", judged: Callable[[str], bool] = lambda path: False
    ) -> None:
        self.description = clean_text(" ".join(description.split()), DESCRIPTION_CHARS)
        # Paths the judge is fingerprinted from (harness, rubric): an edit touching one is
        # set aside while the campaign opens.
        self.judged = judged
        self.workspace: Workspace | None = None
        self.tree: str | None = None
        self.changed: list[str] = []  # the paths the edit touched
        self.away = False  # the edit is not in the workspace's files now
        self.proposed = False
        self.outcome: Outcome | None = None
        self.problem = ""

    def reopen_workspace(self, workspace: Workspace, start: str) -> bool:
        """Called by the engine instead of making the workspace afresh: True when it
        takes the workspace over as it stands; otherwise the edits are held as a tree
        and the engine makes the workspace afresh."""
        self.workspace = workspace
        reopened = workspace.reopen(start)
        self.tree = snapshot_edits(workspace, start, checked_index=reopened)
        if self.tree is None:
            return reopened
        self.changed = _changed(workspace, start, self.tree)
        if not self.changed:
            return reopened
        if not reopened:
            self.away = True  # `ensure` makes the workspace afresh
        elif any(self._touches_judge(p) for p in self.changed):
            # Set aside until the proposal: the judge is fingerprinted from the
            # incumbent's files. Only the paths the edit touched are written.
            workspace.load_tree(self.tree)
            workspace.load_tree(start)
            self.away = True
        return reopened

    def _touches_judge(self, path: str) -> bool:
        name = path.rsplit("/", 1)[-1]
        return self.judged(path) or name in (".gitignore", ".gitattributes")

    @property
    def edited(self) -> bool:
        return bool(self.changed)

    @property
    def edited_on_candidate(self) -> bool:
        """Under a guard rework the workspace held the candidate sent back (`step` left it
        there): an edit found now is the agent's try on top of it, which the engine must
        not overwrite with the bare candidate."""
        return self.edited

    def propose(self, ctx: ProposalContext) -> Proposal:
        self.proposed = True
        if self.workspace is not None and self.away:
            assert self.tree is not None
            self.workspace.load_tree(self.tree)
            self.away = False
        return Proposal(description=self.description)

    def observe(self, outcome: Outcome) -> None:
        self.outcome = outcome

    def close(self) -> None:
        if self.proposed or self.workspace is None or not self.away:
            return
        self.proposed = True  # idempotent
        assert self.tree is not None
        try:
            self.workspace.load_tree(self.tree)
            self.away = False
        except AutoresearchError as exc:
            self.problem = (
                f"your edits could not be put back in the workspace ({exc}); they are kept "
                f"as git tree {self.tree}"
            )


@dataclass
class StepReport:
    """What `start` and `step` tell the agent: the verdict, the best so far, what next."""

    campaign: str
    workspace: str
    direction: str
    baseline: float | None
    best: float | None
    best_iteration: int | None
    iterations: int
    stopped: bool
    stop_reason: str | None
    exit_code: int
    next: str
    message: str = ""
    attempt: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)
    # A candidate sent back for rework, waiting in the workspace for the agent's fix.
    rework: dict[str, Any] | None = None
    # What the agent is given for its next change: the hypothesis to test and the memory.
    offer: Offer | None = None

    def to_json(self) -> dict[str, Any]:
        offered = self.offer.to_json() if self.offer else {"hypothesis": None, "memory_file": None}
        return {
            "campaign": self.campaign,
            "workspace": self.workspace,
            "direction": self.direction,
            "attempt": self.attempt,
            "baseline": self.baseline,
            "best": self.best,
            "best_iteration": self.best_iteration,
            "iterations": self.iterations,
            "stopped": self.stopped,
            "stop_reason": self.stop_reason,
            "message": self.message,
            "next": self.next,
            "warnings": self.warnings,
            "rework": self.rework,
            **offered,
            "exit_code": self.exit_code,
        }


def workspace_path(campaign: Campaign) -> Path:
    """The folder the agent edits; refused before `start` made it."""
    path = campaign.state_dir / "worktree"
    if not Ledger(campaign.state_dir).read() or not real_dir(path):
        raise NotStarted(
            f"campaign '{campaign.name}' has no workspace yet; run `autoresearch start` in "
            f"{campaign.root} first."
        )
    return path


def start(
    campaign: Campaign,
    *,
    executor: Executor | None = None,
    on_event: Callable[[Event], None] | None = None,
) -> StepReport:
    """Set the campaign up and measure its baseline; on a campaign that has one, resume it
    (the workspace is made afresh, hand edits in it kept) without an attempt."""
    return _drive(campaign, 0, "", executor, on_event)


def step(
    campaign: Campaign,
    description: str = "",
    *,
    executor: Executor | None = None,
    on_event: Callable[[Event], None] | None = None,
) -> StepReport:
    """Judge the edit made in the workspace: one attempt of the engine."""
    records = Ledger(campaign.state_dir).read()
    if not records:
        raise NotStarted(
            f"campaign '{campaign.name}' has not started; run `autoresearch start` in "
            f"{campaign.root} (it measures the baseline), edit the workspace, then "
            "`autoresearch step`."
        )
    state = StateFile(campaign.state_dir).read()
    halted = state.get("stop_reason")
    if halted in HALTS:
        raise AutoresearchError(
            f"campaign '{campaign.name}' halted ({halted}: {state.get('stop_message') or ''}); "
            "see `autoresearch log`, then `autoresearch start` to resume it."
        )
    return _drive(campaign, 1, description, executor, on_event)


def _drive(
    campaign: Campaign,
    attempts: int,
    description: str,
    executor: Executor | None,
    on_event: Callable[[Event], None] | None,
) -> StepReport:
    warnings: list[str] = []

    def listen(event: Event) -> None:
        if isinstance(event, Warned):
            warnings.append(event.message)
        if on_event is not None:
            on_event(event)

    cfg = campaign.config
    rubric = [cfg.judge.rubric] if cfg.judge is not None else []
    proposer = HandEdits(description, PathMatcher([*cfg.harness, *rubric]).matches)
    engine = Engine(campaign, proposer=proposer, executor=executor, on_event=listen)
    # The agent sees no prompt: a step carries the hypothesis `start` or `step` showed it.
    engine.guide.only_shown = True
    _campaign_clock(engine)
    before = max((r.iteration for r in Ledger(campaign.state_dir).read()), default=-1)
    result = engine.run(attempts=attempts)
    if proposer.problem:
        warnings.append(proposer.problem)
    made = [r for r in engine.records if r.iteration > before and r.status is not Status.BASELINE]
    return _report(campaign, engine, result, made[-1] if made else None, proposer, warnings)


def _campaign_clock(engine: Engine) -> None:
    """`max_minutes` counts from the campaign's baseline, not from this call: each step is
    a call of its own."""
    records = Ledger(engine.campaign.state_dir).read()
    utc = records[0].utc if records else None
    if not utc:
        return
    try:
        began = datetime.fromisoformat(utc.replace("Z", "+00:00"))
    except ValueError:
        return
    elapsed = max(0.0, (datetime.now(UTC) - began).total_seconds())
    engine.started = engine.clock() - elapsed


def _report(
    campaign: Campaign,
    engine: Engine,
    result: RunResult,
    record: AttemptRecord | None,
    proposer: HandEdits,
    warnings: list[str],
) -> StepReport:
    summary = result.summary
    stopped = bool(result.stop_reason)
    scope = ", ".join(campaign.config.scope)
    attempt = None if record is None else _attempt_json(record)
    report = StepReport(
        campaign=campaign.name,
        workspace=str(engine.workspace.path),
        direction=str(campaign.config.metric.direction),
        baseline=summary.get("baseline"),
        best=summary.get("best"),
        best_iteration=summary.get("best_iteration"),
        iterations=int(summary.get("iterations") or 0),
        stopped=stopped,
        stop_reason=result.stop_reason or None,
        exit_code=result.exit_code,
        next="",
        message=result.message,
        attempt=attempt,
        warnings=warnings,
        rework=_rework_json(campaign, engine.rework),
    )
    report.next = _next(report, record, proposer, scope)
    # No hypothesis when no step follows, or when the next one fixes a candidate sent back.
    more = not stopped and report.rework is None
    report.offer = offer(campaign, engine.records, more)
    return report


def _rework_json(campaign: Campaign, rework: Rework | None) -> dict[str, Any] | None:
    if rework is None:
        return None
    guard = campaign.config.guard
    limit = guard.rework if guard is not None else 0
    return {
        "of": rework.of,  # the attempt whose candidate the workspace holds
        "commit": rework.commit,
        "next_try": rework.tries,  # the number of the next step's try
        "tries": limit,
        "left": max(0, limit - rework.tries + 1),  # the next step's try included
        "guard_output": rework.feedback,
    }


def _attempt_json(record: AttemptRecord) -> dict[str, Any]:
    return {
        "iteration": record.iteration,
        "status": str(record.status),
        "kept": record.status is Status.KEEP,
        "reason": record.reason,
        "metric": record.metric,
        "delta": record.delta,
        # The incumbent the attempt was measured against: for a keep the best it
        # replaced, otherwise the best that stays.
        "previous_best": record.previous_best if record.status.sets_best else record.best,
        "description": record.description,
        "files": list(record.files),
        "commit": record.commit,
        "note": record.note,
        "rework_of": record.rework_of,
        "engine_seconds": record.timings.engine if record.timings else None,
        "measure_seconds": record.timings.measure if record.timings else None,
    }


def _next(report: StepReport, record: AttemptRecord | None, proposer: HandEdits, scope: str) -> str:
    """One or two sentences: what the agent should do now."""
    ws = report.workspace
    if report.stopped:
        reason = report.stop_reason
        if reason in HALTS:
            return (
                f"The campaign halted ({reason}): {report.message}. A person should look at "
                "`autoresearch log` before `autoresearch start` resumes it."
            )
        if reason == "baseline_failed":
            return f"Fix the metric or guard command ({report.message}), then `autoresearch start`."
        # Edits are unmeasured only when the campaign stopped before this step's attempt.
        unmeasured = proposer.edited and not proposer.proposed
        kept_edits = " Your unmeasured edits are still in the workspace." if unmeasured else ""
        waiting = ""
        if report.rework is not None:
            waiting = (
                f" Attempt {report.rework['of']}'s change, sent back for rework, is still in "
                "the workspace: a resumed campaign judges your fix of it as try "
                f"{report.rework['next_try']} of {report.rework['tries']}."
            )
        return (
            f"The campaign stopped ({reason}); no more steps.{kept_edits}{waiting} Review "
            "the best change with `autoresearch diff`, then `autoresearch apply` or "
            "`autoresearch branch NAME`."
        )
    if report.rework is not None and (record is None or record.status is Status.REWORK):
        return _rework_next(report.rework, ws, record)
    if record is None:
        edits = " (your edits in it are kept)" if proposer.edited else ""
        return (
            f"Edit files in {ws}{edits} (scope: {scope}), then run `autoresearch step "
            "--description '<what you changed>'`. Do not run the metric yourself."
        )
    status = record.status
    again = f"Make your next change in {ws}, then `autoresearch step`."
    if record.note and proposer.edited:
        return (
            "This step measured the attempt a stopped engine left in flight; your edits were "
            f"put back in the workspace untouched. Run `autoresearch step` again. {again}"
        )
    if status is Status.KEEP:
        return f"Kept: the workspace now holds it as the new best. {again}"
    if status is Status.DISCARD:
        return f"Not better: rolled back, the workspace is the best version again. {again}"
    if status is Status.NO_CHANGE:
        return (
            f"Nothing changed in the workspace. Edit files in {ws} (not your own checkout), "
            "then `autoresearch step`."
        )
    if status is Status.SCOPE_VIOLATION:
        return f"Rolled back: only files matching {scope} may change. {again}"
    if status in (Status.CRASH, Status.TIMEOUT):
        return (
            f"The metric failed on this change; rolled back. `autoresearch show "
            f"{record.iteration}` lists its logs. {again}"
        )
    if status is Status.GUARD_FAILED:
        tries = (
            f" after its last rework try (attempt {record.rework_of}'s change)"
            if record.rework_of is not None
            else ""
        )
        return (
            f"Better, but the guard failed{tries}; rolled back, the workspace is the best "
            f"version again. `autoresearch show {record.iteration}` lists its logs. {again}"
        )
    if status is Status.AWAITING_APPROVAL:
        n = record.iteration
        return (
            "Better, but it touches paths a person must approve: parked, not kept, and the "
            f"workspace is the best version again. A person decides with `autoresearch "
            f"approve {n}` (its change is measured again on the best then) or `autoresearch "
            f"reject {n}`. {again}"
        )
    return f"Rolled back ({status}). {again}"


GUARD_LINES = 15  # of the guard's output, in the sentence for the agent


def _rework_next(rework: dict[str, Any], ws: str, record: AttemptRecord | None) -> str:
    """After a `rework` verdict (or on resuming one): the candidate waits in the workspace
    for the agent's fix."""
    of, left = rework["of"], rework["left"]
    verdict = (
        "Better, but the guard failed: not kept, and not rolled back either."
        if record is not None
        else f"Attempt {of} was better, but its guard failed."
    )
    output = rework["guard_output"].splitlines()[-GUARD_LINES:]
    said = "\n".join(f"    {line}" for line in output) or "    (nothing)"
    plural = "try" if left == 1 else "tries"
    return (
        f"{verdict} The workspace {ws} holds attempt {of}'s change: fix it there, on top "
        "of that change and without undoing the improvement, then `autoresearch step`. "
        f"Your next step is try {rework['next_try']} of {rework['tries']} ({left} {plural} left); "
        "when the guard still fails on the last one the change is rolled back. "
        f"`autoresearch show {of}` lists the guard's logs. The guard printed (last "
        f"lines):\n{said}"
    )


def step_lines(report: StepReport) -> list[str]:
    """The report as plain lines for a terminal or an agent's tool output."""
    from autoresearch.attempt import num
    from autoresearch.views.render import gain_text

    lines = []
    a = report.attempt
    if a is not None:
        metric = "" if a["metric"] is None else f" metric {num(a['metric'])}"
        if a["metric"] is not None and a["delta"] is not None:
            against = num(a["previous_best"])
            metric += f" ({gain_text(a['delta'], report.direction)}; against {against})"
        reason = f": {a['reason']}" if a["reason"] else ""
        lines.append(f"attempt {a['iteration']} {a['status']}{metric}{reason}")
    elif report.baseline is not None and report.iterations == 0 and not report.stopped:
        lines.append(f"baseline {num(report.baseline)} ({report.direction})")
    best = num(report.best)
    at = f" at attempt {report.best_iteration}" if report.best_iteration else " (the baseline)"
    lines.append(f"best {best}{at}; baseline {num(report.baseline)}; {report.iterations} attempts")
    if report.stopped:
        why = f" ({report.message})" if report.message else ""
        lines.append(f"stopped: {report.stop_reason}{why}")
    for warning in report.warnings:
        lines.append(f"warning: {warning}")
    lines.append(f"workspace: {report.workspace}")
    if report.offer is not None:
        lines += report.offer.lines()
    lines.append(f"next: {report.next}")
    return lines
