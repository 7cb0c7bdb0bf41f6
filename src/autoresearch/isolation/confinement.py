"""The sandbox around the commands a proposer runs (an agent CLI, a script).

A proposer edits its workspace and nothing else. Inside the sandbox it sees the machine
read-only as the user does, minus the user's checkout (which holds `.autoresearch/`: the
ledger, logs, the measurement folder) and the credential folders; it writes only its
workspace, a private TMPDIR (where it may leave its description) and the folders its tool
keeps its own state in (`~/.claude` for Claude Code, say). It reads the user's object
store (the workspace's git borrows it), the shared paths and its prompt. The network stays
on (agents call their model), every process it starts dies with the attempt, and its
environment is an allowlist: the sandbox's own plus the names agents read their keys and
proxies from, plus `[proposer] pass_env`.

Without a sandbox (`isolation = "none"`, or none available) only the environment
allowlist holds; the engine then watches the user's checkout while the proposer runs.
"""

from __future__ import annotations

import os
import sys
import sysconfig
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from autoresearch.errors import ConfigError
from autoresearch.isolation import relay
from autoresearch.isolation.gpu import configured_devices
from autoresearch.isolation.process import Launch, Wrapper
from autoresearch.isolation.proxy import ANY_HOST, ProposerNetwork, Proxy, Tally
from autoresearch.isolation.sandbox import (
    NoSandbox,
    Sandbox,
    allowed_env,
    choose_sandbox,
    engine_boundary,
    fresh_tmpdir,
    shared_paths,
    user_paths,
)

# Where coding agents and the proxies in front of them read their settings and keys.
AGENT_ENV_PREFIXES = (
    "ANTHROPIC_",
    "CLAUDE_",
    "OPENAI_",
    "AZURE_OPENAI_",
    "CODEX_",
    "GEMINI_",
    "GOOGLE_GENAI_",
    "AIDER_",
    "OLLAMA_",
    "AWS_BEDROCK_",
    "VERTEX_",
)
AGENT_ENV_NAMES = (
    "GOOGLE_API_KEY",
    "GOOGLE_CLOUD_PROJECT",
    "GOOGLE_CLOUD_LOCATION",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "OPENROUTER_API_KEY",
    "DEEPSEEK_API_KEY",
    "MISTRAL_API_KEY",
    "GROQ_API_KEY",
    "XAI_API_KEY",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "all_proxy",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
)

# What each agent preset's CLI writes besides the workspace (created when missing, so
# that the tool does not fail on a read-only home).
# Claude Code saves ~/.claude.json by a temporary file and a rename, which a read-only home
# refuses; it then writes the (bound, writable) file in place, which is what happens here.
AGENT_STATE = {
    "claude": ("~/.claude", "~/.claude.json", "~/.config/claude", "~/.local/state/claude"),
    "codex": ("~/.codex",),
    "gemini": ("~/.gemini",),
    "aider": ("~/.aider",),
}

DESCRIPTION_NAME = "description.txt"
PROXY_SOCKET = "proxy.sock"  # in the private TMPDIR: the engine's proxy listens there


def agent_env(env: Mapping[str, str], pass_env: Iterable[str]) -> dict[str, str]:
    """`env` reduced to the allowlist, the agents' own names and `pass_env`."""
    names = {k for k in env if k.startswith(AGENT_ENV_PREFIXES) or k in AGENT_ENV_NAMES}
    return allowed_env(env, [*names, *pass_env])


def home_paths(patterns: Iterable[str]) -> tuple[Path, ...]:
    return tuple(Path(os.path.expanduser(p)) for p in patterns)


@dataclass(frozen=True)
class Confined:
    """One proposer command, ready to start: its environment, the wrapper that puts it in
    the sandbox (None: it runs as it is), and where it may leave its description."""

    env: dict[str, str]
    wrap: Wrapper | None
    description_file: Path
    child_setup: Callable[[], None] | None = None  # the sandbox's step before exec
    proxy: Proxy | None = None  # network = "allow": the engine's proxy, listening
    # The same restrictions without Python before exec (`run_command`'s `launch`).
    launch: Launch | None = None

    def close(self) -> Tally:
        """After the command: the proxy stopped, and what it allowed and refused."""
        if self.proxy is None:
            return Tally()
        self.proxy.close()
        return self.proxy.tally

    def __enter__(self) -> Confined:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


