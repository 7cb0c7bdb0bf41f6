"""Glob matching for `scope`, `harness` and `share` patterns.

Patterns are relative to the repository root and use `/` as separator:
`*` and `?` stay within one path segment, `**` spans any number of segments, and a
pattern that names a directory (`src` or `src/`) covers everything below it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache


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
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = end + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    # A match may also be a directory that contains the path.
    return re.compile("(?:" + "".join(out) + ")(?:/.*)?", re.DOTALL)


class PathMatcher:
    """Matches repository-relative paths against a list of glob patterns."""

    def __init__(self, patterns: Iterable[str]) -> None:
        self.patterns = [p for p in patterns if p.strip()]
        self._compiled = [_compile(p) for p in self.patterns]

    def matches(self, path: str) -> bool:
        return any(rx.fullmatch(path) for rx in self._compiled)

    def __bool__(self) -> bool:
        return bool(self.patterns)
