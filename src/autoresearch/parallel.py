"""Several candidates in flight at once (`[executor] jobs`): one slot per job.

A slot owns a workspace, a measurement folder, an executor and a proposer of its own (or
a share of one that can serve several slots, like the Optuna study) under
`.autoresearch/<name>/slots/<k>/`. A slot's thread runs an attempt's steps up to the
verdict with the engine's own step functions (`_propose`, `_collect`, `screen`,
`_measure`); the engine thread alone keeps, rebases, writes `state.json` and the ledger,
and emits events. The work is subprocess-bound (proposer commands, metric runs), so
threads are enough.

A candidate is measured against the incumbent its slot started from. If another
candidate was kept meanwhile, a winner is never kept on that evidence: its change is
merged onto the new incumbent (a three-way merge with `git merge-tree`); a conflict makes
it `superseded`, otherwise the combination is measured against the new incumbent and
kept (as `merged`, naming the attempts combined) only if it beats it; if it does not, the
winner's own change is measured alone against that incumbent and kept if it beats it, so
that the best single winner is what stays when the gains do not add up.
"""

from __future__ import annotations

import copy
import os
import queue
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autoresearch.attempt import AttemptRecord, Incumbent, Status, StopReason
from autoresearch.config import Campaign
from autoresearch.errors import ConfigError, GitError, WorkspaceHijacked
from autoresearch.evaluation import Evaluation, Evaluator
from autoresearch.events import PhaseChanged
from autoresearch.executors import Executor, LocalExecutor
from autoresearch.executors.base import executor_setup
from autoresearch.executors.local import leftover_warning
from autoresearch.gitcmd import IDENTITY
from autoresearch.lifecycle import EXIT_FAILED, EXIT_OK, EXIT_TAMPERED, Interrupted
from autoresearch.process import ChildRecord
from autoresearch.proposers import create_proposer, proposer_confinement
from autoresearch.proposers.base import Outcome, Proposal, ProposalContext, Proposer
from autoresearch.recording import (
    NOT_FINISHED,
    Collected,
    Judged,
    Steps,
    attempt_record,
    in_flight_record,
)
from autoresearch.sample_book import SampleBook
from autoresearch.screening import Screened, screen
from autoresearch.startup import LOST_REASON, utc_now
from autoresearch.workspace import Workspace

if TYPE_CHECKING:
    from autoresearch.engine import Engine

SLOTS = "slots"
CHILD_RECORD = "child.pgid"
STOPPED = "stopped by a signal during the attempt"


# -- what the slots share ------------------------------------------------------------------


def _locked(name: str) -> Any:
    method = getattr(SampleBook, name)

    def call(self: SharedBook, *args: Any) -> Any:
        with self.lock:
            return method(self, *args)

    call.__name__ = name
    return call


class SharedBook(SampleBook):
    """The sample book every slot's evaluator reads and writes: one lock around it, so a
    comparison never sees another slot's samples half-written."""

    def __init__(self, book: SampleBook) -> None:
        super().__init__(book.rule, book.direction)
        self.groups, self.selected, self.own = book.groups, book.selected, book.own
        self.lock = threading.RLock()

    take = _locked("take")
    baseline = _locked("baseline")
    remeasured = _locked("remeasured")
    measured = _locked("measured")
    kept = _locked("kept")
    reference = _locked("reference")
    carried = _locked("carried")
    comparison = _locked("comparison")


class SharedProposer:
    """A proposer the slots take turns with: one made in-process and handed to the engine,
    which may keep state between calls. A proposer that says `parallel_safe` is used by
    all slots at once instead (it keeps its own lock)."""

    def __init__(self, inner: Proposer) -> None:
        self.inner = inner
        self.lock = threading.Lock()
        self.runs_commands = getattr(inner, "runs_commands", True)
        self.confined = getattr(inner, "confined", False)

    def propose(self, ctx: ProposalContext) -> Proposal:
        with self.lock:
            return self.inner.propose(ctx)

    def observe(self, outcome: Outcome) -> None:
        with self.lock:
            self.inner.observe(outcome)

    def close(self) -> None:
        return None  # the engine closes the proposer it was given


