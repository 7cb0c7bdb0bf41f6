"""The proxy a proposer's network goes through under `network = "allow"`, attacked in
process: it carries what `allow_hosts` admits to real loopback servers, and a server it does
not admit receives nothing, whatever form the request takes; it is bounded."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from autoresearch.isolation.proxy import (
    Allowed,
    ProposerNetwork,
    Proxy,
    network_of,
    parse_allowed,
)
from autoresearch.isolation.relay import connect_unix, proxy_env
from listeners import Echo, Recorder


@pytest.fixture
def echo() -> Iterator[Echo]:
    server = Echo()
    yield server
    server.close()


@pytest.fixture
def other() -> Iterator[Recorder]:
    server = Recorder()
    yield server
    server.close()


def proxy_for(tmp_path: Path, *hosts: str, **limits: float) -> Proxy:
    proxy = Proxy(tmp_path / "proxy.sock", network_of("allow", hosts), tmp_path / "net.log")
    for key, value in limits.items():
        setattr(proxy, key, value)
    proxy.start()
    return proxy


def ask(proxy: Proxy, request: bytes, *, wait: float = 5) -> tuple[socket.socket, bytes]:
    """Send `request` to the proxy; the connection and what came back first."""
    sock = connect_unix(str(proxy.path), wait)
    sock.sendall(request)
    return sock, _read_reply(sock)


def _read_reply(sock: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def settled(recorder: Recorder) -> bool:
    time.sleep(0.2)  # anything on its way has landed
    return recorder.untouched


# -- the allowlist ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("entry", "host", "port"),
    [
        ("api.openai.com", "api.openai.com", 443),
        ("API.Anthropic.com.", "api.anthropic.com", 443),
        ("127.0.0.1:8080", "127.0.0.1", 8080),
        ("[::1]:8080", "::1", 8080),
        ("[0:0::1]", "::1", 443),
        ("*.openai.azure.com", "*.openai.azure.com", 443),
    ],
)
def test_an_entry_is_a_host_and_a_port(entry: str, host: str, port: int) -> None:
    assert parse_allowed(entry) == Allowed(host, port)


@pytest.mark.parametrize(
    "entry",
    [
        "https://api.openai.com",
        "api.openai.com/v1",
        "user@host",
        "::1",
        "host:0",
        "host:70000",
        "host:http",
        "",
        "a..b",
        "-bad.example",
        "api.*.com",
        "*",
        "[::1",
        "[nothost]:1",
    ],
)
def test_an_entry_that_is_not_a_host_is_refused(entry: str) -> None:
    with pytest.raises(ValueError):
        parse_allowed(entry)


def test_a_pattern_admits_the_names_below_it_and_not_itself() -> None:
    network = network_of("allow", ["*.example.com:443"])
    assert network.admits("a.example.com", 443) and network.admits("a.b.example.com", 443)
    assert not network.admits("example.com", 443)
    assert not network.admits("evilexample.com", 443)
    assert not network.admits("a.example.com", 80)


# -- what it carries ----------------------------------------------------------------------


def test_connect_to_an_allowed_host_is_a_tunnel(tmp_path: Path, echo: Echo) -> None:
    proxy = proxy_for(tmp_path, f"127.0.0.1:{echo.port}")
    try:
        sock, reply = ask(proxy, f"CONNECT 127.0.0.1:{echo.port} HTTP/1.1\r\n\r\n".encode())
        assert reply.startswith(b"HTTP/1.1 200")
        sock.sendall(b"ping")
        assert sock.recv(100) == b"echo:ping"
        sock.close()
    finally:
        proxy.close()
    assert proxy.tally.allowed == 1 and proxy.tally.refused == 0
    assert f"CONNECT 127.0.0.1:{echo.port}" in (tmp_path / "net.log").read_text()


def test_the_proxy_resolves_an_allowed_name_itself(tmp_path: Path, echo: Echo) -> None:
    proxy = proxy_for(tmp_path, f"localhost:{echo.port}")
    try:
        sock, reply = ask(proxy, f"CONNECT localhost:{echo.port} HTTP/1.1\r\n\r\n".encode())
        assert reply.startswith(b"HTTP/1.1 200")
        sock.sendall(b"x")
        assert sock.recv(100) == b"echo:x"
        sock.close()
    finally:
        proxy.close()


def test_a_plain_http_request_goes_on_in_origin_form_one_per_connection(
    tmp_path: Path, other: Recorder
) -> None:
    proxy = proxy_for(tmp_path, f"127.0.0.1:{other.port}")
    request = (
        f"POST http://127.0.0.1:{other.port}/v1/chat?x=1 HTTP/1.1\r\n"
        f"Host: 127.0.0.1:{other.port}\r\nProxy-Connection: keep-alive\r\n"
        "Proxy-Authorization: Basic c2VjcmV0\r\nContent-Length: 4\r\n\r\nbody"
    ).encode()
    try:
        sock = connect_unix(str(proxy.path), 5)
        sock.sendall(request)
        time.sleep(0.3)
        sock.close()
    finally:
        proxy.close()
    sent = bytes(other.received)
    assert sent.startswith(b"POST /v1/chat?x=1 HTTP/1.1\r\n")
    assert b"Connection: close\r\n" in sent and sent.endswith(b"\r\n\r\nbody")
    assert b"Proxy-" not in sent


# -- what it refuses: the other server receives nothing -----------------------------------


@pytest.mark.parametrize(
    "form",
    [
        "CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n",
        "CONNECT localhost:{port} HTTP/1.1\r\n\r\n",
        "CONNECT [::ffff:127.0.0.1]:{port} HTTP/1.1\r\n\r\n",
        "GET http://127.0.0.1:{port}/ HTTP/1.1\r\nHost: 127.0.0.1:{allowed}\r\n\r\n",
        "GET http://127.0.0.1:{allowed}@127.0.0.1:{port}/ HTTP/1.1\r\n\r\n",
        "GET http://127.0.0.1/ HTTP/1.1\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n",
        "CONNECT 127.0.0.1:{port}\r\n\r\n",
        "CONNECT *.0.0.1:{port} HTTP/1.1\r\n\r\n",
    ],
)
def test_a_host_not_allowed_receives_nothing(
    tmp_path: Path, echo: Echo, other: Recorder, form: str
) -> None:
    proxy = proxy_for(tmp_path, f"127.0.0.1:{echo.port}")
    request = form.format(port=other.port, allowed=echo.port).encode()
    try:
        sock, reply = ask(proxy, request)
        assert reply.startswith((b"HTTP/1.1 403", b"HTTP/1.1 400")), reply
        try:
            sock.sendall(b"data after the refusal")
        except OSError:
            pass  # closed already
        sock.close()
    finally:
        proxy.close()
    assert settled(other)
    assert echo.connections == 0  # the allowed server is not a way round either


def test_a_refusal_is_counted_logged_and_named_safely(tmp_path: Path, other: Recorder) -> None:
    proxy = proxy_for(tmp_path, "api.example.com")
    try:
        for target in (f"127.0.0.1:{other.port}", "evil.example:443", f"127.0.0.1:{other.port}"):
            sock, reply = ask(proxy, f"CONNECT {target} HTTP/1.1\r\n\r\n".encode())
            assert reply.startswith(b"HTTP/1.1 403")
            sock.close()
    finally:
        proxy.close()
    assert proxy.tally.refused == 3 and proxy.tally.allowed == 0
    assert proxy.tally.refused_targets == [f"127.0.0.1:{other.port}", "evil.example:443"]
    log = (tmp_path / "net.log").read_text()
    assert "refused CONNECT evil.example:443" in log and "refused 3 in all" in log
    assert settled(other)


def test_a_head_past_its_bound_is_refused(tmp_path: Path, other: Recorder) -> None:
    proxy = proxy_for(tmp_path, f"127.0.0.1:{other.port}")
    try:
        sock = connect_unix(str(proxy.path), 5)
        head = f"CONNECT 127.0.0.1:{other.port} HTTP/1.1\r\n".encode() + b"X: " + b"a" * 40000
        try:
            sock.sendall(head)
        except OSError:
            pass  # closed on us while sending: refused as well
        reply = _read_reply(sock)
        assert reply == b"" or reply.startswith(b"HTTP/1.1 400")
        sock.close()
    finally:
        proxy.close()
    assert settled(other)


def test_connections_beyond_the_bound_are_turned_away(tmp_path: Path, echo: Echo) -> None:
    proxy = Proxy(tmp_path / "p.sock", network_of("allow", [f"127.0.0.1:{echo.port}"]),
                  max_connections=2)  # fmt: skip
    proxy.start()
    try:
        held = [ask(proxy, f"CONNECT 127.0.0.1:{echo.port} HTTP/1.1\r\n\r\n".encode())[0]
                for _ in range(2)]  # fmt: skip
        # Turned away on arrival, before any request is read: a request sent now may meet
        # a closed connection, so the answer is read without sending one.
        sock = connect_unix(str(proxy.path), 5)
        reply = _read_reply(sock)
        assert reply.startswith(b"HTTP/1.1 503")
        for each in (*held, sock):
            each.close()
    finally:
        proxy.close()


def test_an_idle_tunnel_and_a_silent_client_are_closed(tmp_path: Path, echo: Echo) -> None:
    proxy = proxy_for(tmp_path, f"127.0.0.1:{echo.port}", idle=0.5, head_seconds=0.5)
    try:
        tunnel, reply = ask(proxy, f"CONNECT 127.0.0.1:{echo.port} HTTP/1.1\r\n\r\n".encode())
        assert reply.startswith(b"HTTP/1.1 200")
        silent = connect_unix(str(proxy.path), 5)
        tunnel.settimeout(5)
        silent.settimeout(5)
        began = time.monotonic()
        assert tunnel.recv(10) == b""  # closed by the proxy, not by us
        assert silent.recv(1000).startswith((b"HTTP/1.1 400", b""))
        assert time.monotonic() - began < 4
    finally:
        proxy.close()


def test_a_head_sent_a_byte_at_a_time_is_cut_at_its_time(tmp_path: Path, echo: Echo) -> None:
    proxy = proxy_for(tmp_path, f"127.0.0.1:{echo.port}", head_seconds=1.0)
    try:
        sock = connect_unix(str(proxy.path), 5)
        began = time.monotonic()
        reply = b""
        for byte in b"CONNECT 127.0.0.1:1 HTTP/1.1\r\nX-Slow: " + b"a" * 100:
            try:
                sock.sendall(bytes([byte]))
            except OSError:
                break
            sock.settimeout(0.3)
            try:
                reply = sock.recv(1000)
            except TimeoutError:
                continue
            break
        assert reply.startswith(b"HTTP/1.1 400") and time.monotonic() - began < 10
        sock.close()
    finally:
        proxy.close()
    assert echo.connections == 0


def test_closing_the_proxy_ends_its_tunnels(tmp_path: Path, echo: Echo) -> None:
    proxy = proxy_for(tmp_path, f"127.0.0.1:{echo.port}")
    tunnel, reply = ask(proxy, f"CONNECT 127.0.0.1:{echo.port} HTTP/1.1\r\n\r\n".encode())
    assert reply.startswith(b"HTTP/1.1 200")
    proxy.close()
    tunnel.settimeout(5)
    assert tunnel.recv(10) == b""
    with pytest.raises(OSError):
        connect_unix(str(proxy.path), 2)


def test_a_socket_path_longer_than_sun_path_works(tmp_path: Path, echo: Echo) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    proxy = Proxy(deep / "proxy.sock", network_of("allow", [f"127.0.0.1:{echo.port}"]))
    assert len(str(proxy.path)) > 108
    with proxy:
        sock, reply = ask(proxy, f"CONNECT 127.0.0.1:{echo.port} HTTP/1.1\r\n\r\n".encode())
        assert reply.startswith(b"HTTP/1.1 200")
        sock.close()


def test_the_relay_points_every_proxy_variable_at_itself() -> None:
    env = proxy_env({"NO_PROXY": "*", "no_proxy": "localhost", "HTTPS_PROXY": "http://x"}, 4321)
    assert "NO_PROXY" not in env and "no_proxy" not in env
    for name in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "https_proxy", "http_proxy"):
        assert env[name] == "http://127.0.0.1:4321"


def test_what_check_says_of_each_mode() -> None:
    assert "any host" in ProposerNetwork("on").text()
    assert "no network" in ProposerNetwork("off").text()
    allowed = network_of("allow", ["api.anthropic.com", "127.0.0.1:8080"]).text()
    assert allowed.startswith("only api.anthropic.com:443, 127.0.0.1:8080")
