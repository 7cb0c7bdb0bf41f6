"""`autoresearch mcp` answers `initialize` from the SDK's earlier answer before the SDK is
imported: the client gets the SDK's very answer, exactly once, and the SDK still serves
everything after it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from autoresearch.agent.mcp_handshake import CACHE_NAME, answer_key, sdk_key

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 7,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"},
    },
}
MESSAGES = [
    INITIALIZE,
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 8, "method": "tools/list"},
]


def serve(repo: Path, cache: Path, messages: list[dict[str, Any]]) -> tuple[list[Any], str]:
    """Every message the server wrote to its client, and its stderr. Its input stays open
    until every request is answered, as a client's does (a server may drop what is still in
    flight when its input ends)."""
    env = {**os.environ, "AUTORESEARCH_CACHE_DIR": str(cache)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "autoresearch", "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=repo,
        env=env,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    proc.stdin.write("".join(json.dumps(m) + "\n" for m in messages).encode())
    proc.stdin.flush()
    waiting = {m["id"] for m in messages if "id" in m}
    seen: list[Any] = []
    try:
        while waiting:
            line = proc.stdout.readline()
            if not line:
                break
            message = json.loads(line)
            seen.append(message)
            waiting.discard(message.get("id"))
        rest, err = proc.communicate(timeout=120)  # closes the input: the server ends
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    seen += [json.loads(line) for line in rest.decode().splitlines()]
    return seen, err.decode()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


def answers(messages: list[Any], ident: int) -> list[Any]:
    return [m for m in messages if m.get("id") == ident]


def test_the_early_answer_is_the_sdks_own_and_comes_once(repo: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first, _ = serve(repo, cache, MESSAGES)
    assert (cache / CACHE_NAME).exists()
    second, _ = serve(repo, cache, MESSAGES)
    # The SDK answered the first time; the second time the answer came from the cache and
    # the SDK's own was left out: the client sees one answer, the same.
    assert len(answers(first, 7)) == 1 and len(answers(second, 7)) == 1
    assert answers(second, 7) == answers(first, 7)
    assert answers(first, 7)[0]["result"]["serverInfo"]["name"] == "autoresearch"
    assert answers(first, 7)[0]["result"]["serverInfo"]["version"]
    tools = answers(second, 8)
    assert len(tools) == 1
    assert "step" in {t["name"] for t in tools[0]["result"]["tools"]}


def test_a_stale_answer_is_replaced_by_the_sdks(repo: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    honest, _ = serve(repo, cache, MESSAGES)
    key = answer_key(sdk_key() or "", INITIALIZE)
    stale = {**answers(honest, 7)[0]["result"], "instructions": "an older text"}
    (cache / CACHE_NAME).write_text(json.dumps({key: stale}))
    given, err = serve(repo, cache, MESSAGES)
    assert answers(given, 7)[0]["result"] == stale
    assert "differs" in err
    again, _ = serve(repo, cache, MESSAGES)
    assert answers(again, 7) == answers(honest, 7)


def test_other_protocol_versions_and_first_messages_reach_the_sdk(
    repo: Path, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    ping = {"jsonrpc": "2.0", "id": 3, "method": "ping"}
    seen, _ = serve(repo, cache, [ping, *MESSAGES])
    assert len(answers(seen, 3)) == 1 and len(answers(seen, 7)) == 1
    assert not (cache / CACHE_NAME).exists()  # only an answer to a first `initialize` is kept
    other = {**INITIALIZE, "params": {**INITIALIZE["params"], "protocolVersion": "2024-11-05"}}
    serve(repo, cache, MESSAGES)
    seen, _ = serve(repo, cache, [other, *MESSAGES[1:]])
    assert answers(seen, 7)[0]["result"]["protocolVersion"] == "2024-11-05"
