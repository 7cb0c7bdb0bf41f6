"""Glob matching for `scope`, `harness` and `share` patterns.

Patterns are relative to the repository root and use `/` as separator:
`*` and `?` stay within one path segment, `**` spans any number of segments, and a
pattern that names a directory (`src` or `src/`) covers everything below it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache


def _class_body(body: str) -> str:
    """A glob's [...] body as a regex class body: only a '-' between two characters makes
    a range; every other character (and any other '-') is literal."""
    out = []
    for j, c in enumerate(body):
        is_range = c == "-" and 0 < j < len(body) - 1 and "-" not in (body[j - 1], body[j + 1])
        out.append(c if is_range else re.escape(c))
    return "".join(out)


@lru_cache(maxsize=512)
def _compile(pattern: str) -> re.Pattern[str]:
    pattern = pattern.strip().removeprefix("./").rstrip("/")
    out: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:[^/]+/)*")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[":
            end = pattern.find("]", i + 1)
            if end == -1:
                out.append(re.escape("["))
                i += 1
            else:
                body = pattern[i + 1 : end]
                negate = body.startswith("!")
                # Only '-' keeps its meaning inside a class; every other character is literal.
                out.append("[" + "^" * negate + _class_body(body[negate:]) + "]")
                i = end + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    # A match may also be a directory that contains the path.
    return re.compile("(?:" + "".join(out) + ")(?:/.*)?", re.DOTALL)


def glob_problem(pattern: str) -> str | None:
    """Why `pattern` is not a usable glob, or None when it is."""
    try:
        _compile(pattern)
    except re.error:
        return (
            "is not a valid glob: a [...] class must hold at least one character and its "
            "ranges must go from low to high (write [[] for a literal '[')"
        )
    except RecursionError:
        return "is too complex a glob"
    return None


class PathMatcher:
    """Matches repository-relative paths against a list of glob patterns."""

    def __init__(self, patterns: Iterable[str]) -> None:
        self.patterns = [p for p in patterns if p.strip()]
        self._compiled = [_compile(p) for p in self.patterns]

    def matches(self, path: str) -> bool:
        return any(rx.fullmatch(path) for rx in self._compiled)

    def __bool__(self) -> bool:
        return bool(self.patterns)


MIB = 1 << 20


@dataclass(frozen=True)
class Caps:
    """How much one candidate may hold (`[scope] max_file_mb`, `max_files`): above either,
    its content never enters the repository and the attempt is `edit_refused`."""

    max_bytes: int = 100 * MIB
    max_files: int = 10_000

    def file_refusal(self, path: str, size: int) -> str | None:
        """Why a file of `size` bytes at `path` may not be part of a candidate, or None."""
        if size <= self.max_bytes:
            return None
        return (
            f"{path} is {human_size(size)}, above the {human_size(self.max_bytes)} cap "
            "([scope] max_file_mb)"
        )

    def count_refusal(self, count: int) -> str | None:
        """Why a candidate changing `count` files is refused, or None."""
        if count <= self.max_files:
            return None
        return (
            f"the change touches {count} files, above the cap of {self.max_files} "
            "([scope] max_files)"
        )


def human_size(size: float) -> str:
    """1.5 GiB, 100 MiB, 12.1 KiB, 10 bytes: a size as a person reads it."""
    if size < 1024:
        return f"{int(size)} bytes"
    for unit in ("KiB", "MiB", "GiB"):
        size /= 1024
        if size < 1024:
            return f"{size:.4g} {unit}"
    return f"{size / 1024:.4g} TiB"
