"""Optuna on a small discrete space: every point once, then a clean stop, across resumes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import Runner, ledger, make_repo

CONFIG = """\
name = "opt"
scope = ["calc.py"]
harness = ["bench.py"]

[metric]
command = "python bench.py"
direction = "minimize"

[stop]
max_iterations = 40

[proposer]
kind = "optuna"
seed = {seed}
sampler = "{sampler}"
startup_trials = 2

[proposer.space]
{space}
"""

TWO_BY_THREE = '"calc.py:N" = { low = 0, high = 2 }\n"calc.py:M" = { choices = [0, 1] }'
SAMPLERS = ["tpe", "random", "cmaes", "grid", "qmc"]


def repo_with(tmp_path: Path, space: str, calc: str, sampler: str, seed: int = 0) -> Path:
    return make_repo(
        tmp_path / "repo",
        {
            "calc.py": calc,
            "bench.py": "import calc\nprint(abs(calc.N - 1) + calc.M * 0.5)\n",
            "autoresearch.toml": CONFIG.format(space=space, sampler=sampler, seed=seed),
        },
    )


def study_trials(repo: Path) -> list[object]:
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    path = repo / ".autoresearch/opt/optuna.journal"
    storage = JournalStorage(JournalFileBackend(str(path)))
    return list(optuna.load_study(study_name="opt", storage=storage).trials)


def points(repo: Path) -> list[tuple[object, ...]]:
    return [
        (r["params"]["calc.py:N"], r["params"]["calc.py:M"])
        for r in ledger(repo, "opt")
        if "params" in r
    ]


def stop_reason(repo: Path, invoke: Runner) -> str:
    return str(json.loads(invoke(repo, "status", "--json").stdout)["stop_reason"])


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_every_point_once_then_space_exhausted_across_a_resume(
    tmp_path: Path, invoke: Runner, sampler: str
) -> None:
    repo = repo_with(tmp_path, TWO_BY_THREE, "N = 9\nM = 7\n", sampler)  # baseline outside
    first = invoke(repo, "run", "--plain", "--max-iterations", "2")
    assert first.returncode == 0, first.stderr
    assert len(points(repo)) == 2

    second = invoke(repo, "run", "--plain")
    assert second.returncode == 0, second.stderr
    assert "internal error" not in second.stderr
    assert stop_reason(repo, invoke) == "space_exhausted"
    tried = points(repo)
    assert sorted(tried) == [(n, m) for n in range(3) for m in range(2)]  # each point once
    assert all(r["status"] in ("keep", "discard") for r in ledger(repo, "opt")[1:])
    trials = study_trials(repo)
    assert len(trials) == 6  # one trial per attempt, no repeats told from memory

    # Resuming an exhausted search adds nothing: no attempt, no trial, no error.
    ledger_before = (repo / ".autoresearch/opt/ledger.jsonl").read_bytes()
    third = invoke(repo, "run", "--plain")
    assert third.returncode == 0, third.stderr
    assert stop_reason(repo, invoke) == "space_exhausted"
    assert (repo / ".autoresearch/opt/ledger.jsonl").read_bytes() == ledger_before
    assert len(study_trials(repo)) == 6


@pytest.mark.parametrize("sampler", ["tpe", "grid", "random"])
def test_the_baseline_counts_as_a_tried_point(tmp_path: Path, invoke: Runner, sampler: str) -> None:
    repo = repo_with(tmp_path, '"calc.py:N" = { choices = [3, 1] }', "N = 3\nM = 0\n", sampler)
    result = invoke(repo, "run", "--plain")
    assert result.returncode == 0, result.stderr
    assert stop_reason(repo, invoke) == "space_exhausted"
    records = ledger(repo, "opt")
    assert [r["params"]["calc.py:N"] for r in records if "params" in r] == [1]
    assert records[-1]["status"] == "keep"


def test_a_stepped_real_range_is_finite(tmp_path: Path, invoke: Runner) -> None:
    space = '"calc.py:N" = { low = 0.5, high = 1.5, step = 0.5 }'
    repo = repo_with(tmp_path, space, "N = 9.0\nM = 0\n", "tpe")
    result = invoke(repo, "run", "--plain")
    assert result.returncode == 0, result.stderr
    assert stop_reason(repo, invoke) == "space_exhausted"
    values = sorted(r["params"]["calc.py:N"] for r in ledger(repo, "opt") if "params" in r)
    assert values == [0.5, 1.0, 1.5]


def test_an_interrupted_point_is_tried_again_on_resume(tmp_path: Path, invoke: Runner) -> None:
    """A trial left running by a killed engine is not a tried point."""
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    repo = repo_with(tmp_path, '"calc.py:N" = { choices = [0, 1, 2] }', "N = 9\nM = 0\n", "grid")
    assert invoke(repo, "run", "--plain", "--max-iterations", "1").returncode == 0
    # An engine killed while measuring leaves its trial running.
    path = repo / ".autoresearch/opt/optuna.journal"
    study = optuna.load_study(
        study_name="opt", storage=JournalStorage(JournalFileBackend(str(path)))
    )
    done = {t.params["calc.py:N"] for t in study.trials}
    left = sorted({0, 1, 2} - done)
    study.enqueue_trial({"calc.py:N": left[0]})
    study.ask({"calc.py:N": optuna.distributions.CategoricalDistribution([0, 1, 2])})
    result = invoke(repo, "run", "--plain")
    assert result.returncode == 0, result.stderr
    assert stop_reason(repo, invoke) == "space_exhausted"
    assert sorted(r["params"]["calc.py:N"] for r in ledger(repo, "opt") if "params" in r) == [
        0,
        1,
        2,
    ]
