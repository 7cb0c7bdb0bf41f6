"""`check` checks the proposer too (its executable, its options, a chat endpoint) and says
which decision rule and isolation are in force; `--json` carries the same."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from autoresearch.isolation.sandbox import Bwrap, bwrap_problem
from autoresearch.testing.fake_openai import FakeOpenAI, serve
from campaigns import campaign_toml
from conftest import Runner, make_repo

BENCH = 'import calc\nprint(f"score: {abs(calc.N - 3)}")\n'


def repo_with(tmp_path: Path, files: dict[str, str] | None = None, **overrides: Any) -> Path:
    return make_repo(
        tmp_path / "repo",
        {
            "calc.py": "N = 10\n",
            "bench.py": BENCH,
            **(files or {}),
            "autoresearch.toml": campaign_toml(guard=None, **overrides),
        },
    )


def check_json(invoke: Runner, repo: Path, *args: str) -> tuple[int, dict[str, Any]]:
    result = invoke(repo, "check", "--json", *args)
    return result.returncode, json.loads(result.stdout)


def test_a_committed_script_and_the_rule_and_isolation_are_shown(
    tmp_path: Path, invoke: Runner
) -> None:
    repo = repo_with(
        tmp_path,
        {"propose.sh": "echo hi\n"},
        proposer={"kind": "command", "command": "bash propose.sh"},
        decision={"rule": "sequential"},
    )
    result = invoke(repo, "check")
    assert result.returncode == 0, result.stderr
    assert "proposer: command, runs " in result.stdout and "propose.sh" in result.stdout
    assert "decision: sequential" in result.stdout
    # bubblewrap where it works (the default, isolation = "auto"), else none and why
    expected = "bwrap" if bwrap_problem() is None else f"none ({bwrap_problem()})"
    assert f"isolation: {expected}" in result.stdout
    code, data = check_json(invoke, repo)
    assert code == 0 and data["ok"] is True
    assert data["proposer"]["ok"] is True and data["proposer"]["kind"] == "command"
    assert data["decision"].startswith("sequential") and data["isolation"] == expected
    assert data["limits"].startswith("none") and "limits: none" in result.stdout
    # The host's abstract unix sockets: out of reach only inside a Landlock scope.
    scoped = bwrap_problem() is None and Bwrap().child_setup() is not None
    assert data["abstract_sockets"].startswith("out of reach" if scoped else "reachable")
    assert f"abstract unix sockets: {data['abstract_sockets']}" in result.stdout


def test_check_says_limits_hold_per_process(tmp_path: Path, invoke: Runner) -> None:
    repo = repo_with(
        tmp_path,
        {"propose.sh": "echo hi\n"},
        proposer={"kind": "command", "command": "bash propose.sh"},
        sandbox={"memory_mb": 512, "cpu_seconds": 30},
    )
    code, data = check_json(invoke, repo)
    assert code == 0, data
    said = data["limits"]
    assert "512 MiB" in said and "30 s" in said and "each process" in said
    assert "not limited together" in said


@pytest.mark.parametrize(
    "command,needle",
    [
        # not committed: the proposer runs in the campaign's worktree, where it is missing
        ("bash propose.sh", "propose.sh, given to bash, does not exist"),
        ("no-such-agent-9f2 -p hello", "no-such-agent-9f2 is not installed or not on PATH"),
        ("./tools/propose", "./tools/propose is not an executable file"),
        ("bash -c 'echo unbalanced", "cannot parse"),
    ],
)
def test_a_proposer_command_that_cannot_start_fails_check(
    tmp_path: Path, invoke: Runner, command: str, needle: str
) -> None:
    repo = repo_with(tmp_path, proposer={"kind": "command", "command": command})
    result = invoke(repo, "check")
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert "proposer cannot work" in result.stdout and needle in result.stdout
    assert "metric: 7" in result.stdout  # the metric is still measured
    code, data = check_json(invoke, repo)
    assert code == 1 and data["ok"] is False
    assert data["proposer"]["ok"] is False and needle in data["proposer"]["problem"]
    assert data["values"] == [7.0]


@pytest.mark.parametrize("command", ["cd src && python -m tool", "bash -lc 'anything at all'"])
def test_shell_syntax_is_not_second_guessed(tmp_path: Path, invoke: Runner, command: str) -> None:
    repo = repo_with(tmp_path, proposer={"kind": "command", "command": command})
    assert invoke(repo, "check").returncode == 0


def test_an_agent_executable_is_found_or_named(tmp_path: Path, invoke: Runner) -> None:
    exe = tmp_path / "bin" / "claude"
    exe.parent.mkdir()
    exe.write_text("#!/bin/bash\nexit 0\n")
    exe.chmod(0o755)
    repo = repo_with(tmp_path, proposer={"kind": "claude", "executable": str(exe)})
    result = invoke(repo, "check")
    assert result.returncode == 0, result.stderr
    assert f"proposer: claude, runs {exe}" in result.stdout

    exe.unlink()
    result = invoke(repo, "check")
    assert result.returncode == 1
    assert "npm install -g @anthropic-ai/claude-code" in result.stdout
    assert "metric: 7" in result.stdout


def test_invalid_proposer_options_are_a_config_error(tmp_path: Path, invoke: Runner) -> None:
    repo = repo_with(tmp_path, proposer={"kind": "claude", "turns": 3})
    result = invoke(repo, "check")
    assert result.returncode == 2
    assert "proposer.turns" in result.stderr


@pytest.fixture
def chat() -> Iterator[tuple[FakeOpenAI, Any]]:
    fake, server = serve()
    yield fake, server
    server.shutdown()
    server.server_close()


def chat_repo(tmp_path: Path, url: str) -> Path:
    proposer = {"kind": "openai", "base_url": url, "model": "m", "max_retries": 0}
    return repo_with(tmp_path, proposer=proposer)


def test_a_chat_endpoint_is_asked_unless_offline(
    tmp_path: Path, invoke: Runner, chat: tuple[FakeOpenAI, Any]
) -> None:
    fake, server = chat
    repo = chat_repo(tmp_path, fake.url)
    env = {"OPENAI_API_KEY": "sk-test"}
    result = invoke(repo, "check", env=env)
    assert result.returncode == 0, (result.stdout, result.stderr)
    assert f"openai, model m at {fake.url} answered" in result.stdout
    assert len(fake.requests) == 1

    result = invoke(repo, "check", "--offline", env=env)
    assert result.returncode == 0 and "not contacted: --offline" in result.stdout
    assert len(fake.requests) == 1  # nothing sent

    server.shutdown()
    server.server_close()
    result = invoke(repo, "check", env=env)
    assert result.returncode == 1
    assert f"cannot reach the chat API at {fake.url}" in result.stdout
    code, data = check_json(invoke, repo, "--offline")
    assert code == 0 and data["proposer"]["ok"] is True
    assert invoke(repo, "check", "--offline", env=env).returncode == 0


def test_a_chat_endpoint_refusing_the_key_fails_check(
    tmp_path: Path, invoke: Runner, chat: tuple[FakeOpenAI, Any]
) -> None:
    from autoresearch.testing.fake_openai import Prepared

    fake, _ = chat
    fake.add(Prepared(status=401))
    repo = chat_repo(tmp_path, fake.url)
    result = invoke(repo, "check", env={"OPENAI_API_KEY": "sk-wrong"})
    assert result.returncode == 1
    assert "answered HTTP 401" in result.stdout
