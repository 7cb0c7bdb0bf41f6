"""The campaign loop: a baseline, then attempts until a stop rule holds.

The loop is one for every number of jobs, as in docs/architecture.md:

    while no stop rule holds:
        give each free place a task: the next queued candidate, else a fresh proposal
        wait for an attempt to land (procedure.run_attempt) -> conclude it here

Concluding is the engine thread's alone: keep (or merge a winner measured against an
older incumbent), record, learn, tell the proposer, put the place back. The engine knows
no terminal: it reports progress as `events` to one listener.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from autoresearch.attempt import AttemptRecord, Incumbent, Status, StopReason
from autoresearch.checks import rework as reworks
from autoresearch.checks.approval import merged_tree
from autoresearch.checks.holdout import Holdout
from autoresearch.checks.review import Review
from autoresearch.config import Campaign
from autoresearch.engine.lifecycle import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TAMPERED,
    Interrupted,
    Lifecycle,
    RunResult,
    raise_interrupted,
)
from autoresearch.engine.merging import alone, merged
from autoresearch.engine.procedure import STOPPED, Place, Ran, Task, release
from autoresearch.engine.queue import CandidateQueue, Queued, Why
from autoresearch.engine.recording import (
    Judged,
    Steps,
    attempt_record,
    baseline_record,
    kept_level,
)
from autoresearch.engine.screening import Rules
from autoresearch.engine.slots import (
    Inline,
    Landed,
    Parts,
    Runner,
    Slots,
    kill_slot_leftovers,
    lost_in_slots,
)
from autoresearch.engine.startup import (
    dirty_checkout_warning,
    fix_judge,
    lost_attempt,
    mark_running,
    resume_notes,
    start_commit,
    to_measure,
    utc_now,
)
from autoresearch.engine.stopping import StopRules, stop_reason
from autoresearch.errors import AutoresearchError
from autoresearch.events import Attempted, Listener, Noted, PhaseChanged, Started, Stopped, Warned
from autoresearch.executors import Executor, executor_for
from autoresearch.learning.guidance import Guide
from autoresearch.measure.evaluation import Evaluator, passed_values
from autoresearch.measure.integrity import Fingerprint
from autoresearch.measure.repeats import TreeIndex, git_trees
from autoresearch.proposers import create_proposer, proposer_confinement, validate_proposer
from autoresearch.proposers.base import Outcome, Proposal, Proposer, as_proposer
from autoresearch.proposers.network import ANY_HOST_WARNING
from autoresearch.stats.decide import JUDGE_VERSION
from autoresearch.store.ledger import Ledger, StateFile
from autoresearch.store.summary import summarize
from autoresearch.workspace import Workspace, head_of

PROPOSER_FAILURE_LIMIT = 3


# Phases that `state.json` shows from the next write on, which follows within the attempt
# (the committed candidate, or the measurement): each write is a file renamed into place,
# and checking what changed takes a moment once the kernel names the touched paths.
STAGED_PHASES = frozenset({"checking"})


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
        plateau_after: int = 0,
    ) -> None:
        self.campaign = campaign
        # `run --more`: the plateau rule counts only the attempts after this one, so a
        # campaign that stopped on a plateau gets the attempts it was given.
        self.plateau_after = plateau_after
        self.cfg = campaign.config
        self.proposer = None if proposer is None else as_proposer(proposer)
        self.own_proposer = proposer is None  # made from the config: one per slot with jobs
        self.jobs = jobs or campaign.config.executor.jobs
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
        self.queue = CandidateQueue()  # candidates measured before the proposer is asked
        self.guide = Guide(campaign)
        self.unattended = unattended
        self.approve = approve  # a parked candidate to re-check against the best (approval.py)
        self.started = clock()
        self.evaluator: Evaluator | None = None
        # What was last said of the noise's learned shape, and how many estimator switches.
        self.noise_said: tuple[str | None, int] = (None, 0)
        self.holdout: Holdout | None = None
        self.halted: RunResult | None = None
        # What the attempts another slot's halt cut short record as their reason.
        self.cut_off: str | None = None

    @property
    def rework(self) -> reworks.Rework | None:
        """The candidate sent back for rework, waiting for its try."""
        return self.queue.rework()

    # -- events and state ---------------------------------------------------------------

    def phase(self, phase: str, iteration: int | None = None, **extra: Any) -> None:
        fields = dict(phase=phase, iteration=iteration, updated_utc=utc_now(), **extra)
        if phase in STAGED_PHASES:
            self.state.stage(**fields)
        else:
            self.state.update(durable=False, **fields)
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

    def _run(self, attempts: int | None) -> RunResult:
        place = self._open()
        try:
            if not self.records:
                failure = self._baseline()
                if failure:
                    return self._finish(StopReason.BASELINE_FAILED, EXIT_FAILED, failure)
            if self.approve is not None:
                self._queue_approval(self.approve)
                attempts = 0  # the approved change alone: it is measured however many remain
            paused = self._loop(place, attempts)
            if self.halted is not None:
                return self._finish_with(self.halted)
            if self.approve is not None:
                return self._finish(StopReason.MAX_ITERATIONS, EXIT_OK)
            if self.proposer_failures >= PROPOSER_FAILURE_LIMIT:
                last = next((r for r in reversed(self.records) if r.status.is_failure), None)
                message = (
                    f"the proposer failed {self.proposer_failures} times in a row; last: "
                    f"{last.reason if last else ''}"
                )
                return self._finish(StopReason.PROPOSER_FAILED, EXIT_FAILED, message)
            if paused:
                self.workspace.settle_private_git()
                self.state.update(waiting=True, in_flight=None)
                return RunResult("", EXIT_OK, self.summary())
            stop = self._stop_reason() or StopReason.MAX_ITERATIONS
            if self.cfg.stop.ablate:
                self._ablate()
            return self._finish(stop, EXIT_OK)
        except Interrupted as exc:
            code = EXIT_INTERRUPTED if exc.signum == signal.SIGINT else 128 + exc.signum
            return self._finish(StopReason.INTERRUPTED, code)

    def _loop(self, place: Place, attempts: int | None) -> bool:
        """Attempts until a stop rule holds, or `attempts` were made (then True: paused)."""
        runner = self._runner(place)
        try:
            while True:
                if self.halted is None:
                    attempts = self._fill(runner, attempts)
                if not runner.busy():
                    return attempts is not None and attempts <= 0 and self._stop_reason() is None
                self._conclude(runner, runner.next_landed())
        except Interrupted:
            runner.cancel(lambda landed: self._conclude(runner, landed))
            raise
        finally:
            runner.close()

    def _runner(self, place: Place) -> Runner:
        if self.jobs <= 1:
            return Inline(place, self.state)
        parts = Parts(
            self.campaign,
            place,
            self.executor,
            self.fingerprint,
            self._proposer_sealed,
            self.own_proposer,
            self.state,
            self.on_event,
            self.holdout,
        )
        slots = Slots(parts, self.jobs)
        for warning in slots.open(self.incumbent.commit):
            self.warn(warning)
        return slots

    def _fill(self, runner: Runner, attempts: int | None) -> int | None:
        """Give every free place its next task: queued candidates first, then the proposer.
        Returns the attempts still to make (None: no limit)."""
        for free in runner.free():
            finishing = self.queue.pop(finishing_only=True)
            if finishing is not None:
                self._assign(runner, free, finishing)
                continue
            if self.proposer_failures >= PROPOSER_FAILURE_LIMIT:
                break
            if attempts is not None and attempts <= 0:
                break
            if self._next_iteration(runner) > self.max_iterations or self._stop_reason():
                break
            attempts = None if attempts is None else attempts - 1
            self._assign(runner, free, self.queue.pop())
        return attempts

    def _next_iteration(self, runner: Runner) -> int:
        running = [t.iteration for t in runner.tasks.values()]
        return max([self._last_iteration(), *running]) + 1

    def _assign(self, runner: Runner, place: Place, queued: Queued | None) -> None:
        again = queued.again if queued is not None else None
        if again is not None:  # the attempt goes on under its own number
            task = Task(again.steps.iteration, again.start, again.steps.began, queued=queued)
        else:
            if queued is not None and queued.why is Why.REWORK:
                assert queued.rework is not None
                if not self._rework_holds(queued.rework):
                    queued = None  # built on an incumbent that is not the best any more
            iteration = self._next_iteration(runner)
            self.logs.mkdir(parents=True, exist_ok=True)
            records = tuple(self.records)
            task = Task(iteration, self.incumbent, self.clock(), records, queued)
        runner.assign(place, task)

    def _rework_holds(self, rework: reworks.Rework) -> bool:
        record = next((r for r in reversed(self.records) if r.iteration == rework.of), None)
        return record is not None and record.parent == self.incumbent.commit

    def _queue_approval(self, parked: AttemptRecord) -> None:
        """A parked candidate's change on top of the current best, measured as one attempt."""
        tree = merged_tree(self.campaign.root, parked, self.incumbent.commit)
        self.queue.push(Queued(Why.APPROVED, record=replace(parked, commit=tree)), front=True)

    # -- concluding an attempt (the engine's thread) ------------------------------------

    def _conclude(self, runner: Runner, landed: Landed) -> None:
        place, task, ran = landed.place, landed.task, landed.ran
        if landed.error is not None:
            runner.ended(place)
            runner.cancel(lambda other: self._conclude(runner, other))
            raise landed.error
        steps, queued = ran.steps, task.queued
        again = queued.again if queued is not None else None
        cancelled = place.cancelled.is_set()
        outcome = steps.outcome
        if isinstance(outcome, Judged) and outcome.status is Status.KEEP:
            if task.start.commit != self.incumbent.commit:
                follow = merged(
                    self.workspace,
                    self.cfg.name,
                    task,
                    steps,
                    self.incumbent,
                    self._kept_since(task.start.commit),
                    cancelled=cancelled,
                )
                if isinstance(follow, Queued):
                    self._set_aside(runner, place, ran, task, follow)
                    return
                steps = follow
            else:
                self._keep(steps)
        elif isinstance(outcome, Judged) and again is not None and not cancelled:
            retry = alone(self.workspace, task, steps, self.incumbent)
            if retry is not None:
                self._set_aside(runner, place, ran, task, retry)
                return
        outcome = steps.outcome
        if self.cut_off is not None and outcome is not None and outcome.reason == STOPPED:
            # Cut off by another slot's halt, not by a signal: say which.
            steps = replace(steps, outcome=replace(outcome, reason=self.cut_off))
        if ran.disk_full:  # the candidate's files go first: the record needs their room
            self._release(place, ran, task)
        stored = self._log(self._record(runner, place, task, steps))
        self._noise_news()
        if steps.proposal is not None and steps.proposal.network_refused:
            self.warn(f"attempt {stored.iteration}: {steps.proposal.network_note}")
        if steps.collected is not None and stored.commit is not None:
            self.trees.add(stored, steps.collected.candidate.tree)
        output = steps.proposal.output_path if steps.proposal else None
        for message in [] if ran.disk_full else self.guide.learn(self.records, output):
            self.warn(message)
        if steps.proposal is not None and again is None:
            failed = steps.proposal.failed or steps.proposal.timed_out
            self.proposer_failures = self.proposer_failures + 1 if failed else 0
        if stored.status.sets_best:
            self.proposer_failures = 0
        if not ran.disk_full:
            self._release(place, ran, task)
        self._follow_rework(place, stored, queued)
        runner.ended(place)
        if stored.status is not Status.INTERRUPTED:
            place.proposer.observe(self._outcome(stored))
        if stored.status.halts and self.halted is None:
            message = f"campaign halted: {stored.reason}"
            self.cut_off = (
                f"cut off when attempt {stored.iteration} halted the campaign "
                f"({stored.status}: {stored.reason})"
            )
            self.halted = RunResult(StopReason(stored.status), EXIT_TAMPERED, {}, message)
            runner.cancel(lambda other: self._conclude(runner, other))
        if ran.disk_full and self.halted is None:
            message = f"campaign halted, the disk is full: {stored.reason}; free space and resume"
            self.cut_off = f"cut off when attempt {stored.iteration} found the disk full"
            self.halted = RunResult(StopReason.DISK_FULL, EXIT_FAILED, {}, message)
            runner.cancel(lambda other: self._conclude(runner, other))
        if ran.stopped_by is not None and not runner.parallel:
            raise ran.stopped_by

    def _record(self, runner: Runner, place: Place, task: Task, steps: Steps) -> AttemptRecord:
        record = attempt_record(steps, task.start, self.incumbent, self.clock())
        again = task.queued.again if task.queued is not None else None
        combined = again.combined if again is not None else ()
        status = record.status
        if status is Status.KEEP and combined:
            status = Status.MERGED
        if not runner.parallel:
            return record
        measured = isinstance(steps.outcome, Judged)
        return replace(
            record,
            status=status,
            measured_against=task.start.commit if measured else None,
            slot=place.index,
            combined=combined or None,
        )

    def _set_aside(
        self, runner: Runner, place: Place, ran: Ran, task: Task, follow: Queued
    ) -> None:
        """A winner goes on as a queued measurement; its place is free meanwhile."""
        self._release(place, ran, task)
        runner.ended(place)
        self.queue.push(follow, front=True)

    def _keep(self, steps: Steps) -> None:
        outcome, collected = steps.outcome, steps.collected
        assert isinstance(outcome, Judged)
        assert collected is not None and collected.commit is not None
        self.workspace.advance(collected.commit, self.incumbent.commit)
        tree = collected.candidate.tree
        direction = str(self.cfg.metric.direction)
        best = kept_level(self.incumbent.metric, outcome.measured, direction)
        self.incumbent = Incumbent(collected.commit, tree, best)
        assert self.evaluator is not None
        self.evaluator.kept(collected.commit)

    def _release(self, place: Place, ran: Ran, task: Task) -> None:
        problem = release(place, ran, task.start, self.incumbent)
        if problem:
            self.warn(f"falling back to a full reset: {problem}")

    def _follow_rework(self, place: Place, record: AttemptRecord, queued: Queued | None) -> None:
        """A candidate sent back for rework is queued for the proposer's try."""
        if queued is not None and (queued.again is not None or queued.why is Why.APPROVED):
            return
        previous = queued.rework if queued is not None else None
        hide = passed_values(self.campaign.config.sandbox.pass_env)
        rework = reworks.after(record, previous, self.logs, hide)
        if rework is None:
            return
        self.queue.push(Queued(Why.REWORK, rework=rework), front=True)
        if place.proposer.edits_in_place:
            # The agent makes its try in the workspace: the candidate waits there for it.
            place.workspace.load_tree(rework.commit)

    def _outcome(self, record: AttemptRecord) -> Outcome:
        direction = str(self.cfg.metric.direction)
        best, metric = self.incumbent.metric, self.trees.answer(record)
        memory = self.guide.memory(self.records)
        return Outcome(record.iteration, record.status, metric, best, direction, memory)

    def _kept_since(self, commit: str) -> list[int]:
        """The attempts kept since `commit` was the incumbent, in the order the ledger
        holds them (the order they were kept in)."""
        best = [r for r in self.records if r.status.sets_best]
        commits = [r.commit for r in best]
        since = best[commits.index(commit) + 1 :] if commit in commits else best
        return [r.iteration for r in since if r.status.kept_change]

    # -- opening and finishing ----------------------------------------------------------

    def _open(self) -> Place:
        """Load or start the campaign: workspace at the incumbent, judge fingerprinted."""
        before = self.state.read()
        mark_running(self.state, self.campaign, self.max_iterations)
        self.state.update(isolation=self.executor.isolation, waiting=False)
        repaired = self.ledger.repair()
        if repaired:
            self.warn(repaired)
        self.records = self.ledger.read()
        if self.proposer is None:
            confinement = proposer_confinement(self.campaign, self.workspace.objects())
            self.proposer = create_proposer(self.campaign, confinement=confinement)
        proposer = self.proposer
        start = start_commit(self.campaign, self.workspace, self.ledger, self.records)
        dirty = dirty_checkout_warning(self.campaign)
        if dirty:
            self.warn(dirty)
        for note in resume_notes(self.campaign, self.workspace, before, self.records):
            self.warn(note)
        self.state.update(head_seen=head_of(self.campaign.root))
        # The agent-driven mode's proposer takes the workspace over as the agent left it.
        kept = proposer.edits_in_place and proposer.reopen_workspace(self.workspace, start)
        for warning in [] if kept else self.workspace.ensure(start):
            self.warn(warning)
        validate_proposer(proposer, self.workspace.path)
        if any(network.mode == "on" for network in proposer.reach()):
            self.warn(ANY_HOST_WARNING)
        resumed = bool(self.records)
        self.fingerprint, self.rules = fix_judge(self.campaign, self.workspace, self.state, resumed)
        best = next((r.best_after for r in reversed(self.records) if r.status.sets_best), None)
        self.incumbent = Incumbent(start, self.workspace.tree_of(start), best)
        evaluator = self.evaluator = Evaluator(
            self.campaign,
            self.workspace,
            self.executor,
            self.fingerprint,
            self.logs,
            self.phase,
            others_sealed=self._proposer_sealed,
        )
        evaluator.load(self.records)
        self.trees = TreeIndex(git_trees(self.workspace.git))
        self.trees.load(self.records)
        workspace = self.workspace
        if self.cfg.holdout:
            self.holdout = Holdout(self.campaign, evaluator, start)
            self.holdout.load(self.records)
            for warning in self.holdout.warnings():
                self.warn(warning)
        review = Review(
            self.campaign,
            evaluator,
            lambda a, b: workspace.git.run("diff", "--numstat", "--no-renames", a, b),
            holdout=self.holdout.check if self.holdout is not None else None,
            unattended=self.unattended,
        )
        if self.records:
            self._decision()
        self._queue_lost(start)
        where = str(self.workspace.path)
        self.on_event(Started(self.summary(), self.max_iterations, where, resumed))
        return self._place(proposer, evaluator, review, self.rules)

    def _place(
        self, proposer: Proposer, evaluator: Evaluator, review: Review, rules: Rules
    ) -> Place:
        return Place(
            self.campaign,
            self.workspace,
            evaluator,
            proposer,
            review,
            rules,
            self.trees,
            self.guide,
            self.logs,
            self.phase,
            self.clock,
            at=self.incumbent.commit,
        )

    def _queue_lost(self, start: str) -> None:
        """What an engine that was killed left: each lost attempt logged as `interrupted`,
        its committed candidate queued to be measured; the rework under way queued after."""
        hide = passed_values(self.campaign.config.sandbox.pass_env)
        rework = reworks.pending(self.records, start, self.logs, hide)
        lost = [lost_attempt(self.state, self.records, start)]
        for warning in kill_slot_leftovers(self.campaign.state_dir):
            self.warn(warning)
        lost += lost_in_slots(self.state.read(), self.records)
        for record in lost:
            if record is None:
                continue
            self._log(record)
            if to_measure(record, self.workspace):
                tried = rework if rework and record.rework_of == rework.of else None
                self.queue.push(Queued(Why.RESUMED, record=record, rework=tried))
                if tried is not None:
                    rework = None  # its try is the candidate found in flight
        self.state.update(in_flight=None, in_flight_record=None, slots=None)
        # A candidate sent back for rework waits in the ledger, not in this process.
        if rework is not None:
            self.queue.push(Queued(Why.REWORK, rework=rework))

    def _finish(self, reason: StopReason, code: int, message: str = "") -> RunResult:
        settled = reason not in (StopReason.INTERRUPTED, StopReason.TAMPERED, StopReason.DISK_FULL)
        holdout = self.holdout
        if holdout is not None and settled and self.records and self.records[0].commit:
            last = self.records[-1].iteration
            final = holdout.final(self.incumbent.commit, self.records[0].commit, last)
            if final is not None:
                self.state.update(holdout=final)
        if self.evaluator is not None:
            self.evaluator.discard()
        self.workspace.close()
        if reason is not StopReason.TAMPERED:  # a hijacked folder is not written to
            self.workspace.settle_private_git()
        self.state.update(
            stop_reason=reason, stop_message=message, stopped_utc=utc_now(), in_flight=None
        )
        result = RunResult(reason, code, self.summary(), message)
        self.on_event(
            Stopped(reason, result.summary, message, self.workspace.branch, str(self.ledger.path))
        )
        return result

    def _finish_with(self, halted: RunResult) -> RunResult:
        return self._finish(StopReason(halted.stop_reason), halted.exit_code, halted.message)

    def _last_iteration(self) -> int:
        return max((r.iteration for r in self.records), default=0)

    def _stop_reason(self) -> StopReason | None:
        rules = StopRules.of(self.cfg, self.max_iterations)
        summary = summarize(self.cfg.name, str(self.cfg.metric.direction), self.records)
        if self.plateau_after:
            recent = [r for r in self.records if r.iteration > self.plateau_after]
            streak = summarize(self.cfg.name, str(self.cfg.metric.direction), recent).streak
            summary = replace(summary, streak=streak)
        minutes = (self.clock() - self.started) / 60.0
        reason = stop_reason(rules, summary, self.incumbent.metric, self._last_iteration(), minutes)
        if reason is None and self.proposer is not None and self.proposer.exhausted():
            return StopReason.SPACE_EXHAUSTED
        return reason

    def _proposer_sealed(self) -> bool:
        """Whether nothing the proposer starts outlives it (proposers/base.py)."""
        return self.proposer is not None and self.proposer.sealed

    def _ablate(self) -> None:
        """`[stop] ablate`: which kept changes carry the gain, once the campaign is done."""
        from autoresearch.checks.ablation import ablate_campaign

        assert self.evaluator is not None
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
        assert self.evaluator is not None
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
        """Say which rule decides (and why, under `auto`) and what it can detect at this
        noise, and keep it for `status`; warn, once, when that is coarser than the gains
        looked for."""
        assert self.evaluator is not None
        text = self.evaluator.decision_text()
        detectable, warning = self.evaluator.detectable(self.incumbent.commit)
        shape, switches = self.evaluator.noise_learned()
        self.noise_said = (shape, len(switches))
        self.state.update(
            decision=text,
            estimator=self.evaluator.rule.estimator,
            speed_states=self.evaluator.book.gap or None,
            detectable=detectable or None,
            noise_shape=shape,
            estimator_switches=switches,
        )
        self.on_event(Noted(text))
        for switch in switches:
            self.on_event(Noted(switch))
        if detectable:
            self.on_event(Noted(detectable))
        if warning and not self.records[1:]:
            self.warn(warning)  # at the start only: a resume says it through `status`

    def _noise_news(self) -> None:
        """Say when `noise = "auto"` changed the estimator (and why), and keep what the
        noise looks like for `status`."""
        if self.evaluator is None:
            return
        shape, switches = self.evaluator.noise_learned()
        said_shape, said = self.noise_said
        if (shape, len(switches)) == (said_shape, said):
            return
        for text in switches[said:]:
            self.on_event(Noted(text))
        self.noise_said = (shape, len(switches))
        self.state.update(
            decision=self.evaluator.decision_text(),
            estimator=self.evaluator.rule.estimator,
            speed_states=self.evaluator.book.gap or None,
            noise_shape=shape,
            estimator_switches=switches,
        )

    def _log(self, record: AttemptRecord) -> AttemptRecord:
        judge = JUDGE_VERSION if record.judge is None else record.judge
        stored = self.ledger.append(replace(record, utc=utc_now(), judge=judge))
        self.records.append(stored)
        self.on_event(Attempted(stored, self.incumbent.metric, self.max_iterations))
        return stored


__all__ = ["PROPOSER_FAILURE_LIMIT", "Engine", "Proposal"]
