"""A reference that one run cannot move: the deterministic stand-in of a real campaign on a
shared machine. The metric's level is 100 (90 after the first real gain, 81 after the
second), with a jitter of +-0.4; right after the first keep, the incumbent's first
re-measurement is spiked x1.6 and the run after it x1.4. A neutral change measured then
must not be kept, the recorded best must never move backwards, and the next real gain is
still kept."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from autoresearch.attempt import Status
from autoresearch.checks.verify import verify_campaign
from autoresearch.config import load_campaign
from autoresearch.engine import Engine
from autoresearch.proposers.base import Proposal
from autoresearch.stats.decide import Comparison, Noise, Rule, Side
from autoresearch.store.ledger import Ledger
from campaigns import campaign_toml
from conftest import make_repo
from unit.memory import DisturbedExecutor, ScriptedProposer

JITTER = (0.4, -0.4, 0.2, -0.2, 0.0, 0.3, -0.3, 0.1, -0.1)


def level(workspace: Path) -> float:
    text = (workspace / "calc.py").read_text()
    return 100.0 * (0.9 ** text.count("FAST"))


class SpikedAfterKeep(DisturbedExecutor):
    """The stand-in machine: a burst hits the incumbent's first re-measurement of
    `spiked_attempt` and the run after it."""

    def __init__(self, spiked_attempt: int) -> None:
        super().__init__(level)
        self.calls = 0
        self.spiked = f"{spiked_attempt:04d}-incumbent-1"
        self.burst = 0  # runs left in the burst
        self.factors = (1.6, 1.4)

    def disturb(self, value: float, log_stem: Path) -> float:
        value += JITTER[self.calls % len(JITTER)]
        self.calls += 1
        if log_stem.name == self.spiked:
            self.burst = len(self.factors)
        if self.burst:
            value *= self.factors[len(self.factors) - self.burst]
            self.burst -= 1
        return value


def faster(workspace: Path) -> Proposal:
    with (workspace / "calc.py").open("a") as f:
        f.write("# FAST\n")
    return Proposal(description="a real 10% gain")


def rename(workspace: Path) -> Proposal:
    path = workspace / "calc.py"
    path.write_text(path.read_text().replace("N = 10", "N = 10  # renamed"))
    return Proposal(description="a neutral rename")


@pytest.mark.parametrize("noise", ["auto", "time"])
def test_one_spiked_re_measurement_never_becomes_the_reference(tmp_path: Path, noise: str) -> None:
    overrides: dict[str, object] = {
        "metric.command": "metric",
        "metric.target": None,
        "guard": None,
        "decision.rule": None,  # the default: auto
        "stop.max_iterations": 3,
        "stop.plateau": 0,
    }
    if noise == "time":
        overrides["metric.noise"] = "time"
    repo = make_repo(
        tmp_path / "repo",
        {
            "calc.py": "N = 10\n",
            "bench.py": "# the judge\n",
            "autoresearch.toml": campaign_toml(**overrides),
        },
    )
    executor = SpikedAfterKeep(spiked_attempt=2)
    proposer = ScriptedProposer(faster, rename, faster)
    result = Engine(load_campaign(repo), proposer=proposer, executor=executor).run()
    assert result.exit_code == 0, result.message
    records = Ledger(repo / ".autoresearch" / "toy").read()
    by_iteration = {r.iteration: r for r in records}
    assert by_iteration[1].status is Status.KEEP, by_iteration[1]
    spiked = by_iteration[2]
    assert spiked.status is not Status.KEEP, spiked
    assert by_iteration[3].status is Status.KEEP, by_iteration[3]
    # The recorded best never moves backwards, and ends at the honest level of two gains.
    bests = [r.best_after for r in records]
    assert all(b is not None for b in bests), bests
    assert all(later <= earlier for earlier, later in itertools.pairwise(bests)), bests  # type: ignore[operator]
    assert abs(bests[-1] - 81.0) < 1.5, bests  # type: ignore[operator]
    for record in records[1:]:
        if record.status is Status.KEEP:  # best = the best before + the judged delta
            assert record.previous_best is not None and record.delta is not None
            # No better than the comparison judged, and better than the best before.
            assert record.delta < 0 and record.best is not None
            assert record.previous_best + record.delta - 1e-9 <= record.best
            assert record.best < record.previous_best
    report = verify_campaign(repo, repo / ".autoresearch" / "toy", "toy")
    assert report.ok, report.problems


# -- the comparison itself ---------------------------------------------------------------

SEQUENTIAL = Rule("sequential", max_samples=8, estimator="robust")
QUIET = Noise(0.4, 30)


def test_a_lone_spike_after_a_keep_is_answered_with_another_run_and_left_out() -> None:
    test = Comparison(SEQUENTIAL, "minimize", (), QUIET, 0, prior=[90.0])
    assert test.next() is Side.INCUMBENT
    test.add(144.0)  # the burst
    assert test.next() is Side.INCUMBENT  # answered with another run, not adopted
    test.add(90.2)
    assert test.next() is Side.CANDIDATE
    reference, fresh, _ = test.compared()
    assert reference == [90.2] and fresh == 1


def test_a_spike_the_size_of_the_campaign_s_typical_spike_is_still_left_out() -> None:
    """A campaign that spikes often (its first-sample screen at 16 sigmas) still answers a
    re-measurement 30 sigmas worse than the incumbent's level with another run: the
    spike scale stays at 4 robust sigmas, so the spikes the campaign is used to are not
    taken as the reference."""
    spiky = Noise(1.0, 30, screen=16.0)
    test = Comparison(SEQUENTIAL, "minimize", (), spiky, 0, prior=[90.0])
    test.add(105.0)  # 15 sigmas worse: inside the screen's step, far beyond 4 sigmas
    assert test.next() is Side.INCUMBENT
    test.add(90.5)
    assert test.next() is Side.CANDIDATE
    assert test.compared()[0] == [90.5]


def test_runs_that_agree_are_the_incumbent_s_new_level() -> None:
    test = Comparison(SEQUENTIAL, "minimize", (), QUIET, 0, prior=[90.0])
    test.add(120.0)
    assert test.next() is Side.INCUMBENT
    test.add(120.3)  # two runs in a row are what a burst gives: answered once more
    assert test.next() is Side.INCUMBENT
    test.add(119.8)  # the machine changed: three runs agree, the latest among them
    assert test.next() is Side.CANDIDATE
    reference, fresh, _ = test.compared()
    assert reference == [120.0, 120.3, 119.8] and fresh == 3


def test_a_burst_that_ended_is_left_out_of_the_reference() -> None:
    test = Comparison(SEQUENTIAL, "minimize", (), QUIET, 0, prior=[90.0])
    test.add(120.0)
    test.add(120.3)  # a burst of contention: two runs agree ...
    test.add(90.2)  # ... and the machine is back at the known level
    assert test.next() is Side.CANDIDATE
    assert test.compared()[0] == [90.2]


def test_spikes_are_answered_twice_at_most() -> None:
    test = Comparison(SEQUENTIAL, "minimize", (), QUIET, 0, prior=[90.0])
    test.add(144.0)
    test.add(126.0)  # a second spike that does not agree with the first
    assert test.set_aside == 2
    test.add(150.0)
    assert test.next() is Side.CANDIDATE  # no third rerun: the comparison goes on
    assert test.compared()[0] == [144.0, 126.0, 150.0]  # nothing else: taken as they are


def test_a_spike_carried_from_an_earlier_comparison_stays_out() -> None:
    test = Comparison(SEQUENTIAL, "minimize", (144.0, 90.1), QUIET, 2, prior=[90.0])
    reference, fresh, carried = test.compared()
    assert reference == [90.1] and fresh == 0 and carried == 1


def test_a_better_run_is_never_a_spike() -> None:
    test = Comparison(SEQUENTIAL, "minimize", (), QUIET, 0, prior=[90.0])
    test.add(70.0)
    assert test.next() is Side.CANDIDATE
    assert test.compared()[0] == [70.0]


@pytest.mark.parametrize("prior", [(), (90.0,)])
def test_with_nothing_to_screen_the_comparison_is_its_own_reference(
    prior: tuple[float, ...],
) -> None:
    """No prior (the baseline, the calibration) or no spike: the reference, fresh and
    carried counts the rule was calibrated with, unchanged."""
    test = Comparison(SEQUENTIAL, "minimize", (90.1, 89.9, 90.0), QUIET, 3, prior=prior)
    assert test.compared() == (test.reference, len(test.fresh), test.carried)
    assert test.next() is Side.CANDIDATE
    test.add(90.05)
    assert test.compared() == (test.reference, len(test.fresh), test.carried)
