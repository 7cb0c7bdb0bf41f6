"""Read the number a metric run produced: from stdout, a `METRIC` line or a file."""

from __future__ import annotations

import math
import re
from pathlib import Path

NUMBER_RE = re.compile(
    r"(?<![\w.])[-+]?(?:(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|nan|inf(?:inity)?)(?![\w])",
    re.IGNORECASE,
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
