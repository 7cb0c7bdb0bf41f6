"""The campaign loop: a baseline, then attempts until a stop rule holds.

One attempt is a chain of steps that hand values on, as in docs/architecture.md:

    propose -> collect the candidate -> screen it -> measure -> keep or roll back -> record

The engine knows no terminal: it reports progress as `events` to one listener.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from autoresearch import rework as reworks
from autoresearch.approval import merged_tree
from autoresearch.attempt import AttemptRecord, Incumbent, Status, StopReason
from autoresearch.config import Campaign
from autoresearch.errors import AutoresearchError, WorkspaceHijacked
from autoresearch.evaluation import Evaluator
from autoresearch.events import (
    Attempted,
    Listener,
    Noted,
    PhaseChanged,
    Started,
    Stopped,
    Warned,
)
from autoresearch.executors import Executor, executor_for
from autoresearch.guidance import Guidance, Guide
from autoresearch.holdout import Holdout
from autoresearch.integrity import Fingerprint
from autoresearch.ledger import Ledger, StateFile
from autoresearch.lifecycle import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TAMPERED,
    Interrupted,
    Lifecycle,
    RunResult,
    raise_interrupted,
)
from autoresearch.parallel import (
    kill_slot_leftovers,
    lost_in_slots,
    refuse_sequential_only,
    run_slots,
)
from autoresearch.prompt import proposal_context
from autoresearch.proposers import create_proposer, proposer_confinement, validate_proposer
from autoresearch.proposers.base import Outcome, Proposal, Proposer
from autoresearch.proposing import CheckoutWatch, ask
from autoresearch.recording import (
    Collected,
    Judged,
    Steps,
    attempt_record,
    baseline_record,
    describe,
    in_flight_record,
)
from autoresearch.repeats import TreeIndex, git_trees
from autoresearch.review import Review
from autoresearch.screening import Screened, screen
from autoresearch.startup import (
    LOST_REASON,
    dirty_checkout_warning,
    fix_judge,
    lost_attempt,
    mark_running,
    start_commit,
    to_measure,
    utc_now,
)
from autoresearch.stopping import StopRules, stop_reason
from autoresearch.summary import summarize
from autoresearch.workspace import Workspace

PROPOSER_FAILURE_LIMIT = 3
# A candidate screened out for what it touched keeps no ref: its content is not stored.
REJECTED_CONTENT = frozenset({Status.SCOPE_VIOLATION, Status.TAMPERED})
# After these outcomes only the attempt's own paths need undoing; anything unusual (a
# signal, a tamper, a proposer that failed midway) gets a full reset.
FAST_ROLLBACK = frozenset(
    {
        Status.KEEP,
        Status.DISCARD,
        Status.CRASH,
        Status.GUARD_FAILED,
        Status.NO_CHANGE,
        Status.DUPLICATE,
    }
    | {s for s in Status if s.rule_kept}
)


class Engine:
    def __init__(
        self,
        campaign: Campaign,
        *,
        proposer: Proposer | None = None,
        executor: Executor | None = None,
        on_event: Listener | None = None,
        max_iterations: int | None = None,
        clock: Callable[[], float] = time.monotonic,
        unattended: bool = False,
        approve: AttemptRecord | None = None,
        jobs: int | None = None,
    ) -> None:
        self.campaign = campaign
        self.cfg = campaign.config
        self.proposer = proposer
        self.own_proposer = proposer is None  # made from the config: one per slot with jobs
        self.jobs = jobs or campaign.config.executor.jobs
        self.requeue: list[AttemptRecord] = []  # candidates of slots lost in a crash
        self.executor: Executor = executor or executor_for(campaign)
        self.on_event: Listener = on_event or (lambda event: None)
        self.clock = clock
        self.max_iterations = (
            self.cfg.stop.max_iterations if max_iterations is None else max_iterations
        )
        self.ledger = Ledger(campaign.state_dir)
        self.state = StateFile(campaign.state_dir)
        self.logs = campaign.state_dir / "logs"
        self.workspace = Workspace(
            campaign.root, campaign.name, campaign.state_dir, list(self.cfg.share)
        )
        self.records: list[AttemptRecord] = []
        self.incumbent = Incumbent("", "", None)
        self.fingerprint = Fingerprint()
        self.proposer_failures = 0
        self.pending: AttemptRecord | None = None  # an interrupted candidate to measure
        self.guide, self.guidance = Guide(campaign), Guidance()
        self.rework: reworks.Rework | None = None  # a candidate sent back to its proposer
        self.unattended = unattended
        self.approve = approve  # a parked candidate to re-check against the best (approval.py)
        self.started = clock()

    # -- events and state ---------------------------------------------------------------

    def phase(self, phase: str, iteration: int | None = None, **extra: Any) -> None:
        self.state.update(
            durable=False, phase=phase, iteration=iteration, updated_utc=utc_now(), **extra
        )
        self.on_event(PhaseChanged(phase, iteration, **extra))

    def warn(self, message: str) -> None:
        self.on_event(Warned(message))

    def summary(self) -> dict[str, Any]:
        return summarize(self.cfg.name, str(self.cfg.metric.direction), self.records).to_json()

    # -- run ----------------------------------------------------------------------------

    def run(self, attempts: int | None = None) -> RunResult:
        """Run until a stop rule holds; with `attempts`, pause after that many (the
        agent-driven mode: `start` makes none, `step` one). A paused run's stop reason is
        "": the campaign goes on with the next call."""
        with Lifecycle(self.campaign, self.executor, self.warn, raise_interrupted):
            try:
                return self._run(attempts)
            finally:
                if self.proposer is not None:
                    self.proposer.close()
                self.state.update(running=False, phase="stopped", updated_utc=utc_now())

    def _run(self, attempts: int | None = None) -> RunResult:
        self._open()
        try:
            if not self.records:
                failure = self._baseline()
                if failure:
                    return self._finish(StopReason.BASELINE_FAILED, EXIT_FAILED, failure)
            if self.approve is not None:
                self._approved(self.approve)
                return self._finish(StopReason.MAX_ITERATIONS, EXIT_OK)
            if self.jobs > 1:
                done = run_slots(self, self.jobs)
                return self._finish(done.reason, done.code, done.message)
            while (stop := self._stop_reason()) is None:
                if attempts is not None and attempts <= 0:
                    self.state.update(waiting=True)
                    return RunResult("", EXIT_OK, self.summary())
                attempts = None if attempts is None else attempts - 1
                record = self._attempt(self._last_iteration() + 1)
                if record.status.halts:
                    message = f"campaign halted: {record.reason}"
                    return self._finish(StopReason(record.status), EXIT_TAMPERED, message)
                if self.proposer_failures >= PROPOSER_FAILURE_LIMIT:
                    message = (
                        f"the proposer failed {self.proposer_failures} times in a row; last: "
                        f"{record.reason}"
                    )
                    return self._finish(StopReason.PROPOSER_FAILED, EXIT_FAILED, message)
            if self.cfg.stop.ablate:
                self._ablate()
            return self._finish(stop, EXIT_OK)
        except Interrupted as exc:
            code = EXIT_INTERRUPTED if exc.signum == signal.SIGINT else 128 + exc.signum
            return self._finish(StopReason.INTERRUPTED, code)

    def _approved(self, parked: AttemptRecord) -> AttemptRecord:
        """Measure a parked candidate's change on top of the current best, as one attempt."""
        tree = merged_tree(self.campaign.root, parked, self.incumbent.commit)
        self.pending = replace(parked, commit=tree)
        self.review.approved = True
        return self._attempt(self._last_iteration() + 1, approval_of=parked.iteration)

    def _open(self) -> None:
        """Load or start the campaign: workspace at the incumbent, judge fingerprinted."""
        refuse_sequential_only(self.campaign, self.jobs)
        mark_running(self.state, self.campaign, self.max_iterations)
        self.state.update(isolation=self.executor.isolation, waiting=False)
        repaired = self.ledger.repair()
        if repaired:
            self.warn(repaired)
        self.records = self.ledger.read()
        if self.proposer is None:
            confinement = proposer_confinement(self.campaign, self.workspace.objects())
            self.proposer = create_proposer(self.campaign, confinement=confinement)
        start = start_commit(self.campaign, self.workspace, self.ledger, self.records)
        dirty = dirty_checkout_warning(self.campaign)
        if dirty:
            self.warn(dirty)
        # The agent-driven mode's proposer takes the workspace over as the agent left it.
        reopen = getattr(self.proposer, "reopen_workspace", None)
        kept = callable(reopen) and reopen(self.workspace, start)
        for warning in [] if kept else self.workspace.ensure(start):
            self.warn(warning)
        validate_proposer(self.proposer, self.workspace.path)
        resumed = bool(self.records)
        self.fingerprint, self.rules = fix_judge(self.campaign, self.workspace, self.state, resumed)
        best = next((r.metric for r in reversed(self.records) if r.status.sets_best), None)
        self.incumbent = Incumbent(start, self.workspace.tree_of(start), best)
        self.evaluator = Evaluator(
            self.campaign,
            self.workspace,
            self.executor,
            self.fingerprint,
            self.logs,
            self.phase,
            others_sealed=self._proposer_sealed,
        )
        self.evaluator.load(self.records)
        self.trees = TreeIndex(git_trees(self.workspace.git))
        self.trees.load(self.records)
        self.review = Review(
            self.campaign,
            self.evaluator,
            lambda a, b: self.workspace.git.run("diff", "--numstat", "--no-renames", a, b),
            unattended=self.unattended,
        )
        self.holdout = Holdout(self.campaign, self.evaluator, start) if self.cfg.holdout else None
        if self.holdout is not None:
            self.holdout.load(self.records)
            self.review.holdout = self.holdout.check
        if self.records:
            self._decision()
        lost = lost_attempt(self.state, self.records, start)
        if lost is not None:
            self._log(lost)
            self.pending = lost if to_measure(lost, self.workspace) else None
        for warning in kill_slot_leftovers(self.campaign.state_dir):
            self.warn(warning)
        for lost in lost_in_slots(self.state.read(), self.records):
            self._log(lost)
            if to_measure(lost, self.workspace):
                self.requeue.append(lost)
        self.state.update(in_flight=None, in_flight_record=None, slots=None)
        # A candidate sent back for rework waits in the ledger, not in this process.
        self.rework = reworks.pending(self.records, start, self.logs)
        where = str(self.workspace.path)
        self.on_event(Started(self.summary(), self.max_iterations, where, resumed))

    def _finish(self, reason: StopReason, code: int, message: str = "") -> RunResult:
        evaluator = getattr(self, "evaluator", None)  # none when stopped before it opened
        holdout = getattr(self, "holdout", None)
        settled = reason not in (StopReason.INTERRUPTED, StopReason.TAMPERED)
        if holdout is not None and settled and self.records and self.records[0].commit:
            final = holdout.final(self.incumbent.commit, self.records[0].commit)
            if final is not None:
                self.state.update(holdout=final)
        if evaluator is not None:
            evaluator.discard()
        self.workspace.close_watch()
        self.state.update(stop_reason=reason, stop_message=message, stopped_utc=utc_now())
        result = RunResult(reason, code, self.summary(), message)
        self.on_event(
            Stopped(reason, result.summary, message, self.workspace.branch, str(self.ledger.path))
        )
        return result

    def _last_iteration(self) -> int:
        return max((r.iteration for r in self.records), default=0)

    def _stop_reason(self) -> StopReason | None:
        rules = StopRules.of(self.cfg, self.max_iterations)
        summary = summarize(self.cfg.name, str(self.cfg.metric.direction), self.records)
        minutes = (self.clock() - self.started) / 60.0
        reason = stop_reason(rules, summary, self.incumbent.metric, self._last_iteration(), minutes)
        exhausted = getattr(self.proposer, "exhausted", None)
        if reason is None and callable(exhausted) and exhausted():
            return StopReason.SPACE_EXHAUSTED
        return reason

    def _ablate(self) -> None:
        """`[stop] ablate`: which kept changes carry the gain, once the campaign is done."""
        from autoresearch.ablation import ablate_campaign

        self.phase("ablating")
        try:
            report = ablate_campaign(
                self.campaign, self.workspace, self.executor, self.fingerprint, self.records,
                self.phase, self.warn, tree=self.evaluator.tree,
            )  # fmt: skip
        except AutoresearchError as exc:
            self.warn(f"no ablation: {exc}")
            return
        neutral = ", ".join(f"#{i}" for i in report.neutral) or "none"
        self.warn(f"ablation: neutral kept changes {neutral}; see ablation.md")

    # -- the baseline -------------------------------------------------------------------

    def _baseline(self) -> str | None:
        began = self.clock()
        self.logs.mkdir(parents=True, exist_ok=True)
        measured = self.evaluator.baseline(self.incumbent.commit)
        if measured.failure:
            return (
                f"the baseline measurement failed: {measured.reason}; see "
                f"{self.logs.relative_to(self.campaign.root)}/ and fix the metric command "
                "(try `autoresearch check`)."
            )
        guard = self.evaluator.run_guard(0, self.incumbent.commit)
        if guard.failure:
            return (
                f"the guard fails on the unchanged code ({guard.reason}); fix the code or the "
                "guard command first."
            )
        self.incumbent = Incumbent(self.incumbent.commit, self.incumbent.tree, measured.metric)
        self.workspace.record_ref(0, self.incumbent.commit)
        engine = self.clock() - began - measured.seconds - guard.seconds
        record = self._log(baseline_record(self.incumbent, measured, guard, engine))
        self.trees.add(record, self.incumbent.tree)
        self._decision()
        return None

    def _decision(self) -> None:
        """Say which rule decides (and why, under `auto`), and keep it for `status`."""
        text = self.evaluator.decision_text()
        self.state.update(decision=text, estimator=self.evaluator.rule.estimator)
        self.on_event(Noted(text))

    # -- one attempt --------------------------------------------------------------------

    def _attempt(self, iteration: int, approval_of: int | None = None) -> AttemptRecord:
        began, before = self.clock(), self.incumbent
        self.logs.mkdir(parents=True, exist_ok=True)
        self.state.update(in_flight=iteration, in_flight_record=None)
        steps = Steps(iteration, began)
        pending, self.pending = self.pending, None
        # The rework's try, unless this attempt measures another candidate (an approved
        # one, or one a stopped engine left in flight that was not this try): it waits.
        rework = self.rework
        tried = pending is None or (
            approval_of is None and rework is not None and pending.rework_of == rework.of
        )
        if tried:
            self.rework = None
        else:
            rework = None
        steps = replace(steps, rework_of=rework.of if rework else None)
        try:
            if pending is None:
                note = None
                proposal, seconds, watch = self._propose(iteration, rework)
            else:
                note = f"the candidate of attempt {pending.iteration}, measured on resume"
                if approval_of is not None:
                    note = f"approved: attempt {approval_of}'s change, re-checked on the best"
                proposal, seconds, watch = self._replay(pending)
                self.guidance = Guidance(hypothesis=pending.hypothesis)
            steps = replace(
                steps,
                proposal=proposal,
                propose_seconds=seconds,
                note=note,
                approval_of=approval_of,
                guidance=self.guidance,
            )
            collected = self._collect(iteration, proposal, watch)
            steps = replace(steps, collected=collected)
            if collected.commit is not None:  # a kill from here on must not lose it
                known = in_flight_record(steps, before, LOST_REASON).to_json()
                self.state.update(in_flight=iteration, in_flight_record=known)
            self._count_proposer_failures(proposal)
            changes = list(collected.checkout_changes)
            screened = screen(proposal, collected.candidate, changes, self.rules)
            # Files measured before are not measured again; a rework try starts from its
            # refused candidate on purpose, so it is judged as a try, not a repeat.
            if screened is None and pending is None and rework is None:
                screened = self.trees.screen(collected.candidate.tree)
            if screened is not None and screened.status in REJECTED_CONTENT:
                self.workspace.forget(iteration)  # its content is not kept under a ref
            outcome = screened or self._measure(iteration, collected, rework)
            steps = replace(steps, outcome=outcome)
            self.workspace.check()
        except WorkspaceHijacked as exc:
            # Nothing is rolled back: the folder is not the engine's any more.
            steps = replace(steps, outcome=Screened(Status.TAMPERED, str(exc)))
            return self._record(steps, before)
        except Interrupted:
            reason = "stopped by a signal during the attempt"
            steps = replace(steps, outcome=Screened(Status.INTERRUPTED, reason))
            self._settle(steps)
            self._record(steps, before)
            raise
        self._settle(steps)
        record = self._record(steps, before)
        if tried:
            self.rework = reworks.after(record, rework, self.logs)
        if self.rework is not None and self._edits_in_place():
            # The agent makes its try in the workspace: the candidate waits there for it.
            self.workspace.load_tree(self.rework.commit)
        return record

    def _proposer_sealed(self) -> bool:
        """Whether nothing the proposer starts outlives it: its commands sealed by
        bubblewrap, or its writes the engine's own code (an agent that drives works on its
        own, outside). Only then may the kernel's account of a folder stand for it."""
        return not self._edits_in_place() and (
            not getattr(self.proposer, "runs_commands", True)
            or getattr(self.proposer, "confined", False)
        )

    def _edits_in_place(self) -> bool:
        """The agent-driven mode: the proposal is the edit found in the workspace."""
        return callable(getattr(self.proposer, "reopen_workspace", None))

    def _propose(
        self, iteration: int, rework: reworks.Rework | None = None
    ) -> tuple[Proposal, float, CheckoutWatch]:
        """Ask the proposer for one change while the user's checkout is watched."""
        assert self.proposer is not None
        self.phase("proposing", iteration)
        records, best = self.records, self.incumbent.metric
        path = self.workspace.path
        self.guidance = self.guide.next(records)
        ctx = proposal_context(
            self.campaign, records, iteration, best, path, self.logs, self.guidance
        )
        if rework is not None:  # the try starts from the candidate the guard refused
            # An agent's edit was made on top of it (`step` left it in the workspace).
            if not getattr(self.proposer, "edited_on_candidate", False):
                self.workspace.load_tree(rework.commit)
            limit = self.cfg.guard.rework if self.cfg.guard else 0
            ctx = reworks.context(ctx, rework, limit)
        # A confined proposer cannot see the checkout: there is nothing to watch.
        watched = (
            self.cfg.sandbox.watch_checkout
            and getattr(self.proposer, "runs_commands", True)
            and not getattr(self.proposer, "confined", False)
        )
        watch = CheckoutWatch(self.campaign.root, list(self.cfg.share), watched)
        self.workspace.watch(self._proposer_sealed())
        began = self.clock()
        proposal = ask(self.proposer, ctx, self.logs / f"{iteration:04d}-proposer-error.txt")
        return proposal, self.clock() - began, watch

    def _replay(self, lost: AttemptRecord) -> tuple[Proposal, float, CheckoutWatch]:
        """Put an interrupted attempt's committed candidate back in the workspace, as if its
        proposer had just made it (its cost is on the interrupted record already)."""
        assert lost.commit is not None
        self.workspace.load_tree(lost.commit)
        watch = CheckoutWatch(self.campaign.root, [], enabled=False)
        return Proposal(description=lost.description), 0.0, watch

    def _collect(self, iteration: int, proposal: Proposal, watch: CheckoutWatch) -> Collected:
        """Find out from git what changed, and commit it as the attempt's candidate."""
        self.phase("checking", iteration)
        watch.scan_after()
        candidate = self.workspace.collect(
            self.incumbent.commit, self.incumbent.tree, admit=self.rules.admits
        )
        changed = watch.changes()
        if changed:
            return Collected(candidate, proposal.description, checkout_changes=tuple(changed))
        description = proposal.description or describe(candidate)
        if not candidate.changes:
            return Collected(candidate, description)
        if not candidate.staged:  # refused paths: named, never stored, so no commit
            named = ", ".join(f"{c.path} ({c.status})" for c in candidate.changes[:8])
            return Collected(candidate, description, diffstat=named)
        message = f"autoresearch {self.cfg.name} #{iteration}: {description}"
        commit = self.workspace.commit(candidate, self.incumbent.commit, message, iteration)
        diffstat = self.workspace.diffstat(self.incumbent.commit, commit)
        return Collected(candidate, description, commit, diffstat)

    def _count_proposer_failures(self, proposal: Proposal) -> None:
        failed = proposal.failed or proposal.timed_out
        self.proposer_failures = self.proposer_failures + 1 if failed else 0

    def _measure(
        self, iteration: int, collected: Collected, rework: reworks.Rework | None = None
    ) -> Judged:
        """Measure against the incumbent until the rule decides, then review the rest
        (constraints, simplicity, guard, holdout, approval: review.py)."""
        assert collected.commit is not None
        measured = self.evaluator.evaluate(
            iteration, collected.candidate, collected.commit, self.incumbent.commit
        )
        if measured.failure:
            return Judged(Status(measured.failure), measured.reason, measured)
        # An approved change is re-checked as it stands: no rework for it.
        limit = self.cfg.guard.rework if self.cfg.guard and not self.review.approved else 0
        return self.review.judge(
            iteration,
            collected.commit,
            collected.files,
            measured,
            self.incumbent,
            reworks.left(limit, rework),
        )

    def _settle(self, steps: Steps) -> None:
        """Keep the candidate or roll it back: the worktree is exactly the incumbent after."""
        outcome, collected = steps.outcome, steps.collected
        if isinstance(outcome, Judged) and outcome.status is Status.KEEP:
            assert collected is not None and collected.commit is not None
            self.workspace.advance(collected.commit, self.incumbent.commit)
            tree = collected.candidate.tree
            self.incumbent = Incumbent(collected.commit, tree, outcome.measured.metric)
            self.evaluator.kept(collected.commit)
            self.proposer_failures = 0
        candidate = collected.candidate if collected else None
        fast = outcome.status in FAST_ROLLBACK
        kept = outcome.status is Status.KEEP
        problem = self.workspace.roll_back(candidate, self.incumbent.commit, kept=kept, fast=fast)
        if problem:
            self.warn(f"falling back to a full reset: {problem}")

    def _record(self, steps: Steps, before: Incumbent) -> AttemptRecord:
        """Log the attempt (fsynced) and tell the proposer how it went."""
        record = self._log(attempt_record(steps, before, self.incumbent, self.clock()))
        # Not fsynced: the ledger already holds the attempt, and a resume ignores an
        # in-flight number it has a record for.
        self.state.update(durable=False, in_flight=None)
        if steps.collected is not None and record.commit is not None:
            self.trees.add(record, steps.collected.candidate.tree)
        output = steps.proposal.output_path if steps.proposal else None
        for message in self.guide.learn(self.records, output):
            self.warn(message)
        if self.proposer is not None and record.status is not Status.INTERRUPTED:
            direction = str(self.cfg.metric.direction)
            best, metric = self.incumbent.metric, self.trees.answer(record)
            memory = self.guide.memory(self.records)
            self.proposer.observe(
                Outcome(steps.iteration, record.status, metric, best, direction, memory)
            )
        return record

    def _log(self, record: AttemptRecord) -> AttemptRecord:
        stored = self.ledger.append(replace(record, utc=utc_now()))
        self.records.append(stored)
        self.on_event(Attempted(stored, self.incumbent.metric, self.max_iterations))
        return stored
