"""`autoresearch start --agent "<command>"`: the agent-driven mode with the agent sandboxed.

An agent run by the user, as the user, can reach everything the user can: the ledger, the
measurement folder while a metric runs, the engine's files (even a sandbox's mounts,
through /proc/PID/root of its processes). No anchor holds against it. So here the agent
itself runs in the proposer's sandbox (`Confinement`, as a confined proposer's command):
the workspace writable, the user's checkout (with `.autoresearch/`) hidden, its CLI's own
state folders (`AGENT_STATE`) and `[sandbox] writable` writable, the environment reduced
to the allowlist and the agents' key names, in its own PID namespace, so that everything it
starts dies with it.

It reaches the engine only through MCP: the engine's side listens on a unix socket in the
sandbox's private TMPDIR (which is bound into the sandbox); each connection is served by
the real MCP server (`autoresearch mcp`, `mcp_server.py`) started outside the sandbox for
it, with the engine, so that `step` is the same call, attempt and ledger as everywhere.
Inside, the agent's MCP client starts the relay (`relay.py`, copied into the TMPDIR) as its
`autoresearch` server. Claude Code is given the config with `--mcp-config`; any other
command finds it in `AUTORESEARCH_MCP_CONFIG` (and the socket in `AUTORESEARCH_AGENT_SOCKET`).
"""

from __future__ import annotations

import fcntl
import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from autoresearch.agent import relay
from autoresearch.agent.pause import PAUSE_ENV, Root
from autoresearch.agent.terminal import run_attached
from autoresearch.config import Campaign
from autoresearch.errors import AutoresearchError
from autoresearch.isolation.confinement import AGENT_STATE, Confined, Confinement
from autoresearch.isolation.owned import remove
from autoresearch.isolation.process import SANDBOX_EXITED, drain
from autoresearch.isolation.proxy import ProposerNetwork
from autoresearch.proposers import proposer_confinement

SOCKET_NAME = "mcp.sock"
CONFIG_NAME = "mcp.json"
RELAY_NAME = "relay.py"
SERVER_LOG = "agent-mcp.log"
NETWORK_LOG = "agent-network.log"  # under network = "allow": what the proxy refused
SESSION_LOCK = "agent-session.lock"
SOCKET_ENV, CONFIG_ENV = relay.SOCKET_ENV, relay.CONFIG_ENV
SERVER = "autoresearch"
MAX_SESSIONS = 4  # MCP sessions served at once
# Presets whose CLI takes an MCP config file on its command line, and the flag.
MCP_CONFIG_FLAG = {"claude": "--mcp-config"}


def preset_of(command: str) -> str | None:
    """The agent preset a command starts (`claude`, `codex`, ...), from its program's name."""
    try:
        words = shlex.split(command)
    except ValueError:
        raise AutoresearchError(
            f"--agent {command!r} is not a valid shell command line (unbalanced quotes); "
            "quote it as you would in the shell."
        ) from None
    if not words:
        raise AutoresearchError('--agent needs a command, e.g. --agent claude or --agent "codex".')
    name = Path(words[0]).name
    return name if name in AGENT_STATE else None


def relay_argv(socket_path: Path, relay_file: Path) -> list[str]:
    """How the agent's MCP client starts the relay inside the sandbox."""
    return [sys.executable, "-I", str(relay_file), str(socket_path)]


def mcp_config(socket_path: Path, relay_file: Path) -> dict[str, object]:
    """The MCP config naming the relay as the `autoresearch` server (Claude Code's format,
    which Gemini CLI's `mcpServers` shares)."""
    argv = relay_argv(socket_path, relay_file)
    return {"mcpServers": {SERVER: {"command": argv[0], "args": argv[1:]}}}


def agent_command(command: str, preset: str | None, config_file: Path) -> str:
    """The agent's command line, given the MCP config where its CLI takes one."""
    flag = MCP_CONFIG_FLAG.get(preset or "")
    if flag is None:
        return command
    return f"{command} {flag} {shlex.quote(str(config_file))}"


