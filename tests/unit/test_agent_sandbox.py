"""`autoresearch start --agent`: the agent runs in the sandbox, `step` reaches the engine
through the MCP relay, and nothing the agent leaves behind reaches the measurement, the
ledger or the checkout.

The "agent" is a bash script given as `--agent`; it calls `step` through the relay named in
its MCP config with raw JSON-RPC lines, as any MCP client does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autoresearch.agent import relay
from autoresearch.agent.sandboxed import (
    CONFIG_ENV,
    SOCKET_ENV,
    agent_command,
    mcp_config,
    preset_of,
)
from autoresearch.errors import AutoresearchError
from autoresearch.isolation.sandbox import bwrap_problem
from campaigns import campaign_toml
from conftest import Runner, git, ledger, make_repo, snapshot

needs_bwrap = pytest.mark.skipif(bwrap_problem() is not None, reason="needs bubblewrap")
SRC = Path(__file__).resolve().parents[2] / "src"

# An MCP client of the agent's: starts the relay its MCP config names, initialises a
# session and calls one tool; prints the tool's structured result on one marked line.
CLIENT = r"""
import json, os, subprocess, sys
config = json.load(open(os.environ["AUTORESEARCH_MCP_CONFIG"]))
server = config["mcpServers"]["autoresearch"]
proc = subprocess.Popen([server["command"], *server["args"]], stdin=subprocess.PIPE,
                        stdout=subprocess.PIPE)
def send(message):
    proc.stdin.write((json.dumps(message) + "\n").encode()); proc.stdin.flush()
def answer(ident):
    while True:
        line = proc.stdout.readline()
        if not line:
            sys.exit("the relay closed")
        message = json.loads(line)
        if message.get("id") == ident:
            return message
send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "stand-in", "version": "1"}}})
answer(1)
send({"jsonrpc": "2.0", "method": "notifications/initialized"})
send({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
      "params": {"name": sys.argv[1], "arguments": json.loads(sys.argv[2])}})
result = answer(2)["result"]
print(sys.argv[1].upper() + "-RESULT " + json.dumps(result.get("structuredContent", result)))
proc.stdin.close(); proc.wait()
"""


BENCH = """import time
start = time.time_ns()
time.sleep(1.5)
import calc
print(f"score: {{calc.N}}")
with open("{windows}", "a") as log:
    log.write(f"{{start}} {{time.time_ns()}}\\n")
"""


def agent_repo(tmp_path: Path, **overrides: object) -> tuple[Path, Path]:
    """The toy campaign (score = N, minimised, read slowly enough for a watcher to act), an
    out folder the sandbox may write (`[sandbox] writable`), and a secret in the checkout."""
    out = tmp_path / "out"
    out.mkdir()
    config = campaign_toml(
        **{
            "guard": None,
            "metric.command": "python bench.py",
            "metric.timeout": 60,
            "sandbox.writable": [str(out)],
            "sandbox.isolation": "bwrap",
            **overrides,
        }
    )
    repo = make_repo(
        tmp_path / "repo",
        {
            "calc.py": "N = 12\n",
            # calc is read only after a pause: a watcher has time to swap it; each run
            # notes when it ran
            "bench.py": BENCH.format(windows=out / "windows"),
            "autoresearch.toml": config,
            ".gitignore": ".env\n",
        },
    )
    (repo / ".env").write_text("TOKEN=the-users-secret\n")
    return repo, out


def run_start(
    repo: Path, agent: str, timeout: float = 240, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(SRC), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "autoresearch", "start", "--agent", agent],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        env=env,
    )


def marked(stdout: str, mark: str) -> dict[str, object]:
    lines = [line for line in stdout.splitlines() if line.startswith(mark + " ")]
    assert lines, stdout
    found: dict[str, object] = json.loads(lines[-1].split(" ", 1)[1])
    return found


def processes_with(token: str) -> list[str]:
    """The command lines of this machine's processes that mention `token`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if token in cmdline:
            found.append(cmdline)
    return found


