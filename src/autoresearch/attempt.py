"""The vocabulary of a campaign: statuses, the attempt record, the incumbent.

An attempt record is what the ledger stores, one JSON object per line. `AttemptRecord`
reads every ledger written so far and writes exactly the keys they carry: a key that a
record of that kind never had is left out, never written as null.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any


class Status(StrEnum):
    """How an attempt ended. The strings are the ledger's and the CLI's."""

    BASELINE = "baseline"
    KEEP = "keep"
    DISCARD = "discard"
    CRASH = "crash"
    TIMEOUT = "timeout"
    GUARD_FAILED = "guard_failed"
    SCOPE_VIOLATION = "scope_violation"
    NO_CHANGE = "no_change"
    TAMPERED = "tampered"
    PROPOSER_FAILED = "proposer_failed"
    EDIT_REFUSED = "edit_refused"
    INTERRUPTED = "interrupted"
    CHECKOUT_CHANGED = "checkout_changed"
    # The candidate's files are exactly an earlier measured attempt's: answered from the
    # ledger (the reason names that attempt), not measured again.
    DUPLICATE = "duplicate"
    # Judged beyond the primary number (metrics.py, holdout.py, approval.py, rework.py):
    CONSTRAINT_FAILED = "constraint_failed"  # better, but a [[metrics]] constraint broke
    OVERFIT = "overfit"  # better, but worse on the holdout beyond its noise
    AWAITING_APPROVAL = "awaiting_approval"  # better, touches [approval] paths: parked
    REJECTED = "rejected"  # a parked candidate a person (or --unattended) turned down
    REWORK = "rework"  # better, guard failed: sent back to the proposer to fix
    # With several candidates in flight: a winner whose change conflicts with a candidate
    # kept since it started, and a combination of winners kept as one.
    SUPERSEDED = "superseded"
    MERGED = "merged"

    @property
    def traits(self) -> Traits:
        return TRAITS[self]

    @property
    def halts(self) -> bool:
        """The campaign stops at once: the judge or the user's checkout is not what it was."""
        return self.traits.halts

    @property
    def sets_best(self) -> bool:
        """The attempt's commit is the incumbent afterwards."""
        return self.traits.sets_best

    @property
    def kept_change(self) -> bool:
        """A candidate's change was kept: a `keep`, or winners combined as `merged`."""
        return self.sets_best and self is not Status.BASELINE

    @property
    def counts_toward_plateau(self) -> bool:
        """An attempt that was seen through and did not move the best. An interrupted
        attempt says nothing about the search, so it neither counts nor breaks a streak."""
        return not self.sets_best and self is not Status.INTERRUPTED

    @property
    def is_failure(self) -> bool:
        """Something went wrong (as opposed to a measured change that was not better)."""
        return self.traits.failure

    @property
    def failed_or_refused(self) -> bool:
        """Not kept, and not merely no better: something went wrong (`is_failure`), the
        files repeat an earlier attempt's (`duplicate`), or a check after the rule refused
        a better candidate (a constraint, the holdout, a person, a conflict with a newer
        keep). The research memory says why each one was not kept, and the same one over
        and over trips the breaker. Not: a keep, a discard (measured, no better: a dead
        end), no change, an interrupted attempt (it says nothing) and a parked one
        (`awaiting_approval` waits for a person; it did not fail)."""
        if self is Status.INTERRUPTED:
            return False
        return self.traits.failure or self.traits.refused

    @property
    def dead_end(self) -> bool:
        """A change seen through that did not help: measured and not kept, or turned down
        by a person. Not a candidate still in play (parked for approval, sent back for a
        rework) and not one never measured (a duplicate repeats an attempt listed already)."""
        if self.traits.in_play:
            return False
        return (self.measured and not self.sets_best) or self is Status.REJECTED

    @property
    def measured(self) -> bool:
        """The metric ran on the candidate (its number may still be missing: a crash)."""
        return self.traits.measured

    @property
    def rule_kept(self) -> bool:
        """The decision rule found the candidate better; something after it refused it."""
        return self.traits.rule_kept

    @property
    def rolls_back_unmeasured(self) -> bool:
        """Decided by screening what the proposer did, before any measurement."""
        return self.traits.screened

    @property
    def shows_reason(self) -> bool:
        """The record's reason is worth showing beside it: why it failed, or the rule's
        statistic and threshold behind a keep or a discard."""
        return self is not Status.BASELINE

    @property
    def stores_content(self) -> bool:
        """The candidate keeps its ref: not one rejected for what it touched (its content
        leaves the repository with the next `git gc`)."""
        return not self.traits.rejects_content

    @property
    def fast_roll_back(self) -> bool:
        """After this outcome only the attempt's own paths need undoing; anything unusual
        (a signal, a tamper, a proposer that failed midway) gets a full reset."""
        return self.traits.fast_roll_back


