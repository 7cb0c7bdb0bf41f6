"""Agent CLI presets, driven with stand-in executables that behave like the real tools.

The campaigns run in-process through the click runner; the stand-in tools are processes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from campaigns import campaign_toml
from conftest import Runner, git, ledger, make_repo


def agent_config(kind: str, out: Path) -> str:
    """Campaign "agent" whose stand-in tool writes its arguments to `ARGS_OUT` in `out`."""
    return campaign_toml(
        name="agent",
        guard=None,
        proposer={
            "kind": kind,
            "model": "some-model",
            "extra_args": ["--verbose"],
            "max_turns": 7,
            "pass_env": ["ARGS_OUT"],
            "writable": [str(out)],
        },
        **{"metric.pattern": None, "stop.max_iterations": 1},
    )


STAND_INS = {
    "claude": """#!/bin/bash
printf '%s\\n' "$@" > "$ARGS_OUT"
sed -i 's/^N = .*/N = 3/' calc.py
cat <<'JSON'
{"type":"result","subtype":"success","is_error":false,
 "result":"DESCRIPTION: set N to 3\\nDone.","total_cost_usd":0.25,
 "usage":{"input_tokens":1000,"cache_read_input_tokens":500,"output_tokens":50}}
JSON
""",
    "codex": """#!/bin/bash
printf '%s\\n' "$@" > "$ARGS_OUT"
sed -i 's/^N = .*/N = 3/' calc.py
echo '{"type":"item.completed","item":{"type":"agent_message","text":"set N to 3"}}'
echo '{"type":"turn.completed","usage":{"input_tokens":1200,"output_tokens":80}}'
""",
    "aider": """#!/bin/bash
printf '%s\\n' "$@" > "$ARGS_OUT"
sed -i 's/^N = .*/N = 3/' calc.py
echo "Aider v0.80.0"
echo "set N to 3 so the score reaches zero"
echo "Applied edit to calc.py"
echo "Tokens: 2.5k sent, 310 received. Cost: \\$0.02 message, \\$0.05 session."
""",
    "gemini": """#!/bin/bash
printf '%s\\n' "$@" > "$ARGS_OUT"
sed -i 's/^N = .*/N = 3/' calc.py
echo '{"response":"set N to 3","stats":{"models":{"m":{"tokens":{"prompt":900,"candidates":40}}}}}'
""",
}

EXPECTED = {
    "claude": (
        0.25,
        1500,
        50,
        [
            "-p",
            "--permission-mode",
            "acceptEdits",
            "--max-turns",
            "7",
            "--output-format",
            "json",
            "--model",
            "some-model",
        ],
    ),
    "codex": (None, 1200, 80, ["exec", "--full-auto", "--json", "--model", "some-model"]),
    "aider": (
        0.02,
        2500,
        310,
        ["--yes-always", "--no-auto-commits", "--message-file", "--model", "some-model", "calc.py"],
    ),
    "gemini": (None, 900, 40, ["--yolo", "-p", "-m", "some-model"]),
}


def agent_repo(tmp_path: Path, kind: str) -> tuple[Path, dict[str, str]]:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    tool = bindir / kind
    tool.write_text(STAND_INS[kind])
    tool.chmod(0o755)
    out = tmp_path / "out"
    out.mkdir()
    repo = make_repo(
        tmp_path / "repo",
        {
            "calc.py": "N = 10\n",
            "bench.py": "import calc\nprint(abs(calc.N - 3))\n",
            "autoresearch.toml": agent_config(kind, out),
        },
    )
    env = {
        "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}",
        "ARGS_OUT": str(out / "args.txt"),
    }
    return repo, env


@pytest.mark.parametrize("kind", sorted(STAND_INS))
def test_preset_runs_the_tool_and_records_its_cost(
    tmp_path: Path, invoke: Runner, kind: str
) -> None:
    repo, env = agent_repo(tmp_path, kind)
    result = invoke(repo, "run", env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    record = ledger(repo, "agent")[1]
    assert record["status"] == "keep"
    cost, tokens_in, tokens_out, flags = EXPECTED[kind]
    assert record.get("cost_usd") == cost
    assert record["tokens_in"] == tokens_in and record["tokens_out"] == tokens_out
    args = (tmp_path / "out" / "args.txt").read_text().splitlines()
    for flag in flags:
        assert flag in args, (flag, args)
    assert "--verbose" in args
    if kind != "aider":
        assert any("make the score zero" in a for a in args), "the prompt is passed"
    assert "set N to 3" in record["description"]
    assert git(repo, "show", "autoresearch/agent:calc.py") == "N = 3\n"


def test_claude_may_not_commit(tmp_path: Path, invoke: Runner) -> None:
    repo, env = agent_repo(tmp_path, "claude")
    assert invoke(repo, "run", env=env).returncode == 0
    args = (tmp_path / "out" / "args.txt").read_text()
    assert "Bash(git commit:*)" in args


@pytest.mark.parametrize(
    "kind,install",
    [
        ("claude", "@anthropic-ai/claude-code"),
        ("codex", "@openai/codex"),
        ("aider", "aider-install"),
        ("gemini", "@google/gemini-cli"),
    ],
)
def test_a_missing_tool_is_named_with_how_to_install_it(
    tmp_path: Path, invoke: Runner, kind: str, install: str
) -> None:
    repo = make_repo(
        tmp_path / "repo",
        {
            "calc.py": "N = 10\n",
            "bench.py": "print(1)\n",
            "autoresearch.toml": agent_config(kind, tmp_path),
        },
    )
    for command in ("run", "check"):
        result = invoke(repo, command, env={"PATH": "/usr/bin:/bin"})
        assert result.returncode != 0
        # `check` reports the proposer on stdout, beside the measurement it still makes.
        said = result.stdout if command == "check" else result.stderr
        assert f"{kind} (the '{kind}' proposer) is not installed" in said
        assert install in said and "Traceback" not in result.stderr


def test_tool_failure_is_recorded(tmp_path: Path, invoke: Runner) -> None:
    repo, env = agent_repo(tmp_path, "claude")
    (tmp_path / "bin" / "claude").write_text("#!/bin/bash\necho 'not logged in' >&2\nexit 1\n")
    assert invoke(repo, "run", env=env).returncode == 0
    record = ledger(repo, "agent")[1]
    assert record["status"] == "proposer_failed"
    assert "claude exited with code 1: not logged in" in record["reason"]
    assert json.loads(invoke(repo, "status", "--json").stdout)["iterations"] == 1