@needs_bwrap
@pytest.mark.slow
def test_a_sandboxed_agent_cannot_forge_the_number_or_the_record(tmp_path: Path) -> None:
    """The agent edits the workspace and calls `step` through the relay; the watcher it
    leaves rewrites the measurement folder and appends a forged record to the ledger the
    whole time the metric runs. The kept number is the commit's honest number, the ledger
    holds no forged record, `verify` passes, the checkout is unchanged byte for byte, and
    no process of the agent's outlives it."""
    repo, out = agent_repo(tmp_path)
    state = repo / ".autoresearch" / "toy"
    client = tmp_path / "client.py"
    client.write_text(CLIENT)
    forged = (
        '{"iteration": 7, "status": "keep", "metric": -1000, "best": -1000, '
        '"description": "FORGED"}'
    )
    script = tmp_path / "agent.sh"
    script.write_text(
        f"""#!/bin/bash
py={sys.executable}
cat {repo}/.env > {out}/secret 2>/dev/null
ls -A {state} > {out}/state-listing 2>/dev/null
# the watcher, left behind: it tries the measurement folder (directly and through the
# root of every process it can see), the ledger, the checkout
( n=0
  while :; do
    n=$((n+1)); echo $n > {out}/heartbeat; date +%s%N >> {out}/beats
    for dir in {state}/measure /proc/*/root{state}/measure; do
      mkdir -p "$dir" 2>/dev/null
      echo 'N = -1000' > "$dir/calc.py" 2>/dev/null
    done
    echo '{forged}' >> {state}/ledger.jsonl 2>/dev/null
    echo 'N = -1000' > {repo}/calc.py 2>/dev/null
    sleep 0.05
  done ) &
$py -m autoresearch step > {out}/plain-step 2>&1; echo "exit $?" >> {out}/plain-step
sed -i 's/N = 12/N = 9/' calc.py          # one change, in the workspace
$py {client} step '{{"description": "N to 9"}}'
sleep 0.5  # the watcher, running again
echo "watcher at $(cat {out}/heartbeat)"
"""
    )
    before = snapshot(repo)
    ran = run_start(repo, f"bash {script}")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    result = marked(ran.stdout, "STEP-RESULT")
    attempt = result["attempt"]
    assert isinstance(attempt, dict) and attempt["status"] == "keep", result
    # The watcher ran before and after the step, and not while the engine judged it
    # (every process of the agent is held still meanwhile).
    assert int((out / "heartbeat").read_text()) > 5
    _, candidate_run = [
        tuple(map(int, line.split())) for line in (out / "windows").read_text().splitlines()
    ]
    beats = [int(line) for line in (out / "beats").read_text().split()]
    assert any(b < candidate_run[0] for b in beats) and any(b > candidate_run[1] for b in beats)
    assert [b for b in beats if candidate_run[0] <= b <= candidate_run[1]] == []
    # The promise: the number kept is the committed tree's honest number.
    kept = git(repo, "show", "autoresearch/toy:calc.py")
    assert kept == "N = 9\n"
    assert attempt["metric"] == 9 and result["best"] == 9
    records = ledger(repo)
    assert [r["status"] for r in records] == ["baseline", "keep"]
    assert [r["metric"] for r in records] == [12, 9]
    assert "FORGED" not in (state / "ledger.jsonl").read_text()
    verified = subprocess.run(
        [sys.executable, "-m", "autoresearch", "verify"],
        cwd=repo,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(SRC)},
    )
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert snapshot(repo) == before
    # What the agent saw: no secret, no campaign folder, `step` only through MCP.
    assert not (out / "secret").read_text()
    assert (out / "state-listing").read_text() in ("", ".worktree-agent-tmp\nworktree\n")
    plain = (out / "plain-step").read_text()
    assert "MCP" in plain and "exit 1" in plain and "Traceback" not in plain
    # Nothing of the agent's outlives it.
    beat = (out / "heartbeat").read_text()
    time.sleep(0.5)
    assert (out / "heartbeat").read_text() == beat
    assert processes_with(str(script)) == []
    assert not (state / ".worktree-agent-tmp").exists()


