"""The Optuna parameter proposer on real campaigns: learning, resuming, and bad spaces.

In-process through the click runner; the metric is a real process."""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path

import pytest

from campaigns import campaign_toml
from conftest import Runner, git, ledger, make_repo


def optuna_repo(
    tmp_path: Path,
    *,
    space: str = '"calc.py:N" = { low = 0, high = 20, step = 1 }',
    max_iterations: int = 25,
    seed: int = 0,
    sampler: str = "tpe",
    calc: str = "# the knob\nN = 10  # start far away\n",
) -> Path:
    return make_repo(
        tmp_path / "repo",
        {
            "calc.py": calc,
            "params.yaml": "model:\n  depth: 2  # layers\n  kind: a\n",
            "bench.py": "import calc\nprint(abs(calc.N - 3))\n",
            "autoresearch.toml": campaign_toml(
                name="opt",
                goal=None,
                guard=None,
                scope=["calc.py", "params.yaml"],
                proposer={
                    "kind": "optuna",
                    "seed": seed,
                    "sampler": sampler,
                    "space": tomllib.loads(space),
                },
                **{"metric.pattern": None, "stop.max_iterations": max_iterations},
            ),
        },
    )


def trials(repo: Path) -> list[int]:
    return [int(r["params"]["optuna_trial"]) for r in ledger(repo, "opt") if "params" in r]


@pytest.mark.parametrize("seed", [0, 1])
def test_tpe_reaches_the_target_within_25_attempts(
    tmp_path: Path, invoke: Runner, seed: int
) -> None:
    repo = optuna_repo(tmp_path, seed=seed)
    result = invoke(repo, "run")
    assert result.returncode == 0, result.stderr
    status = json.loads(invoke(repo, "status", "--json").stdout)
    assert status["stop_reason"] == "target" and status["best"] == 0
    assert status["iterations"] <= 25
    assert git(repo, "show", "autoresearch/opt:calc.py") == "# the knob\nN = 3  # start far away\n"
    records = ledger(repo, "opt")
    assert records[1]["description"].startswith("trial ")
    assert "N 10 -> " in records[1]["description"]
    # Every attempt is a new point: repeats are answered from the study without a run.
    points = [r["params"]["calc.py:N"] for r in records if "params" in r]
    assert len(points) == len(set(points))


def test_resume_continues_the_same_study(tmp_path: Path, invoke: Runner) -> None:
    repo = optuna_repo(tmp_path, sampler="random", seed=3)
    first = invoke(repo, "run", "--max-iterations", "5")
    assert first.returncode == 0, first.stderr
    before = trials(repo)
    assert len(before) == 5
    second = invoke(repo, "run", "--max-iterations", "9")
    assert second.returncode == 0, second.stderr
    after = trials(repo)
    assert after[:5] == before
    assert len(after) >= 6
    assert min(after[5:]) > max(before)
    journal = repo / ".autoresearch/opt/optuna.journal"
    assert journal.exists()


def test_yaml_and_choices(tmp_path: Path, invoke: Runner) -> None:
    repo = optuna_repo(
        tmp_path,
        space='"calc.py:N" = { choices = [3, 4, 10] }\n'
        '"params.yaml:model.depth" = { low = 2, high = 12 }\n'
        '"params.yaml:model.kind" = { choices = ["a", "b"] }',
        sampler="random",
        max_iterations=6,
    )
    assert invoke(repo, "run").returncode == 0
    for record in ledger(repo, "opt")[1:]:
        if record.get("commit"):
            text = git(repo, "show", f"{record['commit']}:params.yaml")
            assert "# layers" in text
            assert f"depth: {record['params']['params.yaml:model.depth']}" in text


def test_grid_sampler(tmp_path: Path, invoke: Runner) -> None:
    repo = optuna_repo(tmp_path, sampler="grid", space='"calc.py:N" = { choices = [7, 3, 5] }')
    assert invoke(repo, "run").returncode == 0
    assert json.loads(invoke(repo, "status", "--json").stdout)["best"] == 0


@pytest.mark.parametrize(
    "space,calc,needle",
    [
        ('"calc.py:M" = { low = 0, high = 5 }', None, "no module-level assignment 'M"),
        ('"calc.py:N" = { low = 0, high = 5 }', 'N = "ten"\n', "the space is numeric"),
        ('"calc.py:N" = { low = 0, high = 5 }', "N = 1.5\n", "the space holds integers"),
        ('"calc.py:N" = { choices = ["a", "b"] }', None, "choices are of type str"),
        ('"other.py:N" = { low = 0, high = 5 }', None, "not in 'scope'"),
        ('"bench.py:N" = { low = 0, high = 5 }', None, "not in 'scope'"),
        ('"calc.py:N" = { low = 5, high = 1 }', None, "must be below 'high'"),
        ('"calc.py:N" = { low = 0, high = 5, choices = [1] }', None, "not both"),
        ('"calc.py:N" = { low = 0 }', None, "needs 'low' and 'high'"),
        ('"calc.py:N" = { low = 0.0, high = 1.0, log = true }', "N = 0.5\n", "above 0"),
        (
            '"calc.py:N" = { low = 0.1, high = 1.0, log = true, step = 0.1 }',
            "N = 0.5\n",
            "cannot be combined",
        ),
        ('"calc.py:N" = { low = 0, high = 5, color = 1 }', None, "color"),
        ('"calcpy" = { low = 0, high = 5 }', None, "FILE:NAME"),
        ('"calc.ini:N" = { low = 0, high = 5 }', None, "scope"),
        ("", None, "proposer.space"),
    ],
)
def test_bad_space_is_a_config_error(
    tmp_path: Path, invoke: Runner, space: str, calc: str | None, needle: str
) -> None:
    repo = optuna_repo(tmp_path, space=space, **({"calc": calc} if calc else {}))
    for command in ("run", "check"):
        result = invoke(repo, command)
        assert result.returncode == 2, (command, result.stdout, result.stderr)
        assert needle in result.stderr, result.stderr
        assert "Traceback" not in result.stderr
    assert not (repo / ".autoresearch/opt/ledger.jsonl").exists()


def test_grid_needs_steps_for_reals(tmp_path: Path, invoke: Runner) -> None:
    repo = optuna_repo(
        tmp_path, sampler="grid", space='"calc.py:N" = { low = 0.0, high = 1.0 }', calc="N = 0.5\n"
    )
    result = invoke(repo, "run")
    assert result.returncode == 2 and "grid sampler needs 'step'" in result.stderr


def test_a_sampler_whose_library_is_missing_is_refused_before_the_baseline(
    tmp_path: Path, invoke: Runner, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = optuna_repo(tmp_path, sampler="qmc")
    monkeypatch.setitem(sys.modules, "scipy", None)  # as if it were not installed
    for command in ("check", "run"):
        result = invoke(repo, command)
        assert result.returncode == 2, (command, result.stdout, result.stderr)
        assert "key 'proposer.sampler': the qmc sampler needs scipy" in result.stderr
        assert "Traceback" not in result.stderr
    assert not (repo / ".autoresearch/opt/ledger.jsonl").exists()
