"""A stdio <-> unix socket relay: the MCP server a sandboxed agent's client starts.

Inside the sandbox of `autoresearch start --agent`, the agent's MCP client launches this
relay as its `autoresearch` server; the relay copies the client's stdin to the socket the
engine listens on (bound into the sandbox's private TMPDIR) and the socket's answers to
stdout. The MCP server itself runs outside the sandbox, with the engine.

This file imports nothing but the standard library: it is also copied into the sandbox's
TMPDIR and run from there (`python -I relay.py SOCKET`), where the package may not be
importable (an editable install inside the hidden checkout).
"""

from __future__ import annotations

import os
import select
import socket
import sys
from collections.abc import Iterator
from contextlib import contextmanager

# Set inside the sandbox of `start --agent`: the socket the relay connects to, and the MCP
# config that names the relay.
SOCKET_ENV = "AUTORESEARCH_AGENT_SOCKET"
CONFIG_ENV = "AUTORESEARCH_MCP_CONFIG"
# sockaddr_un holds 108 bytes, the terminating zero included.
SUN_PATH_MAX = 107
CHUNK = 65536


@contextmanager
def address(path: str) -> Iterator[str]:
    """A name of the socket at `path` that fits in a sockaddr_un: the path itself, or,
    when it is too long, the path through a descriptor of its folder."""
    if len(os.fsencode(path)) <= SUN_PATH_MAX:
        yield path
        return
    folder, name = os.path.split(path)
    fd = os.open(folder or ".", os.O_PATH | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{fd}/{name}"
    finally:
        os.close(fd)


def connect(path: str) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        with address(path) as name:
            sock.connect(name)
    except OSError:
        sock.close()
        raise
    return sock


def pump(sock: socket.socket, stdin: int = 0, stdout: int = 1) -> None:
    """Copy `stdin` to the socket and the socket to `stdout` until the socket ends; the
    end of `stdin` is passed on as a half-close."""
    reading = True
    peer = sock.fileno()
    while True:
        ready, _, _ = select.select([peer, stdin] if reading else [peer], [], [])
        if stdin in ready:
            data = os.read(stdin, CHUNK)
            if data:
                sock.sendall(data)
            else:
                reading = False
                sock.shutdown(socket.SHUT_WR)
        if peer in ready:
            data = sock.recv(CHUNK)
            if not data:
                return
            view = memoryview(data)
            while view:
                view = view[os.write(stdout, view) :]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        sys.stderr.write("usage: relay.py SOCKET\n")
        return 2
    try:
        sock = connect(args[0])
    except OSError as exc:
        sys.stderr.write(
            f"autoresearch relay: cannot connect to {args[0]} ({exc.strerror}); the "
            "session of `autoresearch start --agent` that serves it has ended.\n"
        )
        return 1
    try:
        pump(sock)
    except (BrokenPipeError, ConnectionResetError):
        return 0
    finally:
        sock.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
