"""The proposer's network under `[proposer] network = "allow"`: a proxy the engine runs.

The proposer's sandbox then has a network namespace of its own (its own loopback only: no
route out, no DNS, no host service, no abstract unix socket of the host). Its one way out
is this proxy, which runs in the engine's process, outside the sandbox, and listens on a
unix socket in the proposer's private TMPDIR; inside, `relay.py` carries the command's
proxy connections (HTTPS_PROXY) to it. The proxy allows `CONNECT host:port` and plain-HTTP
requests for an absolute URI to the host:port pairs of `allow_hosts` only, resolving the
names itself; everything else gets 403 and a line in the attempt's network log, and is
counted. It is bounded: connections at once, the request head's size, idle time; bytes
are copied a chunk at a time, never gathered.

What an allowed host receives is not looked at: an allowed host is one the proposer can
send anything to (the model's API, with a key of its own, included).
"""

from __future__ import annotations

import ipaddress
import os
import re
import socket
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Literal

from autoresearch.isolation.owned import open_own
from autoresearch.isolation.relay import CHUNK, IDLE_SECONDS, pump, unix_address

CONNECT_PORT = 443  # an allow_hosts entry without a port, and CONNECT's usual port
HTTP_PORT = 80  # an absolute http:// URI without a port
MAX_HEAD = 16 * 1024  # bytes of a request's line and headers
MAX_LOG_LINES = 1000
SHOWN_REFUSALS = 5  # distinct refused targets a proposal names

_LABEL = re.compile(r"(?!-)[a-z0-9_-]{1,63}(?<!-)")
_SHOWN = re.compile(r"[^A-Za-z0-9.:_*\[\]-]")


@dataclass(frozen=True)
class Allowed:
    """One `allow_hosts` entry: a host (a name, `*.domain` for the names below it, or an
    address) and a port."""

    host: str
    port: int

    def admits(self, host: str, port: int) -> bool:
        if port != self.port:
            return False
        if self.host.startswith("*."):
            return host.endswith(self.host[1:]) and len(host) > len(self.host) - 1
        return host == self.host

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def split_host_port(text: str, default: int) -> tuple[str, int]:
    """`host`, `host:port`, `[v6]` or `[v6]:port` as a normalised host and a port; raises
    ValueError with what is wrong."""
    text = text.strip()
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            raise ValueError("an IPv6 address opened with '[' is not closed with ']'")
        host, rest = text[1:end], text[end + 1 :]
        if rest and not rest.startswith(":"):
            raise ValueError("only ':port' may follow ']'")
        port_text = rest[1:] if rest else None
        try:
            host = ipaddress.IPv6Address(host).compressed
        except ValueError:
            raise ValueError(f"{host!r} in brackets is not an IPv6 address") from None
    else:
        if text.count(":") > 1:
            raise ValueError("an IPv6 address must be written in brackets, as [::1]:8080")
        host, colon, port_text_found = text.partition(":")
        port_text = port_text_found if colon else None
        host = _host_name(host)
    if port_text is None:
        return host, default
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ValueError(f"port {port_text!r} is not a number from 1 to 65535")
    return host, int(port_text)


def _host_name(text: str) -> str:
    host = text.lower().removesuffix(".")
    if not host:
        raise ValueError("the host is empty")
    try:
        return str(ipaddress.IPv4Address(host))
    except ValueError:
        pass
    labels = host.removeprefix("*.").split(".")
    if len(host) > 253 or not all(_LABEL.fullmatch(label) for label in labels):
        raise ValueError(f"{text!r} is not a host name, an IPv4 address or *.domain")
    return host


def parse_allowed(entry: str) -> Allowed:
    """One `allow_hosts` entry, checked: `api.openai.com`, `api.openai.com:443`,
    `*.example.com`, `127.0.0.1:8080`, `[::1]:8080` (no port: 443)."""
    if "/" in entry or "@" in entry:
        raise ValueError(
            f"{entry!r} is not a host; give a host name or host:port, "
            "such as 'api.openai.com' or '127.0.0.1:8080'"
        )
    host, port = split_host_port(entry, CONNECT_PORT)
    if "*" in host and not (host.startswith("*.") and "*" not in host[2:]):
        raise ValueError(f"{entry!r}: '*' may only start a name, as in '*.example.com'")
    return Allowed(host, port)


NetworkMode = Literal["on", "off", "allow"]