@dataclass(frozen=True)
class Traits:
    """What the code asks of a status, one row per status in `TRAITS`."""

    measured: bool = False  # the metric ran on the candidate
    sets_best: bool = False  # its commit is the incumbent afterwards
    failure: bool = False  # something went wrong
    refused: bool = False  # not a failure, but a check refused it (memory, breaker)
    rule_kept: bool = False  # the rule found it better; a later check refused it
    screened: bool = False  # decided before any measurement
    halts: bool = False  # the campaign stops at once
    in_play: bool = False  # the candidate waits (approval, rework): not a dead end
    rejects_content: bool = False  # refused for what it touched: no ref keeps it
    fast_roll_back: bool = False  # only the attempt's own paths are undone


TRAITS: dict[Status, Traits] = {
    Status.BASELINE: Traits(measured=True, sets_best=True),
    Status.KEEP: Traits(measured=True, sets_best=True, fast_roll_back=True),
    Status.MERGED: Traits(measured=True, sets_best=True),
    Status.DISCARD: Traits(measured=True, fast_roll_back=True),
    Status.CRASH: Traits(measured=True, failure=True, fast_roll_back=True),
    Status.TIMEOUT: Traits(measured=True, failure=True),
    Status.GUARD_FAILED: Traits(measured=True, failure=True, rule_kept=True, fast_roll_back=True),
    Status.CONSTRAINT_FAILED: Traits(
        measured=True, refused=True, rule_kept=True, fast_roll_back=True
    ),
    Status.OVERFIT: Traits(measured=True, refused=True, rule_kept=True, fast_roll_back=True),
    Status.AWAITING_APPROVAL: Traits(
        measured=True, rule_kept=True, in_play=True, fast_roll_back=True
    ),
    Status.REWORK: Traits(
        measured=True, failure=True, rule_kept=True, in_play=True, fast_roll_back=True
    ),
    Status.SUPERSEDED: Traits(measured=True, refused=True),
    Status.REJECTED: Traits(refused=True),
    Status.NO_CHANGE: Traits(screened=True, fast_roll_back=True),
    Status.DUPLICATE: Traits(screened=True, refused=True, fast_roll_back=True),
    Status.SCOPE_VIOLATION: Traits(screened=True, failure=True, rejects_content=True),
    Status.TAMPERED: Traits(screened=True, failure=True, halts=True, rejects_content=True),
    Status.CHECKOUT_CHANGED: Traits(screened=True, failure=True, halts=True),
    Status.PROPOSER_FAILED: Traits(screened=True, failure=True),
    Status.EDIT_REFUSED: Traits(screened=True, failure=True),
    Status.INTERRUPTED: Traits(failure=True),
}


# Why a candidate is refused when its holdout run gave no number: fixed words, since the
# reason reaches the next prompt and whatever the run printed could carry the holdout out.
HOLDOUT_FAILED = "the holdout run failed; its output stays in the campaign's logs"


def without_holdout(record: AttemptRecord) -> AttemptRecord:
    """The record as a program may be given it (the prompt, the dashboard, the MCP tools):
    no holdout numbers, and a holdout failure's reason the fixed one (a ledger written
    before it was fixed holds the run's output there)."""
    data = record.holdout
    if data is None:
        return record
    reason = record.reason
    if record.status is Status.CRASH and "error" in data:
        reason = HOLDOUT_FAILED
    return replace(record, holdout=None, reason=reason)


