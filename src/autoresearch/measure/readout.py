"""Read the number a metric run produced: from stdout, a `METRIC` line or a file."""

from __future__ import annotations

import math
import os
import re
import stat
from collections import deque
from pathlib import Path

import regex

MAX_FILE_BYTES = 16 * 1024 * 1024  # a metric file larger than this is not a metric file
DEFAULT_BUDGET = 600.0  # seconds a user pattern may take when the caller gives no budget

NUMBER_RE = re.compile(
    r"(?<![\w.])[-+]?(?:(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|nan|inf(?:inity)?)(?![\w])",
    re.IGNORECASE,
)


class MetricParseError(ValueError):
    """The metric output holds no usable number."""


def _last_group(pattern: str, text: str, budget: float) -> list[str | None] | None:
    """The first group of the pattern's last match ([None] if the group took no part),
    None without a match; MetricParseError when matching outlasts `budget` seconds.

    Matched in this process by the `regex` engine, which stops a match at its timeout:
    Python's own cannot be stopped, and a pattern can backtrack for hours. No interpreter
    is started per run."""
    limit = max(budget, 1.0)
    try:
        matches = deque(regex.finditer(pattern, text, regex.MULTILINE, timeout=limit), maxlen=1)
    except TimeoutError:
        raise MetricParseError(
            f"the pattern {pattern!r} was still matching after {limit:.1f} s (the "
            "metric timeout); simplify it, nested repeats like (a+)+ backtrack endlessly"
        ) from None
    except (regex.error, IndexError) as exc:
        raise MetricParseError(f"the pattern {pattern!r} could not be matched ({exc})") from None
    return [matches[0].group(1)] if matches else None


def extract_number(text: str, pattern: str | None, budget: float = DEFAULT_BUDGET) -> float:
    """The number the metric printed: the last match of `pattern`, else the last number.

    A pattern is matched within `budget` seconds (the metric's timeout)."""
    if pattern is not None:
        found = _last_group(pattern, text, budget)
        if found is None:
            raise MetricParseError(f"no line matched the pattern {pattern!r}")
        raw = found[0]
        if raw is None:
            raise MetricParseError(f"the pattern {pattern!r} matched but its group is empty")
    else:
        last = None
        for match in NUMBER_RE.finditer(text):
            last = match
        if last is None:
            raise MetricParseError("printed no number on stdout")
        raw = last.group(0)
    return _finite(raw)


METRIC_LINE = re.compile(r"^METRIC\s+([\w.\-/]+)\s*=\s*(\S+)\s*$", re.MULTILINE)


def metric_line(text: str, name: str) -> float:
    """The value of the last `METRIC <name>=<value>` line."""
    found = [m.group(2) for m in METRIC_LINE.finditer(text) if m.group(1) == name]
    if not found:
        names = sorted({m.group(1) for m in METRIC_LINE.finditer(text)})[:10]
        seen = f" (it printed: {', '.join(names)})" if names else ""
        raise MetricParseError(f"printed no 'METRIC {name}=...' line{seen}")
    return _finite(found[-1])


def _finite(raw: str) -> float:
    shown = raw.strip()
    shown = shown if len(shown) <= 40 else shown[:37] + "..."
    try:
        value = float(raw.strip())
    except ValueError:
        raise MetricParseError(f"printed {shown!r}, which is not a number") from None
    if not math.isfinite(value):
        raise MetricParseError(f"printed {shown}, which is not a finite number")
    return value


def read_bounded(path: Path, cap: int = MAX_FILE_BYTES) -> str:
    """The text of a regular file of at most `cap` bytes; anything else (a device such as
    /dev/zero behind a symlink, a pipe, a folder, a huge file) is a MetricParseError."""
    name = path.name
    try:
        flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise MetricParseError(f"did not write {name}") from None
    except OSError as exc:
        raise MetricParseError(f"wrote {name}, which cannot be read ({exc.strerror})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise MetricParseError(
                f"{name} is not a regular file (a device, pipe or folder); the metric file "
                "must be a file the command writes"
            )
        if info.st_size > cap:
            raise MetricParseError(
                f"wrote {name} with {info.st_size} bytes, more than a metric file may hold "
                f"({cap} bytes)"
            )
        chunks = []
        size = 0
        while size <= cap:
            chunk = os.read(fd, min(1 << 20, cap + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        data = b"".join(chunks)
    finally:
        os.close(fd)
    if len(data) > cap:
        raise MetricParseError(f"wrote {name} with more than {cap} bytes")
    return data.decode("utf-8", errors="replace")


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


def inside(folder: Path, relative: str) -> Path:
    """`folder / relative` with every link resolved, refused (MetricParseError) when it
    leads out of `folder`: the engine reads it outside the sandbox, so a link planted by
    the command would make it read what the command itself may not (the checkout's .env,
    /proc/self/environ)."""
    base = Path(os.path.realpath(folder))
    target = Path(os.path.realpath(folder / relative))
    if target != base and not target.is_relative_to(base):
        raise MetricParseError(
            f"{relative} is a link out of the folder the command ran in; the engine reads "
            "only files inside it"
        )
    return target


def file_metric(
    path: Path, key: str | None, pattern: str | None, budget: float = DEFAULT_BUDGET
) -> float:
    """A number from a file the metric command wrote: a dotted key, or else its text."""
    text = read_bounded(path)
    if key is None:
        return extract_number(text, pattern, budget)
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
    except RecursionError:
        raise MetricParseError(f"wrote {path.name}, which nests too deeply to parse") from None
    except Exception as exc:  # any parser's error: the file is malformed
        detail = " ".join(str(exc).split())[:200]
        raise MetricParseError(f"wrote {path.name}, which cannot be parsed ({detail})") from None
    value = value_at(data, key)
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise MetricParseError(f"{path.name}: {key} holds {value!r}, not a number")
    return _finite(str(value))


def read_metric(spec: object, stdout: str, workspace: Path, budget: float | None = None) -> float:
    """The number a metric run produced, from wherever the config says to read it.

    A user pattern gets `budget` seconds, by default the metric's timeout."""
    file = getattr(spec, "file", None)
    name = getattr(spec, "name", None)
    pattern = getattr(spec, "pattern", None)
    if budget is None:
        budget = float(getattr(spec, "timeout", DEFAULT_BUDGET))
    if file is not None:
        return file_metric(inside(workspace, file), getattr(spec, "key", None), pattern, budget)
    if name is not None:
        return metric_line(stdout, name)
    return extract_number(stdout, pattern, budget)