class SlotWorkspace(Workspace):
    """A slot's workspace: the engine's bookkeeping, but it never moves the campaign
    branch; only the engine thread does, when it keeps a candidate."""

    def reset_to(self, commit: str) -> None:
        self.check()
        self.git.run("update-ref", "--no-deref", "HEAD", commit)
        self.restore()

    def advance(self, commit: str, expected: str) -> None:
        raise AssertionError("a slot's workspace never moves the campaign branch")


class SlotEvaluator(Evaluator):
    """The evaluator of one slot: its own measurement folder and executor, the shared
    sample book, its GPUs in the environment, and the gate that limits how many
    measurements run at once (one for an `exclusive` metric)."""

    extra_env: dict[str, str]
    gate: threading.Semaphore
    cancelled: threading.Event

    def env(self, iteration: int) -> dict[str, str]:
        env = super().env(iteration)
        env.update(self.extra_env)
        return env

    def evaluate(self, iteration: int, candidate: Any, commit: str, incumbent: str) -> Evaluation:
        with self._turn():
            return super().evaluate(iteration, candidate, commit, incumbent)

    def run_guard(self, iteration: int, commit: str) -> Evaluation:
        with self._turn():
            return super().run_guard(iteration, commit)

    @contextmanager
    def _turn(self) -> Iterator[None]:
        self.phase("waiting", None)
        with self.gate:
            yield

    def _run(self, *args: Any, **kwargs: Any) -> float | None:
        if self.cancelled.is_set():
            raise Interrupted()
        return super()._run(*args, **kwargs)


# -- messages between the slots and the engine thread -----------------------------------


@dataclass
class Task:
    iteration: int
    start: Incumbent  # the slot starts from it and measures against it
    began: float
    lost: AttemptRecord | None = None  # a candidate re-queued after the engine died
    steps: Steps | None = None  # a winner merged onto a newer incumbent: measure again
    combined: tuple[int, ...] = ()  # the attempts whose changes it holds
    alone: str = ""  # how the winner did alone, for the record of its combinations
    original: Collected | None = None  # the winner's own change, before any merge
    retried_alone: bool = False  # its combination lost: the winner alone was measured


@dataclass
class Landed:
    slot: Slot
    task: Task
    steps: Steps
    error: BaseException | None = None


@dataclass
class Progress:
    slot: Slot
    event: PhaseChanged


@dataclass
class Known:
    """A slot's candidate is committed: what the record of an engine killed now says."""

    slot: Slot
    record: AttemptRecord


Message = Landed | Progress | Known


# -- a slot ----------------------------------------------------------------------------------


@dataclass
class SlotInfo:
    iteration: int | None = None
    phase: str = "idle"
    since: str | None = None
    record: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "iteration": self.iteration,
            "phase": self.phase,
            "started_utc": self.since,
            "record": self.record,
        }