def num(value: float | None, noise: float | None = None) -> str:
    """A metric value as every view and message writes it: to the two significant digits
    of its noise when that is known (a digit below the noise says nothing), else to six
    significant digits; never more than six."""
    if value is None:
        return "-"
    if noise is None or not math.isfinite(noise) or noise <= 0 or not math.isfinite(value):
        return f"{value:.6g}"
    decimals = 1 - math.floor(math.log10(noise))
    magnitude = math.floor(math.log10(abs(value))) + 1 if value else 1
    if magnitude + decimals > 6:
        return f"{value:.6g}"
    if decimals >= 0:
        return f"{value:.{decimals}f}"
    return f"{round(value, decimals):.0f}"


def rounded(value: Any) -> Any:
    """Floats in a value (lists and tables included) to six significant digits, for text a
    person reads; JSON output keeps full precision."""
    if isinstance(value, float):
        return float(f"{value:.6g}")
    if isinstance(value, list | tuple):
        return [rounded(v) for v in value]
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    return value


@dataclass(frozen=True)
class Screened:
    """An attempt settled without measuring it: its status and why."""

    status: Status
    reason: str | None = None


@dataclass(frozen=True)
class Timings:
    """Seconds spent per step. `total` is absent on the baseline record."""

    propose: float = 0.0
    measure: float = 0.0
    guard: float = 0.0
    engine: float = 0.0
    total: float | None = None


@dataclass(frozen=True)
class Cost:
    """What an LLM cost: the proposer's or the judge's."""

    usd: float | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None

    def __bool__(self) -> bool:
        return any(v is not None for v in (self.usd, self.tokens_in, self.tokens_out))