@pytest.mark.slow
@pytest.mark.xfail(
    strict=True,
    reason="an agent running as you, outside the sandbox, can rewrite the measurement "
    "folder while the metric runs (docs/agent-mode.md: what it guarantees)",
)
def test_an_agent_outside_the_sandbox_can_forge_the_number(tmp_path: Path, invoke: Runner) -> None:
    """The same watcher, run as the user beside `autoresearch step` (the agent-driven mode
    without --agent): the promise does not hold, as docs/agent-mode.md says."""
    import threading

    repo, _ = agent_repo(tmp_path)
    assert invoke(repo, "start").returncode == 0
    measure = repo / ".autoresearch" / "toy" / "measure"
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            if measure.is_dir():
                try:
                    (measure / "calc.py").write_text("N = -1000\n")
                except OSError:
                    pass
            time.sleep(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        workspace = repo / ".autoresearch" / "toy" / "worktree"
        (workspace / "calc.py").write_text("N = 9\n")
        stepped = invoke(repo, "step", "--json")
    finally:
        done.set()
        watcher.join()
    attempt = json.loads(stepped.stdout)["attempt"]
    honest = git(repo, "show", f"{attempt['commit']}:calc.py")
    assert honest == "N = 9\n"
    assert attempt["metric"] == 9


@needs_bwrap
@pytest.mark.slow
def test_the_claude_preset_gets_its_mcp_config_and_its_own_folder(tmp_path: Path) -> None:
    """`--agent claude` (a stand-in `claude` on PATH): its command line carries
    `--mcp-config` naming a config whose server reaches the engine; it may write its own
    folder (~/.claude) and nothing else of the home folder, and reads none of it."""
    repo, out = agent_repo(tmp_path)
    home = tmp_path / "home"
    (home / ".config").mkdir(parents=True)
    (home / ".config" / "token").write_text("a login of the user's\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    client = tmp_path / "client.py"
    client.write_text(CLIENT)
    claude = bin_dir / "claude"
    claude.write_text(
        f"""#!/bin/bash
[ "$1" = "--model" ] && [ "$2" = "opus" ] || exit 9
[ "$3" = "--mcp-config" ] || exit 8
cat ~/.config/token > {out}/token 2>/dev/null
echo mine > ~/.claude/state && echo wrote > {out}/state
echo other > ~/.bashrc 2>/dev/null && echo wrote > {out}/bashrc
AUTORESEARCH_MCP_CONFIG="$4" {sys.executable} {client} status '{{}}'
"""
    )
    claude.chmod(0o755)
    ran = run_start(
        repo,
        "claude --model opus",
        env={"HOME": str(home), "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"},
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    status = marked(ran.stdout, "STATUS-RESULT")
    assert status["campaign"] == "toy" and status["baseline"] == 12
    assert (home / ".claude" / "state").read_text() == "mine\n"
    assert (out / "state").exists() and not (out / "bashrc").exists()
    assert not (home / ".bashrc").exists()
    assert not (out / "token").read_text()


@needs_bwrap
@pytest.mark.slow
@pytest.mark.parametrize(("network", "expected"), [("off", "refused"), ("on", "reached")])
def test_the_agent_reaches_only_the_network_the_proposer_may(
    tmp_path: Path, network: str, expected: str
) -> None:
    """`[proposer] network` holds for the sandboxed agent as for a proposer: with "off" a
    service on the machine's loopback is out of its reach, while `step` still reaches the
    engine (a unix socket, not the network)."""
    import socket

    repo, out = agent_repo(tmp_path, **{"proposer.network": network})
    service = socket.create_server(("127.0.0.1", 0))
    port = service.getsockname()[1]
    client = tmp_path / "client.py"
    client.write_text(CLIENT)
    probe = f"import socket; socket.create_connection(('127.0.0.1', {port}), 2)"
    script = tmp_path / "agent.sh"
    script.write_text(
        f"""{sys.executable} -c "{probe}" && echo reached > {out}/net || echo refused > {out}/net
{sys.executable} {client} status '{{}}'
"""
    )
    try:
        ran = run_start(repo, f"bash {script}")
    finally:
        service.close()
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert (out / "net").read_text() == expected + "\n"
    assert marked(ran.stdout, "STATUS-RESULT")["campaign"] == "toy"


def test_the_agent_presets_and_their_mcp_config(tmp_path: Path) -> None:
    assert preset_of("claude --model opus") == "claude"
    assert preset_of("/usr/local/bin/codex") == "codex"
    assert preset_of("bash agent.sh") is None
    for bad in ("", "  ", "claude 'unbalanced"):
        with pytest.raises(AutoresearchError, match="--agent"):
            preset_of(bad)
    config = tmp_path / "mcp.json"
    line = agent_command("claude --model opus", "claude", config)
    assert line == f"claude --model opus --mcp-config {config}"
    assert agent_command("codex", "codex", config) == "codex"
    served = mcp_config(tmp_path / "mcp.sock", tmp_path / "relay.py")
    entry = served["mcpServers"]["autoresearch"]  # type: ignore[index]
    assert entry["command"] == sys.executable
    assert entry["args"][-2:] == [str(tmp_path / "relay.py"), str(tmp_path / "mcp.sock")]


def test_the_relay_carries_both_ways_over_a_long_socket_path(tmp_path: Path) -> None:
    """A socket path longer than a sockaddr_un holds (a deep checkout) still connects; the
    relay passes the client's bytes on, the answers back, and the client's end as a
    half-close."""
    import threading

    folder = tmp_path / ("d" * 60) / ("e" * 60)
    folder.mkdir(parents=True)
    path = folder / "mcp.sock"
    assert len(str(path)) > relay.SUN_PATH_MAX
    from autoresearch.agent.sandboxed import listen

    listener = listen(path)
    got: list[bytes] = []

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            data = b""
            while chunk := conn.recv(100):
                data += chunk
            got.append(data)
            conn.sendall(data.upper())

    thread = threading.Thread(target=serve)
    thread.start()
    proc = subprocess.run(
        [sys.executable, "-I", relay.__file__, str(path)],
        input=b'{"hello": 1}\n' * 3,
        capture_output=True,
        timeout=30,
    )
    thread.join()
    listener.close()
    assert proc.returncode == 0, proc.stderr
    assert got == [b'{"hello": 1}\n' * 3]
    assert proc.stdout == b'{"HELLO": 1}\n' * 3
    gone = subprocess.run(
        [sys.executable, "-I", relay.__file__, str(path)], capture_output=True, text=True
    )
    assert gone.returncode == 1 and "has ended" in gone.stderr


def test_inside_the_sandbox_autoresearch_mcp_relays_to_the_session(tmp_path: Path) -> None:
    """A server the agent's own config registers (`autoresearch mcp`, from `setup --user`)
    is, inside the sandbox, a relay to the session's server: never a campaign of the
    workspace's own."""
    import threading

    from autoresearch.agent.sandboxed import listen

    path = tmp_path / "mcp.sock"
    listener = listen(path)

    def serve() -> None:
        conn, _ = listener.accept()
        with conn, conn.makefile("rb") as lines:
            conn.sendall(b"session: " + lines.readline())

    thread = threading.Thread(target=serve)
    thread.start()
    repo, _ = agent_repo(tmp_path)
    ran = subprocess.run(
        [sys.executable, "-m", "autoresearch", "mcp"],
        cwd=repo,
        input=b'{"jsonrpc": "2.0"}\n',
        capture_output=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(SRC), SOCKET_ENV: str(path)},
    )
    thread.join()
    listener.close()
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == b'session: {"jsonrpc": "2.0"}\n'
    assert not (repo / ".autoresearch").exists()


def test_inside_the_sandbox_start_and_step_point_to_the_mcp_tools(
    tmp_path: Path, invoke: Runner
) -> None:
    repo, _ = agent_repo(tmp_path)
    env = {SOCKET_ENV: str(tmp_path / "mcp.sock"), CONFIG_ENV: str(tmp_path / "mcp.json")}
    for command in ("step", "start"):
        refused = invoke(repo, command, env=env)
        assert refused.returncode == 1
        assert f"tool `{command}`" in refused.stderr and "Traceback" not in refused.stderr
    assert not (repo / ".autoresearch" / "toy" / "ledger.jsonl").exists()


def test_start_without_an_agent_offers_the_sandboxed_mode(tmp_path: Path, invoke: Runner) -> None:
    repo = make_repo(
        tmp_path / "repo",
        {
            "calc.py": "N = 5\n",
            "bench.py": "import calc\nprint(f'score: {abs(calc.N - 3)}')\n",
            "autoresearch.toml": campaign_toml(guard=None),
        },
    )
    started = invoke(repo, "start")
    assert started.returncode == 0, started.stderr
    offer = [line for line in started.stderr.splitlines() if "--agent" in line]
    assert len(offer) == 1 and "outside the sandbox" in offer[0]
    as_json = invoke(repo, "start", "--json")
    assert "--agent" not in as_json.stderr
    json.loads(as_json.stdout)


def test_a_bad_agent_command_is_refused_before_the_baseline(tmp_path: Path, invoke: Runner) -> None:
    repo, _ = agent_repo(tmp_path)
    refused = invoke(repo, "start", "--agent", "claude 'unbalanced")
    assert refused.returncode == 1 and "quote it" in refused.stderr
    assert not (repo / ".autoresearch" / "toy" / "ledger.jsonl").exists()


def test_without_bubblewrap_the_sandboxed_mode_is_refused(tmp_path: Path, invoke: Runner) -> None:
    repo, _ = agent_repo(tmp_path)
    toml = (repo / "autoresearch.toml").read_text().replace('"bwrap"', '"none"')
    (repo / "autoresearch.toml").write_text(toml)
    git(repo, "commit", "-qam", "no sandbox")
    refused = invoke(repo, "start", "--agent", "bash -c true")
    assert refused.returncode == 1
    assert "sandbox.isolation" in refused.stderr and "Traceback" not in refused.stderr


def test_the_mcp_server_answers_without_loading_the_engine(tmp_path: Path) -> None:
    """`autoresearch mcp` answers `initialize` with the other commands and the engine
    unloaded (an MCP client waits for it each session); `--connect` to a session that
    ended says so in one sentence."""
    repo, _ = agent_repo(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    log = tmp_path / "imports.txt"
    with open(log, "wb") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-X", "importtime", "-m", "autoresearch", "mcp"],
            cwd=repo,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=env,
        )
    assert proc.stdin is not None and proc.stdout is not None
    hello = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"},
        },
    }
    proc.stdin.write((json.dumps(hello) + "\n").encode())
    proc.stdin.flush()
    answer = json.loads(proc.stdout.readline())
    proc.stdin.close()
    proc.wait(timeout=60)
    assert answer["result"]["serverInfo"]["name"] == "autoresearch"
    loaded = log.read_text()
    assert "autoresearch.agent.mcp_server" in loaded
    for heavy in ("autoresearch.cli.commands", "autoresearch.engine.loop"):
        assert heavy not in loaded
    ended = subprocess.run(
        [sys.executable, "-m", "autoresearch", "mcp", "--connect", str(tmp_path / "gone.sock")],
        cwd=repo,
        capture_output=True,
        text=True,
        env=env,
    )
    assert ended.returncode == 1 and "has ended" in ended.stderr
    assert "Traceback" not in ended.stderr


