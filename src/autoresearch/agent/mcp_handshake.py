"""The MCP server's answer to `initialize`, given before the SDK is imported.

An MCP client starts the server and waits for its answer to `initialize`, often under a
deadline. Importing the official SDK takes most of a second of CPU (its protocol types are
hundreds of pydantic models), longer on a loaded machine. The answer itself depends only on
the server (name, version, capabilities, instructions), the SDK's version and the protocol
version the client asks for, so the answer the SDK gave last time under the same key is
given at once, and the SDK's own answer, when it comes, is dropped; the next requests
queue in the pipe until the SDK serves them.

The SDK reads and writes the standard descriptors, so the handshake sits in front of them
as two pipes: one feeds the SDK the `initialize` line and then the client's bytes; the
other carries the SDK's output to the client, leaving out the one answer already given.
The SDK's answer is checked against the one given; when they differ (a changed SDK at the
same path and size, say) the cache takes the SDK's and the difference is said on stderr.
The first start with a given key has nothing cached and passes the SDK's answer through.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from autoresearch import __version__
from autoresearch.stats.calibration import cache_dir

CACHE_NAME = "mcp-initialize-v1.json"
LINE_LIMIT = 1 << 20  # an `initialize` line longer than this is left to the SDK
OUTPUT_GRACE_SECONDS = 5.0


def sdk_key() -> str | None:
    """What identifies the installed SDK without importing it: its location, size and
    modification time; None without the SDK."""
    try:
        spec = importlib.util.find_spec("mcp")
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None:
        return None
    try:
        info = os.stat(spec.origin)
    except OSError:
        return None
    return f"{spec.origin}:{info.st_size}:{info.st_mtime_ns}"


def _server_key() -> str:
    """What identifies the server's own side of the answer (its name, version,
    instructions and tools live in `mcp_server`): that module's size and modification
    time, and the package's version."""
    try:
        info = (Path(__file__).parent / "mcp_server.py").stat()
    except OSError:
        return __version__
    return f"{__version__}:{info.st_size}:{info.st_mtime_ns}"


def answer_key(sdk: str, request: dict[str, Any]) -> str:
    """The cache key of one `initialize` answer: everything that answer depends on."""
    params = request.get("params")
    asked = params.get("protocolVersion") if isinstance(params, dict) else None
    return f"{sdk}|{_server_key()}|{asked!r}"


def _cache_path() -> Path:
    return cache_dir() / CACHE_NAME


def _read_cache() -> dict[str, Any]:
    try:
        data = json.loads(_cache_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_cache(key: str, result: Any) -> None:
    path = _cache_path()
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        merged = {**_read_cache(), key: result}
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".mcp-initialize-")
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(merged, out)
        os.replace(tmp, path)


def _first_line(fd: int) -> tuple[bytes, bytes]:
    """The first line from `fd` (newline included, or all there was at end of input or
    past the limit) and whatever was read after it."""
    data = b""
    while b"\n" not in data and len(data) < LINE_LIMIT:
        chunk = os.read(fd, 65536)
        if not chunk:
            return data, b""
        data += chunk
    line, newline, rest = data.partition(b"\n")
    return line + newline, rest


def _request(line: bytes) -> dict[str, Any] | None:
    """The `initialize` request on the line, or None for anything else."""
    try:
        message = json.loads(line)
    except ValueError:
        return None
    if not isinstance(message, dict) or message.get("method") != "initialize":
        return None
    if "id" not in message:
        return None
    return message


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _feed(source: int, sink: int, first: bytes) -> None:
    """The client's input to the SDK: the line already read, then the rest until the end."""
    try:
        _write_all(sink, first)
        while chunk := os.read(source, 65536):
            _write_all(sink, chunk)
    except OSError:
        pass
    finally:
        os.close(sink)


class _Output:
    """The SDK's output to the client, with its answer to `initialize` checked against the
    one already given (and left out) or, when none was given, passed on and cached."""

    def __init__(
        self, source: int, sink: int, request: dict[str, Any] | None, given: Any, key: str | None
    ) -> None:
        self.source = source
        self.sink = sink
        self.request_id = None if request is None else request["id"]
        self.given = given
        self.key = key

    def run(self) -> None:
        pending = b""
        settled = self.request_id is None
        try:
            while chunk := os.read(self.source, 65536):
                if settled:
                    _write_all(self.sink, chunk)
                    continue
                pending += chunk
                while not settled and b"\n" in pending:
                    line, _, pending = pending.partition(b"\n")
                    settled = self._answer(line + b"\n")
                if settled and pending:
                    _write_all(self.sink, pending)
                    pending = b""
            if pending:
                _write_all(self.sink, pending)
        except OSError:
            pass
        finally:
            os.close(self.source)

    def _answer(self, line: bytes) -> bool:
        """Pass `line` on unless it is the answer already given; whether it was the answer."""
        try:
            message = json.loads(line)
        except ValueError:
            message = None
        if not isinstance(message, dict) or message.get("id") != self.request_id:
            _write_all(self.sink, line)
            return False
        if "result" not in message:
            # An error is the SDK's to say, and nothing is cached from it.
            if self.given is None:
                _write_all(self.sink, line)
            return True
        if self.given is None:
            _write_all(self.sink, line)
        elif message["result"] != self.given:
            sys.stderr.write(
                "autoresearch mcp: the SDK's answer to initialize differs from the one "
                "given from the cache; the cache now holds the SDK's\n"
            )
        if self.key is not None and message["result"] != self.given:
            _write_cache(self.key, message["result"])
        return True


def serve_answering_early(run_sdk: Callable[[], None]) -> None:
    """Run `run_sdk` (which imports the SDK and serves stdio) behind the handshake.

    Without the SDK installed `run_sdk` is run as it is, so its error reaches the user.
    """
    sdk = sdk_key()
    if sdk is None:
        run_sdk()
        return
    line, rest = _first_line(0)
    request = _request(line)
    key = answer_key(sdk, request) if request is not None else None
    given = _read_cache().get(key) if key is not None else None
    client_in, client_out = os.dup(0), os.dup(1)
    if request is not None and given is not None:
        answer = {"jsonrpc": "2.0", "id": request["id"], "result": given}
        _write_all(client_out, json.dumps(answer, separators=(",", ":")).encode() + b"\n")
    sdk_in, feed_in = os.pipe()
    drain_out, sdk_out = os.pipe()
    os.dup2(sdk_in, 0)
    os.dup2(sdk_out, 1)
    os.close(sdk_in)
    os.close(sdk_out)
    feeder = threading.Thread(target=_feed, args=(client_in, feed_in, line + rest), daemon=True)
    output = _Output(drain_out, client_out, request, given, key)
    writer = threading.Thread(target=output.run, daemon=True)
    feeder.start()
    writer.start()
    try:
        run_sdk()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
        # The SDK is done: its end of the pipe closes, so the writer drains what is left.
        os.close(1)
        with contextlib.suppress(OSError):
            os.dup2(2, 1)
        # A process the server started and left running may still hold the pipe.
        writer.join(timeout=OUTPUT_GRACE_SECONDS)
