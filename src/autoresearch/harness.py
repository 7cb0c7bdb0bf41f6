"""Run a command the way the engine trusts: own process group, timeout, bounded logs.

Also reads the number a metric printed and fingerprints the harness files.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

LOG_CAP_BYTES = 4 * 1024 * 1024  # per stream: half head, half tail
KILL_GRACE_SECONDS = 2.0
NUMBER_RE = re.compile(
    r"(?<![\w.])[-+]?(?:(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|nan|inf(?:inity)?)(?![\w])",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Limits:
    memory_mb: int = 0
    cpu_seconds: int = 0
    network: bool = True

    def preexec(self) -> Callable[[], None] | None:
        if not self.memory_mb and not self.cpu_seconds:
            return None
        memory = self.memory_mb * 1024 * 1024
        cpu = self.cpu_seconds

        def apply() -> None:
            import resource

            if memory:
                resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
            if cpu:
                resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))

        return apply

    def argv(self, command: str) -> list[str]:
        if self.network:
            return ["bash", "-c", command]
        extra = [] if os.geteuid() == 0 else ["--map-root-user"]
        return ["unshare", "--net", *extra, "bash", "-c", command]


def network_isolation_problem() -> str | None:
    """Why commands cannot run without network here, or None when they can."""
    import shutil

    if shutil.which("unshare") is None:
        return "the unshare command is not installed (util-linux)"
    argv = Limits(network=False).argv("true")
    proc = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        return proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "unshare failed"
    return None


@dataclass(frozen=True)
class CommandResult:
    returncode: int | None
    timed_out: bool
    seconds: float
    stdout_path: Path
    stderr_path: Path

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out

    def stdout_text(self) -> str:
        return _read_text(self.stdout_path)

    def stderr_tail(self, lines: int = 1) -> str:
        text = _read_text(self.stderr_path).strip().splitlines()
        return " | ".join(line.strip() for line in text[-lines:] if line.strip())[:400]


def _read_text(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8", errors="replace")
    except OSError:
        return ""


class _Pump(threading.Thread):
    """Copies a pipe to a file, keeping the first and last `cap/2` bytes only."""

    def __init__(self, source: BinaryIO, dest: Path, cap: int) -> None:
        super().__init__(daemon=True)
        self.source = source
        self.dest = dest
        self.head_limit = cap // 2
        self.tail_limit = cap - self.head_limit
        self.total = 0

    def run(self) -> None:
        tail: deque[bytes] = deque()
        tail_size = 0
        with open(self.dest, "wb") as out:
            while True:
                try:
                    chunk = self.source.read1(65536)  # type: ignore[attr-defined]
                except (OSError, ValueError):
                    break
                if not chunk:
                    break
                self.total += len(chunk)
                room = self.head_limit - out.tell() if not tail else 0
                if room > 0:
                    out.write(chunk[:room])
                    chunk = chunk[room:]
                if chunk:
                    tail.append(chunk)
                    tail_size += len(chunk)
                    while tail_size - len(tail[0]) >= self.tail_limit:
                        tail_size -= len(tail.popleft())
            if tail:
                excess = tail_size - self.tail_limit
                if excess > 0:
                    tail[0] = tail[0][excess:]
                    tail_size -= excess
                written = out.tell()
                omitted = self.total - written - tail_size
                if omitted > 0:
                    out.write(f"\n[... {omitted} bytes omitted ...]\n".encode())
                for chunk in tail:
                    out.write(chunk)
        try:
            self.source.close()
        except OSError:
            pass


def _kill_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


class ChildRecord:
    """Where the process group of the running command is written down.

    If the engine is killed (SIGKILL leaves no chance to clean up), the command's group
    lives on; the next engine reads the record and kills that group before doing anything.
    """

    path: Path | None = None

    @classmethod
    def use(cls, path: Path | None) -> None:
        cls.path = path

    @classmethod
    def write(cls, pgid: int) -> None:
        if cls.path is not None:
            cls.path.write_text(str(pgid), encoding="utf-8")

    @classmethod
    def clear(cls) -> None:
        if cls.path is not None:
            cls.path.unlink(missing_ok=True)

    @classmethod
    def kill_leftover(cls) -> int | None:
        """Kill the group a killed engine left running; return its id if there was one."""
        if cls.path is None or not cls.path.exists():
            return None
        try:
            pgid = int(cls.path.read_text(encoding="utf-8").strip())
        except (OSError, ValueError):
            pgid = 0
        cls.path.unlink(missing_ok=True)
        if pgid > 1:
            _kill_group(pgid, signal.SIGKILL)
            return pgid
        return None


def run_command(
    command: str,
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout: float,
    stdout_path: Path,
    stderr_path: Path,
    log_cap: int = LOG_CAP_BYTES,
    limits: Limits | None = None,
) -> CommandResult:
    """Run `command` with bash in its own process group; never leave processes behind."""
    stdout_path.parent.mkdir(parents=True, exist_ok=True)
    limits = limits or Limits()
    start = time.monotonic()
    proc = subprocess.Popen(
        limits.argv(command),
        preexec_fn=limits.preexec(),
        cwd=cwd,
        env=dict(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    ChildRecord.write(proc.pid)
    pumps = [
        _Pump(proc.stdout, stdout_path, log_cap),  # type: ignore[arg-type]
        _Pump(proc.stderr, stderr_path, log_cap),  # type: ignore[arg-type]
    ]
    for pump in pumps:
        pump.start()
    timed_out = False
    try:
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=KILL_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                pass
    except BaseException:
        _kill_group(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=KILL_GRACE_SECONDS)
        except BaseException:
            pass
        raise
    finally:
        # Whatever the command left running in its group goes with it.
        _kill_group(proc.pid, signal.SIGKILL)
        proc.wait()
        ChildRecord.clear()
        for pump in pumps:
            pump.join(timeout=5)
            if pump.is_alive():
                # A process that left the group still holds the pipe open.
                try:
                    pump.source.close()
                except OSError:
                    pass
    return CommandResult(
        returncode=None if timed_out else proc.returncode,
        timed_out=timed_out,
        seconds=time.monotonic() - start,
        stdout_path=stdout_path,
        stderr_path=stderr_path,
    )


class MetricParseError(ValueError):
    """The metric output holds no usable number."""


def extract_number(text: str, pattern: str | None) -> float:
    """The number the metric printed: the last match of `pattern`, else the last number."""
    if pattern is not None:
        matches = list(re.finditer(pattern, text, re.MULTILINE))
        if not matches:
            raise MetricParseError(f"no line matched the pattern {pattern!r}")
        raw = matches[-1].group(1)
        if raw is None:
            raise MetricParseError(f"the pattern {pattern!r} matched but its group is empty")
    else:
        numbers = NUMBER_RE.findall(text)
        if not numbers:
            raise MetricParseError("printed no number on stdout")
        raw = numbers[-1]
    return _finite(raw)


METRIC_LINE = re.compile(r"^METRIC\s+([\w.\-/]+)\s*=\s*(\S+)\s*$", re.MULTILINE)


def metric_line(text: str, name: str) -> float:
    """The value of the last `METRIC <name>=<value>` line."""
    found = [value for key, value in METRIC_LINE.findall(text) if key == name]
    if not found:
        names = sorted({key for key, _ in METRIC_LINE.findall(text)})
        seen = f" (it printed: {', '.join(names)})" if names else ""
        raise MetricParseError(f"printed no 'METRIC {name}=...' line{seen}")
    return _finite(found[-1])


def _finite(raw: str) -> float:
    try:
        value = float(raw.strip())
    except ValueError:
        raise MetricParseError(f"printed {raw.strip()!r}, which is not a number") from None
    if not math.isfinite(value):
        raise MetricParseError(f"printed {raw.strip()}, which is not a finite number")
    return value


def value_at(data: object, key: str) -> object:
    """Follow a dotted path (`val.loss`, `history.-1.acc`) through dicts and lists."""
    node = data
    for part in key.split("."):
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif (
            isinstance(node, list)
            and re.fullmatch(r"-?\d+", part)
            and -len(node) <= int(part) < len(node)
        ):
            node = node[int(part)]
        else:
            raise MetricParseError(f"has no key {key!r} (stopped at {part!r})")
    return node


def file_metric(path: Path, key: str | None, pattern: str | None) -> float:
    """A number from a file the metric command wrote: a dotted key, or else its text."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        raise MetricParseError(f"did not write {path.name}") from None
    except OSError as exc:
        raise MetricParseError(f"wrote {path.name}, which cannot be read ({exc})") from None
    if key is None:
        return extract_number(text, pattern)
    suffix = path.suffix.lower()
    try:
        if suffix == ".json":
            import json

            data: object = json.loads(text)
        elif suffix in (".yaml", ".yml"):
            import yaml

            data = yaml.safe_load(text)
        elif suffix == ".toml":
            import tomllib

            data = tomllib.loads(text)
        else:
            raise MetricParseError(f"{path.name}: 'key' needs a .json, .yaml or .toml file")
    except MetricParseError:
        raise
    except Exception as exc:  # any parser's error: the file is malformed
        raise MetricParseError(f"wrote {path.name}, which cannot be parsed ({exc})") from None
    value = value_at(data, key)
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise MetricParseError(f"{path.name}: {key} holds {value!r}, not a number")
    return _finite(str(value))


def read_metric(spec: object, stdout: str, workspace: Path) -> float:
    """The number a metric run produced, from wherever the config says to read it."""
    file = getattr(spec, "file", None)
    name = getattr(spec, "name", None)
    pattern = getattr(spec, "pattern", None)
    if file is not None:
        return file_metric(workspace / file, getattr(spec, "key", None), pattern)
    if name is not None:
        return metric_line(stdout, name)
    return extract_number(stdout, pattern)


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    try:
        if path.is_symlink():
            digest.update(b"symlink:" + os.readlink(path).encode())
            return digest.hexdigest()
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    except FileNotFoundError:
        return "missing"
    return digest.hexdigest()


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()
