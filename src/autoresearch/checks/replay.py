"""Re-deriving every verdict of a ledger from its recorded samples and the decision rule.

The ledger is replayed in order with the objects that decided it: a `SampleBook` rebuilt
from the records before each attempt (what a resumed evaluator loads) gives the reference,
the pooled noise and the start state, and a `Comparison` is fed the attempt's recorded
candidate and incumbent samples in the order it asks for them. A record whose status,
metric, delta or best does not follow from them is reported: a hash chain can be
recomputed by whoever rewrites the ledger, the rule's verdict on the recorded numbers
cannot.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from autoresearch.attempt import AttemptRecord, Status
from autoresearch.checks.simplicity import Lines, pays, within_noise
from autoresearch.stats.decide import (
    JUDGE_VERSION,
    Comparison,
    Look,
    Rule,
    Side,
    Verdict,
    estimate,
    explain,
    gain,
    judged_level,
    kept_best,
)
from autoresearch.stats.sample_book import SampleBook

# Statuses the rule decided: the verdict they imply once the comparison is over.
DECIDED = {
    Status.KEEP: Verdict.KEEP,
    Status.DISCARD: Verdict.DISCARD,
    # The rule kept it; a later check (guard, constraint, holdout, approval) refused it.
    **{status: Verdict.KEEP for status in Status if status.rule_kept},
    Status.REJECTED: Verdict.KEEP,  # parked for approval and turned down at once
}
# A failed run stops the comparison where it was: its samples are cut short. So does a
# run killed from outside (twice: `interrupted`), which may also come after the rule
# decided (a guard's run, the holdout's): then the samples are complete and its verdict,
# whichever it was, stands unrecorded.
CUT_SHORT = (Status.CRASH, Status.TIMEOUT, Status.INTERRUPTED)


@dataclass(frozen=True)
class Finding:
    """A record whose content does not follow from the records before it and the rule."""

    index: int  # the record's position in the list replayed
    iteration: int
    message: str
    # Decided by an earlier version of the rule (`JUDGE_VERSION`), whose verdict today's
    # may not give: said, not held against the ledger.
    earlier_judge: int | None = None


@dataclass
class Fed:
    """How a comparison went on the recorded samples."""

    outcome: Side | Verdict  # the verdict, or the side it still asked for
    look: Look | None
    runs: int  # candidate samples taken when it decided (or ran out)
    left_candidate: int  # recorded samples it never asked for
    left_incumbent: int


def feed(test: Comparison, samples: Sequence[float], incumbent: Sequence[float]) -> Fed:
    """Give `test` the recorded samples in the order it asks for them, until it decides or
    asks for one that was not recorded."""
    candidate, remeasured = test.feed(samples, incumbent)
    return Fed(
        test.next(),
        test.look,
        candidate,
        len(samples) - candidate,
        len(incumbent) - remeasured,
    )


@dataclass
class _Best:
    commit: str | None = None
    metric: float | None = None


def replay(records: Sequence[AttemptRecord], rule: Rule, direction: str) -> list[Finding]:
    """Every record of `records` (a ledger, in order) whose status, samples, metric,
    delta, best or parent does not follow from the records before it under `rule`, and
    every best that moves against `direction`."""
    findings: list[Finding] = []
    book = SampleBook(rule, direction)
    best = _Best()
    newest = 1  # the newest version of the rule a record so far names
    for index, record in enumerate(records):
        version = record.judge or 1
        # A ledger is written by one version after another, never back: a record that
        # claims an older rule than one before it is held to today's, and said.
        went_back = version < newest
        newest = max(newest, version)
        earlier = version if version < JUDGE_VERSION and not went_back else None

        def report(
            message: str,
            record: AttemptRecord = record,
            index: int = index,
            earlier: int | None = earlier,
        ) -> None:
            findings.append(Finding(index, record.iteration, message, earlier))

        if went_back:
            report(
                f"it names version {version} of the rule, older than a record before it "
                f"({newest}): versions never go back within one ledger"
            )
        if record.status is Status.BASELINE:
            for message in _baseline(record, rule, index):
                report(message)
            book.take(record)
            best = _Best(record.commit, record.metric)
            continue
        if best.commit is None and index == 0:
            report("the first record is not the baseline; nothing can be re-derived")
            return findings
        if record.slot is None:
            # Decided while other slots measured beside it (`slot`), the samples its
            # comparison started from depend on timing, not on ledger order: only its
            # numbers are checked then.
            messages, judged = _attempt(record, book, best)
            for message in messages:
                report(message)
            for message in _numbers(record, best, judged, direction):
                report(message)
        else:
            for message in _metric(record):
                report(message)
        for message in _backwards(record, best, direction):
            report(message, earlier=None)  # no version of the rule moves the best back
        book.take(record)
        if record.status.sets_best:
            best = _Best(record.commit, record.best_after)
    return findings


def _backwards(record: AttemptRecord, best: _Best, direction: str) -> list[str]:
    """A best recorded worse than the best before it: no keep may move it that way."""
    if record.best is None or best.metric is None:
        return []
    if gain(record.best, best.metric, direction) >= 0:
        return []
    lower = "lower" if direction == "minimize" else "higher"
    return [
        f"its best {record.best} is worse than the best before it ({best.metric}): the best "
        f"moved backwards, where a {direction} campaign's best only ever gets {lower}"
    ]


def _baseline(record: AttemptRecord, rule: Rule, index: int) -> list[str]:
    out: list[str] = []
    if index != 0:
        out.append("a baseline record after the first line (the campaign has one baseline)")
    samples = list(record.samples or ())
    # A one-sample baseline under `auto` is a campaign from before `auto` (then `strict`).
    before_auto = rule.name == "auto" and len(samples) == 1
    if len(samples) != rule.baseline_samples and not before_auto:
        out.append(
            f"the baseline has {len(samples)} sample{_s(len(samples))}, but the "
            f"{rule.name} rule measures it {rule.baseline_samples} time"
            f"{_s(rule.baseline_samples)}"
        )
    out += _metric(record)
    return out


@dataclass(frozen=True)
class Judged:
    """What the replayed comparison says of the candidate's level: None when it did not
    decide on the recorded samples (a failed run cut it short)."""

    look: Look | None = None
    verdict: Verdict | None = None


def _attempt(record: AttemptRecord, book: SampleBook, best: _Best) -> tuple[list[str], Judged]:
    """Whether the status follows from the samples, the rule and the incumbent, and what
    the comparison judged."""
    samples = list(record.samples or ())
    incumbent = list(record.incumbent_samples or ())
    if record.parent != best.commit:
        return [
            f"its incumbent is {str(record.parent)[:12]}, but the best kept commit before "
            f"it is {str(best.commit)[:12]}"
        ], Judged()
    measured = bool(samples or incumbent)
    status = record.status
    if status is Status.REJECTED and not measured:
        return [], Judged()  # a person turned a parked candidate down: nothing measured
    if not (status in DECIDED or status in CUT_SHORT or status is Status.TAMPERED):
        # Decided before any measurement (or cut short by a signal): nothing was measured.
        if measured or record.metric is not None:
            message = f"recorded {status}, which is decided before measuring, but it has samples"
            return [message], Judged()
        return [], Judged()
    if not measured and status is not Status.TAMPERED and status not in CUT_SHORT:
        message = f"recorded {status}, but it has no samples: the rule needs them to decide"
        return [message], Judged()
    if not measured:
        return [], Judged()  # the first run failed, or the judge was found edited before it
    assert best.commit is not None
    try:
        test = book.comparison(best.commit)
    except ValueError as exc:
        return [f"recorded {status}, but {exc} and has none"], Judged()
    fed = feed(test, samples, incumbent)
    decided = fed.outcome if isinstance(fed.outcome, Verdict) else None
    judged = Judged(fed.look if decided else None, decided)
    reference = incumbent or book.groups.get(best.commit, [])
    if record.status is Status.DISCARD and _unpaid(record, best, book.direction):
        fed.outcome = Verdict.DISCARD if fed.outcome is Verdict.KEEP else fed.outcome
    simpler = _simplification(record, reference, book)
    return _verdict(record, fed, book.rule, simpler), judged


def _unpaid(record: AttemptRecord, best: _Best, direction: str) -> bool:
    """A discard of a better candidate stands when its gain did not pay for its lines."""
    if not record.lines or record.metric is None or best.metric is None:
        return False
    lines, price = Lines.of(record.lines)
    return pays(price, lines, record.metric, best.metric, direction) is not None


def _simplification(record: AttemptRecord, reference: Sequence[float], book: SampleBook) -> bool:
    """A keep the rule did not find better stands when it removed code (its recorded
    diff size) and its samples equal the incumbent's within noise."""
    lines = record.lines or {}
    if not lines:  # a keep, or a simplification a later check refused
        return False
    if int(lines.get("removed", 0)) <= int(lines.get("added", 0)):
        return False
    equal, _ = within_noise(list(record.samples or ()), reference, book.direction, book.rule)
    return equal


