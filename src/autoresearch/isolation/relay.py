"""Inside the proposer's sandbox: its one way out to the network.

With `[proposer] network = "allow"` the proposer's sandbox has a network namespace of its
own (only its own loopback) and the engine runs a proxy outside it (`proxy.py`), listening
on a unix socket in the proposer's private TMPDIR. This program runs inside the sandbox
around the proposer's command: it listens on 127.0.0.1 in the sandbox's loopback, carries
each connection to the engine's socket, and starts the command with `HTTPS_PROXY` and its
kin pointing there (`NO_PROXY` cleared). It is the command's parent, so it ends with it,
and everything inside the sandbox ends with it.

It runs as a script of its own (`python -I -S relay.py SOCKET -- COMMAND...`), so it uses
the standard library only: nothing of the package needs to be importable in the sandbox.
The relay decides nothing: whatever runs in the sandbox could replace it; what is allowed
is decided by the proxy, outside.
"""

from __future__ import annotations

import os
import selectors
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Mapping

PROXY_NAMES = ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "https_proxy", "http_proxy", "all_proxy")
NO_PROXY_NAMES = ("NO_PROXY", "no_proxy")
CHUNK = 65536  # bytes read at a time: the most a pump holds
IDLE_SECONDS = 600.0  # a connection with no byte either way for this long is closed
MAX_CONNECTIONS = 64
# sun_path holds 108 bytes: a longer path is reached through the folder's descriptor.
SUN_PATH = 100


def proxy_env(env: Mapping[str, str], port: int) -> dict[str, str]:
    """`env` with every proxy variable pointing at the relay and no exceptions to it."""
    url = f"http://127.0.0.1:{port}"
    out = {k: v for k, v in env.items() if k not in NO_PROXY_NAMES}
    out.update(dict.fromkeys(PROXY_NAMES, url))
    return out


def unix_address(path: str) -> tuple[str, int | None]:
    """An address for the socket at `path` that fits in sun_path, and the descriptor of its
    folder to close after use (None: the path fits as it is)."""
    if len(os.fsencode(path)) < SUN_PATH:
        return path, None
    folder, name = os.path.split(path)
    fd = os.open(folder or ".", os.O_PATH | os.O_DIRECTORY)
    return f"/proc/self/fd/{fd}/{name}", fd


def connect_unix(path: str, timeout: float) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    address, fd = unix_address(path)
    try:
        sock.settimeout(timeout)
        sock.connect(address)
    except OSError:
        sock.close()
        raise
    finally:
        if fd is not None:
            os.close(fd)
    return sock


def pump(a: socket.socket, b: socket.socket, idle: float = IDLE_SECONDS) -> None:
    """Copy bytes both ways between `a` and `b` until both ends are done, an error, or
    `idle` seconds without a byte either way; then close both. A half-close is passed on.
    Holds at most one chunk: a side that does not read stops the other (back-pressure)."""
    peer = {a: b, b: a}
    selector = selectors.DefaultSelector()
    try:
        for sock in (a, b):
            sock.settimeout(idle)  # sendall to a side that never reads ends too
            selector.register(sock, selectors.EVENT_READ)
        reading = 2
        while reading:
            events = selector.select(idle)
            if not events:
                return
            for key, _ in events:
                source: socket.socket = key.fileobj  # type: ignore[assignment]
                data = source.recv(CHUNK)
                if data:
                    peer[source].sendall(data)
                    continue
                selector.unregister(source)
                reading -= 1
                try:
                    peer[source].shutdown(socket.SHUT_WR)
                except OSError:
                    pass
    except OSError:
        return
    finally:
        selector.close()
        a.close()
        b.close()


def serve(listener: socket.socket, target: str) -> None:
    """Carry every connection made to `listener` to the unix socket `target`."""
    slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
    while True:
        try:
            client, _ = listener.accept()
        except OSError:
            return
        if not slots.acquire(blocking=False):
            client.close()
            continue

        def carry(client: socket.socket = client) -> None:
            try:
                upstream = connect_unix(target, 10.0)
            except OSError:
                client.close()
            else:
                pump(client, upstream)
            finally:
                slots.release()

        threading.Thread(target=carry, daemon=True).start()


USAGE = "usage: relay.py SOCKET -- COMMAND [ARG...]"


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print(USAGE, file=sys.stderr)
        return 2
    target, command = argv[0], argv[2:]
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(MAX_CONNECTIONS)
    port = listener.getsockname()[1]
    threading.Thread(target=serve, args=(listener, target), daemon=True).start()
    child = subprocess.Popen(command, env=proxy_env(os.environ, port))

    def forward(signum: int, _frame: object) -> None:
        child.send_signal(signum)

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, forward)
    code = child.wait()
    return code if code >= 0 else 128 - code  # killed by a signal: as bash says it


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