class Slot:
    def __init__(self, loop: SlotLoop, index: int) -> None:
        engine = loop.engine
        self.loop = loop
        self.index = index
        self.dir = engine.campaign.state_dir / SLOTS / str(index)
        self.workspace = SlotWorkspace(
            engine.campaign.root, engine.campaign.name, self.dir, list(engine.cfg.share)
        )
        self.child = ChildRecord(self.dir / CHILD_RECORD)
        self.executor: Executor = loop.make_executor(self)
        self.proposer: Proposer | None = None
        self.evaluator: SlotEvaluator | None = None
        self.inbox: queue.Queue[Task | None] = queue.Queue()
        self.task: Task | None = None  # the engine thread's view: busy while set
        self.info = SlotInfo()
        self.at: str | None = None  # the commit the workspace shows
        self.thread = threading.Thread(
            target=self.serve, name=f"autoresearch-slot-{index}", daemon=True
        )

    # -- in the engine thread -------------------------------------------------------------

    def open(self, start: str) -> list[str]:
        engine = self.loop.engine
        self.dir.mkdir(parents=True, exist_ok=True)
        warnings = self.workspace.ensure(start)
        self.at = start
        setup = replace(executor_setup(engine.campaign), state_dir=self.dir)
        if self.executor is not engine.executor:
            warnings += self.executor.start(setup)
        evaluator = SlotEvaluator(
            engine.campaign,
            self.workspace,
            self.executor,
            engine.fingerprint,
            engine.logs,
            self.phase,
            others_sealed=engine._proposer_sealed,
        )
        evaluator.book = self.loop.book
        evaluator.extra_env = self.loop.env_for(self.index)
        evaluator.gate = self.loop.gate
        evaluator.cancelled = self.loop.cancelled
        self.evaluator = evaluator
        self.proposer = self.loop.proposer_for(self)
        self.rules = replace(engine.rules, escapes=self.workspace.escapes)
        self.thread.start()
        return warnings

    def close(self) -> None:
        if self.thread.is_alive():
            self.inbox.put(None)
            self.thread.join(timeout=30)
        if self.proposer is not None and self.loop.owns_proposers:
            self.proposer.close()
        if self.executor is not self.loop.engine.executor:
            self.executor.close()

    # -- in the slot's thread ---------------------------------------------------------------

    def serve(self) -> None:
        self.loop.pin(self.index)
        while (task := self.inbox.get()) is not None:
            try:
                steps = self.work(task)
                self.loop.outbox.put(Landed(self, task, steps))
            except BaseException as exc:  # reported to the engine thread, which re-raises
                self.loop.outbox.put(Landed(self, task, Steps(task.iteration, task.began), exc))

    def phase(self, phase: str, iteration: int | None = None, **extra: Any) -> None:
        event = PhaseChanged(phase, iteration, slot=self.index, **extra)
        self.loop.outbox.put(Progress(self, event))

    def view(self, start: Incumbent) -> Engine:
        """The engine as this slot's steps see it: this slot's workspace, evaluator and
        proposer, and the incumbent the slot started from."""
        view = copy.copy(self.loop.engine)
        view.workspace = self.workspace
        assert self.evaluator is not None
        view.evaluator = self.evaluator
        view.proposer = self.proposer
        view.incumbent = start
        view.records = list(self.loop.records)
        view.phase = self.phase  # type: ignore[method-assign]
        return view

    def work(self, task: Task) -> Steps:
        view = self.view(task.start)
        if task.steps is not None:
            return self.measure_again(view, task, task.steps)
        steps = Steps(task.iteration, task.began)
        iteration = task.iteration
        try:
            self.ready(task.start.commit)
            if task.lost is None:
                note = None
                proposal, seconds, watch = view._propose(iteration)
            else:
                note = f"the candidate of attempt {task.lost.iteration}, measured on resume"
                proposal, seconds, watch = view._replay(task.lost)
            steps = replace(steps, proposal=proposal, propose_seconds=seconds, note=note)
            if self.loop.cancelled.is_set():
                raise Interrupted()  # the proposer was stopped, not failed
            collected = view._collect(iteration, proposal, watch)
            steps = replace(steps, collected=collected)
            if collected.commit is not None:
                known = in_flight_record(steps, task.start, LOST_REASON)
                self.loop.outbox.put(Known(self, replace(known, slot=self.index)))
            changes = list(collected.checkout_changes)
            screened = screen(proposal, collected.candidate, changes, self.rules)
            if screened is None and task.lost is None:  # files measured before: not again
                screened = view.trees.screen(collected.candidate.tree)
            if screened is not None and screened.status in REJECTED_CONTENT:
                self.workspace.forget(iteration)
            if screened is None:
                self.check_cancelled()  # what screening found stands, cancelled or not
            outcome = screened or self.stopped(view._measure(iteration, collected))
            steps = replace(steps, outcome=outcome)
            self.workspace.check()
        except WorkspaceHijacked as exc:
            # Nothing is rolled back: the folder is not the engine's any more.
            self.at = None
            return replace(steps, outcome=Screened(Status.TAMPERED, str(exc)))
        except Interrupted:
            steps = replace(steps, outcome=Screened(Status.INTERRUPTED, STOPPED))
        self.roll_back(steps, task.start.commit)
        return steps

    def measure_again(self, view: Engine, task: Task, steps: Steps) -> Steps:
        assert steps.collected is not None
        try:
            self.check_cancelled()
            outcome: Screened | Judged = self.stopped(
                view._measure(task.iteration, steps.collected)
            )
        except Interrupted:
            outcome = Screened(Status.INTERRUPTED, STOPPED)
        return replace(steps, outcome=outcome)

    def stopped(self, outcome: Judged) -> Judged:
        """A run that failed because the engine killed it (a signal, a halt) was stopped,
        not a crash of the candidate."""
        cut = outcome.status in (Status.CRASH, Status.TIMEOUT, Status.GUARD_FAILED)
        if cut and self.loop.cancelled.is_set():
            return replace(outcome, status=Status.INTERRUPTED, reason=STOPPED)
        return outcome

    def check_cancelled(self) -> None:
        if self.loop.cancelled.is_set():
            raise Interrupted()

    def ready(self, commit: str) -> None:
        """The workspace shows exactly `commit` before the proposer starts."""
        if self.at != commit:
            self.workspace.reset_to(commit)
            self.at = commit

    def roll_back(self, steps: Steps, start: str) -> None:
        collected = steps.collected
        candidate = collected.candidate if collected else None
        fast = steps.outcome.status in FAST_ROLLBACK
        try:
            self.workspace.roll_back(candidate, start, kept=False, fast=fast)
            self.at = start
        except GitError:
            self.at = None  # made afresh before the slot's next attempt


