"""The composite score's evaluator and the new config tables: attacked with what a
careless or hostile config holds; every refusal is one sentence naming the key."""

from __future__ import annotations

from typing import Any

import pytest

from autoresearch.checks.simplicity import Lines, parse_numstat, pays, settings, within_noise
from autoresearch.config import parse_config
from autoresearch.config.criteria import SecondaryMetric, SimplicityConfig
from autoresearch.errors import ConfigError
from autoresearch.measure.expression import Expression, ExpressionError
from autoresearch.measure.metrics import check, regression
from autoresearch.stats.decide import Rule
from campaigns import campaign_config


def test_a_composite_computes_weights_and_gates() -> None:
    score = Expression("(tests_failed == 0) * (coverage >= 80) * (0.7*acc - 0.3*lat/100)")
    assert score.names == ("tests_failed", "coverage", "acc", "lat")
    values = {"tests_failed": 0, "coverage": 85, "acc": 0.9, "lat": 50}
    assert score.evaluate(values) == pytest.approx(0.7 * 0.9 - 0.3 * 0.5)
    assert score.evaluate({**values, "coverage": 79}) == 0.0
    assert score.evaluate({**values, "tests_failed": 2}) == 0.0
    assert Expression("max(a, 2) - abs(-b) + 2**3 % 5").evaluate({"a": 1, "b": 1}) == 4.0
    assert Expression("1 < a <= 3").evaluate({"a": 3}) == 1.0


@pytest.mark.parametrize(
    "text",
    [
        "__import__('os').system('touch /tmp/pwned')",
        "acc.__class__",
        "open('x').read()",
        "(lambda: 1)()",
        "acc[0]",
        "'a' + acc",
        "acc if acc else 1",
        "[acc for acc in range(9)]",
        "acc; 1",
        "max",
        "exec('1')",
        "True + acc",
        "1 + 2",
        "",
        "x" * 600,
    ],
)
def test_anything_but_arithmetic_is_refused_when_read(text: str) -> None:
    with pytest.raises(ExpressionError):
        Expression(text)


@pytest.mark.parametrize(
    "text,values,message",
    [
        ("a / b", {"a": 1, "b": 0}, "divides by zero"),
        ("a ** 1000", {"a": 10}, "more than 64"),
        ("a ** 0.5", {"a": -1}, "not a real number"),
        ("a * 2", {}, "needs the metric 'a'"),
        ("a * 1e308 * 10", {"a": 10}, "not a finite number"),
    ],
)
def test_a_score_that_cannot_be_computed_says_why(
    text: str, values: dict[str, float], message: str
) -> None:
    with pytest.raises(ExpressionError, match=message):
        Expression(text).evaluate(values)


def bad(**overrides: Any) -> str:
    with pytest.raises(ConfigError) as caught:
        parse_config("autoresearch.toml", campaign_config(**overrides))
    message = str(caught.value)
    assert message.startswith("autoresearch.toml: key ") and "\n" not in message
    return message


def test_bad_new_settings_are_one_sentence_naming_the_key() -> None:
    assert "metric.score" in bad(**{"metric.score": "acc.__class__"})
    assert "'score' computes" in bad(**{"metric.score": "acc * 2"})  # with a pattern
    message = bad(metrics=[{"name": "mem", "no_regress": "2%"}])
    assert "metrics[0]" in message and "needs 'direction'" in message
    assert "no_regress" in bad(
        metrics=[{"name": "mem", "direction": "minimize", "no_regress": "lots"}]
    )
    assert "used twice" in bad(metrics=[{"name": "m"}, {"name": "m"}])
    assert "metrics[0].name" in bad(metrics=[{"name": "9lives"}])
    assert "'min' 5 is above 'max' 1" in bad(metrics=[{"name": "m", "min": 5, "max": 1}])
    assert "guard.rework" in bad(**{"guard.rework": -1})
    assert "guard.rework" in bad(**{"guard.rework": True})
    assert "decision.simplicity" in bad(**{"decision.simplicity": {"lines_per_unit": 0}})
    assert "approval.paths" in bad(**{"approval.paths": []})
    assert "must be relative" in bad(**{"holdout.command": "x", "holdout.files": ["/etc/*"]})
    assert "one file's path" in bad(**{"holdout.in_place_of": {"h/x": "../data.csv"}})
    assert "one file's path" in bad(**{"holdout.in_place_of": {"h/*": "data.csv"}})
    assert "replaced twice" in bad(**{"holdout.in_place_of": {"h/a": "d", "h/b": "d"}})


def test_a_holdout_without_command_runs_the_metrics() -> None:
    config = parse_config(
        "autoresearch.toml",
        campaign_config(**{"holdout.in_place_of": {"held/data.csv": "data.csv"}}),
    )
    assert config.holdout is not None and config.holdout.command is None
    assert config.holdout.in_place_of == {"held/data.csv": "data.csv"}


def test_a_good_config_reads() -> None:
    config = parse_config(
        "autoresearch.toml",
        campaign_config(
            **{
                "metric.pattern": None,
                "metric.score": "0.7*acc - 0.3*latency_ms/100",
                "metric.direction": "maximize",
                "decision.simplicity": True,
                "guard.rework": 2,
            },
            metrics=[{"name": "mem_mb", "direction": "minimize", "no_regress": "2%"}],
        ),
    )
    assert settings(config.decision.simplicity) is not None
    assert config.metrics[0].tolerance() == (2.0, True)


MEM = SecondaryMetric(name="mem", direction="minimize", no_regress="10%")


def test_no_regress_looks_through_noise_and_not_past_it() -> None:
    reference = [100.0, 104.0, 96.0, 100.0]
    # 12% worse on average, but the samples scatter more than that: not proven
    assert regression(MEM, [90.0, 134.0, 112.0], reference) is None
    # 12% worse with tight samples: a regression
    found = regression(MEM, [112.0, 112.5, 111.5], [100.0, 100.5, 99.5])
    assert found is not None and "regressed" in found and "10%" in found
    # single samples: the tolerance alone
    assert regression(MEM, [109.0], [100.0]) is None
    assert regression(MEM, [111.0], [100.0]) is not None
    # better is never a regression
    assert check([MEM], {"mem": [50.0]}, {"mem": [100.0]}) is None


def test_simplicity_charges_lines_and_spares_deletions() -> None:
    config = SimplicityConfig(lines_per_unit=100)
    assert parse_numstat("10\t2\ta.py\n-\t-\tbin.dat\n") == Lines(11, 3)
    assert pays(config, Lines(150, 50), 99.0, 100.0, "minimize") is not None  # 1% < 2%
    assert pays(config, Lines(150, 50), 97.0, 100.0, "minimize") is None
    assert pays(config, Lines(10, 60), 100.0, 100.0, "minimize") is None  # shrinks
    rule = Rule("strict")
    assert within_noise([100.0], [100.0], "minimize", rule)[0]
    assert not within_noise([100.5], [100.0], "minimize", rule)[0]
    assert within_noise([100.5, 99.0, 101.0], [100.0, 101.0, 99.5], "minimize", rule)[0]
