"""The best never moves the wrong way: a keep records the level its comparison judged the
candidate at (no better than its own runs showed), and `verify` fails a ledger whose best
moves against the direction.

The ledgers here are made by hand from the real comparison: a baseline at 100, a real
10% gain kept, then the machine slows down by 30% (a neighbour starts) and the next real
10% gain is measured against the slowed incumbent. Recording the kept candidate's own
mean as the best (as ledgers did before the best followed the comparison) makes that
keep move the best from ~90 to ~117 in a minimize campaign."""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Iterator
from dataclasses import replace

from autoresearch.attempt import AttemptRecord, Status
from autoresearch.checks.replay import replay
from autoresearch.stats.decide import (
    Look,
    Rule,
    Side,
    Verdict,
    judged_level,
    kept_best,
)
from autoresearch.stats.sample_book import SampleBook
from autoresearch.store.summary import summarize

RULE = Rule("auto")
JITTER = (0.3, -0.2, 0.1, -0.3, 0.2, 0.0, -0.1)
BASELINE = (100.0, 100.4, 99.6, 100.2)


def runs(level: float) -> Iterator[float]:
    return (level + j for j in itertools.cycle(JITTER))


def compare(
    book: SampleBook, incumbent: str, candidate: float, now: float
) -> tuple[list[float], list[float], Look]:
    """Drive the campaign's comparison: the candidate at `candidate`, the incumbent at
    `now`, until a verdict; it must be a keep."""
    test = book.comparison(incumbent)
    sides = {Side.CANDIDATE: runs(candidate), Side.INCUMBENT: runs(now)}
    taken: dict[Side, list[float]] = {Side.CANDIDATE: [], Side.INCUMBENT: []}
    while isinstance(side := test.next(), Side):
        value = next(sides[side])
        taken[side].append(value)
        test.add(value)
    assert test.verdict is Verdict.KEEP and test.look is not None
    return taken[Side.CANDIDATE], taken[Side.INCUMBENT], test.look


def ledger(legacy: bool) -> list[AttemptRecord]:
    """Baseline, a keep at 90 on a quiet machine, a keep at 117 on a machine 30% slower
    (its incumbent now measures 130): bests as judged, or (`legacy`) each keep's mean."""
    book = SampleBook(RULE, "minimize")
    commits = ["a" * 40, "b" * 40, "c" * 40]
    records = [
        AttemptRecord(
            0,
            Status.BASELINE,
            statistics.fmean(BASELINE),
            commits[0],
            description="baseline",
            samples=BASELINE,
            metric_runs=4,
        )
    ]
    book.take(records[0])
    best = records[0].metric
    assert best is not None
    for iteration, (candidate, now) in enumerate([(90.0, 100.0), (117.0, 130.0)], 1):
        samples, fresh, look = compare(book, commits[iteration - 1], candidate, now)
        metric = statistics.fmean(samples)
        after = metric if legacy else kept_best(best, look, "minimize")
        delta = metric - best if legacy else judged_level(best, look) - best
        record = AttemptRecord(
            iteration,
            Status.KEEP,
            metric,
            commits[iteration],
            commits[iteration - 1],
            description="a real 10% gain",
            samples=tuple(samples),
            incumbent_samples=tuple(fresh) or None,
            metric_runs=len(samples) + len(fresh),
            previous_best=best,
            closed=True,
            delta=delta,
            best=after,
        )
        records.append(record)
        book.take(record)
        best = after
    return records


def test_a_keep_on_a_slowed_machine_never_moves_the_best_backwards() -> None:
    records = ledger(legacy=False)
    bests = [r.best_after for r in records]
    assert all(b is not None for b in bests)
    # The first gain is recorded at its level; the second, whose runs read 117 on the
    # slowed machine, cannot show a level better than 90 with them: the best stays.
    assert abs(bests[1] - 90.0) < 0.5 and bests[2] == bests[1], bests  # type: ignore[operator]
    # Its delta is the gain its comparison judged, on the best's scale.
    assert records[2].delta is not None and -10.0 < records[2].delta < -8.0, records[2]
    assert replay(records, RULE, "minimize") == []
    summary = summarize("toy", "minimize", records)
    assert summary.best == bests[2]
    assert 9 < summary.to_json()["improvement_pct"] < 11


def look(reference: float, level: float) -> Look:
    return Look(1, 1, 1, reference - level, ref_mean=reference, level=level)


def test_the_kept_best_is_the_worse_of_the_judged_level_and_the_candidate_s_own() -> None:
    # Against the best itself (the one-sample rules): exactly the candidate's location.
    assert kept_best(100.0, look(100.0, 93.7), "minimize") == 93.7
    # A reference a burst inflated (131 where the best is 113): the 24% gain it shows is
    # not recorded; the candidate's own 99.3 is.
    assert kept_best(112.94, look(131.35, 99.34), "minimize") == 99.34
    # A machine 2% faster than when the best was recorded: the judged level, 90, not the
    # candidate's own 88.2.
    assert abs(kept_best(100.0, look(98.0, 88.2), "minimize") - 90.0) < 1e-9
    # Maximize mirrors it.
    assert kept_best(100.0, look(100.0, 106.3), "maximize") == 106.3
    assert abs(kept_best(100.0, look(102.0, 112.2), "maximize") - 110.0) < 1e-9
    assert kept_best(100.0, look(120.0, 99.0), "maximize") == 100.0
    # Negative values: the gain in units.
    assert kept_best(-5.0, look(-4.0, -6.0), "minimize") == -6.0


def test_verify_fails_a_ledger_whose_best_moves_backwards() -> None:
    records = ledger(legacy=True)
    assert records[2].best is not None and records[2].best > 110  # the mean on the slowed machine
    findings = replay(records, RULE, "minimize")
    assert [(f.iteration, f.message) for f in findings] == [
        (
            2,
            f"its best {records[2].best} is worse than the best before it "
            f"({records[1].best}): the best moved backwards, where a minimize campaign's "
            "best only ever gets lower",
        )
    ]


def test_a_best_recorded_worse_in_a_parallel_slot_is_named() -> None:
    """A record of a slot is decided beside others (its verdict is not replayed): its best
    is still held to the direction."""
    records = ledger(legacy=False)
    worse = records[2].previous_best + 5.0  # type: ignore[operator]
    records[2] = replace(records[2], slot=1, best=worse, delta=5.0)
    findings = replay(records, RULE, "minimize")
    assert len(findings) == 1 and findings[0].iteration == 2
    assert findings[0].message.startswith(f"its best {worse} is worse than the best before it")


def neg(value: float | None) -> float | None:
    return None if value is None else -value


def test_a_maximize_campaign_s_best_only_rises() -> None:
    records = ledger(legacy=False)
    flipped = [
        replace(
            r,
            metric=neg(r.metric),
            samples=tuple(-v for v in r.samples or ()),
            incumbent_samples=tuple(-v for v in r.incumbent_samples)
            if r.incumbent_samples
            else None,
            best=neg(r.best),
            previous_best=neg(r.previous_best),
            delta=neg(r.delta),
        )
        for r in records
    ]
    assert replay(flipped, RULE, "maximize") == []
    assert flipped[1].best is not None
    lowered = replace(flipped[2], best=flipped[1].best - 1.0)
    found = replay([*flipped[:2], lowered], RULE, "maximize")
    assert any("gets higher" in f.message for f in found), found