@dataclass(frozen=True)
class Confinement:
    """How the commands of a proposer are confined; built once per campaign run."""

    sandbox: Sandbox = field(default_factory=NoSandbox)
    state_dir: Path | None = None  # `.autoresearch/<name>`: the private TMPDIR lives here
    root: Path | None = None  # the user's checkout: hidden
    objects: Path | None = None  # the user's object store: readable
    share: tuple[Path, ...] = ()  # shared paths of the checkout: readable
    deny_read: tuple[Path, ...] = ()
    writable: tuple[Path, ...] = ()  # `[sandbox] writable`
    home_readable: tuple[str, ...] = ()  # `[sandbox] home_readable`
    devices: tuple[Path, ...] = ()  # `[sandbox] devices`, resolved: the nodes shown

    @property
    def isolating(self) -> bool:
        return not isinstance(self.sandbox, NoSandbox)

    def prepare(
        self,
        workspace: Path,
        env: Mapping[str, str],
        *,
        readonly: Iterable[Path] = (),
        writable: Iterable[str] = (),
        pass_env: Iterable[str] = (),
        network: ProposerNetwork = ANY_HOST,
        log: Path | None = None,
        purpose: str = "proposer",
    ) -> Confined:
        """Confine one command that runs in `workspace`. `readonly` are files it must read
        (its prompt), `writable` what its tool needs beyond the workspace (`~`-paths). Its
        private TMPDIR is in `state_dir`, else beside the workspace, named for `purpose`
        (a proposer's, or a sandboxed agent's session, which may run beside one). Under
        `network` "allow" the engine's proxy is started here, writing what it refuses to
        `log`; `Confined.close` stops it once the command has ended."""
        folder = self.state_dir or workspace.parent
        tmpdir = fresh_tmpdir(folder / f".{workspace.name}-{purpose}-tmp")
        description = tmpdir / DESCRIPTION_NAME
        reduced = agent_env(env, pass_env)
        if not self.isolating:
            if network.mode != "on":  # refused at start (`require_sandbox`); never degraded
                raise ConfigError(f"[proposer] network = {network.mode!r} needs bubblewrap")
            return Confined(reduced, None, description)
        extra = home_paths(writable)
        for path in extra:  # a tool fails on a read-only home when its folder is missing
            if not path.suffix and not os.path.lexists(path):
                path.mkdir(parents=True, exist_ok=True)
        objects = (self.objects,) if self.objects is not None else ()
        boundary = engine_boundary(
            workspace,
            tmpdir,
            self.root or workspace,
            reduced,
            path_env=env.get("PATH", ""),
            deny_read=self.deny_read,
            readonly=(*objects, *self.share, *readonly, *relay_paths(network)),
            writable=(*self.writable, *(p.resolve() for p in extra)),
            network=network.mode == "on",
            home_readable=self.home_readable,
            devices=self.devices,
        )
        sandbox = self.sandbox
        proxy = None
        if network.mode == "allow":
            proxy = Proxy(tmpdir / PROXY_SOCKET, network, log)
            proxy.start()
        around = relay_argv(tmpdir / PROXY_SOCKET) if proxy is not None else []

        def wrap(argv: list[str], status_fd: int) -> list[str]:
            return sandbox.command([*around, *argv], boundary, status_fd)

        return Confined(
            sandbox.environment(boundary),
            wrap,
            description,
            sandbox.child_setup(),
            proxy,
            sandbox.launcher(),
        )


def relay_argv(socket_path: Path) -> list[str]:
    """The relay around a command (`relay.py`), run by the engine's interpreter in isolated
    mode: the standard library is all it needs."""
    python = os.path.realpath(sys.executable)
    return [python, "-I", "-S", str(relay_file()), str(socket_path), "--"]


def relay_file() -> Path:
    return Path(relay.__file__).resolve()


def relay_paths(network: ProposerNetwork) -> tuple[Path, ...]:
    """What the relay needs to read, shown read-only in case a hidden folder holds it (an
    interpreter or this package inside the checkout, say)."""
    if network.mode != "allow":
        return ()
    found = [relay_file(), Path(os.path.realpath(sys.executable))]
    for key in ("stdlib", "platstdlib"):
        found.append(Path(sysconfig.get_paths()[key]).resolve())
    libdir = sysconfig.get_config_var("LIBDIR")
    if sysconfig.get_config_var("Py_ENABLE_SHARED") and libdir:
        found.append(Path(libdir).resolve())
    return tuple(dict.fromkeys(found))


def require_sandbox(network: ProposerNetwork, confinement: Confinement, source: str) -> None:
    """`network` "off" or "allow" holds only inside the sandbox: refused without it (one
    sentence, at start), never run with the network open instead."""
    if network.mode == "on" or confinement.isolating:
        return
    raise ConfigError(
        f"{source}: key 'proposer.network': {network.mode!r} is enforced by the sandbox, and "
        'the proposer runs without one here ([sandbox] isolation is "none" or bubblewrap '
        'is missing); install bubblewrap, or set network = "on" to let it reach any host.'
    )


def confinement_for(
    isolation: str,
    source: str,
    *,
    state_dir: Path,
    root: Path,
    objects: Path | None,
    share: Iterable[str] = (),
    deny_read: Iterable[str] = (),
    writable: Iterable[str] = (),
    home_readable: Iterable[str] = (),
    devices: str | Iterable[str] = "none",
) -> Confinement:
    """The confinement `[sandbox] isolation` asks for ("bwrap" without bubblewrap raises
    ConfigError; "auto" without it confines only the environment: the executor warns).
    `devices` is `[sandbox] devices`: the GPU nodes the proposer's commands see too."""
    sandbox, _warning = choose_sandbox(isolation, source)
    shown = () if isinstance(sandbox, NoSandbox) else configured_devices(devices, source)
    return Confinement(
        sandbox=sandbox,
        state_dir=state_dir,
        root=root,
        objects=objects,
        share=shared_paths(root, share),
        deny_read=user_paths(deny_read),
        writable=user_paths(writable),
        home_readable=tuple(home_readable),
        devices=shown,
    )