def _verdict(record: AttemptRecord, fed: Fed, rule: Rule, simpler: bool = False) -> list[str]:
    status = record.status
    extra = fed.left_candidate + fed.left_incumbent
    if isinstance(fed.outcome, Verdict):
        why = explain(rule, fed.outcome, fed.look)
        decided = f"{fed.outcome.value} ({why})" if why else fed.outcome.value
        if extra:
            return [
                f"recorded {status} with {_count(fed.left_candidate, fed.left_incumbent)} "
                f"more than the rule takes: it gives {decided}"
            ]
        expected = DECIDED.get(status)
        if status is Status.TAMPERED:
            expected = Verdict.KEEP  # complete samples: the guard found the judge edited
        if status is Status.CRASH and (record.holdout or {}).get("error"):
            expected = Verdict.KEEP  # the rule kept it; the holdout then failed to run
        if status is Status.INTERRUPTED:
            return []  # killed after the verdict: a check after the rule was cut short
        if expected is None:
            return [f"recorded {status}, but its samples are complete: the rule gives {decided}"]
        if fed.outcome is not expected and not (simpler and fed.outcome is Verdict.DISCARD):
            return [f"recorded {status}, but the rule gives {decided}"]
        return []
    # The comparison asked for a sample that was not recorded: where a failed run cut it
    # short, unless the status says it was decided or samples were recorded beyond it.
    if not extra and status not in DECIDED:
        return []
    wanted = "a candidate" if fed.outcome is Side.CANDIDATE else "an incumbent"
    beyond = f" ({_count(fed.left_candidate, fed.left_incumbent)} recorded beyond it)"
    return [
        f"recorded {status}, but samples are missing where the rule needs them: after "
        f"{fed.runs} candidate run{_s(fed.runs)} it asks for {wanted} sample"
        + (beyond if extra else "")
    ]


