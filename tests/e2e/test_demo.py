"""`autoresearch demo` as a user runs it: a bundled example copied, run and improved."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

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


def test_demo_train_example_lowers_the_validation_loss_on_the_cpu(
    tmp_path: Path, cli: Runner
) -> None:
    target = tmp_path / "train"
    result = cli(
        tmp_path, "demo", "train", "--dir", str(target), "--max-iterations", "4", timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr
    records = [
        json.loads(line)
        for line in (target / ".autoresearch/train/ledger.jsonl").read_text().splitlines()
    ]
    assert records[0]["status"] == "baseline" and len(records) == 5
    # Seeded NumPy training repeats exactly: one run per attempt decides.
    assert len(set(records[0]["samples"])) == 1 and len(records[0]["samples"]) == 4
    status = json.loads(cli(target, "status", "--json").stdout)
    assert status["best"] < status["baseline"]
    logs = target / ".autoresearch/train/logs"
    assert any("device: cpu" in p.read_text() for p in logs.glob("*.out"))
    assert git(target, "status", "--porcelain") == ""
