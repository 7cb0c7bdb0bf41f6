"""Runs that carry the run before them (heat, caches a version leaves behind): the campaign
finds it from its comparisons' runs in order, then judges only runs that follow their own
version, so the number it keeps is the candidate's, not half of it; on machines without
carry-over nothing changes."""

from __future__ import annotations

import random
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from autoresearch.attempt import AttemptRecord
from autoresearch.stats.decide import CARRY_BLOCK, Comparison, Noise, Rule, Side, Verdict
from autoresearch.stats.noise_model import Runs, carry_over
from autoresearch.stats.sample_book import SampleBook
from conftest import upper_bound

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

# The machines and the campaign's comparisons as the bench runs them.
from carry_readings import (
    EFFECTS,
    Machine,
    Shape,
    bursts,
    comparisons,
    switch_cost,
    symmetric,
    thermal,
)

AUTO = Rule("auto", max_samples=8, confidence=0.95, estimator="robust", adaptive=True)


def campaign(
    machine: Machine, attempts: int, book: SampleBook, effects: tuple[float, ...] = EFFECTS
) -> tuple[list[dict[str, object]], list[float], list[float]]:
    """A campaign as the evaluator runs it (the book's comparison, the runs back into the
    book in order, a keep makes the incumbent): its records, and for each keep the gain
    the comparison judged and the true gain."""
    rng = random.Random(machine.seed + 1000)
    levels = {"c0": 100.0}
    samples = [machine.run(100.0) for _ in range(4)]
    book.baseline("c0", samples)
    records: list[dict[str, object]] = [
        {"iteration": 0, "status": "baseline", "commit": "c0", "samples": samples}
    ]
    judged: list[float] = []
    true: list[float] = []
    incumbent = "c0"
    for i in range(1, attempts + 1):
        commit = f"c{i}"
        levels[commit] = levels[incumbent] - rng.choice(effects)
        test = book.comparison(incumbent)
        candidate: list[float] = []
        fresh: list[float] = []
        while isinstance(side := test.next(), Side):
            if side is Side.INCUMBENT:
                value = machine.run(levels[incumbent])
                book.remeasured(incumbent, value)
                fresh.append(value)
            else:
                value = machine.run(levels[commit])
                candidate.append(value)
            test.add(value)
        book.measured(commit, candidate, incumbent, test.taken)
        kept = test.verdict is Verdict.KEEP
        records.append(
            {
                "iteration": i,
                "status": "keep" if kept else "discard",
                "commit": commit,
                "parent": incumbent,
                "samples": candidate,
                "incumbent_samples": fresh,
            }
        )
        if kept:
            assert test.look is not None
            judged.append(test.look.gain)
            true.append(levels[incumbent] - levels[commit])
            book.kept(commit)
            incumbent = commit
    return records, judged, true


def sequences(shape: Shape, seed: int, attempts: int = 40) -> list[tuple[str, Runs]]:
    """A campaign's comparisons, in order, each with its incumbent, every run judged."""
    rule = Rule("sequential", max_samples=8, estimator="robust", pairs="both")
    machine = Machine(seed, shape)
    baseline = [machine.run(100.0) for _ in range(4)]
    return list(comparisons(machine, rule, baseline, attempts))


def found(shape: Shape, seeds: range) -> int:
    """In how many campaigns of 40 attempts carry-over is found."""
    return sum(carry_over(sequences(shape, seed), "minimize", 1.0).found for seed in seeds)


def test_carry_over_is_found_where_runs_carry_the_one_before_and_only_there() -> None:
    """The campaign's own comparisons tell a machine whose runs carry the run before them
    (heat one way, a share both ways) from one whose runs cost more after a switch of
    version, or spike, which hit both sides alike and need nothing."""
    seeds = range(20)
    assert found(thermal(1.0), seeds) >= 12
    assert found(symmetric(0.5), seeds) >= 9
    assert found(switch_cost, seeds) <= 1
    assert found(bursts, seeds) <= 1
    assert found(lambda last, now, rng: 0.0, seeds) <= 1


def test_carry_over_reads_the_share_a_run_carries() -> None:
    """The estimate of the share itself, from the readings of many comparisons."""
    rng = random.Random(5)
    rule = Rule("sequential", max_samples=8, estimator="robust", pairs="both")
    for share in (0.0, 0.5, 0.8):
        machine = Machine(7, symmetric(share))
        sequences = []
        for _ in range(300):
            level = 100.0 + rng.choice((-6.0, -3.0, 3.0, 6.0))
            test = Comparison(rule, "minimize", [100.0] * 4, Noise(1.0, 100), 4, open_walk=True)
            while isinstance(side := test.next(), Side):
                test.add(machine.run(level if side is Side.CANDIDATE else 100.0))
            sequences.append(("c0", test.taken))
        carry = carry_over(sequences, "minimize", 1.0)
        assert carry.found == (share > 0), (share, carry)
        if share <= 0.5:
            assert abs(carry.share - share) < 0.1, (share, carry)
        else:
            # The difference it is regressed on is measured too, and shrunk by the carry:
            # where that leaves it small beside its noise, the share reads low.
            assert 0.4 < carry.share < share, (share, carry)


