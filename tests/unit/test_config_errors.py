"""Config shapes that used to give a traceback or pass silently: each is one sentence naming
the file and the key, exit 2, for `run` and `check` alike; fuzzed around those shapes."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import tomlkit
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autoresearch.config import find_config, parse_config
from autoresearch.errors import ConfigError
from autoresearch.scope import PathMatcher
from campaigns import campaign_config, campaign_toml
from conftest import Runner, make_repo

DEEP = 100_000
BIG = 10**15

CASES = [
    (campaign_toml(scope=["[]"]), "autoresearch.toml", "scope"),
    (campaign_toml(scope=["[!]"]), "autoresearch.toml", "scope"),
    (campaign_toml(scope=["src/[z-a].py"]), "autoresearch.toml", "scope"),
    (campaign_toml(harness=["[]"]), "autoresearch.toml", "harness"),
    (campaign_toml(share=["[z-a]"]), "autoresearch.toml", "share"),
    (campaign_toml(**{"sandbox.memory_mb": BIG}), "autoresearch.toml", "sandbox.memory_mb"),
    (campaign_toml(**{"sandbox.cpu_seconds": BIG}), "autoresearch.toml", "sandbox.cpu_seconds"),
    (campaign_toml(**{"sandbox.memory_mb": True}), "autoresearch.toml", "sandbox.memory_mb"),
    (campaign_toml(**{"stop.max_iterations": True}), "autoresearch.toml", "stop.max_iterations"),
    (campaign_toml(**{"metric.timeout": True}), "autoresearch.toml", "metric.timeout"),
    (campaign_toml(name="toy\n"), "autoresearch.toml", "name"),
    (campaign_toml(name="to\ny"), "autoresearch.toml", "name"),
    (campaign_toml(**{"decision.min_delta": math.nan}), "autoresearch.toml", "decision.min_delta"),
    (campaign_toml(**{"decision.min_delta": "nan%"}), "autoresearch.toml", "decision.min_delta"),
    (campaign_toml(**{"decision.min_delta": True}), "autoresearch.toml", "decision.min_delta"),
    (campaign_toml(**{"metric.target": math.nan}), "autoresearch.toml", "metric.target"),
    (campaign_toml(**{"metric.timeout": math.inf}), "autoresearch.toml", "metric.timeout"),
    (campaign_toml(**{"stop.max_minutes": math.inf}), "autoresearch.toml", "stop.max_minutes"),
    ("a = " + "[" * DEEP + "]" * DEEP + "\n", "autoresearch.toml", "levels deep"),
    ("a = " + "{b=" * DEEP + "}" * DEEP + "\n", "autoresearch.toml", "levels deep"),
    ("a" + ".a" * DEEP + " = 1\n", "autoresearch.toml", "levels deep"),
    ("[" + ".".join(["t"] * DEEP) + "]\n", "autoresearch.toml", "levels deep"),
]

PYPROJECT_CASES = [
    ("tool = 5\n", "key 'tool' must be a table"),
    ("[[tool]]\nautoresearch = 1\n", "key 'tool' must be a table"),
    ("[tool]\nautoresearch = 3\n", "[tool.autoresearch] must be a table"),
]


def _one_sentence(stderr: str, file: str, needle: str) -> None:
    assert "Traceback" not in stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert file in lines[0] and needle in lines[0], lines[0]


@pytest.mark.parametrize("text,file,needle", CASES, ids=range(len(CASES)))
def test_each_bad_shape_is_one_sentence_and_exit_2(
    tmp_path: Path, invoke: Runner, text: str, file: str, needle: str
) -> None:
    repo = make_repo(tmp_path / "r", {"calc.py": "N = 1\n", "bench.py": "print(1)\n", file: text})
    for command in ("run", "check"):
        result = invoke(repo, command)
        assert result.returncode == 2, (command, result.stdout, result.stderr)
        _one_sentence(result.stderr, file, needle)


@pytest.mark.parametrize("text,needle", PYPROJECT_CASES)
def test_a_pyproject_whose_tool_is_no_table(
    tmp_path: Path, invoke: Runner, text: str, needle: str
) -> None:
    repo = make_repo(tmp_path / "r", {"calc.py": "N = 1\n", "pyproject.toml": text})
    for args in (("run",), ("check",), ("run", "--config", "pyproject.toml")):
        result = invoke(repo, *args)
        assert result.returncode == 2, (args, result.stderr)
        _one_sentence(result.stderr, "pyproject.toml", needle)


GLOB_CHARS = st.text(alphabet="[]!-^az*?/\\.", min_size=1, max_size=8)


@settings(max_examples=300, deadline=None)
@given(GLOB_CHARS)
def test_any_glob_is_refused_in_one_sentence_or_matches_without_error(pattern: str) -> None:
    data = campaign_config(scope=[f"src/{pattern}"])
    try:
        config = parse_config("autoresearch.toml", data)
    except ConfigError as exc:
        message = str(exc)
        assert message.startswith("autoresearch.toml: key 'scope'") and "\n" not in message
        return
    matcher = PathMatcher(config.scope)
    for path in ("src/a", "src/[", "src/]", "src/-", "src/a/b.py", "src/!"):
        matcher.matches(path)


NUMBER_KEYS = [
    "metric.timeout",
    "metric.target",
    "guard.timeout",
    "stop.max_iterations",
    "stop.plateau",
    "stop.max_minutes",
    "stop.max_cost_usd",
    "decision.min_delta",
    "decision.repeats",
    "decision.max_samples",
    "decision.confidence",
    "sandbox.memory_mb",
    "sandbox.cpu_seconds",
]
ODD_NUMBERS = st.one_of(
    st.booleans(),
    st.sampled_from([math.nan, math.inf, -math.inf, 10**30, -(10**30), 2**63, 1e308, -0.0]),
    st.floats(),
    st.integers(),
    st.text(alphabet="0123456789.%naife-", max_size=6),
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(NUMBER_KEYS), ODD_NUMBERS)
def test_odd_numbers_are_refused_or_give_a_usable_finite_setting(key: str, value: object) -> None:
    try:
        config = parse_config("autoresearch.toml", campaign_config(**{key: value}))
    except ConfigError as exc:
        message = str(exc)
        assert message.startswith(f"autoresearch.toml: key '{key}'"), message
        assert "\n" not in message
        return
    assert not isinstance(value, bool), f"{key} = {value} was taken as a number"
    table, _, name = key.partition(".")
    stored = getattr(getattr(config, table), name)
    if isinstance(stored, float):
        assert math.isfinite(stored)
    if key == "decision.min_delta":
        assert math.isfinite(config.decision.to_rule().min_delta)
    if key == "sandbox.memory_mb":
        assert stored * 1024 * 1024 < 2**63


@settings(max_examples=60, deadline=None)
@given(
    st.integers(min_value=33, max_value=20_000),
    st.sampled_from(["array", "inline", "dotted", "header"]),
)
def test_deep_nesting_of_any_kind_is_refused_quickly(
    tmp_path_factory: pytest.TempPathFactory, depth: int, kind: str
) -> None:
    text = {
        "array": "x = " + "[" * depth + "]" * depth,
        "inline": "x = " + "{y=" * depth + "1" + "}" * depth,
        "dotted": "x" + ".x" * depth + " = 1",
        "header": "[" + ".".join(["x"] * depth) + "]",
    }[kind]
    root = tmp_path_factory.mktemp("deep")
    (root / "autoresearch.toml").write_text(text + "\n")
    # Refused before it is parsed: a parser given 20,000 levels would recurse or take
    # quadratic time.
    with pytest.raises(ConfigError, match="levels deep"):
        find_config(root, None)


def test_strings_and_comments_may_hold_brackets_and_dots(tmp_path: Path) -> None:
    config = campaign_config(goal="[" * 200 + "." * 200, instructions=None)
    text = tomlkit.dumps(config) + "# " + "[" * 100 + "\n"
    (tmp_path / "autoresearch.toml").write_text(text)
    _, data = find_config(tmp_path, None)
    assert parse_config("autoresearch.toml", data).goal == "[" * 200 + "." * 200
