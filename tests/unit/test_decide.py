"""Decision rules: exact behaviour, and measured error rates of the sequential rule."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path

import pytest

from autoresearch.config import DecisionConfig
from autoresearch.stats import calibration
from autoresearch.stats.decide import (
    JUDGE_VERSION,
    REFERENCE_MIN,
    Comparison,
    Noise,
    Pool,
    Rule,
    Side,
    Start,
    Verdict,
    _critical_boundary,
    calibrated_efficacy,
    confidence_better,
    decide,
    explain,
    normal_ppf,
    pooled_noise,
    samples_needed,
    t_cdf,
    t_quantile,
)


@pytest.mark.parametrize(
    "p,dof,expected",
    [(0.975, 10, 2.228), (0.95, 3, 2.353), (0.99, 5, 3.365), (0.975, 30, 2.042), (0.9, 20, 1.325)],
)
def test_t_quantile(p: float, dof: int, expected: float) -> None:
    assert t_quantile(p, dof) == pytest.approx(expected, abs=0.02)


def test_normal_ppf_and_t_cdf_invert() -> None:
    assert normal_ppf(0.975) == pytest.approx(1.959964, abs=1e-6)
    assert normal_ppf(0.001) == pytest.approx(-3.090232, abs=1e-5)
    for dof in (3, 8, 40):
        for p in (0.1, 0.5, 0.9, 0.99):
            assert t_cdf(t_quantile(p, dof), dof) == pytest.approx(p, abs=1e-4)


def test_pooled_noise() -> None:
    assert pooled_noise([[1.0], [2.0]]) is None
    noise = pooled_noise([[1.0, 3.0], [10.0, 12.0, 14.0]])
    assert noise is not None and noise.dof == 3
    assert noise.sigma == pytest.approx(((2 + 8) / 3) ** 0.5)


def test_repeats_rule_follows_the_seed() -> None:
    rule = DecisionConfig(rule="repeats", repeats=3, min_delta=0.1)
    assert samples_needed(rule) == 3
    assert decide([10, 10, 10], [9.0, 9.0], "minimize", rule) is Verdict.MORE
    # gain 1 beyond max(0.1, 2 sigma) -> keep
    assert decide([10, 10.1, 9.9], [9.0, 9.1, 8.9], "minimize", rule) is Verdict.KEEP
    # gain 0.3, 2 sigma of the difference ~ 0.33 -> discard
    assert decide([10, 10.2, 9.8], [9.7, 9.9, 9.5], "minimize", rule) is Verdict.DISCARD
    # deterministic metric: min_delta alone decides
    assert decide([5, 5, 5], [5.05, 5.05, 5.05], "maximize", rule) is Verdict.DISCARD
    assert decide([5, 5, 5], [5.2, 5.2, 5.2], "maximize", rule) is Verdict.KEEP


def test_sequential_needs_a_fresh_incumbent_sample_to_keep() -> None:
    rule = DecisionConfig(rule="sequential")
    noise = Noise(sigma=0.1, dof=20)
    assert decide([10.0] * 4, [5.0], "minimize", rule, noise, 0) is Verdict.MORE
    assert decide([10.0] * 4, [5.0], "minimize", rule, noise, 1) is Verdict.KEEP
    assert decide([10.0] * 4, [10.3], "minimize", rule, noise, 0) is Verdict.DISCARD
    assert decide([10.0] * 4, [10.0], "minimize", rule, noise, 3) is Verdict.DISCARD


def test_a_first_run_beyond_the_noise_seen_gets_a_second_run() -> None:
    """With no spike screen yet, a first run more than SPIKE_SIGMAS worse than the
    reference is as likely a disturbance as the change: it gets another run (a real gain
    whose first run was spiked is not lost), and a change that is that much worse shows
    it again and is dropped."""
    rule = DecisionConfig(rule="sequential")
    noise = Noise(sigma=0.1, dof=20)
    assert decide([10.0] * 4, [10.5], "minimize", rule, noise, 0) is Verdict.MORE
    assert decide([10.0] * 5, [10.5, 10.5], "minimize", rule, noise, 1) is Verdict.DISCARD
    # Under an estimator that can leave a spike out (here the better half, noise = time).
    timing = Rule("sequential", estimator="time")
    test = Comparison(timing, "minimize", [10.0] * 4, noise, 4)
    runs = {Side.CANDIDATE: iter((13.0, 9.0, 9.0, 9.0)), Side.INCUMBENT: iter([10.0] * 4)}
    while isinstance(side := test.next(), Side):  # a spike, then a 10% gain
        test.add(next(runs[side]))
    assert test.verdict is Verdict.KEEP, explain(timing, test.verdict, test.look)


def test_sequential_gives_up_at_max_samples() -> None:
    rule = DecisionConfig(rule="sequential", max_samples=3)
    noise = Noise(sigma=1.0, dof=20)
    verdict = decide([10.0] * 3, [9.8, 9.7, 9.9], "minimize", rule, noise, 2)
    assert verdict is Verdict.DISCARD


def test_sequential_respects_min_delta() -> None:
    rule = DecisionConfig(rule="sequential", min_delta="5%")
    noise = Noise(sigma=0.01, dof=50)
    assert decide([100.0] * 4, [97.0, 97.0], "minimize", rule, noise, 1) is Verdict.DISCARD
    assert decide([100.0] * 4, [90.0, 90.0], "minimize", rule, noise, 1) is Verdict.KEEP


def test_confidence_better() -> None:
    noise = Noise(sigma=1.0, dof=30)
    high = confidence_better([10.0] * 4, [6.0] * 4, "minimize", noise)
    assert high is not None and high > 0.999
    even = confidence_better([10.0] * 4, [10.0] * 4, "minimize", noise)
    assert even == pytest.approx(0.5, abs=1e-3)
    assert confidence_better([1.0], [2.0], "minimize", None) is None


def evaluate_in_turn(test: Comparison, draw: Callable[[bool], float]) -> tuple[Verdict, int]:
    """Drive a comparison to its verdict; `draw(incumbent)` measures one side. Returns the
    verdict and how many samples it took."""
    taken = 0
    while isinstance(side := test.next(), Side):
        test.add(draw(side is Side.INCUMBENT))
        taken += 1
    return test.verdict, taken


def simulate(
    effect: float, rule: Rule, rng: random.Random, n: int, carried: int = 4
) -> tuple[int, float]:
    """Evaluate `n` candidates with true gain `effect` (sigma = 1). The reference starts
    with `carried` fresh, unbiased samples, or (0) with REFERENCE_MIN taken just now; either
    way the rule is told it starts right after a keep, the state whose boundary is
    calibrated on unbiased references.

    Returns how many were kept and the mean number of metric runs per candidate.
    """
    kept = 0
    runs = 0
    for _ in range(n):
        # Earlier repeated samples: what the pooled noise estimate has seen so far.
        history = [tuple(rng.gauss(0, 1) for _ in range(4)) for _ in range(3)]
        incumbent = tuple(rng.gauss(10, 1) for _ in range(carried))
        test = Comparison(rule, "minimize", incumbent, Pool((*history, incumbent), 3))
        verdict, taken = evaluate_in_turn(
            test, lambda is_incumbent: rng.gauss(10 if is_incumbent else 10 - effect, 1)
        )
        runs += taken
        kept += verdict is Verdict.KEEP
    return kept, runs / n


@pytest.mark.parametrize("confidence", [0.9, 0.95, 0.99])
@pytest.mark.parametrize("carried", [0, 4, 8])
def test_sequential_false_keep_rate_is_within_one_minus_confidence(
    confidence: float, carried: int
) -> None:
    rule = Rule("sequential", confidence=confidence)
    kept, _ = simulate(0.0, rule, random.Random(carried), 3000, carried)
    # Binomial slack of three standard errors on 3000 trials.
    alpha = 1 - confidence
    assert kept / 3000 <= alpha + 3 * (alpha * (1 - alpha) / 3000) ** 0.5


@pytest.mark.parametrize("confidence", [0.9, 0.95])
def test_sequential_false_keep_rate_along_a_campaign_of_null_candidates(
    confidence: float,
) -> None:
    """The carried-over start states are calibrated for references that earlier
    evaluations left behind; a campaign of candidates with no true gain measures them."""
    rule = Rule("sequential", confidence=confidence)
    rng = random.Random(11)
    noise = Noise(sigma=1.0, dof=200)
    total = {"all": [0, 0], "full": [0, 0]}
    reference: list[float] = []  # right after a keep: the comparison measures it first
    for _ in range(6000):
        test = Comparison(rule, "minimize", reference, noise, len(reference))
        verdict, _ = evaluate_in_turn(test, lambda _: rng.gauss(0, 1))
        keys = ["all", "full"] if len(reference) >= rule.max_samples else ["all"]
        for key in keys:
            total[key][0] += 1
            total[key][1] += verdict is Verdict.KEEP
        reference = [] if verdict is Verdict.KEEP else test.reference
    alpha = 1 - confidence
    for attempts, kept in total.values():
        assert attempts > 1000
        assert kept / attempts <= alpha + 3 * (alpha * (1 - alpha) / attempts) ** 0.5


@pytest.mark.parametrize("screen", [0.0, 16.0])
def test_a_later_first_keep_holds_the_false_keep_rate_and_keeps_nothing_earlier(
    screen: float,
) -> None:
    """`first_keep` moves the earliest keep, and the boundary calibrated for it holds the
    false-keep rate on a campaign of null candidates, with a spike screen sparing the looks
    before it or without; a huge gain waits for its look."""
    rule = Rule("sequential", first_keep=3)
    rng = random.Random(12)
    noise = Noise(sigma=1.0, dof=200, screen=screen)
    attempts = kept = 0
    reference: list[float] = []
    for _ in range(4000):
        test = Comparison(rule, "minimize", reference, noise, len(reference))
        verdict, _ = evaluate_in_turn(test, lambda _: rng.gauss(0, 1))
        attempts += 1
        kept += verdict is Verdict.KEEP
        reference = [] if verdict is Verdict.KEEP else test.reference
    assert kept / attempts <= 0.05 + 3 * (0.05 * 0.95 / attempts) ** 0.5
    test = Comparison(rule, "minimize", [10.0] * 8, noise, 8)
    verdict, _ = evaluate_in_turn(test, lambda incumbent: 10.0 if incumbent else 0.0)
    assert verdict is Verdict.KEEP and len(test.candidate) == 3
    with pytest.raises(ValueError, match="first_keep"):
        Rule("sequential", max_samples=4, first_keep=5)


def in_order(candidate: list[float], incumbent: list[float]) -> Callable[[bool], float]:
    """A `draw` for `evaluate_in_turn` that gives each side its runs in order."""
    sides = {False: iter(candidate), True: iter(incumbent)}
    return lambda is_incumbent: next(sides[is_incumbent])


def test_runs_before_the_first_keep_do_not_drop_a_gain_for_a_loss_the_spikes_explain() -> None:
    """Two frequency states 15 sigmas apart: a candidate 4 sigmas better whose first two
    runs both fall in the slow state is kept once a run shows its level, not dropped as
    "not better" on runs too few to keep on. A loss beyond the spike screen still drops a
    candidate at once."""
    rule = Rule("sequential", first_keep=3, estimator="time")
    noise = Noise(sigma=1.0, dof=200, screen=16.0)
    incumbent = [100.0 + 0.3 * (i % 3 - 1) for i in range(20)]
    slow_first = [111.0, 111.2, 96.0, 96.1, 95.9, 96.0, 96.2, 95.8]
    test = Comparison(rule, "minimize", incumbent[:8], noise, 8)
    verdict, _ = evaluate_in_turn(test, in_order(slow_first, incumbent[8:]))
    assert verdict is Verdict.KEEP and len(test.candidate) == 3
    test = Comparison(rule, "minimize", incumbent[:8], noise, 8)
    verdict, _ = evaluate_in_turn(test, in_order([120.0] * 8, incumbent[8:]))
    assert verdict is Verdict.DISCARD and len(test.candidate) == 1


def test_sequential_rarely_keeps_harm_and_finds_clear_gains_cheaply() -> None:
    rule = Rule("sequential")
    harmful, harmful_runs = simulate(-1.0, rule, random.Random(2), 2000)
    assert harmful / 2000 < 0.005 and harmful_runs < 1.7
    clear, clear_runs = simulate(3.0, rule, random.Random(3), 2000)
    assert clear / 2000 > 0.95 and clear_runs < 3.5
    modest, _ = simulate(1.0, rule, random.Random(4), 2000)
    assert modest / 2000 > 0.3


def test_sequential_keeps_an_exact_gain_after_one_fresh_incumbent_sample() -> None:
    rule = DecisionConfig(rule="sequential", min_delta="1%")
    exact = Noise(sigma=0.0, dof=10)
    assert decide([10.0] * 4, [9.0], "minimize", rule, exact, 0) is Verdict.MORE
    assert decide([10.0] * 4, [9.0], "minimize", rule, exact, 1) is Verdict.KEEP
    assert decide([10.0] * 4, [9.95], "minimize", rule, exact, 0) is Verdict.DISCARD


def test_sequential_drops_a_gain_confidently_below_min_delta() -> None:
    rule = DecisionConfig(rule="sequential", min_delta=1.0)
    noise = Noise(sigma=0.01, dof=100)
    # Clearly better, but by 0.5 +- 0.01 where 1.0 is the smallest gain worth keeping.
    assert decide([10.0] * 8, [9.5] * 3, "minimize", rule, noise, 2) is Verdict.DISCARD


@pytest.mark.parametrize("first_keep", [1, 3])
@pytest.mark.parametrize("carried", [0, 2, 8])
def test_calibration_shortcut_matches_the_procedure(carried: int, first_keep: int) -> None:
    """Each null comparison's critical boundary (computed in one pass over its looks) is
    exactly where the comparison at a fixed boundary switches from keeping to dropping,
    whatever the earliest look a keep may come at."""
    max_samples = 8
    rng = random.Random(carried * 10 + (0 if carried else REFERENCE_MIN))
    rule = Rule("sequential", max_samples=max_samples, first_keep=first_keep)

    def comparison(draws: list[float], **boundary: float | bool) -> Comparison:
        noise = Noise(sigma=draws[0], dof=1000)
        return Comparison(rule, "minimize", draws[1 : 1 + carried], noise, carried, **boundary)

    def replay(draws: list[float], boundary: float) -> Verdict:
        rest = iter(draws[1 + carried :])
        verdict, _ = evaluate_in_turn(comparison(draws, efficacy=boundary), lambda _: next(rest))
        return verdict

    checked = 0
    for _ in range(300):
        draws = [0.7 + 0.6 * rng.random()] + [
            rng.gauss(0, 1) for _ in range(carried + REFERENCE_MIN + 2 * max_samples + 1)
        ]
        walk = comparison(draws, open_walk=True)
        critical = _critical_boundary(walk, iter(draws[1 + carried :]))
        if critical <= 0:
            continue
        checked += 1
        assert replay(draws, critical * (1 - 1e-9)) is Verdict.KEEP
        assert replay(draws, critical * (1 + 1e-6)) is Verdict.DISCARD
    assert checked > 20


def test_calibrated_boundary_is_deterministic_and_orders_with_confidence() -> None:
    assert calibrated_efficacy(8, 0.95, 100) == calibrated_efficacy.__wrapped__(8, 0.95, 100)
    assert calibrated_efficacy(8, 0.9, 100) < calibrated_efficacy(8, 0.95, 100)
    assert calibrated_efficacy(8, 0.95, 100) < calibrated_efficacy(8, 0.99, 100)
    # A rougher noise estimate needs a higher boundary.
    assert calibrated_efficacy(8, 0.95, 3) > calibrated_efficacy(8, 0.95, 100)


# Boundaries from fixed seeds and paths. The after-keep ones are what the calibration gave
# before it drove `Comparison`; the partial and full ones moved up by 0.5-4% when the prior
# candidates began to be evaluated exactly as the evaluator does (against a single reference
# sample a candidate is dropped only at z <= -1, not at z < 0). Judge 8 (runs in blocks
# A B B A) moved them all, by -8% to +5%: the looks come at other sample counts.
PINNED = [
    (8, 0.95, 20, Start.AFTER_KEEP, 2.3165830862692256),
    (8, 0.95, 20, Start.PARTIAL, 2.1641176514542626),
    (8, 0.95, 20, Start.FULL, 1.9219769463495144),
    (3, 0.9, 3, Start.AFTER_KEEP, 2.1889445575668387),
    (3, 0.9, 3, Start.PARTIAL, 1.7629477240676954),
    (3, 0.9, 3, Start.FULL, 1.445969597274178),
    (8, 0.99, 1000, Start.AFTER_KEEP, 2.935304357570262),
]


@pytest.mark.parametrize("max_samples,confidence,dof,start,expected", PINNED)
def test_calibrated_boundaries_are_pinned(
    max_samples: int, confidence: float, dof: int, start: Start, expected: float
) -> None:
    assert calibrated_efficacy(max_samples, confidence, dof, start) == expected


def sides(test: Comparison, values: Callable[[Side], float]) -> list[str]:
    """The sides a comparison asks for, in order, then its verdict."""
    seen = []
    while isinstance(side := test.next(), Side):
        seen.append(side.value[0])
        test.add(values(side))
    return [*seen, test.verdict.value]


def test_each_rule_samples_in_the_engines_order() -> None:
    level = {Side.CANDIDATE: 9.0, Side.INCUMBENT: 10.0}
    assert sides(Comparison(Rule("strict"), "minimize", [10.0]), level.get) == ["c", "keep"]
    threshold = Rule("threshold", min_delta=2.0)
    assert sides(Comparison(threshold, "minimize", [10.0]), level.get) == ["c", "discard"]
    repeats = Rule("repeats", repeats=3)
    assert sides(Comparison(repeats, "minimize", [10.0] * 3), level.get) == [
        *"ccc",
        "keep",
    ]
    sequential = Rule("sequential", max_samples=3)
    noise = Noise(sigma=1.0, dof=20)
    # Freshly kept (no unbiased reference): the incumbent first, then the candidate.
    clear = {Side.CANDIDATE: 5.0, Side.INCUMBENT: 10.0}
    assert sides(Comparison(sequential, "minimize", [], noise), clear.get) == [*"ic", "keep"]
    # A carried reference: candidate first; a look after every sample, sides in blocks
    # A B B A. A gain of 1.5 sigma is promising at every look but never clear: dropped at
    # the last candidate sample, when the futility bar has risen to the boundary.
    unclear = {Side.CANDIDATE: 8.5, Side.INCUMBENT: 10.0}
    test = Comparison(sequential, "minimize", [10.0] * 3, noise)
    assert sides(test, unclear.get) == [*"ciicc", "discard"]
    assert test.look is not None and test.look.futility == 1.0
    assert len(test.candidate) == 3 and len(test.fresh) == 2


def test_a_decided_comparison_takes_no_more_samples() -> None:
    test = Comparison(Rule("strict"), "minimize", [1.0])
    test.add(0.5)
    assert test.next() is Verdict.KEEP
    with pytest.raises(RuntimeError):
        test.add(0.5)
    with pytest.raises(ValueError):
        Comparison(Rule("strict"), "minimize", [])


def test_the_config_builds_the_rule() -> None:
    config = DecisionConfig(rule="threshold", min_delta="2.5%", max_samples=6)
    assert config.to_rule() == Rule("threshold", 2.5, True, 5, 6, 0.95)
    assert config.to_rule().min_delta_abs(-200.0) == 5.0
    assert DecisionConfig(min_delta=0.5).to_rule().min_delta_abs(-200.0) == 0.5


def test_a_boundary_an_earlier_judge_cached_is_never_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    """A cache left by an earlier build (the file of another judge version, or the name
    before the judge's version was in it) holds a boundary of a procedure that has changed
    since: it must not stand in for today's."""
    request.addfinalizer(calibrated_efficacy.cache_clear)
    args = (3, 0.9, 3, Start.AFTER_KEEP)
    honest = calibrated_efficacy.__wrapped__(*args)
    monkeypatch.setenv("AUTORESEARCH_CACHE_DIR", str(tmp_path / "fresh"))
    calibrated_efficacy.cache_clear()
    assert calibrated_efficacy(*args) == honest
    (key,) = json.loads(calibration.cache_file(JUDGE_VERSION).read_text())
    old = tmp_path / "old"
    old.mkdir()
    monkeypatch.setenv("AUTORESEARCH_CACHE_DIR", str(old))
    poisoned = json.dumps({key: 0.01})
    (old / f"calibration-v{calibration.VERSION}.json").write_text(poisoned)
    calibration.cache_file(JUDGE_VERSION - 1).write_text(poisoned)
    calibrated_efficacy.cache_clear()
    assert calibrated_efficacy(*args) == honest
    assert json.loads(calibration.cache_file(JUDGE_VERSION).read_text()) == {key: honest}