@dataclass(frozen=True)
class EarlierComparison:
    """A comparison an attempt went through before the one that decided it: a parallel
    winner measured against an incumbent replaced since, set aside and measured again.
    Its runs were real runs of both versions; the noise estimate and the campaign's clock
    counted them when they were taken, so a resumed campaign and `verify` count them too."""

    commit: str  # the version measured as the candidate
    parent: str  # the incumbent it was compared with
    samples: tuple[float, ...] = ()
    incumbent_samples: tuple[float, ...] = ()
    metric_runs: int = 0  # every metric run it cost, failed ones too

    def to_json(self) -> dict[str, Any]:
        return {
            "commit": self.commit,
            "parent": self.parent,
            "samples": list(self.samples),
            "incumbent_samples": list(self.incumbent_samples),
            "metric_runs": self.metric_runs,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> EarlierComparison:
        if not isinstance(data, dict) or "commit" not in data or "parent" not in data:
            # What the ledger's readers turn into one sentence naming the line.
            raise ValueError("an earlier comparison needs its commit and parent")
        return cls(
            str(data["commit"]),
            str(data["parent"]),
            tuple(float(v) for v in data.get("samples") or ()),
            tuple(float(v) for v in data.get("incumbent_samples") or ()),
            int(data.get("metric_runs") or 0),
        )


@dataclass(frozen=True)
class AttemptRecord:
    """One line of the ledger.

    `delta` and `best` belong to attempts the engine saw through (`closed`); the baseline
    and an attempt found in flight after a crash carry neither. Both follow the comparison
    that judged the candidate: `delta` is its judged level minus the best before, and a
    keep's `best` is that level, no better than its own runs and never worse than the best
    before (a simplification, kept as equal, leaves it).
    """

    iteration: int
    status: Status
    metric: float | None = None
    commit: str | None = None
    parent: str | None = None
    files: tuple[str, ...] = ()
    description: str = ""
    reason: str | None = None
    note: str | None = None
    diffstat: str | None = None
    proposer_output: str | None = None
    params: dict[str, Any] | None = None
    cost: Cost = Cost()
    judge_cost: Cost = Cost()
    samples: tuple[float, ...] | None = None
    incumbent_samples: tuple[float, ...] | None = None
    metric_runs: int | None = None
    previous_best: float | None = None
    # {name: {value, samples, incumbent_samples}} of the [[metrics]] and a composite's names
    metrics: dict[str, Any] | None = None
    # {added, removed, lines_per_unit, percent}: the diff size simplicity weighed, and how
    lines: dict[str, Any] | None = None
    holdout: dict[str, Any] | None = None  # {value, incumbent, gain}: the unseen check
    rework_of: int | None = None  # the attempt whose candidate this try fixes
    approval_of: int | None = None  # the parked attempt this record decides
    closed: bool = False
    delta: float | None = None
    best: float | None = None
    timings: Timings | None = None
    # With several candidates in flight (`[executor] jobs`): the incumbent the samples were
    # compared with, the slot that ran the attempt, and for `merged` the attempts combined.
    measured_against: str | None = None
    slot: int | None = None
    combined: tuple[int, ...] | None = None
    utc: str | None = None
    prev_hash: str | None = None
    # What the engine asked for: the hypothesis from the queue, the strategy when stuck.
    hypothesis: str | None = None
    strategy: str | None = None
    judge: int | None = None  # the version of the rule that decided it (none: version 1)
    # The comparisons before the one that decided it, in the order taken (parallel only).
    earlier: tuple[EarlierComparison, ...] = ()
    # Keys this version does not know (a newer writer's), kept so nothing read is lost.
    extra: dict[str, Any] = field(default_factory=dict)

    # -- reading ------------------------------------------------------------------------

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> AttemptRecord:
        known = dict(data)

        def take(key: str) -> Any:
            return known.pop(key, None)

        def samples(key: str) -> tuple[float, ...] | None:
            value = take(key)
            return None if value is None else tuple(float(v) for v in value)

        def cost(prefix: str) -> Cost:
            return Cost(
                _opt_float(take(f"{prefix}cost_usd")),
                _opt_int(take(f"{prefix}tokens_in")),
                _opt_int(take(f"{prefix}tokens_out")),
            )

        closed = "best" in known or "delta" in known
        timing_keys = ("propose_seconds", "measure_seconds", "guard_seconds", "engine_seconds")
        has_timings = any(k in known for k in timing_keys)
        timings = (
            Timings(
                float(take("propose_seconds") or 0.0),
                float(take("measure_seconds") or 0.0),
                float(take("guard_seconds") or 0.0),
                float(take("engine_seconds") or 0.0),
                _opt_float(take("total_seconds")),
            )
            if has_timings
            else None
        )
        record = cls(
            iteration=int(take("iteration") or 0),
            status=Status(str(take("status"))),
            metric=_opt_float(take("metric")),
            commit=take("commit"),
            parent=take("parent"),
            files=tuple(str(f) for f in take("files") or ()),
            description=str(take("description") or ""),
            reason=take("reason"),
            note=take("note"),
            diffstat=take("diffstat"),
            proposer_output=take("proposer_output"),
            params=take("params"),
            cost=cost(""),
            judge_cost=cost("judge_"),
            samples=samples("samples"),
            incumbent_samples=samples("incumbent_samples"),
            metric_runs=_opt_int(take("metric_runs")),
            previous_best=_opt_float(take("previous_best")),
            metrics=take("metrics"),
            lines=take("lines"),
            holdout=take("holdout"),
            rework_of=_opt_int(take("rework_of")),
            approval_of=_opt_int(take("approval_of")),
            closed=closed,
            delta=_opt_float(take("delta")),
            best=_opt_float(take("best")),
            timings=timings,
            measured_against=take("measured_against"),
            slot=_opt_int(take("slot")),
            combined=_combined(take("combined")),
            utc=take("utc"),
            prev_hash=take("prev_hash"),
            hypothesis=take("hypothesis"),
            strategy=take("strategy"),
            judge=_opt_int(take("judge")),
            earlier=tuple(EarlierComparison.from_json(e) for e in take("earlier") or ()),
        )
        return replace(record, extra=known) if known else record

    # -- writing ------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        """The ledger object, keys in a fixed order; `prev_hash` is the ledger's to add."""
        out: dict[str, Any] = {
            "iteration": self.iteration,
            "status": str(self.status),
            "metric": self.metric,
            "commit": self.commit,
            "parent": self.parent,
            "files": list(self.files),
            "description": self.description,
        }
        optional: list[tuple[str, Any]] = [
            ("cost_usd", self.cost.usd),
            ("tokens_in", self.cost.tokens_in),
            ("tokens_out", self.cost.tokens_out),
            ("proposer_output", self.proposer_output),
            ("params", self.params or None),
            ("note", self.note),
            ("diffstat", self.diffstat),
            ("samples", None if self.samples is None else list(self.samples)),
            (
                "incumbent_samples",
                list(self.incumbent_samples) if self.incumbent_samples else None,
            ),
            ("metric_runs", self.metric_runs),
            ("judge_cost_usd", self.judge_cost.usd),
            ("judge_tokens_in", self.judge_cost.tokens_in),
            ("judge_tokens_out", self.judge_cost.tokens_out),
            ("reason", self.reason),
            ("previous_best", self.previous_best),
            ("hypothesis", self.hypothesis),
            ("strategy", self.strategy),
            ("metrics", self.metrics or None),
            ("lines", self.lines),
            ("holdout", self.holdout),
            ("rework_of", self.rework_of),
            ("approval_of", self.approval_of),
            ("measured_against", self.measured_against),
            ("slot", self.slot),
            ("combined", None if self.combined is None else list(self.combined)),
            ("judge", self.judge),
            ("earlier", [e.to_json() for e in self.earlier] or None),
        ]
        out.update((k, v) for k, v in optional if v is not None)
        if self.closed:
            out["delta"] = self.delta
            out["best"] = self.best
        if self.timings is not None:
            out["propose_seconds"] = self.timings.propose
            out["measure_seconds"] = self.timings.measure
            out["guard_seconds"] = self.timings.guard
            out["engine_seconds"] = self.timings.engine
            if self.timings.total is not None:
                out["total_seconds"] = self.timings.total
        if self.utc is not None:
            out["utc"] = self.utc
        out.update(self.extra)
        if self.status is Status.BASELINE:
            # The baseline's keys come in the order 0.1.0 wrote them, so that `show` and
            # `log --json` print an old ledger's baseline line as it stands.
            first = [k for k in _BASELINE_ORDER if k in out]
            out = {k: out[k] for k in [*first, *(k for k in out if k not in _BASELINE_ORDER)]}
        return out

    # -- reading helpers ----------------------------------------------------------------

    @property
    def best_after(self) -> float | None:
        """The best once this record is in: its `best`, or for a record without one (the
        baseline) its metric. A keep's best is the level its comparison judged it at, which
        is its metric under the one-sample rules and may differ from it under
        `sequential`."""
        return self.best if self.best is not None else self.metric

    @property
    def cost_usd(self) -> float:
        """Proposer and judge cost together."""
        return float(self.cost.usd or 0.0) + float(self.judge_cost.usd or 0.0)

    @property
    def tokens(self) -> tuple[int, int]:
        """Tokens in and out, proposer and judge together."""
        return (
            (self.cost.tokens_in or 0) + (self.judge_cost.tokens_in or 0),
            (self.cost.tokens_out or 0) + (self.judge_cost.tokens_out or 0),
        )


_BASELINE_ORDER = (
    "iteration",
    "status",
    "metric",
    "samples",
    "metric_runs",
    "commit",
    "parent",
    "files",
    "description",
    "propose_seconds",
    "measure_seconds",
    "guard_seconds",
    "judge_cost_usd",
    "judge_tokens_in",
    "judge_tokens_out",
    "engine_seconds",
)


@dataclass(frozen=True)
class Incumbent:
    """The best kept version of the code: the commit the campaign branch points at."""

    commit: str
    tree: str
    metric: float | None


def _opt_float(value: Any) -> float | None:
    if value is None:
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _opt_int(value: Any) -> int | None:
    return None if value is None else int(value)


def _combined(value: Any) -> tuple[int, ...] | None:
    return None if value is None else tuple(int(v) for v in value)


class StopReason(StrEnum):
    """Why a campaign stopped. Three of them share a status's name: the attempt that
    halted the campaign (or the signal) is the reason."""

    TARGET = "target"
    MAX_ITERATIONS = "max_iterations"
    PLATEAU = "plateau"
    MAX_MINUTES = "max_minutes"
    MAX_COST = "max_cost"
    INTERRUPTED = "interrupted"
    TAMPERED = "tampered"
    CHECKOUT_CHANGED = "checkout_changed"
    PROPOSER_FAILED = "proposer_failed"
    BASELINE_FAILED = "baseline_failed"
    SPACE_EXHAUSTED = "space_exhausted"  # the proposer has nothing left to try
    DISK_FULL = "disk_full"  # the engine's disk filled up during an attempt
