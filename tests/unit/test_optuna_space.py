"""The Optuna proposer's space: type mismatches refused before the start, points counted."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import Runner, make_repo

CONFIG = """\
name = "opt"
scope = ["calc.py", "conf.yaml"]
harness = ["bench.py"]

[metric]
command = "python bench.py"
direction = "minimize"

[proposer]
kind = "optuna"

[proposer.space]
{space}
"""


@pytest.mark.parametrize(
    "space,files,needle",
    [
        # a real range on an integer constant would write 2.5 where range(N) needs an int
        ('"calc.py:N" = { low = 0.0, high = 5.0 }', {"calc.py": "N = 3\n"}, "real numbers"),
        ('"calc.py:N" = { low = 0, high = 5.0 }', {"calc.py": "N = 3\n"}, "real numbers"),
        (
            '"conf.yaml:opt.depth" = { low = 1.0, high = 9.0, step = 0.5 }',
            {"conf.yaml": "opt:\n  depth: 4\n"},
            "real numbers",
        ),
        # and the reverse
        ('"calc.py:N" = { low = 0, high = 5 }', {"calc.py": "N = 3.0\n"}, "holds integers"),
    ],
)
@pytest.mark.parametrize("command", ["run", "check"])
def test_a_range_of_the_wrong_number_type_is_refused_before_the_start(
    tmp_path: Path, invoke: Runner, space: str, files: dict[str, str], needle: str, command: str
) -> None:
    repo = make_repo(
        tmp_path / "repo",
        {
            **files,
            "bench.py": "print(1)\n",
            "autoresearch.toml": CONFIG.format(space=space),
        },
    )
    result = invoke(repo, command)
    assert result.returncode == 2, (result.stdout, result.stderr)
    message = result.stderr.strip()
    key = space.split(" = ")[0]
    assert f"key 'proposer.space.{key}'" in message
    assert needle in message
    assert len(message.splitlines()) == 1 and "Traceback" not in message
    assert not (repo / ".autoresearch/opt/ledger.jsonl").exists()


def test_a_real_range_on_a_real_constant_is_accepted(tmp_path: Path, invoke: Runner) -> None:
    repo = make_repo(
        tmp_path / "repo",
        {
            "calc.py": "N = 3.0\n",
            "bench.py": "print(1)\n",
            "autoresearch.toml": CONFIG.format(space='"calc.py:N" = { low = 0.0, high = 5.0 }'),
        },
    )
    result = invoke(repo, "check")
    assert result.returncode == 0, result.stderr


def test_points_are_counted_and_enumerated() -> None:
    import optuna.distributions as d

    from autoresearch.proposers.optuna_space import Space

    space = Space(
        {
            "a": d.IntDistribution(0, 4, step=2),
            "b": d.FloatDistribution(0.1, 0.3, step=0.1),
            "c": d.CategoricalDistribution(["x", 1, 1.0]),
        },
        seed=0,
    )
    assert space.size == 3 * 3 * 3
    keys = {space.key(space.params(k)) for k in space._all()}
    assert len(keys) == 27
    assert space.key({"a": 1, "b": 0.1, "c": "x"}) is None  # off the step
    assert space.key({"a": 2, "b": 0.2, "c": True}) is None  # True is not the choice 1
    assert space.key({"a": 2, "b": 0.2, "c": 1.0}) != space.key({"a": 2, "b": 0.2, "c": 1})
    assert Space({"x": d.FloatDistribution(0.0, 1.0)}, seed=0).size is None