def test_judged_only_after_own_runs_the_kept_gain_is_the_candidates() -> None:
    """Where a run after a slower version carries all of its excess, a candidate 3 units
    faster is kept at about half its gain when every run counts (its runs after the
    incumbent's read as the incumbent); judged on the runs that follow their own version,
    at its gain, in blocks of runs of one side."""
    gains = {}
    for carry in (False, True):
        rule = Rule("sequential", max_samples=8, estimator="robust", pairs="both", carry=carry)
        found = []
        for seed in range(60):
            machine = Machine(seed, thermal(1.0))
            machine.last = 100.0
            reference = [100.0 + machine.rng.gauss(0.0, 1.0) for _ in range(4)]
            test = Comparison(rule, "minimize", reference, Noise(1.0, 100), 4, efficacy=2.5)
            while isinstance(side := test.next(), Side):
                test.add(machine.run(97.0 if side is Side.CANDIDATE else 100.0))
            assert test.look is not None
            if test.verdict is Verdict.KEEP:
                found.append(test.look.gain)
            if carry:
                sides = [side for side, _, _ in test.taken]
                # Runs of one side in blocks, all but the first judged.
                block = CARRY_BLOCK
                assert all(side is sides[i - i % block] for i, side in enumerate(sides))
                assert [f for _, _, f in test.taken] == [i % block > 0 for i in range(len(sides))]
        gains[carry] = (len(found), sum(found) / max(1, len(found)))
    kept, gain = gains[True]
    assert kept >= 57 and 2.6 < gain < 3.6, gains
    kept, gain = gains[False]
    assert kept < 57 or gain < 2.2, gains


@pytest.mark.slow
@pytest.mark.parametrize("probe", [False, True])
def test_null_candidates_judged_after_own_runs_are_kept_within_the_bound(probe: bool) -> None:
    """The boundary of the procedure that judges half the runs is its own calibration: on
    Gaussian noise, null candidates are kept at most 1 - confidence of the time; so they
    are while the campaign probes for carry-over, whose first-run screen only adds a way
    to be dropped."""
    rule = Rule(
        "sequential", max_samples=8, estimator="robust", pairs="both", carry=True, probe=probe
    )
    kept = total = 0
    for seed in range(10):
        book = SampleBook(rule, "minimize")
        _, judged, _ = campaign(Machine(seed), 40, book, effects=(0.0,))
        kept += len(judged)
        total += 40
    assert kept / total <= upper_bound(0.05, total), f"{kept} of {total} kept"


def test_a_resumed_book_judges_after_own_runs_from_the_same_attempt() -> None:
    """The ledger holds no order of runs: a resumed campaign (and `verify`) replays each
    comparison to find it, and learns carry-over at the same attempt with the same runs
    judged."""
    for seed in range(1, 6):
        live = SampleBook(AUTO, "minimize")
        records, _, _ = campaign(Machine(seed, thermal(1.0)), 40, live)
        if live.rule.carry:
            break
    assert live.rule.carry  # heat found, and judged after own runs, in one of five
    book = SampleBook(AUTO, "minimize")
    book.load([AttemptRecord.from_json(r) for r in records])
    assert book.rule == live.rule
    assert book.follows == live.follows
    assert book.sequences == live.sequences
    assert book.switches == live.switches


class Watched(SampleBook):
    """A book that notes after how many comparisons it stopped judging after own runs."""

    ended: int | None = None

    def measured(
        self, commit: str, samples: list[float], incumbent: str = "", taken: Runs = ()
    ) -> None:
        super().measured(commit, samples, incumbent, taken)
        if self.ended is None and not self.rule.carry:
            self.ended = len(self.sequences)


def probe(shape: Shape, seed: int) -> Watched:
    """The book after an `auto` campaign of 40 attempts on `shape`."""
    book = Watched(AUTO, "minimize")
    campaign(Machine(seed, shape), 40, book)
    return book


def test_auto_judges_after_own_runs_from_the_start() -> None:
    """A campaign cannot read carry-over before it has compared versions, and a real gain
    that every run after the incumbent hides is dropped by then: `auto` starts judging only
    the runs that follow their own version."""
    start = SampleBook(AUTO, "minimize")
    start.baseline("c0", [100.0, 101.0, 99.0, 100.5])
    assert start.rule.carry and start.rule.probe
    assert start.switches and "until the comparisons show" in start.switches[0]


