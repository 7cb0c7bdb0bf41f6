"""`check` catches what every attempt would fail on: a proposer, metric or guard command
naming a path the sandbox hides (a script kept in the checkout); the harness is listed
grouped by folder and counted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autoresearch.isolation.sandbox import bwrap_problem
from campaigns import campaign_toml
from conftest import Runner, ledger, make_repo

BENCH = 'import calc\nprint(f"score: {abs(calc.N - 3)}")\n'
PROPOSE = 'sed -i "s/^N = .*/N = 4/" calc.py\n'

needs_bwrap = pytest.mark.skipif(bwrap_problem() is not None, reason="needs bubblewrap")


def repo_with(tmp_path: Path, proposer: str, metric: str = "python bench.py") -> Path:
    repo = tmp_path / "repo"
    return make_repo(
        repo,
        {
            "calc.py": "N = 10\n",
            "bench.py": BENCH,
            "tools/propose.sh": PROPOSE,
            "autoresearch.toml": campaign_toml(
                guard=None,
                **{
                    "proposer.command": proposer.format(repo=repo),
                    "metric.command": metric.format(repo=repo),
                },
            ),
        },
    )


@needs_bwrap
def test_a_proposer_script_in_the_checkout_fails_check(tmp_path: Path, invoke: Runner) -> None:
    repo = repo_with(tmp_path, "bash {repo}/tools/propose.sh")
    out = invoke(repo, "check")
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert f"names {repo}/tools/propose.sh, inside your checkout" in out.stdout
    assert "No such file or directory" in out.stdout
    data = json.loads(invoke(repo, "check", "--json").stdout)
    assert data["ok"] is False and data["proposer"]["ok"] is False
    # What check foretold is what a run meets: the sandboxed proposer cannot find it.
    invoke(repo, "run", "--plain", "--max-iterations", "1")
    first = ledger(repo)[1]
    assert first["status"] != "keep"
    logs = repo / ".autoresearch" / "toy" / "logs"
    said = (logs / "0001-proposer.err").read_text()
    assert "No such file or directory" in said


@needs_bwrap
def test_a_script_outside_the_checkout_passes(tmp_path: Path, invoke: Runner) -> None:
    outside = tmp_path / "propose.sh"
    outside.write_text(PROPOSE)
    repo = repo_with(tmp_path, f"bash {outside}")
    out = invoke(repo, "check")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "cannot work" not in out.stdout


@needs_bwrap
def test_a_metric_naming_the_checkout_fails_check(tmp_path: Path, invoke: Runner) -> None:
    outside = tmp_path / "propose.sh"
    outside.write_text(PROPOSE)
    repo = repo_with(tmp_path, f"bash {outside}", metric="python {repo}/bench.py")
    data = json.loads(invoke(repo, "check", "--json").stdout)
    assert data["ok"] is False
    assert data["hidden_paths"] == [
        f"the metric command names {repo}/bench.py, inside your checkout, which the sandbox "
        "hides: every run would fail with 'No such file or directory'; move it out of the "
        "repository (or commit it and name it relative to the repository's top)"
    ]


def test_the_harness_is_listed_by_folder(tmp_path: Path, invoke: Runner) -> None:
    outside = tmp_path / "propose.sh"
    outside.write_text(PROPOSE)
    files = {f"tests/test_{k}.py": "" for k in range(12)}
    config = campaign_toml(
        guard=None,
        harness=["bench.py", "tests/**"],
        **{"proposer.command": f"bash {outside}"},
    )
    repo = make_repo(
        tmp_path / "repo",
        {"calc.py": "N = 10\n", "bench.py": BENCH, "autoresearch.toml": config, **files},
    )
    out = invoke(repo, "check")
    assert "harness: 13 files: bench.py, tests/ (12 files)\n" in out.stdout
    assert len(json.loads(invoke(repo, "check", "--json").stdout)["harness"]) == 13
