"""The proposer's sandbox, attacked directly: a command confined for an agent preset writes
its workspace, its TMPDIR and its tool's own folder, and nothing else of the user's; it
sees the agents' key names and never the engine's other secrets."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from autoresearch.isolation.confinement import AGENT_STATE, Confinement, confinement_for
from autoresearch.isolation.process import run_command
from autoresearch.isolation.sandbox import bwrap_problem
from autoresearch.testing.repo import make_repo

pytestmark = pytest.mark.skipif(bwrap_problem() is not None, reason="no bubblewrap")

ATTEMPTS = """
echo edit > edited.txt
echo state > ~/.claude/state.txt
echo planted > ~/.bashrc || true
echo planted > ~/planted.txt || true
echo planted > "$CHECKOUT/planted.txt" || true
echo note > "$TMPDIR/scratch.txt"
echo described > "$AUTORESEARCH_DESCRIPTION_FILE"
env > env.txt
"""


def test_an_agent_command_writes_only_its_own_places(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".bashrc").write_text("# the user's\n")
    monkeypatch.setenv("HOME", str(home))
    checkout = make_repo(tmp_path / "repo", {"a.txt": "a\n"})
    state = checkout / ".autoresearch" / "c"
    workspace = state / "workspace"
    workspace.mkdir(parents=True)
    confinement = confinement_for(
        "bwrap", "autoresearch.toml", state_dir=state, root=checkout, objects=None
    )
    assert isinstance(confinement, Confinement) and confinement.isolating
    env = {
        **os.environ,
        "CHECKOUT": str(checkout),
        "ANTHROPIC_API_KEY": "agent-key",
        "AR_ENGINE_SECRET": "engine-secret",
    }
    confined = confinement.prepare(workspace, env, writable=AGENT_STATE["claude"])
    env = {**confined.env, "AUTORESEARCH_DESCRIPTION_FILE": str(confined.description_file)}
    env["CHECKOUT"] = str(checkout)  # named for the attack only
    result = run_command(
        ATTEMPTS,
        cwd=workspace,
        env=env,
        timeout=20,
        stdout_path=tmp_path / "out",
        stderr_path=tmp_path / "err",
        wrap=confined.wrap,
    )
    assert result.returncode == 0, (tmp_path / "err").read_text()
    assert (workspace / "edited.txt").read_text() == "edit\n"
    assert (home / ".claude" / "state.txt").read_text() == "state\n"
    assert confined.description_file.read_text() == "described\n"
    assert (home / ".bashrc").read_text() == "# the user's\n"
    assert not (home / "planted.txt").exists() and not (checkout / "planted.txt").exists()
    seen = (workspace / "env.txt").read_text()
    assert "ANTHROPIC_API_KEY=agent-key" in seen and "engine-secret" not in seen