# Each shape is a test of its own (ten campaigns of 40 attempts each, about a minute), so
# that parallel workers share them.
def test_auto_judges_every_run_once_the_comparisons_show_that_nothing_carries() -> None:
    """`auto` goes back to judging every run once its comparisons show that runs carry too
    little to matter, early in the campaign."""
    plain = [probe(lambda last, now, rng: 0.0, seed) for seed in range(10)]
    ended = [b.ended for b in plain if any("every run judged" in t for t in b.switches)]
    assert len(ended) >= 9, [b.switches for b in plain]
    # Where nothing carries, most of the campaign judges every run.
    assert all(n is not None and n <= 20 for n in ended), ended


def test_auto_judges_every_run_where_a_switch_of_version_costs_alike() -> None:
    """A switch of version that costs alike whichever way is no carry-over."""
    cost = [probe(switch_cost, seed) for seed in range(10)]
    assert sum(b.ended is not None for b in cost) >= 9, [b.switches for b in cost]


def test_auto_keeps_judging_after_own_runs_where_heat_carries() -> None:
    hot = [probe(thermal(1.0), seed) for seed in range(10)]
    assert sum(b.rule.carry for b in hot) >= 8, [b.switches for b in hot]


def test_while_probing_a_drop_waits_for_one_more_run_of_the_incumbent() -> None:
    """The candidates most often dropped are the worse ones, and a run right after a worse
    version is what shows a machine that keeps its heat: while carry-over is not yet
    measured, a drop comes after one more incumbent run, and the verdict is the same."""
    verdicts = {}
    for probe in (False, True):
        rule = Rule("sequential", max_samples=8, estimator="robust", pairs="both", carry=True)
        rule = replace(rule, probe=probe)
        test = Comparison(rule, "minimize", [100.0, 100.5, 99.5, 100.2], Noise(0.5, 100), 4)
        runs = iter([110.0, 110.3, 109.8, 110.1, 110.4, 109.9, 110.2, 110.0])
        while isinstance(side := test.next(), Side):
            test.add(next(runs) if side is Side.CANDIDATE else 100.0)
        verdicts[probe] = (test.verdict, [(s, f) for s, _, f in test.taken])
    verdict, taken = verdicts[False]
    assert verdict is Verdict.DISCARD and all(s is Side.CANDIDATE for s, _ in taken)
    assert verdicts[True] == (verdict, [*taken, (Side.INCUMBENT, False)])
    with pytest.raises(ValueError, match="probe"):
        Rule("sequential", probe=True)


def _probed(first: float) -> tuple[Verdict, list[tuple[Side, bool]]]:
    """A probed comparison against an incumbent at 100 (one run's noise 0.5) whose
    candidate's first run reads `first` and its later runs 100.2: its verdict and runs."""
    rule = Rule(
        "sequential", max_samples=8, estimator="robust", pairs="both", carry=True, probe=True
    )
    reference = [100.0, 100.5, 99.5, 100.2, 99.8, 100.1]
    test = Comparison(rule, "minimize", reference, Noise(0.5, 100), 6, efficacy=2.5)
    candidate = iter([first, *[100.2] * 20])
    while isinstance(side := test.next(), Side):
        test.add(100.0 if side is Side.INCUMBENT else next(candidate))
    return test.verdict, [(s, f) for s, _, f in test.taken]


def test_while_probing_a_clearly_worse_first_run_is_dropped_after_one_incumbent_run() -> None:
    """A run right after the incumbent's can only carry the incumbent's level: a
    candidate whose first run is clearly worse even so is worse still, and is dropped
    there, after the one incumbent run the probe asks (two runs, not a block of three and
    that run)."""
    verdict, taken = _probed(101.8)  # z -3.3
    assert verdict is Verdict.DISCARD
    assert taken == [(Side.CANDIDATE, False), (Side.INCUMBENT, False)]


@pytest.mark.parametrize("first", [101.3, 100.6, 99.0, 104.0])
def test_while_probing_a_first_run_not_clearly_worse_is_not_judged(first: float) -> None:
    """A first run worse but not clearly (z -2.4: a gain whose first run a burst slowed),
    a little worse, better, or so much worse that it is as likely a disturbance as the
    change: the block goes on, the first run not judged."""
    verdict, taken = _probed(first)
    assert taken[:2] == [(Side.CANDIDATE, False), (Side.CANDIDATE, True)]
    assert verdict is Verdict.DISCARD  # the later runs, 100.2, are not better