@dataclass(frozen=True)
class ProposerNetwork:
    """What the commands of a proposer may reach: any host ("on"), nothing ("off"), or the
    `hosts` through the engine's proxy ("allow")."""

    mode: NetworkMode = "on"
    hosts: tuple[Allowed, ...] = ()

    def admits(self, host: str, port: int) -> bool:
        return any(allowed.admits(host, port) for allowed in self.hosts)

    def text(self) -> str:
        """As `check` and the start say it."""
        if self.mode == "on":
            return 'any host (network = "on"): the proposer can reach any host'
        if self.mode == "off":
            return 'no network (network = "off")'
        shown = ", ".join(str(h) for h in self.hosts)
        return f'only {shown} (network = "allow", through the engine\'s proxy)'


ANY_HOST = ProposerNetwork()


def shown(target: str) -> str:
    """A target the proposer named, safe to print: other characters become '?'."""
    return _SHOWN.sub("?", target[:200])


@dataclass
class Tally:
    """What a proxy allowed and refused, for the attempt's account."""

    allowed: int = 0
    refused: int = 0
    refused_targets: list[str] = field(default_factory=list)  # distinct, the first few


class _Refused(Exception):
    def __init__(self, status: str, why: str) -> None:
        super().__init__(why)
        self.status = status