# The same sets as the sequential engine's (kept apart to avoid an import cycle).
REJECTED_CONTENT = frozenset({Status.SCOPE_VIOLATION, Status.TAMPERED})
FAST_ROLLBACK = frozenset(
    {Status.KEEP, Status.DISCARD, Status.CRASH, Status.GUARD_FAILED, Status.NO_CHANGE}
)


# -- the engine thread ---------------------------------------------------------------------


@dataclass
class Finish:
    reason: StopReason
    code: int
    message: str = ""


@dataclass
class SlotLoop:
    engine: Engine
    jobs: int
    outbox: queue.Queue[Message] = field(default_factory=queue.Queue)
    cancelled: threading.Event = field(default_factory=threading.Event)
    slots: list[Slot] = field(default_factory=list)
    next_iteration: int = 1
    halted: Finish | None = None
    kept: list[tuple[int, str]] = field(default_factory=list)  # (iteration, commit) in order

    def __post_init__(self) -> None:
        engine = self.engine
        cfg = engine.cfg.executor
        self.records = engine.records
        engine.evaluator.book = self.book = SharedBook(engine.evaluator.book)
        measure_jobs = 1 if engine.cfg.metric.exclusive else (cfg.measure_jobs or self.jobs)
        self.gate = threading.Semaphore(measure_jobs)
        self.owns_proposers = engine.own_proposer and not getattr(
            engine.proposer, "parallel_safe", False
        )
        self.shared: Proposer | None = None
        if not self.owns_proposers and engine.proposer is not None:
            parallel_safe = getattr(engine.proposer, "parallel_safe", False)
            self.shared = engine.proposer if parallel_safe else SharedProposer(engine.proposer)
        self.cpus = self._cpus()
        self.next_iteration = engine._last_iteration() + 1
        if engine.pending is not None:  # lost by a sequential run: measured here first
            engine.requeue.insert(0, engine.pending)
            engine.pending = None

    # -- slot resources ---------------------------------------------------------------------

    def make_executor(self, slot: Slot) -> Executor:
        given = self.engine.executor
        if not isinstance(given, LocalExecutor):
            return given  # one the caller made (started by the engine): shared by the slots
        return LocalExecutor(slot.child)

    def proposer_for(self, slot: Slot) -> Proposer:
        if self.shared is not None:
            return self.shared
        campaign = self.engine.campaign
        confinement = proposer_confinement(campaign, slot.workspace.objects())
        # Each slot's proposer has its own TMPDIR and its own record of its commands.
        confinement = replace(confinement, state_dir=slot.dir)
        return create_proposer(campaign, child=slot.child, confinement=confinement)

    def env_for(self, index: int) -> dict[str, str]:
        gpus = list(self.engine.cfg.executor.gpus)
        if not gpus:
            return {}
        if len(gpus) >= self.jobs:
            per = len(gpus) // self.jobs
            mine = gpus[index * per : (index + 1) * per]
        else:
            mine = [gpus[index % len(gpus)]]
        return {"CUDA_VISIBLE_DEVICES": ",".join(str(g) for g in mine)}

    def _cpus(self) -> list[list[int]]:
        per = self.engine.cfg.executor.cpus_per_job
        if not per:
            return []
        available = sorted(os.sched_getaffinity(0))
        if per * self.jobs > len(available):
            raise ConfigError(
                f"{self.engine.campaign.display_path()}: key 'executor.cpus_per_job': "
                f"{self.jobs} jobs x {per} cores need {per * self.jobs}, but this process may "
                f"use {len(available)}; lower 'jobs' or 'cpus_per_job'."
            )
        return [available[k * per : (k + 1) * per] for k in range(self.jobs)]

    def pin(self, index: int) -> None:
        """Pin the slot's thread, and so every command it starts, to the slot's cores (on
        Linux a thread's affinity is its own and children inherit it)."""
        if self.cpus:
            os.sched_setaffinity(0, self.cpus[index])

    # -- the loop ---------------------------------------------------------------------------

    def run(self) -> Finish:
        engine = self.engine
        try:
            for index in range(self.jobs):
                slot = Slot(self, index)
                self.slots.append(slot)
                for warning in slot.open(engine.incumbent.commit):
                    engine.warn(warning)
            self.write_state()
            while True:
                if self.halted is None:
                    self.fill()
                if not self.busy():
                    break
                self.handle(self.next_message())
            return self.halted or self.finish()
        except Interrupted:
            self.cancel()
            raise
        finally:
            for slot in self.slots:
                slot.close()
            engine.state.update(slots=None)

    def next_message(self) -> Any:
        """The next message from a slot. Waited for in short steps: a signal the kernel
        hands to another thread (a slot's, a log pump's) runs its handler only when this,
        the main thread, wakes, and a slot may be silent for as long as its metric runs."""
        while True:
            try:
                return self.outbox.get(timeout=0.2)
            except queue.Empty:
                continue

    def busy(self) -> list[Slot]:
        return [slot for slot in self.slots if slot.task is not None]

    def finish(self) -> Finish:
        engine = self.engine
        if engine.proposer_failures >= PROPOSER_FAILURE_LIMIT:
            last = next((r for r in reversed(self.records) if r.status.is_failure), None)
            message = (
                f"the proposer failed {engine.proposer_failures} times in a row; last: "
                f"{last.reason if last else ''}"
            )
            return Finish(StopReason.PROPOSER_FAILED, EXIT_FAILED, message)
        return Finish(engine._stop_reason() or StopReason.MAX_ITERATIONS, EXIT_OK)

    def fill(self) -> None:
        engine = self.engine
        for slot in self.slots:
            if slot.task is not None:
                continue
            if engine.proposer_failures >= PROPOSER_FAILURE_LIMIT:
                return
            if self.next_iteration > engine.max_iterations or engine._stop_reason() is not None:
                return
            lost = engine.requeue.pop(0) if engine.requeue else None
            task = Task(self.next_iteration, engine.incumbent, engine.clock(), lost=lost)
            self.next_iteration += 1
            self.assign(slot, task)

    def assign(self, slot: Slot, task: Task) -> None:
        slot.task = task
        slot.info = SlotInfo(task.iteration, "proposing", utc_now(), slot.info.record)
        if task.steps is None:
            slot.info.record = None
        self.write_state()
        slot.inbox.put(task)

    def write_state(self) -> None:
        slots = {str(s.index): s.info.to_json() for s in self.slots}
        busy = len(self.busy())
        self.engine.state.update(
            slots=slots,
            jobs=self.jobs,
            phase=f"{busy} of {self.jobs} slots busy",
            iteration=None,
            updated_utc=utc_now(),
        )

    def handle(self, message: Message) -> None:
        engine = self.engine
        if isinstance(message, Progress):
            info = message.slot.info
            if message.event.phase != "waiting":
                info.phase = message.event.phase
            else:
                info.phase = "waiting to measure"
            self.engine.state.update(
                durable=False, slots={str(s.index): s.info.to_json() for s in self.slots}
            )
            engine.on_event(message.event)
        elif isinstance(message, Known):
            message.slot.info.record = message.record.to_json()
            self.write_state()
        else:
            self.land(message)

    # -- deciding ---------------------------------------------------------------------------

    def land(self, landed: Landed) -> None:
        engine = self.engine
        slot, task, steps = landed.slot, landed.task, landed.steps
        if landed.error is not None:
            slot.task = None
            self.cancel()
            raise landed.error
        outcome = steps.outcome
        if isinstance(outcome, Judged) and outcome.status is Status.KEEP:
            if task.start.commit != engine.incumbent.commit:
                follow = self.merge(task, steps)
                if isinstance(follow, Task):
                    self.assign(slot, follow)
                    return
                steps = follow
            else:
                self.keep(steps)
        elif isinstance(outcome, Judged) and task.combined and not self.cancelled.is_set():
            retry = self.alone(task, steps)
            if retry is not None:
                self.assign(slot, retry)
                return
        record = attempt_record(steps, task.start, engine.incumbent, engine.clock())
        measured = isinstance(steps.outcome, Judged)
        status = record.status
        if status is Status.KEEP and task.combined:
            status = Status.MERGED
        record = replace(
            record,
            status=status,
            measured_against=task.start.commit if measured else None,
            slot=slot.index,
            combined=task.combined or None,
        )
        if status.kept_change:
            self.kept.append((task.iteration, record.commit or ""))
        stored = engine._log(record)
        if steps.collected is not None and stored.commit is not None:
            engine.trees.add(stored, steps.collected.candidate.tree)
        output = steps.proposal.output_path if steps.proposal else None
        for message in engine.guide.learn(engine.records, output):
            engine.warn(message)
        if steps.proposal is not None and task.steps is None:
            engine._count_proposer_failures(steps.proposal)
        if stored.status.sets_best:
            engine.proposer_failures = 0
        slot.task = None
        slot.info = SlotInfo()
        self.write_state()
        if slot.proposer is not None and stored.status is not Status.INTERRUPTED:
            direction = str(engine.cfg.metric.direction)
            slot.proposer.observe(
                Outcome(
                    task.iteration,
                    stored.status,
                    engine.trees.answer(stored),
                    engine.incumbent.metric,
                    direction,
                    engine.guide.memory(engine.records),
                )
            )
        if stored.status.halts and self.halted is None:
            message = f"campaign halted: {stored.reason}"
            self.halted = Finish(StopReason(stored.status), EXIT_TAMPERED, message)
            self.cancel()

    def keep(self, steps: Steps) -> None:
        engine = self.engine
        outcome, collected = steps.outcome, steps.collected
        assert isinstance(outcome, Judged)
        assert collected is not None and collected.commit is not None
        engine.workspace.advance(collected.commit, engine.incumbent.commit)
        tree = collected.candidate.tree
        engine.incumbent = Incumbent(collected.commit, tree, outcome.measured.metric)
        engine.evaluator.kept(collected.commit)

    def merge(self, task: Task, steps: Steps) -> Task | Steps:
        """A winner measured against an incumbent that was replaced since: its change on
        top of the new incumbent, to be measured again; or `superseded`."""
        engine = self.engine
        outcome, collected = steps.outcome, steps.collected
        assert isinstance(outcome, Judged) and collected is not None
        assert collected.commit is not None
        current = engine.incumbent
        since = self.kept_since(task.start.commit)
        names = ", ".join(f"#{i}" for i in since) or "a newer incumbent"
        if self.cancelled.is_set():
            return replace(steps, outcome=Judged(Status.INTERRUPTED, STOPPED, outcome.measured))
        tree = merge_tree(engine.workspace, current.commit, collected.commit)
        if tree is None or tree == current.tree:
            why = "conflicts with" if tree is None else "is already in"
            reason = f"a winner against {task.start.commit[:12]}, but its change {why} {names}"
            return replace(steps, outcome=Judged(Status.SUPERSEDED, reason, outcome.measured))
        message = (
            f"autoresearch {engine.cfg.name} #{task.iteration}: {collected.description} "
            f"(combined with {names})"
        )
        commit = engine.workspace.git.run(
            "commit-tree", tree, "-p", current.commit, "-F", "-",
            input=message.encode(), extra_env=IDENTITY,
        ).strip()  # fmt: skip
        engine.workspace.record_ref(task.iteration, commit)
        candidate = replace(collected.candidate, tree=tree)
        merged = replace(
            collected,
            commit=commit,
            candidate=candidate,
            diffstat=engine.workspace.diffstat(current.commit, commit),
        )
        earlier = task.combined[:-1] if task.combined else ()
        combined = tuple(dict.fromkeys((*earlier, *since, task.iteration)))
        alone = task.alone or (
            f"a winner against {task.start.commit[:12]} ({_metric(outcome.measured)})"
        )
        note = (
            f"{alone}; its change merged onto {current.commit[:12]} (with {names}) and "
            "measured again"
        )
        again = replace(steps, collected=merged, outcome=NOT_FINISHED, note=note)
        self.announce(task, again, current)
        return Task(
            task.iteration,
            current,
            task.began,
            steps=again,
            combined=combined,
            alone=alone,
            original=task.original or collected,
            retried_alone=task.retried_alone,
        )

    def alone(self, task: Task, steps: Steps) -> Task | None:
        """A combination that did not beat the incumbent: the winner's own change against
        that incumbent, so that what is kept is the best single winner when the gains do
        not add up. Once per attempt; None when there is nothing left to try."""
        engine = self.engine
        original = task.original
        outcome = steps.outcome
        if task.retried_alone or original is None or original.commit is None:
            return None
        if original.candidate.tree == engine.incumbent.tree:
            return None
        assert isinstance(outcome, Judged)
        engine.workspace.record_ref(task.iteration, original.commit)
        names = ", ".join(f"#{i}" for i in task.combined if i != task.iteration)
        note = (
            f"{task.alone}; merged onto {engine.incumbent.commit[:12]} (with {names}) it measured "
            f"{_metric(outcome.measured)} ({outcome.status}: {outcome.reason}), so it was "
            f"measured again alone against {engine.incumbent.commit[:12]}"
        )
        again = replace(steps, collected=original, outcome=NOT_FINISHED, note=note)
        self.announce(task, again, engine.incumbent)
        return Task(
            task.iteration,
            engine.incumbent,
            task.began,
            steps=again,
            alone=task.alone,
            original=original,
            retried_alone=True,
        )

    def announce(self, task: Task, again: Steps, incumbent: Incumbent) -> None:
        """What the record of an engine killed while `again` is measured will say."""
        slot = self.slot_of(task)
        slot.info.record = replace(
            in_flight_record(again, incumbent, LOST_REASON), slot=slot.index
        ).to_json()

    def kept_since(self, commit: str) -> list[int]:
        commits = [c for _, c in self.kept]
        if commit in commits:
            return [i for i, _ in self.kept[commits.index(commit) + 1 :]]
        return [i for i, _ in self.kept]

    def slot_of(self, task: Task) -> Slot:
        return next(s for s in self.slots if s.task is task)

    # -- stopping ---------------------------------------------------------------------------

    def cancel(self) -> None:
        """Stop every slot's work: what they were doing is logged as `interrupted` (or as
        it came out, if it finished first); nothing more is kept unless it was measured
        against the current incumbent."""
        self.cancelled.set()
        while self.busy():
            for slot in self.busy():
                slot.child.kill_running()
                stop = getattr(slot.executor, "cancel", None)
                if callable(stop):
                    stop()  # runs on other machines: a Ray executor cancels its tasks
            try:
                message = self.outbox.get(timeout=0.2)
            except queue.Empty:
                continue
            if isinstance(message, Landed):
                if message.error is not None:
                    message.slot.task = None
                    continue
                self.land(message)


