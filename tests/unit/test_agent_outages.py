"""An agent's outage is a failed proposal with its own message, and three in a row stop the
campaign; odd descriptions (a NUL byte, a 1.5 GB file) are stored as bounded text.

Campaigns run in-process through the click runner; the stand-in tools are real processes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autoresearch.testing.proposer_suite import TOOL_ERROR_OUTPUT, TOOL_MESSAGE
from campaigns import campaign_toml
from conftest import Runner, git, ledger, make_repo

EDIT = "sed -i 's/^N = .*/N = 3/' calc.py"


def campaign(tmp_path: Path, proposer: dict[str, object]) -> Path:
    return make_repo(
        tmp_path / "repo",
        {
            "calc.py": "N = 10\n",
            "bench.py": 'import calc\nprint(f"score: {abs(calc.N - 3)}")\n',
            "autoresearch.toml": campaign_toml(
                guard=None, proposer=proposer, **{"stop.max_iterations": 20}
            ),
        },
    )


def stand_in(tmp_path: Path, name: str, body: str) -> Path:
    exe = tmp_path / "bin" / name
    exe.parent.mkdir(parents=True, exist_ok=True)
    exe.write_text(f"#!/bin/bash\n{body}\n")
    exe.chmod(0o755)
    return exe


@pytest.mark.parametrize("kind", ["claude", "codex", "aider", "gemini"])
def test_an_agent_outage_stops_the_campaign_with_the_tools_message(
    tmp_path: Path, invoke: Runner, kind: str
) -> None:
    # It even edits before failing: what a failed tool leaves behind is not measured.
    exe = stand_in(tmp_path, kind, f"{EDIT}\n{TOOL_ERROR_OUTPUT[kind]}")
    repo = campaign(tmp_path, {"kind": kind, "executable": str(exe), "timeout": 30})
    result = invoke(repo, "run", "--plain")
    assert result.returncode == 1, (result.stdout, result.stderr)
    records = ledger(repo)
    assert [r["status"] for r in records] == ["baseline"] + ["proposer_failed"] * 3
    for record in records[1:]:
        assert TOOL_MESSAGE in str(record["reason"]), record
    status = json.loads(invoke(repo, "status", "--json").stdout)
    assert status["stop_reason"] == "proposer_failed"
    assert TOOL_MESSAGE in result.stdout + result.stderr
    assert git(repo, "show", "autoresearch/toy:calc.py") == "N = 10\n"  # nothing kept


def test_a_recovered_codex_stream_error_is_not_a_failure(tmp_path: Path, invoke: Runner) -> None:
    body = f"""{EDIT}
echo '{{"type":"error","message":"stream disconnected; retrying 1/5"}}'
echo '{{"type":"item.completed","item":{{"type":"agent_message","text":"set N to 3"}}}}'
echo '{{"type":"turn.completed","usage":{{"input_tokens":5,"output_tokens":5}}}}'"""
    exe = stand_in(tmp_path, "codex", body)
    repo = campaign(tmp_path, {"kind": "codex", "executable": str(exe), "timeout": 30})
    invoke(repo, "run", "--plain", "--max-iterations", "1")
    assert [r["status"] for r in ledger(repo)] == ["baseline", "keep"]


def test_aider_mentioning_an_error_it_fixed_is_not_a_failure(
    tmp_path: Path, invoke: Runner
) -> None:
    exe = stand_in(tmp_path, "aider", f"{EDIT}\necho 'Fixed the TypeError in calc.py'")
    repo = campaign(tmp_path, {"kind": "aider", "executable": str(exe), "timeout": 30})
    invoke(repo, "run", "--plain", "--max-iterations", "1")
    assert [r["status"] for r in ledger(repo)] == ["baseline", "keep"]


@pytest.mark.parametrize(
    "writes,expected",
    [
        # a NUL byte: git refuses it in a commit message
        ("printf 'set N\\0 to 3\\n' > \"$AUTORESEARCH_DESCRIPTION_FILE\"", "set N\ufffd to 3"),
        # a 1.5 GB description file (sparse): only its head is read
        (
            "printf 'set N to 3\\n' > \"$AUTORESEARCH_DESCRIPTION_FILE\"\n"
            'truncate -s 1500M "$AUTORESEARCH_DESCRIPTION_FILE"',
            "set N to 3",
        ),
        # terminal escape sequences are text, stored as they are
        (
            "printf 'set \\033[2JN to 3\\n' > \"$AUTORESEARCH_DESCRIPTION_FILE\"",
            "set \x1b[2JN to 3",
        ),
        # a description file that is a device: not read at all, stdout says what was done
        ('ln -sf /dev/zero "$AUTORESEARCH_DESCRIPTION_FILE"; echo "from stdout"', "from stdout"),
    ],
)
def test_an_odd_description_is_stored_as_bounded_text(
    tmp_path: Path, invoke: Runner, writes: str, expected: str
) -> None:
    script = stand_in(tmp_path, "propose.sh", f"{EDIT}\n{writes}")
    repo = campaign(tmp_path, {"kind": "command", "command": f"bash {script}"})
    result = invoke(repo, "run", "--plain", "--max-iterations", "1")
    assert result.returncode == 0, (result.stdout, result.stderr)
    records = ledger(repo)
    assert [r["status"] for r in records] == ["baseline", "keep"]
    assert records[1]["description"] == expected
    message = git(repo, "log", "-1", "--format=%B", "autoresearch/toy")
    assert expected.replace("\x1b", "") in message.replace("\x1b", "")
