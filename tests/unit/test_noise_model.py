"""The judge on noise it was not tuned on: null candidates are kept within the bound on
persistent two-state noise, on long bursts, on a machine that alternates and for
candidates less steady than the incumbent, the boundary
learned from the campaign's own runs follows the procedure, and what `noise = "auto"`
learned and chose reaches `status`."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from autoresearch.checks.verify import verify_campaign
from autoresearch.cli.commands import status_lines
from autoresearch.config import load_campaign
from autoresearch.engine import Engine
from autoresearch.events import Noted
from autoresearch.proposers.base import Proposal
from autoresearch.stats import noise_model
from autoresearch.stats.decide import Rule, Start, Verdict, sequential_bounds
from autoresearch.stats.noise_model import Shape, densest_half, residuals
from autoresearch.stats.sample_book import SampleBook, switch_text
from autoresearch.testing.comparisons import drive
from autoresearch.views.status import campaign_status
from campaigns import campaign_toml
from conftest import make_repo, upper_bound
from unit.memory import DisturbedExecutor, ScriptedProposer

# A version's run from the machine's value at that moment.
Runs = Callable[[str, float], float]
AUTO = Rule("auto", max_samples=8, confidence=0.95, estimator="robust", adaptive=True)


def two_states(seed: int) -> Iterator[float]:
    """Two CPU frequency states 15% apart, switching on about one run in three (so a state
    lasts three runs on average), Gaussian 1% within a state."""
    rng = random.Random(seed)
    slow = False
    while True:
        if rng.random() < 0.3:
            slow = not slow
        yield 100.0 * (1.15 if slow else 1.0) + rng.gauss(0.0, 1.0)


def long_bursts(seed: int) -> Iterator[float]:
    """Bursts of contention 3-5 runs long on 20% of the runs, one right-skewed magnitude per
    burst (lognormal, median 12%), Gaussian 1% between them."""
    rng = random.Random(seed)
    left, size = 0, 0.0
    while True:
        if left == 0 and rng.random() < 0.2 / (4 * 0.8):
            left, size = rng.choice((3, 4, 5)), 12.0 * rng.lognormvariate(0.0, 0.75)
        loss = 0.0
        if left:
            left -= 1
            loss = size * rng.uniform(0.7, 1.3)
        yield 100.0 + rng.gauss(0.0, 1.0) + loss


def alternating(seed: int) -> Iterator[float]:
    """A machine slower by 2% on every other run (a cache or a frequency that alternates),
    Gaussian 1% besides: candidate and incumbent runs taken in strict turn would each fall
    on one phase, and a null candidate on the fast one would look 2% better at every run."""
    rng = random.Random(seed)
    for run in itertools.count():
        yield 100.0 * (1.02 if run % 2 else 1.0) + rng.gauss(0.0, 1.0)


def null_campaign(
    noise: Iterator[float], attempts: int, book: SampleBook, runs: Runs | None = None
) -> int:
    """A campaign of candidates no better than the incumbent, judged as the evaluator judges
    them (the book's comparison, its samples back into the book, a keep makes the
    incumbent), on one machine whose noise follows time: how many were kept. `runs` turns
    the machine's value into a version's run (none: every version runs as the machine)."""
    run: Runs = runs or (lambda version, value: value)
    book.baseline("c0", [run("c0", next(noise)) for _ in range(4)])
    incumbent, keeps = "c0", 0
    for i in range(1, attempts + 1):
        commit = f"c{i}"
        verdict, _, _ = drive(
            book,
            incumbent,
            commit,
            lambda commit=commit: run(commit, next(noise)),
            lambda incumbent=incumbent: run(incumbent, next(noise)),
        )
        if verdict is Verdict.KEEP:
            keeps += 1
            incumbent = commit
    return keeps


def less_steady(version: str, value: float) -> float:
    """Every other candidate (and every incumbent it became) three times as variable as
    the machine's Gaussian 1%: a change can make the code less steady without making it
    faster, and its luckiest runs must not pass for a gain."""
    wide = version != "c0" and int(version[1:]) % 2 == 1
    return 100.0 + 3.0 * (value - 100.0) if wide else value


def gaussian(seed: int) -> Iterator[float]:
    """Gaussian 1% on every run, nothing else."""
    rng = random.Random(seed)
    while True:
        yield 100.0 + rng.gauss(0.0, 1.0)


@pytest.mark.slow
@pytest.mark.parametrize(
    "shape,runs",
    [
        (two_states, None),
        (long_bursts, None),
        (alternating, None),
        (gaussian, less_steady),
    ],
    ids=["two states", "long bursts", "alternating runs", "less steady candidates"],
)
def test_null_candidates_are_kept_within_the_bound(
    shape: Callable[[int], Iterator[float]], runs: Runs | None
) -> None:
    """The promise itself: on noise the rule was not tuned on (states that persist for
    runs, bursts that hit consecutive runs, every other run slower, candidates whose runs
    spread wider than the pooled noise, mostly other versions', says), candidates that are
    not better are kept at most 1 - confidence of the time, up to the binomial margin of
    the sample."""
    campaigns, attempts = 10, 40
    kept = sum(
        null_campaign(shape(seed), attempts, SampleBook(AUTO, "minimize"), runs)
        for seed in range(campaigns)
    )
    n = campaigns * attempts
    assert kept / n <= upper_bound(0.05, n), f"{kept} of {n} null candidates kept"


def test_the_learned_boundary_rises_on_bursts_and_stays_at_the_gaussian_one_without() -> None:
    """On Gaussian runs the learned boundary is the Gaussian calibration (never below it);
    on runs with long bursts the simulation of the very procedure asks for more."""
    rng = random.Random(3)
    bursty = long_bursts(4)
    quiet = {f"v{i}": [100.0 + rng.gauss(0.0, 1.0) for _ in range(8)] for i in range(6)}
    loud = {f"v{i}": [next(bursty) for _ in range(8)] for i in range(6)}
    rule = replace(AUTO, name="sequential", adaptive=False)
    calm = noise_model.choose(rule, quiet, {}, "minimize")
    rough = noise_model.choose(rule, loud, {}, "minimize")
    assert calm is not None and rough is not None
    floor = noise_model.noise_of(list(quiet.values()), "robust", "minimize")
    assert floor is not None
    # At the first keep's run auto chose: a later first keep has a lower boundary.
    chosen = replace(rule, first_keep=calm.learned.first_keep)
    gaussian = sequential_bounds(chosen, floor.dof, 0, floor.screen)
    assert calm.learned.efficacy(Start.AFTER_KEEP) == pytest.approx(gaussian, rel=0.1)
    assert calm.learned.efficacy(Start.AFTER_KEEP) >= gaussian
    assert rough.learned.efficacy(Start.PARTIAL) > calm.learned.efficacy(Start.PARTIAL)
    # Deterministic: the same residuals give the same boundaries (verify replays them).
    again = noise_model.choose(rule, loud, {}, "minimize")
    assert again is not None and again.learned == rough.learned


def test_a_spike_does_not_move_the_level_its_version_is_centred_on() -> None:
    # Two of four runs spiked: the median would sit halfway, the densest half does not.
    assert densest_half([143.5, 126.1, 89.9, 89.6]) == pytest.approx(89.75)
    found = residuals({"v": [143.5, 126.1, 89.9, 89.6]}, {}, "minimize")
    assert max(abs(r) for r in sorted(found, key=abs)[:2]) < 1.0  # the clean runs stay put
    # The samples that selected a kept version are left out; too short a version says nothing.
    assert residuals({"v": [1.0, 2.0, 3.0, 4.0, 5.0]}, {"v": 2}, "minimize") == []


def test_the_shape_is_described() -> None:
    rng = random.Random(5)
    gaussian = Shape.of([rng.gauss(0.0, 1.0) for _ in range(200)])
    assert gaussian.describe() == "200 residuals: close to Gaussian"
    bursts = long_bursts(6)
    values = [next(bursts) - 100.0 for _ in range(200)]
    text = Shape.of(values).describe()
    assert "right-skewed" in text and "serially correlated" in text, text
    states = two_states(7)
    assert "separate levels" in Shape.of([next(states) - 100.0 for _ in range(200)]).describe()
    # Runs printed to few digits, most of them tied with the median on the worse side: said,
    # not divided by.
    tied = Shape.of([0.0] * 150 + [-1.0] * 30 + [-2.0] * 20)
    assert tied.skew == 0.0 and "left-skewed" in tied.describe()


def test_noise_auto_switches_the_estimator_and_says_why() -> None:
    """On runs whose disturbances only ever make the number worse, in long bursts, the
    better half detects far smaller gains than the clipped mean: `noise = "auto"`
    switches to it, and the book keeps the reason for the live view and `status`."""
    book = SampleBook(AUTO, "minimize")
    null_campaign(long_bursts(8), 30, book)
    assert book.shape is not None
    switches = [text for text in book.switches if text.startswith("estimator: ")]
    assert switches, "no switch on one-sided bursts"
    assert switches[0].startswith("estimator: robust -> ")
    assert "residuals" in switches[0] and "gains kept 4 times in 5" in switches[0]
    assert book.rule.estimator != "robust" or len(switches) > 1
    # A resumed campaign (and `verify`) learns the same from the ledger's order of samples.
    fixed = SampleBook(replace(AUTO, adaptive=False), "minimize")
    null_campaign(long_bursts(8), 30, fixed)
    assert fixed.rule.estimator == "robust"
    assert all(text.startswith("estimator: robust") for text in fixed.switches)


def test_judged_after_their_own_version_a_later_first_keep_must_pay_for_its_blocks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A later first keep spares each candidate's first runs. Where every run is judged
    that is one run more, and a gain 15% smaller detected is worth it; where runs are judged
    after their own version it is two blocks of three, mostly spent on candidates that are
    not better, and the same 15% is not: the first run's option stays, and a switch the
    margin decides says so."""
    book = SampleBook(replace(AUTO, adaptive=False), "minimize")
    null_campaign(long_bursts(1), 30, book)
    groups, selected = book.judged_runs()
    # The gain each option detects, as the calibration would find it: 15% smaller from the
    # third run on.
    monkeypatch.setattr(
        noise_model,
        "detectable",
        lambda rule, boundary, sigma: 2.0 if rule.first_keep == 1 else 1.7,
    )
    start = replace(book.rule, estimator="robust", first_keep=1, probe=False)
    every = noise_model.choose(replace(start, carry=False), groups, selected, "minimize")
    after_own = noise_model.choose(replace(start, carry=True), groups, selected, "minimize")
    assert every is not None and every.learned.option == ("robust", 3)
    assert after_own is not None and after_own.learned.option == ("robust", 1)
    # Clearly smaller (by more than the margin, and the switch's own): chosen either way.
    monkeypatch.setattr(
        noise_model,
        "detectable",
        lambda rule, boundary, sigma: 2.0 if rule.first_keep == 1 else 1.5,
    )
    clearly = noise_model.choose(replace(start, carry=True), groups, selected, "minimize")
    assert clearly is not None and clearly.learned.option == ("robust", 3)
    # Held at the first run with a smaller gain detected from the third: the line says why.
    held = replace(start, first_keep=3)
    text = switch_text(
        held, replace(after_own, detectable={("robust", 1): 2.0, ("robust", 3): 1.7})
    )
    assert "a later first keep must detect at most 0.9 of the gain" in text, text


def test_on_two_states_auto_folds_the_runs_into_one_state_and_says_why() -> None:
    """Where runs sit in two speed states a fixed gap apart, `noise = "auto"` finds the gap
    and compares the runs as one state would have measured them, and the switch says so.
    A fixed estimator cannot fold: where one or two runs of a side can all fall in the
    slow state, it may keep from a later run instead, and its switch says that. (Forty null
    candidates find the states in each of the first 8 seeds of `two_states`, and the fixed
    estimator ends keeping from run 3 in 2 of the first 6; these are among them.)"""
    book = SampleBook(AUTO, "minimize")
    null_campaign(two_states(0), 40, book)
    assert book.rule.estimator == "states", book.switches
    assert book.learned is not None and book.learned.gap == pytest.approx(0.15, rel=0.1)
    assert any("within one speed state" in text for text in book.switches)
    assert any("speed states 1" in text and "% apart" in text for text in book.switches)
    fixed = SampleBook(replace(AUTO, adaptive=False), "minimize")
    null_campaign(two_states(2), 40, fixed)
    assert fixed.rule.estimator == "robust" and fixed.rule.first_keep == 3, fixed.switches
    assert any("keeps from run 3" in text for text in fixed.switches)
    assert any("keeping from run 3" in text for text in fixed.switches)


def versions(noise: Iterator[float], count: int, runs: int) -> dict[str, list[float]]:
    """`count` versions of the same code measured `runs` times each, one after another."""
    return {f"v{i}": [next(noise) for _ in range(runs)] for i in range(count)}


def test_the_gap_between_speed_states_is_found_and_nothing_else_is_taken_for_one() -> None:
    """The states' gap is found from a few versions' runs; Gaussian noise, bursts of
    contention of varied size, a machine that changed speed once (one version measured
    across the change) and a spike of one size on one run of each version have none."""
    found = [noise_model.state_gap(versions(two_states(s), 8, 6), {}) for s in range(40)]
    assert sum(g > 0 for g in found) >= 36, found
    assert all(g == 0 or 0.13 < g < 0.17 for g in found), found
    rng = random.Random(9)
    quiet = [rng.gauss(100.0, 1.0) for _ in range(600)]
    assert noise_model.state_gap(versions(iter(quiet), 20, 6), {}) == 0
    bursts = [noise_model.state_gap(versions(long_bursts(s), 5, 6), {}) for s in range(40)]
    assert sum(g > 0 for g in bursts) <= 2, bursts
    shifted = {
        "v0": [rng.gauss(100.0, 1.0) for _ in range(6)],
        "v1": [rng.gauss(100.0, 1.0) for _ in range(4)] + [rng.gauss(110.0, 1.0) for _ in range(8)],
        "v2": [rng.gauss(110.0, 1.0) for _ in range(6)],
    }
    assert noise_model.state_gap(shifted, {}) == 0
    # A cold cache right after each keep: the first run of every version 1.6 times as long.
    spiked = {
        f"v{i}": [160.0 + rng.gauss(0.0, 1.0)] + [rng.gauss(100.0, 1.0) for _ in range(5)]
        for i in range(8)
    }
    assert noise_model.state_gap(spiked, {}) == 0


def incumbent_and_dropped(noise: Iterator[float], dropped: int) -> dict[str, list[float]]:
    """An incumbent re-measured all along and `dropped` candidates of two or three runs
    each, in the order a campaign takes them: what a campaign whose candidates are mostly
    dropped early has to find its noise in."""
    groups: dict[str, list[float]] = {"v0": [next(noise) for _ in range(4)]}
    for i in range(1, dropped + 1):
        candidate = f"v{i}"
        groups[candidate] = []
        for side in (candidate, "v0", "v0", candidate) + ((candidate,) if i % 2 else ()):
            groups[side].append(next(noise))
    return groups


def test_speed_states_are_found_where_candidates_are_dropped_after_two_runs() -> None:
    """One version measured long and candidates of two or three runs show the states: the
    long one holds stays in both, the short ones the same gap. Bursts of varied size and a
    cold cache on the first run after each keep do not pass for states there."""
    found = [noise_model.state_gap(incumbent_and_dropped(two_states(s), 12), {}) for s in range(40)]
    assert sum(g > 0 for g in found) >= 36, found
    assert all(g == 0 or 0.13 < g < 0.17 for g in found), found
    bursts = [
        noise_model.state_gap(incumbent_and_dropped(long_bursts(s), 12), {}) for s in range(40)
    ]
    assert sum(g > 0 for g in bursts) <= 2, bursts
    rng = random.Random(11)
    # Each keep's first re-measurement 1.6 times as long, every other run Gaussian: one run
    # a state away in each version is no stay.
    spiked: dict[str, list[float]] = {}
    for i in range(8):
        spiked[f"k{i}"] = [160.0 + rng.gauss(0.0, 1.0)] + [rng.gauss(100.0, 1.0) for _ in range(5)]
        spiked[f"c{i}"] = [rng.gauss(100.0, 1.0) for _ in range(2)]
    assert noise_model.state_gap(spiked, {}) == 0


class Bursty(DisturbedExecutor):
    """A machine whose contention comes in long one-sided bursts: every metric run of any
    version is the code's level (100) plus `long_bursts`' noise, in the order taken."""

    def __init__(self) -> None:
        super().__init__(lambda workspace: 0.0)
        self.noise = long_bursts(8)

    def disturb(self, value: float, log_stem: Path) -> float:
        return next(self.noise)


RENAMES = itertools.count()


def neutral(workspace: Path) -> Proposal:
    """A change of the files that does not change the number (each one new)."""
    with (workspace / "calc.py").open("a") as f:
        f.write(f"# renamed {next(RENAMES)}\n")
    return Proposal(description="a neutral rename")


class TwoStates(DisturbedExecutor):
    """A machine with two speed states 15% apart: every metric run of any version is the
    code's level (100) in the state the machine is in, in the order taken. (Thirty
    null candidates find the states on each of the first 4 seeds.)"""

    def __init__(self) -> None:
        super().__init__(lambda workspace: 0.0)
        self.noise = two_states(0)

    def disturb(self, value: float, log_stem: Path) -> float:
        return next(self.noise)


def noisy_campaign(tmp_path: Path, executor: DisturbedExecutor) -> tuple[Path, list[object]]:
    """Thirty neutral renames under the defaults (rule = auto, noise = auto) on `executor`."""
    repo = make_repo(
        tmp_path / "repo",
        {
            "calc.py": "N = 10\n",
            "bench.py": "# the judge\n",
            "autoresearch.toml": campaign_toml(
                **{
                    "metric.command": "metric",
                    "metric.target": None,
                    "guard": None,
                    "decision.rule": None,  # the defaults: rule = auto, noise = auto
                    "decision.confirm": 0,
                    "stop.max_iterations": 30,
                    "stop.plateau": 0,
                }
            ),
        },
    )
    events: list[object] = []
    result = Engine(
        load_campaign(repo),
        proposer=ScriptedProposer(neutral),
        executor=executor,
        on_event=events.append,
    ).run()
    assert result.exit_code == 0, result.message
    return repo, events


def test_the_learned_shape_and_the_switch_reach_the_live_view_and_status(tmp_path: Path) -> None:
    repo, events = noisy_campaign(tmp_path, Bursty())
    said = [e.message for e in events if isinstance(e, Noted)]
    switches = [m for m in said if m.startswith(("estimator: ", "runs: "))]
    assert any(m.startswith("estimator: ") for m in switches), said
    state_dir = repo / ".autoresearch" / "toy"
    status = campaign_status(state_dir)
    assert status["estimator_switches"] == switches
    assert status["noise_shape"] and "residuals" in status["noise_shape"]
    assert "noise = auto" in status["decision"]
    text = "\n".join(status_lines(status))
    assert f"noise shape: {status['noise_shape']}" in text and switches[-1] in text
    # verify derives every verdict again, the learned boundary and the switch included.
    report = verify_campaign(repo, state_dir, "toy")
    assert report.ok, report.problems


@pytest.mark.slow
def test_speed_states_reach_status_and_verify_replays_the_folded_verdicts(tmp_path: Path) -> None:
    """On a machine with two speed states the switch to folding says the gap, `status`
    shows the states and the spread within one state (not the gap), and `verify` derives
    every verdict again, the folded ones included."""
    repo, events = noisy_campaign(tmp_path, TwoStates())
    said = [e.message for e in events if isinstance(e, Noted)]
    assert any("-> states" in m and "speed states 1" in m for m in said), said
    state_dir = repo / ".autoresearch" / "toy"
    status = campaign_status(state_dir)
    assert "speed states" in status["noise_shape"], status["noise_shape"]
    assert status["noise_robust_pct"] < 2.0, status["noise_robust_pct"]
    report = verify_campaign(repo, state_dir, "toy")
    assert report.ok, report.problems
