"""SEARCH/REPLACE edit blocks: parse a model's reply, check every block, then apply all or none.

    path/to/file.py
    <<<<<<< SEARCH
    exact existing lines
    =======
    replacement lines
    >>>>>>> REPLACE

An empty SEARCH creates a new file. A block is refused when its path is absolute, leaves the
workspace (`..`, a symlink), lies outside the scope or in the harness, or when its SEARCH
text is not found exactly once. One refused block refuses the whole reply: nothing is written.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from autoresearch.scope import PathMatcher

SEARCH_RE = re.compile(r"^<{5,9} ?SEARCH\s*$")
DIVIDER_RE = re.compile(r"^={5,9}\s*$")
REPLACE_RE = re.compile(r"^>{5,9} ?REPLACE\s*$")
FENCE_RE = re.compile(r"^\s*(```|~~~)")


@dataclass(frozen=True)
class EditBlock:
    path: str
    search: str
    replace: str


class EditRefused(ValueError):
    """A block cannot be applied; the message says which and why."""


def _clean_path(line: str) -> str:
    path = line.strip().strip("`*").strip()
    path = path.removeprefix("File:").removeprefix("file:").strip().rstrip(":").strip()
    return path.strip("`\"'")


def parse_blocks(text: str) -> list[EditBlock]:
    lines = text.splitlines()
    blocks: list[EditBlock] = []
    i = 0
    while i < len(lines):
        if not SEARCH_RE.match(lines[i]):
            i += 1
            continue
        path = ""
        for back in range(i - 1, -1, -1):
            candidate = lines[back]
            if not candidate.strip() or FENCE_RE.match(candidate):
                continue
            path = _clean_path(candidate)
            break
        search: list[str] = []
        replace: list[str] = []
        j = i + 1
        while j < len(lines) and not DIVIDER_RE.match(lines[j]):
            search.append(lines[j])
            j += 1
        if j >= len(lines):
            raise EditRefused(f"the block for {path or '(no path)'} has no '=======' line")
        j += 1
        while j < len(lines) and not REPLACE_RE.match(lines[j]):
            replace.append(lines[j])
            j += 1
        if j >= len(lines):
            raise EditRefused(f"the block for {path or '(no path)'} has no '>>>>>>> REPLACE' line")
        if not path:
            raise EditRefused("a block has no file path on the line before '<<<<<<< SEARCH'")
        blocks.append(
            EditBlock(
                path=path,
                search="\n".join(search) + ("\n" if search else ""),
                replace="\n".join(replace) + ("\n" if replace else ""),
            )
        )
        i = j + 1
    return blocks


def description_of(text: str) -> str:
    """`DESCRIPTION: ...` if the reply has one, else its first line of prose."""
    for line in text.splitlines():
        match = re.match(r"^\s*\**DESCRIPTION\**\s*:\s*(.+)$", line, re.IGNORECASE)
        if match:
            return match.group(1).strip()[:200]
    for line in text.splitlines():
        stripped = line.strip()
        if (
            stripped
            and not FENCE_RE.match(stripped)
            and not SEARCH_RE.match(stripped)
            and not stripped.startswith(("IDEA:", "#"))
        ):
            return stripped[:200]
    return ""


def ideas_of(text: str) -> list[str]:
    return [
        m.group(1).strip()
        for m in re.finditer(r"^\s*IDEA\s*:\s*(.+)$", text, re.MULTILINE | re.IGNORECASE)
    ]


def _check_path(workspace: Path, rel: str, scope: PathMatcher, harness: PathMatcher) -> Path:
    pure = PurePosixPath(rel)
    if pure.is_absolute() or rel.startswith("~"):
        raise EditRefused(f"{rel}: absolute paths are refused")
    if any(part == ".." for part in pure.parts) or not pure.parts:
        raise EditRefused(f"{rel}: paths that leave the workspace are refused")
    normal = str(pure)
    if harness.matches(normal):
        raise EditRefused(f"{normal}: part of the harness, never edited")
    if not scope.matches(normal):
        raise EditRefused(f"{normal}: outside the scope")
    target = workspace / normal
    current = workspace
    for part in pure.parts:
        current = current / part
        if current.is_symlink():
            raise EditRefused(f"{normal}: goes through a symlink, refused")
    base = os.path.realpath(workspace)
    if not os.path.realpath(target).startswith(base + os.sep):
        raise EditRefused(f"{normal}: resolves outside the workspace")
    return target


def plan_edits(
    blocks: list[EditBlock], workspace: Path, scope: PathMatcher, harness: PathMatcher
) -> dict[Path, str]:
    """The new content of every file the blocks touch; raises EditRefused, writes nothing."""
    if not blocks:
        raise EditRefused("the reply holds no SEARCH/REPLACE block")
    contents: dict[Path, str | None] = {}
    for block in blocks:
        target = _check_path(workspace, block.path, scope, harness)
        if target not in contents:
            try:
                contents[target] = target.read_text(encoding="utf-8")
            except FileNotFoundError:
                contents[target] = None
            except (OSError, UnicodeDecodeError) as exc:
                raise EditRefused(f"{block.path}: cannot be read ({exc})") from None
        current = contents[target]
        if not block.search.strip():
            if current:
                raise EditRefused(f"{block.path}: an empty SEARCH creates a file, but it exists")
            contents[target] = block.replace
            continue
        if current is None:
            raise EditRefused(f"{block.path}: no such file (an empty SEARCH creates one)")
        search = block.search
        count = current.count(search)
        if count == 0 and search.endswith("\n") and current.endswith(search[:-1]):
            search = search[:-1]  # the file's last line has no newline
            count = 1
        if count == 0:
            raise EditRefused(f"{block.path}: the SEARCH text was not found")
        if count > 1:
            raise EditRefused(f"{block.path}: the SEARCH text matches {count} places")
        replacement = block.replace if search.endswith("\n") else block.replace.rstrip("\n")
        contents[target] = current.replace(search, replacement, 1)
    return {path: text for path, text in contents.items() if text is not None}


def write_edits(planned: dict[Path, str]) -> None:
    for path, text in planned.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
