"""Decision rules: exact behaviour, and measured error rates of the sequential rule."""

from __future__ import annotations

import random

import pytest

from autoresearch.config import DecisionConfig
from autoresearch.decide import (
    Noise,
    Verdict,
    confidence_better,
    decide,
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
    assert decide([10.0] * 4, [10.5], "minimize", rule, noise, 0) is Verdict.DISCARD
    assert decide([10.0] * 4, [10.0], "minimize", rule, noise, 3) is Verdict.DISCARD


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


def simulate(effect: float, rule: DecisionConfig, rng: random.Random, n: int) -> tuple[int, float]:
    """Evaluate `n` candidates with true gain `effect` (sigma = 1) the way the engine does.

    Returns how many were kept and the mean number of metric runs per candidate.
    """
    kept = 0
    runs = 0
    for _ in range(n):
        # Earlier repeated samples: what the pooled noise estimate has seen so far.
        history = [[rng.gauss(0, 1) for _ in range(4)] for _ in range(3)]
        incumbent = [rng.gauss(10, 1) for _ in range(samples_needed(rule))]
        candidate = [rng.gauss(10 - effect, 1)]
        fresh = 0
        runs += 1
        while True:
            noise = pooled_noise([*history, incumbent, candidate])
            verdict = decide(
                incumbent[-rule.max_samples :], candidate, "minimize", rule, noise, fresh
            )
            if verdict is not Verdict.MORE:
                break
            incumbent.append(rng.gauss(10, 1))
            candidate.append(rng.gauss(10 - effect, 1))
            fresh += 1
            runs += 2
        kept += verdict is Verdict.KEEP
    return kept, runs / n


@pytest.mark.parametrize("confidence", [0.9, 0.95, 0.99])
def test_sequential_false_keep_rate_is_within_one_minus_confidence(confidence: float) -> None:
    rule = DecisionConfig(rule="sequential", confidence=confidence)
    kept, _ = simulate(0.0, rule, random.Random(1), 4000)
    # Binomial slack of three standard errors on 4000 trials.
    alpha = 1 - confidence
    assert kept / 4000 <= alpha + 3 * (alpha * (1 - alpha) / 4000) ** 0.5


def test_sequential_rarely_keeps_harm_and_finds_clear_gains_cheaply() -> None:
    rule = DecisionConfig(rule="sequential")
    harmful, harmful_runs = simulate(-1.0, rule, random.Random(2), 2000)
    assert harmful / 2000 < 0.005 and harmful_runs < 2
    clear, clear_runs = simulate(3.0, rule, random.Random(3), 2000)
    assert clear / 2000 > 0.9 and clear_runs < 5
    modest, _ = simulate(1.0, rule, random.Random(4), 2000)
    assert modest / 2000 > 0.3