def test_connections_beyond_the_cap_get_no_server(tmp_path: Path) -> None:
    """Every MCP session is a process outside the sandbox: an agent that opens connection
    after connection is served MAX_SESSIONS at once, the others are closed unserved; all
    of them end when the session closes."""
    from autoresearch.agent.sandboxed import MAX_SESSIONS, Servers, listen

    path = tmp_path / "mcp.sock"
    # a stand-in server: answers one line, then waits for the end of its input
    argv = [sys.executable, "-c", "import sys; print('served', flush=True); sys.stdin.read()"]
    servers = Servers(listen(path), argv, tmp_path, tmp_path / "servers.log")
    servers.start()
    servers.sandbox_started(os.getpid())  # a stand-in for the sandbox's process
    clients = [relay.connect(str(path)) for _ in range(MAX_SESSIONS + 3)]
    try:
        answers = []
        for client in clients:
            client.settimeout(30)
            with client.makefile("rb") as lines:
                answers.append(lines.readline())
        assert answers.count(b"served\n") == MAX_SESSIONS
        assert answers.count(b"") == 3
    finally:
        for client in clients:
            client.close()
        servers.close()
    assert all(p.returncode is not None for p in servers.processes)


@needs_bwrap
@pytest.mark.slow
def test_on_a_terminal_the_agent_gets_one_of_its_own(tmp_path: Path) -> None:
    """Run from a terminal, the agent has a terminal (its interface works), the person's
    keys reach it, its exit code is the command's, and a process it left dies with it."""
    import pty
    import select

    repo, out = agent_repo(tmp_path)
    script = tmp_path / "agent.sh"
    script.write_text(
        f"""[ -t 0 ] && [ -t 1 ] && echo terminal > {out}/tty
( while :; do date +%s%N > {out}/beat; sleep 0.05; done ) &
until [ -s {out}/beat ]; do sleep 0.01; done  # the process to outlive it runs
echo READY
read -r line
echo "got:$line" > {out}/line
exit 5
"""
    )
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "autoresearch", "start", "--agent", f"bash {script}"],
        cwd=repo,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env={**os.environ, "PYTHONPATH": str(SRC)},
        start_new_session=True,
    )
    os.close(slave)
    seen = b""
    deadline = time.monotonic() + 120
    typed = False
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
        if not typed and b"READY" in seen:
            os.write(master, b"hello\r")
            typed = True
        if proc.poll() is not None and not ready:
            break
    os.close(master)
    shown = seen.decode(errors="replace")
    assert proc.wait(timeout=30) == 5, shown
    assert (out / "tty").read_text() == "terminal\n", shown
    assert (out / "line").read_text() == "got:hello\n", shown
    beat = (out / "beat").read_text()
    time.sleep(0.3)
    assert (out / "beat").read_text() == beat


@needs_bwrap
def test_a_second_session_is_refused_while_one_runs(tmp_path: Path, invoke: Runner) -> None:
    """A second `start --agent` on the campaign would take the first one's TMPDIR and
    socket over: it is refused, before anything is measured, while the first runs."""
    from autoresearch.agent.sandboxed import one_session
    from autoresearch.config import load_campaign

    repo, _ = agent_repo(tmp_path)
    with one_session(load_campaign(repo)):
        refused = invoke(repo, "start", "--agent", "bash -c true")
    assert refused.returncode == 1
    assert "session already" in refused.stderr and "Traceback" not in refused.stderr
    assert not (repo / ".autoresearch" / "toy" / "ledger.jsonl").exists()