def _numbers(record: AttemptRecord, best: _Best, judged: Judged, direction: str) -> list[str]:
    """metric, delta, previous_best and best against the samples, the comparison that
    judged them and the running best.

    A ledger written before the best followed the comparison recorded the kept
    candidate's metric as the best and `metric - best before` as the delta; those read
    as they are (a best that moved backwards is reported all the same, by `_backwards`).
    """
    out = _metric(record)
    if not record.closed or (record.status in DECIDED and judged.look is None):
        # A decided status the samples do not decide is already named by `_verdict`: the
        # level it was judged at cannot be derived.
        return out
    kept = record.status is Status.KEEP
    before = best.metric
    legacy_delta = None if record.metric is None or before is None else record.metric - before
    delta = legacy_delta
    after = record.metric if kept else before
    if judged.look is not None and before is not None:
        delta = judged_level(before, judged.look) - before
        if kept:
            rule_kept = judged.verdict is Verdict.KEEP
            after = kept_best(before, judged.look, direction) if rule_kept else before
    if not (_same(record.delta, delta) or _same(record.delta, legacy_delta)):
        out.append(f"its delta {record.delta} is not its judged level - best before ({delta})")
    if not (_same(record.best, after) or (kept and _same(record.best, record.metric))):
        out.append(f"its best {record.best} is not the running best ({after})")
    previous = before if kept else None
    if not _same(record.previous_best, previous):
        out.append(f"its previous_best {record.previous_best} is not the best before ({previous})")
    return out


def _metric(record: AttemptRecord) -> list[str]:
    samples = record.samples or ()
    expected = estimate(samples) if samples else None
    if _same(record.metric, expected):
        return []
    if expected is None:
        return [f"its metric {record.metric} has no samples behind it"]
    return [f"its metric {record.metric} is not the mean of its samples ({expected})"]


def _same(a: float | None, b: float | None) -> bool:
    """Equal as the ledger stores them: a float written to JSON reads back exactly."""
    if a is None or b is None:
        return a is b
    return a == b or (math.isnan(a) and math.isnan(b))


def _count(candidate: int, incumbent: int) -> str:
    parts = []
    if candidate:
        parts.append(f"{candidate} candidate sample{_s(candidate)}")
    if incumbent:
        parts.append(f"{incumbent} incumbent sample{_s(incumbent)}")
    return " and ".join(parts)


def _s(n: int) -> str:
    return "" if n == 1 else "s"
