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
from autoresearch.stats.decide import Comparison, Look, Rule, Side, Verdict, estimate, explain
from autoresearch.stats.sample_book import SampleBook

# Statuses the rule decided: the verdict they imply once the comparison is over.
DECIDED = {
    Status.KEEP: Verdict.KEEP,
    Status.DISCARD: Verdict.DISCARD,
    # The rule kept it; a later check (guard, constraint, holdout, approval) refused it.
    **{status: Verdict.KEEP for status in Status if status.rule_kept},
    Status.REJECTED: Verdict.KEEP,  # parked for approval and turned down at once
}
# A failed run stops the comparison where it was: its samples are cut short.
CUT_SHORT = (Status.CRASH, Status.TIMEOUT)


@dataclass(frozen=True)
class Finding:
    """A record whose content does not follow from the records before it and the rule."""

    index: int  # the record's position in the list replayed
    iteration: int
    message: str


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
    queues = {Side.CANDIDATE: list(samples), Side.INCUMBENT: list(incumbent)}
    taken = {Side.CANDIDATE: 0, Side.INCUMBENT: 0}
    while isinstance(side := test.next(), Side):
        if taken[side] >= len(queues[side]):
            break
        test.add(queues[side][taken[side]])
        taken[side] += 1
    return Fed(
        test.next(),
        test.look,
        taken[Side.CANDIDATE],
        len(queues[Side.CANDIDATE]) - taken[Side.CANDIDATE],
        len(queues[Side.INCUMBENT]) - taken[Side.INCUMBENT],
    )


@dataclass
class _Best:
    commit: str | None = None
    metric: float | None = None


def replay(records: Sequence[AttemptRecord], rule: Rule, direction: str) -> list[Finding]:
    """Every record of `records` (a ledger, in order) whose status, samples, metric,
    delta, best or parent does not follow from the records before it under `rule`."""
    findings: list[Finding] = []
    book = SampleBook(rule, direction)
    best = _Best()
    for index, record in enumerate(records):

        def report(message: str, record: AttemptRecord = record, index: int = index) -> None:
            findings.append(Finding(index, record.iteration, message))

        if record.status is Status.BASELINE:
            for message in _baseline(record, rule, index):
                report(message)
            book.take(record)
            best = _Best(record.commit, record.metric)
            continue
        if best.commit is None and index == 0:
            report("the first record is not the baseline; nothing can be re-derived")
            return findings
        if record.slot is not None:
            # Decided while other slots measured beside it: the samples its comparison
            # started from depend on timing, not on ledger order. Its numbers still
            # must follow from its samples.
            for message in _metric(record):
                report(message)
            book.take(record)
            if record.status.sets_best:
                best = _Best(record.commit, record.metric)
            continue
        for message in _attempt(record, book, best):
            report(message)
        for message in _numbers(record, best):
            report(message)
        book.take(record)
        if record.status is Status.KEEP:
            best = _Best(record.commit, record.metric)
    return findings


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


def _attempt(record: AttemptRecord, book: SampleBook, best: _Best) -> list[str]:
    """Whether the status follows from the samples, the rule and the incumbent."""
    samples = list(record.samples or ())
    incumbent = list(record.incumbent_samples or ())
    if record.parent != best.commit:
        return [
            f"its incumbent is {str(record.parent)[:12]}, but the best kept commit before "
            f"it is {str(best.commit)[:12]}"
        ]
    measured = bool(samples or incumbent)
    status = record.status
    if status is Status.REJECTED and not measured:
        return []  # a person turned a parked candidate down: nothing was measured then
    if not (status in DECIDED or status in CUT_SHORT or status is Status.TAMPERED):
        # Decided before any measurement (or cut short by a signal): nothing was measured.
        if measured or record.metric is not None:
            return [f"recorded {status}, which is decided before measuring, but it has samples"]
        return []
    if not measured and status is not Status.TAMPERED and status not in CUT_SHORT:
        return [f"recorded {status}, but it has no samples: the rule needs them to decide"]
    if not measured:
        return []  # the first run failed, or the judge was found edited before it
    assert best.commit is not None
    try:
        test = book.comparison(best.commit)
    except ValueError as exc:
        return [f"recorded {status}, but {exc} and has none"]
    fed = feed(test, samples, incumbent)
    reference = incumbent or book.groups.get(best.commit, [])
    if record.status is Status.DISCARD and _unpaid(record, best, book.direction):
        fed.outcome = Verdict.DISCARD if fed.outcome is Verdict.KEEP else fed.outcome
    return _verdict(record, fed, book.rule, _simplification(record, reference, book))


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


def _numbers(record: AttemptRecord, best: _Best) -> list[str]:
    """metric, delta, previous_best and best against the samples and the running best."""
    out = _metric(record)
    if not record.closed:
        return out
    kept = record.status is Status.KEEP
    after = record.metric if kept else best.metric
    delta = None if record.metric is None or best.metric is None else record.metric - best.metric
    if not _same(record.delta, delta):
        out.append(f"its delta {record.delta} is not metric - best before ({delta})")
    if not _same(record.best, after):
        out.append(f"its best {record.best} is not the running best ({after})")
    previous = best.metric if kept else None
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