def _metric(measured: Evaluation) -> str:
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


def lost_in_slots(state: dict[str, Any], records: list[AttemptRecord]) -> list[AttemptRecord]:
    """The attempts several slots had in flight when an engine died: each logged as
    `interrupted` with what was known of it."""
    slots = state.get("slots")
    if not isinstance(slots, dict):
        return []
    done = {r.iteration for r in records}
    lost: list[AttemptRecord] = []
    for key, info in sorted(slots.items(), key=lambda kv: str(kv[0])):
        if not isinstance(info, dict) or not isinstance(info.get("iteration"), int):
            continue
        iteration = int(info["iteration"])
        if iteration in done or not records:
            continue
        known = info.get("record")
        record: AttemptRecord | None = None
        if isinstance(known, dict) and known.get("iteration") == iteration:
            try:
                record = AttemptRecord.from_json(known)
            except (TypeError, ValueError):
                record = None
        if record is None:
            record = AttemptRecord(iteration, Status.INTERRUPTED, reason=LOST_REASON)
        slot = int(key) if str(key).isdigit() else None
        lost.append(replace(record, slot=slot))
        done.add(iteration)
    return sorted(lost, key=lambda r: r.iteration)


PROPOSER_FAILURE_LIMIT = 3


def refuse_sequential_only(campaign: Campaign, jobs: int) -> None:
    """A guard rework gives the next attempt to the same candidate: with several in flight
    there is no "next attempt" to hand it to, so the two are refused together, before
    anything is measured."""
    guard = campaign.config.guard
    if jobs > 1 and guard is not None and guard.rework:
        raise ConfigError(
            f"{campaign.display_path()}: key 'guard.rework': a guard rework needs one "
            f"candidate at a time, but this run has {jobs} jobs; set rework = 0 or run with "
            "--jobs 1."
        )


def run_slots(engine: Engine, jobs: int) -> Finish:
    return SlotLoop(engine, jobs).run()


def kill_slot_leftovers(state_dir: Path) -> list[str]:
    """Kill what the slots of an engine that was killed left running (whatever the number
    of jobs this run has); warnings for the user."""
    folder = state_dir / SLOTS
    if folder.is_symlink() or not folder.is_dir():
        return []
    warnings = []
    for slot in sorted(p for p in folder.iterdir() if p.is_dir() and not p.is_symlink()):
        pgid = ChildRecord(slot / CHILD_RECORD).kill_leftover()
        if pgid:
            warnings.append(leftover_warning(pgid))
    return warnings
