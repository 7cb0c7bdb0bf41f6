"""`verify`: the ledger's hash chain, the attempt refs and the branch, on a finished toy run."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import Runner, git


def test_verify_passes_on_a_clean_campaign(finished_toy: Path, invoke: Runner) -> None:
    toy = finished_toy
    result = invoke(toy, "verify")
    assert result.returncode == 0, result.stdout
    assert "hash chain intact" in result.stdout
    assert json.loads(invoke(toy, "verify", "--json").stdout)["records"] == 8


def test_verify_names_the_altered_line(toy: Path, invoke: Runner) -> None:
    assert invoke(toy, "run").returncode == 0
    path = toy / ".autoresearch/toy/ledger.jsonl"
    lines = path.read_text().splitlines()
    record = json.loads(lines[2])
    record["metric"] = 1.0  # someone makes a discard look better
    lines[2] = json.dumps(record)
    path.write_text("\n".join(lines) + "\n")
    result = invoke(toy, "verify")
    assert result.returncode == 1
    assert "line 4 (iteration 3): its prev_hash does not match line 3" in result.stdout


def test_verify_catches_moved_refs_and_branch(toy: Path, invoke: Runner) -> None:
    assert invoke(toy, "run").returncode == 0
    git(toy, "update-ref", "refs/autoresearch/toy/2", "refs/autoresearch/toy/3")
    git(toy, "update-ref", "refs/heads/autoresearch/toy", "refs/autoresearch/toy/1")
    result = invoke(toy, "verify")
    assert result.returncode == 1
    assert "iteration 2: refs/autoresearch/toy/2 points at" in result.stdout
    assert "branch autoresearch/toy is at" in result.stdout


def test_verify_catches_a_deleted_record(toy: Path, invoke: Runner) -> None:
    assert invoke(toy, "run").returncode == 0
    path = toy / ".autoresearch/toy/ledger.jsonl"
    lines = path.read_text().splitlines()
    del lines[3]
    path.write_text("\n".join(lines) + "\n")
    result = invoke(toy, "verify")
    assert result.returncode == 1
    assert "iteration 4 where 3 was expected" in result.stdout
