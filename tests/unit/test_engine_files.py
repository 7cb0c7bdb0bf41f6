"""The engine's own files under .autoresearch/ are never written through a link planted at
their path, and a campaign folder swapped for a link is refused before anything is written."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from autoresearch.config import load_campaign
from autoresearch.engine import Engine
from autoresearch.errors import WorkspaceHijacked
from autoresearch.proposers.base import Proposal
from campaigns import campaign_toml
from conftest import make_repo, snapshot
from unit.memory import MemoryExecutor, ScriptedProposer, score, set_n


def toy(tmp_path: Path) -> Path:
    config = campaign_toml(
        harness=None, **{"metric.command": "metric", "guard": None, "metric.target": None}
    )
    repo = make_repo(tmp_path / "repo", {"calc.py": "N = 10\n", "autoresearch.toml": config})
    (repo / ".env").write_text("TOKEN=mine\n")
    return repo


def run(repo: Path, *edits: object, iterations: int = 2) -> None:
    Engine(
        load_campaign(repo),
        proposer=ScriptedProposer(*edits),  # type: ignore[arg-type]
        executor=MemoryExecutor(score),  # type: ignore[arg-type]
        max_iterations=iterations,
    ).run()


def test_a_campaign_folder_swapped_for_a_link_is_refused_before_any_write(
    tmp_path: Path,
) -> None:
    repo = toy(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (repo / ".autoresearch").mkdir()
    (repo / ".autoresearch" / ".gitignore").write_text("*\n")
    os.symlink(elsewhere, repo / ".autoresearch" / "toy")
    with pytest.raises(WorkspaceHijacked, match="symbolic link"):
        run(repo, set_n("7"))
    assert list(elsewhere.iterdir()) == []


def test_links_planted_at_the_engines_file_paths_are_never_written_through(
    tmp_path: Path,
) -> None:
    repo = toy(tmp_path)
    state = repo / ".autoresearch" / "toy"

    def plant(workspace: Path) -> Proposal:
        # Where the next attempt's prompt, proposer trace and process record will be written.
        for path in (
            state / "prompts" / "0002.md",
            state / "logs" / "0002-proposer-error.txt",
            state / "child.pgid",
        ):
            path.unlink(missing_ok=True)
            os.symlink(repo / ".env", path)
        return set_n("7")(workspace)

    def crash(workspace: Path) -> Proposal:
        raise RuntimeError("a proposer's bug, written to its trace")

    before = snapshot(repo)
    run(repo, plant, crash)
    assert snapshot(repo) == before
    assert (state / "prompts" / "0002.md").is_file()
    assert "RuntimeError" in (state / "logs" / "0002-proposer-error.txt").read_text()
