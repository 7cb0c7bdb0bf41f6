"""Reading the config: every bad input is one sentence naming the file, and exit code 2.

The commands run in-process through the click runner; the exit code and the output are
what a user sees."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autoresearch.config import parse_config
from autoresearch.errors import ConfigError
from campaigns import campaign_toml
from conftest import Runner, make_repo, statuses

CASES = [
    (campaign_toml(**{"metric.direction": "down"}), "metric.direction"),
    (campaign_toml(**{"metric.command": None}), "metric.command"),
    (campaign_toml(**{"metric.timeout": -1}), "metric.timeout"),
    (campaign_toml(**{"metric.pattern": "score: [0-9]+"}), "metric.pattern"),
    (campaign_toml(**{"metric.pattern": "(unclosed"}), "metric.pattern"),
    (campaign_toml(scope=[]), "scope"),
    (campaign_toml(scope=["../x"]), "scope"),
    (campaign_toml(name="bad name!"), "name"),
    (campaign_toml(name=None), "name"),
    (campaign_toml(**{"proposer.kind": "telepathy"}), "proposer.kind"),
    (campaign_toml(**{"proposer.command": None}), "proposer.command"),
    (campaign_toml(**{"proposer.timeout": -5}), "proposer.timeout"),
    (campaign_toml(**{"stop.max_iterations": -1}), "stop.max_iterations"),
    (campaign_toml(**{"stop.plateau": "x"}), "stop.plateau"),
    (campaign_toml(**{"decision.confirm_up_to": 0}), "decision.confirm_up_to"),
    (
        campaign_toml(**{"decision.confirm": 10, "decision.confirm_up_to": 6}),
        "confirm_up_to 6 is fewer than confirm 10",
    ),
    (campaign_toml(surprise="x"), "surprise"),
    (campaign_toml(harness=["calc.py"]), "both in scope and in harness"),
    (campaign_toml(instructions="missing.md"), "instructions"),
    ("name = [\n", "not valid TOML"),
]


def repo_with(tmp_path: Path, config: str) -> Path:
    return make_repo(
        tmp_path / "r",
        {"calc.py": "N = 1\n", "bench.py": "print(1)\n", "autoresearch.toml": config},
    )


@pytest.mark.parametrize("text,needle", CASES)
def test_bad_config_is_one_sentence_exit_2(
    tmp_path: Path, invoke: Runner, text: str, needle: str
) -> None:
    repo = repo_with(tmp_path, text)
    for command in ("run", "check"):
        result = invoke(repo, command)
        assert result.returncode == 2, (command, result.stdout, result.stderr)
        assert "Traceback" not in result.stderr
        assert needle in result.stderr
        assert "autoresearch.toml" in result.stderr or "TOML" in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_harness_pattern_that_matches_nothing(tmp_path: Path, invoke: Runner) -> None:
    repo = repo_with(tmp_path, campaign_toml(harness=["nope.py"]))
    result = invoke(repo, "run")
    assert result.returncode == 2
    assert "'nope.py' matches no file" in result.stderr


def test_glob_overlap_of_scope_and_harness(tmp_path: Path, invoke: Runner) -> None:
    repo = repo_with(tmp_path, campaign_toml(scope=["*.py"], harness=["bench.py"]))
    result = invoke(repo, "run")
    assert result.returncode == 2
    assert "bench.py is both in scope and in harness" in result.stderr


def test_no_config(tmp_path: Path, invoke: Runner) -> None:
    repo = make_repo(tmp_path / "r", {"calc.py": "N = 1\n"})
    result = invoke(repo, "run")
    assert result.returncode == 2
    assert "autoresearch init" in result.stderr


def test_missing_explicit_config(tmp_path: Path, invoke: Runner) -> None:
    repo = make_repo(tmp_path / "r", {"calc.py": "N = 1\n"})
    result = invoke(repo, "run", "--config", "nope.toml")
    assert result.returncode == 2
    assert "nope.toml" in result.stderr


def test_bad_usage_exits_2(tmp_path: Path, invoke: Runner) -> None:
    result = invoke(tmp_path, "run", "--max-iterations", "-3")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr


def test_config_from_pyproject(tmp_path: Path, invoke: Runner) -> None:
    proposer = tmp_path / "p.sh"
    proposer.write_text("sed -i 's/^N = .*/N = 1/' calc.py\n")
    repo = make_repo(
        tmp_path / "repo",
        {
            "calc.py": "N = 10\n",
            "pyproject.toml": '[project]\nname = "x"\n\n[tool.autoresearch]\nname = "py"\n'
            'scope = ["calc.py"]\n[tool.autoresearch.metric]\n'
            'command = "python -c \'import calc; print(calc.N)\'"\ndirection = "minimize"\n'
            f"[tool.autoresearch.stop]\nmax_iterations = 1\n[tool.autoresearch.proposer]\n"
            f'command = "bash {proposer}"\n',
        },
    )
    result = invoke(repo, "run")
    assert result.returncode == 0, result.stderr
    assert statuses(repo, "py") == ["baseline", "keep"]


scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 5), st.floats(allow_nan=True), st.text(max_size=8)
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
KEYS = [
    "name",
    "goal",
    "scope",
    "harness",
    "share",
    "metric",
    "guard",
    "stop",
    "decision",
    "proposer",
    "judge",
    "sandbox",
    "instructions",
]
SUBKEYS = [
    "command",
    "direction",
    "pattern",
    "timeout",
    "target",
    "file",
    "key",
    "name",
    "kind",
    "rule",
    "max_iterations",
    "plateau",
    "rubric",
    "files",
    "space",
    "low",
]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.dictionaries(
        st.sampled_from(KEYS),
        st.one_of(values, st.dictionaries(st.sampled_from(SUBKEYS), values, max_size=4)),
        max_size=8,
    )
)
def test_the_config_loader_never_raises_anything_but_a_config_error(data: dict) -> None:
    try:
        parse_config("autoresearch.toml", data)
    except ConfigError as exc:
        message = str(exc)
        assert message.startswith("autoresearch.toml") and "\n" not in message


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_arbitrary_toml_text_is_a_config_error_or_a_config(text: str) -> None:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return
    try:
        parse_config("autoresearch.toml", data)
    except ConfigError:
        pass