@dataclass
class Servers:
    """The engine's side of the socket: one MCP server process per connection, outside
    the sandbox, with the user's environment and the campaign's checkout."""

    listener: socket.socket
    argv: list[str]
    cwd: Path
    log: Path
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    thread: threading.Thread | None = None
    # The sandbox, once it runs: each server holds it still while `start` or `step` works.
    root: Root | None = None
    running: threading.Event = field(default_factory=threading.Event)

    def sandbox_started(self, pid: int) -> None:
        self.root = Root.of(pid)
        self.running.set()

    def start(self) -> None:
        self.thread = threading.Thread(target=self._accept, name="agent-mcp", daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:  # closed: the session is over
                return
            # Each session is a process outside the sandbox: an agent opening connection
            # after connection gets a few, not a process per connection.
            self.processes = [p for p in self.processes if p.poll() is None]
            self.running.wait()
            if len(self.processes) >= MAX_SESSIONS or self.root is None:
                conn.close()
                continue
            env = {**os.environ, PAUSE_ENV: self.root.to_env()}
            with conn, open(self.log, "ab") as log:
                self.processes.append(
                    subprocess.Popen(
                        self.argv,
                        stdin=conn.fileno(),
                        stdout=conn.fileno(),
                        stderr=log,
                        cwd=self.cwd,
                        env=env,
                    )
                )

    def close(self) -> None:
        """Stop accepting; wait for the servers (a `step` under way finishes and is
        recorded: its client is gone, so each ends at the end of its input)."""
        try:
            self.listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.listener.close()
        self.running.set()
        if self.thread is not None:
            self.thread.join()
        for proc in self.processes:
            proc.wait()


def listen(path: Path) -> socket.socket:
    remove(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with relay.address(str(path)) as name:
        sock.bind(name)
    os.chmod(path, 0o600)
    sock.listen(8)
    return sock


def server_argv(config_path: Path | None) -> list[str]:
    extra = ["--config", str(config_path.resolve())] if config_path is not None else []
    return [sys.executable, "-m", "autoresearch", "mcp", *extra]


def confinement_of(campaign: Campaign) -> Confinement:
    """The proposer's sandbox of the campaign, which the agent runs in; refused when the
    campaign's commands run unsandboxed."""
    confinement = proposer_confinement(campaign, _objects(campaign.root))
    if not confinement.isolating:
        raise AutoresearchError(
            f"{campaign.display_path()}: `start --agent` runs the agent in bubblewrap, "
            "which this campaign does not use (key 'sandbox.isolation', or bubblewrap is "
            "missing: apt install bubblewrap); fix that, or run the agent yourself after "
            "`autoresearch start` (outside the sandbox, see docs/agent-mode.md)."
        )
    return confinement


def agent_network(
    campaign: Campaign, preset: str | None, confinement: Confinement
) -> ProposerNetwork:
    """What the agent may reach: `[proposer] network` and `allow_hosts` as for a proposer
    of the campaign (its preset's model API when `allow` lists no host); any host when
    the config says nothing."""
    from pydantic import ValidationError

    from autoresearch.proposers.agents import PRESETS
    from autoresearch.proposers.network import NetworkOptions, proposer_network

    given = campaign.config.proposer.options()
    wanted = {k: given[k] for k in ("network", "allow_hosts") if k in given}
    try:
        options = NetworkOptions.model_validate(wanted)
    except ValidationError as exc:
        problem = exc.errors()[0]
        key = ".".join(str(p) for p in problem["loc"]) or "network"
        raise AutoresearchError(
            f"{campaign.display_path()}: key 'proposer.{key}': {problem['msg']}; fix it."
        ) from None
    hosts = PRESETS[preset].hosts if preset in PRESETS else ()
    return proposer_network(options, confinement, campaign.display_path(), hosts, "the agent")


@contextmanager
def one_session(campaign: Campaign) -> Iterator[None]:
    """The campaign's one sandboxed session: a second would take its TMPDIR (and socket)
    over, so it is refused while the first runs."""
    campaign.state_dir.mkdir(parents=True, exist_ok=True)
    path = campaign.state_dir / SESSION_LOCK
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise AutoresearchError(
                f"campaign '{campaign.name}' has a sandboxed agent session already "
                "(`autoresearch start --agent`); end it first, or use its MCP tools."
            ) from None
        yield
    finally:
        os.close(fd)


def check(campaign: Campaign, command: str) -> None:
    """Refuse, before anything is measured, an agent command that cannot run."""
    preset = preset_of(command)
    agent_network(campaign, preset, confinement_of(campaign))
    with one_session(campaign):
        pass


def run_agent(campaign: Campaign, command: str, config_path: Path | None = None) -> int:
    """Run `command` in the sandbox on the campaign's workspace (already started), serve
    its MCP sessions until it ends, and return its exit code."""
    with one_session(campaign):
        return _session(campaign, command, config_path)


def _session(campaign: Campaign, command: str, config_path: Path | None) -> int:
    preset = preset_of(command)
    workspace = campaign.state_dir / "worktree"
    confinement = confinement_of(campaign)
    logs = campaign.state_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    confined = confinement.prepare(
        workspace,
        os.environ,
        readonly=_interpreter(campaign.root),
        writable=AGENT_STATE.get(preset or "", ()),
        network=agent_network(campaign, preset, confinement),
        log=logs / NETWORK_LOG,
        purpose="agent",
    )
    tmpdir = confined.description_file.parent
    socket_path = tmpdir / SOCKET_NAME
    relay_file = tmpdir / RELAY_NAME
    config_file = tmpdir / CONFIG_NAME
    shutil.copyfile(relay.__file__, relay_file)
    config_file.write_text(json.dumps(mcp_config(socket_path, relay_file), indent=2) + "\n")
    servers = Servers(
        listen(socket_path),
        server_argv(config_path),
        campaign.root,
        logs / SERVER_LOG,
    )
    env = {**confined.env, SOCKET_ENV: str(socket_path), CONFIG_ENV: str(config_file)}
    try:
        with confined:
            return _run(
                confined, agent_command(command, preset, config_file), env, workspace, servers
            )
    finally:
        servers.close()
        remove(tmpdir)


def _run(
    confined: Confined, command: str, env: dict[str, str], workspace: Path, servers: Servers
) -> int:
    assert confined.wrap is not None
    read_end, write_end = os.pipe()
    try:
        try:
            argv = confined.wrap(["bash", "-c", command], write_end)
            servers.start()  # blocked in accept(): it holds no lock the child could need
            code = run_attached(
                argv,
                env=env,
                cwd=workspace,
                setup=confined.child_setup,
                pass_fds=(write_end,),
                started=servers.sandbox_started,
            )
        finally:
            os.close(write_end)
        status = drain(read_end)
    finally:
        os.close(read_end)
    if code == 1 and SANDBOX_EXITED not in status:
        raise AutoresearchError(
            "the agent's sandbox could not be set up (bubblewrap failed before starting it); "
            "`autoresearch check` says what the sandbox needs."
        )
    return code


def _objects(root: Path) -> Path | None:
    from autoresearch.gitcmd import Git

    try:
        out = Git(root).run("rev-parse", "--git-path", "objects").strip()
    except AutoresearchError:
        return None
    return (root / out).resolve()


def _interpreter(root: Path) -> tuple[Path, ...]:
    """The engine's interpreter, which runs the relay: shown read-only when it lives in
    the hidden checkout (a `.venv` there)."""
    prefix = Path(sys.prefix).resolve()
    return (prefix,) if prefix.is_relative_to(root.resolve()) else ()
