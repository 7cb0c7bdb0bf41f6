"""`autoresearch demo` and the bundled examples."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autoresearch.config import load_campaign
from autoresearch.demo import OFFLINE, available, examples_dir
from conftest import Runner, git

pytestmark = pytest.mark.slow


def test_demo_runs_the_classifier_and_improves_it(tmp_path: Path, cli: Runner) -> None:
    target = tmp_path / "demo"
    result = cli(tmp_path, "demo", "--dir", str(target), "--max-iterations", "8", timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "autoresearch/classifier" in result.stdout
    assert "ledger" in result.stdout
    status = json.loads(cli(target, "status", "--json").stdout)
    assert status["stop_reason"] == "max_iterations"
    assert status["best"] < status["baseline"]
    assert git(target, "status", "--porcelain") == ""


def test_demo_speedup_example(tmp_path: Path, cli: Runner) -> None:
    target = tmp_path / "speed"
    result = cli(
        tmp_path, "demo", "speedup", "--dir", str(target), "--max-iterations", "3", timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr
    records = [
        json.loads(line)
        for line in (target / ".autoresearch/speedup/ledger.jsonl").read_text().splitlines()
    ]
    assert records[0]["status"] == "baseline" and len(records) == 4
    # Measured time is noisy: the example decides with the sequential rule.
    assert len(records[0]["samples"]) == 4
    assert all(r["metric_runs"] >= 1 for r in records[1:] if r["status"] in ("keep", "discard"))


@pytest.mark.parametrize(
    "args,needle",
    [
        (["nope"], "no example named 'nope'"),
        (["agent"], "needs a coding agent"),
    ],
)
def test_demo_refusals(tmp_path: Path, cli: Runner, args: list[str], needle: str) -> None:
    result = cli(tmp_path, "demo", *args, "--dir", str(tmp_path / "d"))
    assert result.returncode == 2 and needle in result.stderr


def test_demo_refuses_a_non_empty_folder(tmp_path: Path, cli: Runner) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "keep.txt").write_text("mine")
    result = cli(tmp_path, "demo", "--dir", str(tmp_path / "d"))
    assert result.returncode == 2 and "not empty" in result.stderr
    assert (tmp_path / "d" / "keep.txt").read_text() == "mine"


def test_every_example_has_a_valid_config_and_readme() -> None:
    names = available()
    assert set(OFFLINE) <= set(names) and "agent" in names
    for name in names:
        folder = examples_dir() / name
        assert (folder / "README.md").is_file()
        campaign = load_campaign(folder, folder / "autoresearch.toml")
        assert campaign.config.harness
