"""Every verdict says why: the rule's statistic and the threshold it was held to."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autoresearch.stats.decide import Comparison, Look, Noise, Rule, Side, Verdict, explain
from conftest import Runner


def run(rule: Rule, reference: list[float], candidate: list[float], incumbent: list[float]):
    test = Comparison(
        rule, "minimize", reference, Noise(1.0, 50) if rule.name == "sequential" else None
    )
    cand, inc = iter(candidate), iter(incumbent)
    while isinstance(side := test.next(), Side):
        test.add(next(cand) if side is Side.CANDIDATE else next(inc))
    return test.verdict, explain(rule, test.verdict, test.look)


def rule(name: str, **kw: object) -> Rule:
    base = dict(name=name, min_delta=0.0, percent=False, repeats=3, max_samples=4, confidence=0.95)
    base.update(kw)
    return Rule(**base)  # type: ignore[arg-type]


def test_strict_names_the_relative_gain_and_equal_is_not_better() -> None:
    assert run(rule("strict"), [10.0], [9.0], []) == (
        Verdict.KEEP,
        "first run 10.0% better than the incumbent",
    )
    assert run(rule("strict"), [10.0], [10.52], []) == (
        Verdict.DISCARD,
        "first run 5.2% worse than the incumbent",
    )
    assert run(rule("strict"), [10.0], [10.0], []) == (Verdict.DISCARD, "equal is not better")


def test_threshold_names_min_delta() -> None:
    verdict, why = run(rule("threshold", min_delta=0.5), [10.0], [9.8], [])
    assert verdict is Verdict.DISCARD
    assert why == "gain 0.2 <= min_delta 0.5 after 1 run (2.0% better)"
    verdict, why = run(rule("threshold", min_delta=0.5), [10.0], [9.0], [])
    assert (verdict, why) == (Verdict.KEEP, "gain 1 > min_delta 0.5 after 1 run (10.0% better)")


def test_repeats_names_its_bar_and_the_runs() -> None:
    verdict, why = run(rule("repeats"), [10.0, 10.1, 9.9], [9.95, 10.05, 9.9], [])
    assert verdict is Verdict.DISCARD
    assert why.startswith("gain 0.0") and "the bar (min_delta, 2 sigma)" in why
    assert "after 3 runs" in why


def test_sequential_names_z_and_the_boundary() -> None:
    # A clear gain: kept once a fresh incumbent sample confirms it.
    verdict, why = run(rule("sequential"), [10.0, 10.0], [5.0], [10.0])
    assert verdict is Verdict.KEEP
    assert why.startswith("z ") and ">=" in why and "after 1 run" in why
    # Clearly worse at once.
    verdict, why = run(rule("sequential"), [10.0, 10.0], [12.0], [])
    assert verdict is Verdict.DISCARD
    assert why == (
        "screened out after 1 run: 20.0% worse; the screen allows no loss "
        "(z -1.63 <= 0, one run's noise 10%)"
    )


def first_look(reference: list[float], value: float, noise: Noise) -> tuple[Verdict, str]:
    test = Comparison(
        Rule("sequential", max_samples=4, estimator="robust"), "minimize", reference, noise
    )
    assert test.next() is Side.CANDIDATE
    test.add(value)
    return test.verdict, explain(test.rule, test.verdict, test.look)


def test_a_one_run_drop_names_the_spread_the_screen_allowed() -> None:
    """On a spiky metric (screen 4 sigmas) the screen lets a first run look 4 standard
    errors worse: sigma 1 on a level of 10, se = sqrt(1 + 1/4) = 1.118, so 44.7%. The spread
    it names is the one it applied: just inside it the candidate gets another run, just
    beyond it is dropped."""
    reference, noise = [10.0] * 4, Noise(1.0, 50, screen=4.0)
    verdict, why = first_look(reference, 14.4, noise)
    assert verdict is Verdict.MORE and why == ""
    verdict, why = first_look(reference, 14.6, noise)
    assert verdict is Verdict.DISCARD
    assert why == (
        "screened out after 1 run: 46.0% worse, beyond the 45% spread the screen allows "
        "at this noise (z -4.11 <= -4, one run's noise 10%)"
    )


def test_a_first_run_the_screen_lets_through_is_not_dropped_short_of_min_delta() -> None:
    """With a min_delta, a first run the screen spares (worse, but within the campaign's
    typical spike) gets another run: "confidently short of min_delta" allows the same
    spread the screen does, or the screen would spare a spiked first run only for min_delta
    to drop it at the same look."""
    screened = Rule("sequential", max_samples=4, estimator="robust", min_delta=1.0, percent=True)
    test = Comparison(screened, "minimize", [10.0] * 4, Noise(0.1, 50, screen=16.0))
    test.add(11.0)  # a spike: 10% worse, 9 standard errors, inside the 16 the screen allows
    assert test.verdict is Verdict.MORE and test.next() is Side.INCUMBENT
    # Beyond the screen's spread it is dropped at once, and says so.
    test = Comparison(screened, "minimize", [10.0] * 4, Noise(0.1, 50, screen=16.0))
    test.add(12.0)
    assert test.verdict is Verdict.DISCARD
    assert explain(screened, test.verdict, test.look).startswith("screened out after 1 run")


def test_a_drop_at_max_samples_names_what_the_keep_missed() -> None:
    """At max_samples, a candidate whose sides' z reached the boundary was dropped for
    something else a keep asks: the reason names it, never "z 2.84 < 2.09"."""
    paired = Rule("sequential", max_samples=4, estimator="robust", pairs="both")

    def last_look(gain: float, z: float, paired_z: float, min_delta: float) -> str:
        look = Look(
            4, 4, 4, gain, z, efficacy=2.09, ref_mean=10.0, threshold=min_delta, bar=0.0,
            paired=paired_z, keep_z=min(z, paired_z),
        )  # fmt: skip
        return explain(paired, Verdict.DISCARD, look)

    assert last_look(1.0, 2.84, 1.5, 0.0) == (
        "the interleaved pairs' z 1.50 < 2.09 after 4 runs (max_samples; the sides' z 2.84)"
    )
    assert last_look(1.0, 2.84, 2.5, 1.2) == (
        "gain 1 not above min_delta 1.2 after 4 runs (max_samples; z 2.84)"
    )
    assert last_look(0.5, 1.42, 2.5, 0.0) == "z 1.42 < 2.09 after 4 runs (max_samples)"


def test_a_one_run_drop_against_a_single_reference_run_names_its_allowance() -> None:
    verdict, why = run(rule("sequential"), [10.0], [12.0], [])
    assert verdict is Verdict.DISCARD
    assert why == (
        "screened out after 1 run: 20.0% worse, beyond the 14% spread the screen allows at "
        "this noise (z -1.41 <= -1, one run's noise 10%)"
    )


@pytest.mark.parametrize("name", ["strict", "threshold", "repeats", "sequential"])
def test_no_reason_before_the_verdict(name: str) -> None:
    assert explain(rule(name), Verdict.MORE, None) == ""


def test_the_next_prompt_says_why_the_last_attempt_failed() -> None:
    from autoresearch.learning.prompt import build_prompt
    from autoresearch.proposers.base import AttemptNote

    reason = "guard exited with code 1; last lines: FAILED test_x.py::test_sorts - assert"
    note = AttemptNote(3, "guard_failed", 1.0, -1.0, "faster sort", ["x.py"], reason)
    text = build_prompt(
        iteration=4,
        goal="g",
        instructions="",
        scope=["x.py"],
        harness=[],
        direction="minimize",
        metric_command="m",
        baseline=2.0,
        best=2.0,
        history=[note],
    )
    assert "## Why the last attempt was not kept" in text
    assert f"Attempt 3 ended as `guard_failed`: {reason}" in text


def test_show_lists_every_log_of_an_attempt(finished_toy: Path, invoke: Runner) -> None:
    # Attempt 3 of the toy campaign: proposer, one metric sample, a failed guard.
    shown = invoke(finished_toy, "show", "3")
    assert shown.returncode == 0
    logs = shown.stdout.split("logs:", 1)[1]
    names = [line.split()[0].rsplit("/", 1)[-1] for line in logs.strip().splitlines()]
    assert names == [
        "0003.md",
        "0003-proposer.out",
        "0003-proposer.err",
        "0003-metric-1.out",
        "0003-metric-1.err",
        "0003-guard.out",
        "0003-guard.err",
    ]
    data = json.loads(invoke(finished_toy, "show", "3", "--json").stdout)
    assert [Path(p).name for p in data["logs"]] == names
    assert data["status"] == "guard_failed" and "AssertionError" in data["reason"]
    assert all(Path(p).is_file() for p in data["logs"])
