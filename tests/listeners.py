"""Servers on the host's loopback that keep an account of what reached them: the places a
sandboxed proposer must not reach, and an echo server it may."""

from __future__ import annotations

import os
import socket
import threading
import uuid
from pathlib import Path


class Recorder:
    """A listener (TCP on 127.0.0.1, UDP on 127.0.0.1, or a unix socket: at a path, or
    abstract with a name starting with NUL) that records every connection and every byte."""

    def __init__(self, kind: str = "tcp", address: str = "") -> None:
        self.connections = 0
        self.received = bytearray()
        self._lock = threading.Lock()
        if kind == "tcp":
            self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            self.sock.bind(("127.0.0.1", 0))
        elif kind == "udp":
            self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            self.sock.bind(("127.0.0.1", 0))
        else:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.bind(address)
        self.kind = kind
        self.port = self.sock.getsockname()[1] if kind in ("tcp", "udp") else 0
        if kind != "udp":
            self.sock.listen(16)
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                if self.kind == "udp":
                    data = self.sock.recv(65536)
                    with self._lock:
                        self.connections += 1
                        self.received += data
                    continue
                conn, _ = self.sock.accept()
            except OSError:
                return
            with self._lock:
                self.connections += 1
            threading.Thread(target=self._read, args=(conn,), daemon=True).start()

    def _read(self, conn: socket.socket) -> None:
        conn.settimeout(10)
        with conn:
            try:
                while chunk := conn.recv(65536):
                    with self._lock:
                        self.received += chunk
            except OSError:
                return

    @property
    def untouched(self) -> bool:
        with self._lock:
            return self.connections == 0 and not self.received

    def close(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


class Echo:
    """A TCP server on 127.0.0.1 that sends back what it reads, prefixed with `echo:`."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._echo, args=(conn,), daemon=True).start()

    def _echo(self, conn: socket.socket) -> None:
        with conn:
            try:
                while chunk := conn.recv(65536):
                    conn.sendall(b"echo:" + chunk)
            except OSError:
                return

    def close(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


def short_socket_dir() -> Path:
    """A folder under /tmp for a unix socket whose path must fit in sun_path."""
    import tempfile

    return Path(tempfile.mkdtemp(prefix="ar-sock-", dir="/tmp"))


def abstract_name() -> str:
    # Unique per call: a process forked during an earlier test of the same worker may
    # still hold that test's listener, name and all, after the test closed its own copy.
    return f"\0autoresearch-test-{os.getpid()}-{uuid.uuid4().hex}"