class Proxy:
    """An HTTP proxy on the unix socket `path` that lets through only what `network`
    admits; refusals and tunnels are written to `log`. `start` before the command, `close`
    after it."""

    def __init__(
        self,
        path: Path,
        network: ProposerNetwork,
        log: Path | None = None,
        *,
        max_connections: int = 64,
        idle: float = IDLE_SECONDS,
        head_seconds: float = 30.0,
        connect_seconds: float = 15.0,
    ) -> None:
        self.path = path
        self.network = network
        self.log_path = log
        self.idle = idle
        self.head_seconds = head_seconds
        self.connect_seconds = connect_seconds
        self.tally = Tally()
        self._slots = threading.BoundedSemaphore(max_connections)
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._log: BinaryIO | None = None
        self._lines = 0
        self._listener: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._closed = False

    def start(self) -> None:
        if self.log_path is not None:
            self._log = open_own(self.log_path)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        address, fd = unix_address(str(self.path))
        try:
            listener.bind(address)
            listener.listen(64)
        except OSError:
            listener.close()
            raise
        finally:
            if fd is not None:
                os.close(fd)
        self._listener = listener
        self._note(f"allowed: {', '.join(str(h) for h in self.network.hosts)}")
        self._thread = threading.Thread(target=self._accept, name="proposer-proxy", daemon=True)
        self._thread.start()

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            listener, live = self._listener, list(self._open)
        if listener is not None:
            try:
                listener.shutdown(socket.SHUT_RDWR)  # wakes accept()
            except OSError:
                pass
            listener.close()
        for sock in live:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self._thread is not None:
            self._thread.join(timeout=2)
        with self._lock:
            if self._log is not None:
                if self.tally.refused:
                    self._write(f"refused {self.tally.refused} in all")
                self._log.close()
                self._log = None

    def __enter__(self) -> Proxy:
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # -- connections ---------------------------------------------------------------------

    def _accept(self) -> None:
        assert self._listener is not None
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if not self._slots.acquire(blocking=False):
                self._answer(client, "503 Service Unavailable", "too many connections at once")
                client.close()
                continue
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        upstream: socket.socket | None = None
        try:
            if not self._track(client):
                client.close()
                return
            try:
                head, early = _read_head(client, self.head_seconds)
                method, host, port, forward = _request(head)
                target = f"{host}:{port}" if ":" not in host else f"[{host}]:{port}"
                if not self.network.admits(host, port):
                    self._refuse(method, target)
                    raise _Refused("403 Forbidden", f"{target} is not in [proposer] allow_hosts")
                try:
                    upstream = socket.create_connection((host, port), self.connect_seconds)
                except OSError as exc:
                    self._note(f"{method} {shown(target)}: cannot connect ({exc})")
                    raise _Refused("502 Bad Gateway", f"cannot connect to {target}") from None
            except _Refused as refused:
                self._answer(client, refused.status, str(refused))
                client.close()
                return
            except (OSError, ValueError, EOFError) as exc:
                self._answer(client, "400 Bad Request", str(exc) or "a bad request")
                client.close()
                return
            if not self._track(upstream):
                upstream.close()
                client.close()
                return
            with self._lock:
                self.tally.allowed += 1
            self._note(f"{method} {shown(target)}")
            try:
                if method == "CONNECT":
                    client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                    if early:
                        upstream.sendall(early)
                else:
                    upstream.sendall(forward + early)
            except OSError:
                upstream.close()
                client.close()
                return
            pump(client, upstream, self.idle)
        finally:
            with self._lock:
                self._open.discard(client)
                if upstream is not None:
                    self._open.discard(upstream)
            self._slots.release()

    def _track(self, sock: socket.socket) -> bool:
        with self._lock:
            if self._closed:
                return False
            self._open.add(sock)
            return True

    def _answer(self, client: socket.socket, status: str, why: str) -> None:
        body = f"autoresearch proxy: {why}\n".encode()
        head = (
            f"HTTP/1.1 {status}\r\nContent-Type: text/plain\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        )
        try:
            client.settimeout(5)
            client.sendall(head.encode() + body)
        except OSError:
            pass

    def _refuse(self, method: str, target: str) -> None:
        with self._lock:
            self.tally.refused += 1
            name = shown(target)
            if name not in self.tally.refused_targets and len(self.tally.refused_targets) < (
                SHOWN_REFUSALS
            ):
                self.tally.refused_targets.append(name)
        self._note(f"refused {method} {shown(target)}: not in allow_hosts")

    def _note(self, line: str) -> None:
        with self._lock:
            self._write(line)

    def _write(self, line: str) -> None:
        if self._log is None or self._lines >= MAX_LOG_LINES:
            return
        self._lines += 1
        text = line if self._lines < MAX_LOG_LINES else "(more lines left out)"
        self._log.write(text.encode("utf-8", errors="replace") + b"\n")
        self._log.flush()


def _read_head(sock: socket.socket, seconds: float) -> tuple[bytes, bytes]:
    """The request's line and headers, and what came after them: at most MAX_HEAD bytes,
    within `seconds` in all (a byte now and then does not keep it open)."""
    data = bytearray()
    deadline = time.monotonic() + seconds
    while True:
        end = data.find(b"\r\n\r\n")
        if end >= 0:
            return bytes(data[: end + 4]), bytes(data[end + 4 :])
        if len(data) > MAX_HEAD:
            raise ValueError(f"the request head is longer than {MAX_HEAD} bytes")
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the request head did not come in time")
        sock.settimeout(left)
        chunk = sock.recv(CHUNK if len(data) < MAX_HEAD else 1)
        if not chunk:
            raise EOFError("the connection closed before the request head ended")
        data += chunk


def _no_pattern(host: str) -> str:
    if "*" in host:
        raise ValueError("a request names one host, not a pattern")
    return host


_DROPPED = {b"proxy-connection", b"proxy-authorization", b"connection", b"keep-alive"}


def _request(head: bytes) -> tuple[str, str, int, bytes]:
    """The method, host and port a request asks for, and (plain HTTP) the head to send
    on: origin-form, one request per connection."""
    lines = head[:-4].split(b"\r\n")
    parts = lines[0].decode("latin-1").split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise ValueError("not an HTTP/1.x request line")
    method, target, version = parts
    if method == "CONNECT":
        host, port = split_host_port(target, CONNECT_PORT)
        return method, _no_pattern(host), port, b""
    if not target.lower().startswith("http://"):
        raise ValueError("a proxy request names an absolute http:// URI (or uses CONNECT)")
    rest = target[len("http://") :]
    cut = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
    authority, path = rest[:cut], rest[cut:]
    if "@" in authority:
        raise ValueError("a URI with user information is not forwarded")
    host, port = split_host_port(authority, HTTP_PORT)
    host = _no_pattern(host)
    if not path.startswith("/"):
        path = "/" + path
    kept = [line for line in lines[1:] if line.split(b":", 1)[0].strip().lower() not in _DROPPED]
    forward = b"\r\n".join(
        [f"{method} {path} {version}".encode("latin-1"), *kept, b"Connection: close", b"", b""]
    )
    return method, host, port, forward


def network_of(mode: NetworkMode, entries: Iterable[str]) -> ProposerNetwork:
    """The proposer's network from `[proposer] network` and `allow_hosts` (already checked)."""
    hosts = tuple(dict.fromkeys(parse_allowed(e) for e in entries)) if mode == "allow" else ()
    return ProposerNetwork(mode, hosts)
