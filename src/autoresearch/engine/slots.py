"""Where attempts run: one place on the engine's thread, or several slots in threads.

`Inline` is sequential mode: the engine's own workspace, evaluator and proposer, the
attempt run on the engine's thread when the engine asks for the next one to land. `Slots`
is `[executor] jobs > 1`: each slot owns a workspace, a measurement folder, an executor and
a proposer of its own (or a share of one that serves several, like the Optuna study) under
`.autoresearch/<name>/slots/<k>/`, and runs `run_attempt` in a thread of its own. The work
is subprocess-bound (proposer commands, metric runs), so threads are enough. Both hand the
engine the same `Landed` value, which it concludes the same way; a runner only runs.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from autoresearch.attempt import AttemptRecord, Status
from autoresearch.checks.holdout import Holdout
from autoresearch.config import Campaign
from autoresearch.engine.lifecycle import Interrupted
from autoresearch.engine.procedure import Place, Ran, Task, run_attempt
from autoresearch.engine.recording import Steps, in_flight_record
from autoresearch.engine.startup import LOST_REASON, utc_now
from autoresearch.errors import ConfigError
from autoresearch.events import Listener, PhaseChanged
from autoresearch.executors import CommandSpec, Executor, LocalExecutor
from autoresearch.executors.base import executor_setup
from autoresearch.executors.local import leftover_warning
from autoresearch.isolation.process import ChildRecord
from autoresearch.measure.evaluation import Evaluation, Evaluator, Swap
from autoresearch.measure.integrity import Fingerprint
from autoresearch.proposers import create_proposer, proposer_confinement
from autoresearch.proposers.base import Outcome, Proposal, ProposalContext, Proposer
from autoresearch.stats.sample_book import SampleBook
from autoresearch.store.ledger import StateFile
from autoresearch.workspace import Workspace

SLOTS = "slots"
CHILD_RECORD = "child.pgid"


@dataclass
class Landed:
    """An attempt's steps are done: the engine's thread concludes it."""

    place: Place
    task: Task
    ran: Ran
    error: BaseException | None = None  # the slot's thread failed: the engine re-raises


Conclude = Callable[[Landed], None]


class Runner:
    """Runs attempts in places; the engine assigns tasks and concludes what lands."""

    parallel = False

    def __init__(self, places: list[Place]) -> None:
        self.places = places
        self.tasks: dict[int, Task] = {}  # by place index: busy while set

    def free(self) -> list[Place]:
        return [p for p in self.places if p.index not in self.tasks]

    def busy(self) -> bool:
        return bool(self.tasks)

    def assign(self, place: Place, task: Task) -> None:
        self.tasks[place.index] = task

    def next_landed(self) -> Landed:
        raise NotImplementedError

    def ended(self, place: Place) -> None:
        """The attempt in `place` is concluded: the place is free."""
        self.tasks.pop(place.index, None)

    def cancel(self, conclude: Conclude) -> None:
        """Stop the work in flight; what it was doing is concluded as it came out."""

    def close(self) -> None:
        """Release what the runner made."""


class Inline(Runner):
    """Sequential mode: the engine's own place, run on the engine's thread. A signal
    stops the attempt where it is (`Ran.stopped_by`)."""

    def __init__(self, place: Place, state: StateFile) -> None:
        super().__init__([place])
        self.state = state
        place.known = self._known

    def assign(self, place: Place, task: Task) -> None:
        super().assign(place, task)
        # Written with the attempt's first phase, which follows at once, and not fsynced:
        # what a power cut may lose here is an attempt that has no commit yet; the
        # committed candidate (`_known`) is the attempt's one durable state write.
        self.state.stage(in_flight=task.iteration, in_flight_record=None)

    def _known(self, record: AttemptRecord) -> None:
        self.state.update(in_flight=record.iteration, in_flight_record=record.to_json())

    def next_landed(self) -> Landed:
        place = self.places[0]
        task = self.tasks[place.index]
        return Landed(place, task, run_attempt(place, task))

    def ended(self, place: Place) -> None:
        super().ended(place)
        # Nothing written: the ledger already holds the attempt, a resume ignores an
        # in-flight number it has a record for, and the next `assign` (or the end of the
        # run) replaces it.


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
        self.clock = book.clock
        self.follows, self.sequences, self.carry = book.follows, book.sequences, book.carry
        self.origin, self.switches = book.origin, book.switches
        # What `auto` chose and learned so far: the slots go on from there.
        self.configured, self.rule, self.first = book.configured, book.rule, book.first
        self.learned = book.learned
        self.lock = threading.RLock()

    take = _locked("take")
    baseline = _locked("baseline")
    remeasured = _locked("remeasured")
    measured = _locked("measured")
    kept = _locked("kept")
    reference = _locked("reference")
    carried = _locked("carried")
    comparison = _locked("comparison")
    learn = _locked("learn")


class SharedProposer(Proposer):
    """A proposer the slots take turns with: one made in-process and handed to the engine,
    which may keep state between calls. A `parallel_safe` one is used by all at once."""

    def __init__(self, inner: Proposer) -> None:
        self.inner = inner
        self.lock = threading.Lock()
        self.runs_commands = inner.runs_commands
        self.confined = inner.confined

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

    def measure_swapped(
        self, spec: CommandSpec, commit: str, iteration: int, stem: str, swap: Swap
    ) -> Evaluation:
        with self._turn():
            return super().measure_swapped(spec, commit, iteration, stem, swap)

    @contextmanager
    def _turn(self) -> Iterator[None]:
        self.phase("waiting", None)
        with self.gate:
            yield

    def _run(self, *args: Any, **kwargs: Any) -> float | None:
        if self.cancelled.is_set():
            raise Interrupted()
        return super()._run(*args, **kwargs)


# -- messages from the slots' threads ----------------------------------------------------


@dataclass
class Progress:
    index: int
    event: PhaseChanged


@dataclass
class Known:
    """A slot's candidate is committed: what the record of an engine killed now says."""

    index: int
    record: AttemptRecord


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


