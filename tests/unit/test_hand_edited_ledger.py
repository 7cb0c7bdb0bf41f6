"""A hand-edited ledger never makes a command crash: readers name the line in one sentence,
and `verify` prints what it found as text, never as markup."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import Runner


def edit_line(repo: Path, index: int, **changes: object) -> None:
    path = repo / ".autoresearch" / "toy" / "ledger.jsonl"
    lines = path.read_text().splitlines()
    record = json.loads(lines[index])
    record.update(changes)
    lines[index] = json.dumps(record)
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize(
    "changes",
    [
        {"status": "bogus"},
        {"metric": "x"},
        {"samples": 5},
        {"iteration": "[/x]"},
        {"earlier": [1]},
        {"earlier": [{"parent": "x"}]},
        {"earlier": 3},
    ],
)
@pytest.mark.parametrize("command", [["status"], ["log"], ["show", "1"], ["report"], ["list"]])
def test_readers_name_the_bad_line_in_one_sentence(
    finished_toy: Path,
    tmp_path: Path,
    invoke: Runner,
    changes: dict[str, object],
    command: list[str],
) -> None:
    import shutil

    repo = tmp_path / "repo"
    shutil.copytree(finished_toy, repo, symlinks=True)
    edit_line(repo, 2, **changes)
    result = invoke(repo, *command)
    assert "internal error" not in result.stdout + result.stderr
    if result.returncode != 0:
        message = result.stderr.strip()
        assert "line 3 is not an attempt record" in message and "\n" not in message


def test_verify_prints_ledger_text_as_text(
    finished_toy: Path, tmp_path: Path, invoke: Runner
) -> None:
    import shutil

    repo = tmp_path / "repo"
    shutil.copytree(finished_toy, repo, symlinks=True)
    edit_line(repo, 2, iteration="[/x]", description="[bold]x[/bold]")
    result = invoke(repo, "verify")
    assert "internal error" not in result.stdout + result.stderr
    assert result.returncode != 0 and "problem:" in result.stdout


def test_a_line_that_is_not_an_object_is_named_once(finished_toy: Path, tmp_path: Path) -> None:
    import shutil

    from autoresearch.checks.verify import verify_campaign

    repo = tmp_path / "repo"
    shutil.copytree(finished_toy, repo, symlinks=True)
    path = repo / ".autoresearch" / "toy" / "ledger.jsonl"
    lines = path.read_text().splitlines()
    lines[2] = "[1, 2]"
    path.write_text("\n".join(lines) + "\n")
    problems = verify_campaign(repo, path.parent, "toy").problems
    assert "line 3 is not a JSON object" in problems
    # The next line's chain check names the altered line, not the one before it.
    assert any(p.endswith("the ledger was altered at line 3") for p in problems)
    assert not any("altered at line 2" in p for p in problems)