@dataclass
class Slot:
    place: Place
    dir: Path
    child: ChildRecord
    executor: Executor
    owns_proposer: bool
    owns_executor: bool
    inbox: queue.Queue[Task | None] = field(default_factory=queue.Queue)
    info: SlotInfo = field(default_factory=SlotInfo)
    thread: threading.Thread | None = None


@dataclass(frozen=True)
class Parts:
    """What the slots are made from: the engine's own place and the campaign's parts."""

    campaign: Campaign
    place: Place
    executor: Executor
    fingerprint: Fingerprint
    others_sealed: Callable[[], bool]
    own_proposer: bool  # the engine made its proposer from the config: one per slot
    state: StateFile
    on_event: Listener
    holdout: Holdout | None  # its runs in each slot's folder, as that slot's metric runs


class Slots(Runner):
    parallel = True

    def __init__(self, engine: Parts, jobs: int) -> None:
        super().__init__([])
        self.engine = engine
        self.jobs = jobs
        self.state = engine.state
        self.outbox: queue.Queue[Landed | Progress | Known] = queue.Queue()
        self.cancelled = threading.Event()
        self.slots: list[Slot] = []
        cfg = engine.campaign.config
        base = engine.place.evaluator
        base.book = self.book = SharedBook(base.book)
        measure_jobs = 1 if cfg.metric.exclusive else (cfg.executor.measure_jobs or jobs)
        self.gate = threading.Semaphore(measure_jobs)
        proposer = engine.place.proposer
        self.owns_proposers = engine.own_proposer and not proposer.parallel_safe
        self.shared: Proposer | None = None
        if not self.owns_proposers:
            self.shared = proposer if proposer.parallel_safe else SharedProposer(proposer)
        self.cpus = _cpus(engine.campaign, jobs)
        self.holdout_lock = threading.Lock()

    # -- making the slots (the engine's thread) ---------------------------------------------

    def open(self, start: str) -> list[str]:
        warnings: list[str] = []
        for index in range(self.jobs):
            slot = self._make(index)
            self.slots.append(slot)
            self.places.append(slot.place)
            warnings += self._open(slot, start)
        self.write_state()
        return warnings

    def _make(self, index: int) -> Slot:
        engine, campaign = self.engine, self.engine.campaign
        folder = campaign.state_dir / SLOTS / str(index)
        workspace = SlotWorkspace(campaign.root, campaign.name, folder, list(campaign.config.share))
        child = ChildRecord(folder / CHILD_RECORD)
        given = engine.executor
        # One the caller made (started by the engine) is shared by the slots.
        executor = LocalExecutor(child) if isinstance(given, LocalExecutor) else given
        place = replace(engine.place, workspace=workspace, index=index, at=None)
        return Slot(place, folder, child, executor, self.owns_proposers, executor is not given)

    def _open(self, slot: Slot, start: str) -> list[str]:
        engine, campaign, place = self.engine, self.engine.campaign, slot.place
        slot.dir.mkdir(parents=True, exist_ok=True)
        warnings = place.workspace.ensure(start)
        place.at = start
        if slot.owns_executor:
            warnings += slot.executor.start(replace(executor_setup(campaign), state_dir=slot.dir))
        evaluator = SlotEvaluator(
            campaign,
            place.workspace,
            slot.executor,
            engine.fingerprint,
            place.logs,
            self._phase(slot),
            others_sealed=engine.others_sealed,
        )
        evaluator.book = self.book
        evaluator.extra_env = _gpu_env(campaign, self.jobs, slot.place.index)
        evaluator.gate = self.gate
        evaluator.cancelled = self.cancelled
        place.evaluator = evaluator
        place.proposer = self.shared or self._proposer(slot)
        workspace = place.workspace
        holdout = engine.holdout
        place.review = replace(
            engine.place.review,
            evaluator=evaluator,
            numstat=lambda a, b: workspace.git.run("diff", "--numstat", "--no-renames", a, b),
            # In the slot's own folder, as its metric runs: nothing tells the two apart.
            holdout=None if holdout is None else self._serial(holdout.check_with(evaluator)),
        )
        place.rules = replace(engine.place.rules, escapes=workspace.escapes)
        place.phase = self._phase(slot)
        place.cancelled = self.cancelled
        place.known = lambda record: self.outbox.put(
            Known(slot.place.index, replace(record, slot=slot.place.index))
        )
        slot.thread = threading.Thread(
            target=self._serve, args=(slot,), name=f"autoresearch-slot-{place.index}", daemon=True
        )
        slot.thread.start()
        return warnings

    def _proposer(self, slot: Slot) -> Proposer:
        campaign = self.engine.campaign
        confinement = proposer_confinement(campaign, slot.place.workspace.objects())
        # Each slot's proposer has its own TMPDIR and its own record of its commands.
        confinement = replace(confinement, state_dir=slot.dir)
        return create_proposer(campaign, child=slot.child, confinement=confinement)

    def _serial(self, check: Any) -> Any:
        """The holdout has one measurement folder: its runs take turns."""

        def serial(*args: Any) -> Any:
            with self.holdout_lock:
                return check(*args)

        return serial

    def _phase(self, slot: Slot) -> Callable[..., None]:
        def phase(phase: str, iteration: int | None = None, **extra: Any) -> None:
            event = PhaseChanged(phase, iteration, slot=slot.place.index, **extra)
            self.outbox.put(Progress(slot.place.index, event))

        return phase

    # -- in a slot's thread -----------------------------------------------------------------

    def _serve(self, slot: Slot) -> None:
        if self.cpus:
            # A thread's affinity is its own on Linux, and the commands it starts inherit it.
            os.sched_setaffinity(0, self.cpus[slot.place.index])
        while (task := slot.inbox.get()) is not None:
            try:
                self.outbox.put(Landed(slot.place, task, run_attempt(slot.place, task)))
            except BaseException as exc:  # reported to the engine thread, which re-raises
                ran = Ran(Steps(task.iteration, task.began))
                self.outbox.put(Landed(slot.place, task, ran, exc))

    # -- the engine's thread ----------------------------------------------------------------

    def assign(self, place: Place, task: Task) -> None:
        super().assign(place, task)
        slot = self.slots[place.index]
        again = task.queued.again if task.queued is not None else None
        record = None
        if again is not None:  # what the record of an engine killed while it is measured says
            known = in_flight_record(again.steps, again.start, LOST_REASON)
            record = replace(known, slot=place.index).to_json()
        slot.info = SlotInfo(task.iteration, "proposing", utc_now(), record)
        self.write_state()
        slot.inbox.put(task)

    def ended(self, place: Place) -> None:
        super().ended(place)
        self.slots[place.index].info = SlotInfo()
        self.write_state()

    def next_landed(self) -> Landed:
        """The next attempt to land, handling the slots' progress meanwhile. Waited for in
        short steps: a signal the kernel hands to another thread (a slot's, a log pump's)
        runs its handler only when this, the main thread, wakes, and a slot may be silent
        for as long as its metric runs."""
        while True:
            try:
                message = self.outbox.get(timeout=0.2)
            except queue.Empty:
                continue
            if isinstance(message, Landed):
                return message
            self._handle(message)

    def _handle(self, message: Progress | Known) -> None:
        info = self.slots[message.index].info
        if isinstance(message, Known):
            info.record = message.record.to_json()
            self.write_state()
            return
        phase = message.event.phase
        info.phase = "waiting to measure" if phase == "waiting" else phase
        slots = {str(s.place.index): s.info.to_json() for s in self.slots}
        self.state.update(durable=False, slots=slots)
        self.engine.on_event(message.event)

    def write_state(self) -> None:
        slots = {str(s.place.index): s.info.to_json() for s in self.slots}
        self.state.update(
            slots=slots,
            jobs=self.jobs,
            phase=f"{len(self.tasks)} of {self.jobs} slots busy",
            iteration=None,
            updated_utc=utc_now(),
        )

    def cancel(self, conclude: Conclude) -> None:
        """Stop every slot's work: what they were doing is concluded as `interrupted` (or
        as it came out, if it finished first)."""
        if self.cancelled.is_set():
            return
        self.cancelled.set()
        while self.busy():
            for slot in self.slots:
                if slot.place.index in self.tasks:
                    slot.child.kill_running()
                    slot.executor.cancel()
            try:
                message = self.outbox.get(timeout=0.2)
            except queue.Empty:
                continue
            if not isinstance(message, Landed):
                self._handle(message)
            elif message.error is not None:
                self.ended(message.place)
            else:
                conclude(message)

    def close(self) -> None:
        for slot in self.slots:
            if slot.thread is not None and slot.thread.is_alive():
                slot.inbox.put(None)
                slot.thread.join(timeout=30)
            if slot.owns_proposer:
                slot.place.proposer.close()
            if slot.owns_executor:
                slot.executor.close()
            slot.place.workspace.close()
        self.state.update(slots=None)


def _gpu_env(campaign: Campaign, jobs: int, index: int) -> dict[str, str]:
    gpus = list(campaign.config.executor.gpus)
    if not gpus:
        return {}
    if len(gpus) >= jobs:
        per = len(gpus) // jobs
        mine = gpus[index * per : (index + 1) * per]
    else:
        mine = [gpus[index % len(gpus)]]
    return {"CUDA_VISIBLE_DEVICES": ",".join(str(g) for g in mine)}


def _cpus(campaign: Campaign, jobs: int) -> list[list[int]]:
    per = campaign.config.executor.cpus_per_job
    if not per:
        return []
    available = sorted(os.sched_getaffinity(0))
    if per * jobs > len(available):
        raise ConfigError(
            f"{campaign.display_path()}: key 'executor.cpus_per_job': "
            f"{jobs} jobs x {per} cores need {per * jobs}, but this process may "
            f"use {len(available)}; lower 'jobs' or 'cpus_per_job'."
        )
    return [available[k * per : (k + 1) * per] for k in range(jobs)]


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
