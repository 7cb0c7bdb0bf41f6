"""`autoresearch setup claude-code | codex | gemini`: teach a coding agent the agent-driven
loop and register the MCP server, in each tool's own files.

    claude-code  .claude/skills/autoresearch/SKILL.md   .mcp.json (mcpServers)
    codex        AGENTS.md (a marked section)           .codex/config.toml ([mcp_servers.*])
    gemini       GEMINI.md (a marked section)           .gemini/settings.json (mcpServers)

Project-local by default (`--user`: the same files under the home folder, Claude Code's
user servers in ~/.claude.json). Idempotent: a second run changes nothing; only our own
entry or section is written, everything else in a file stays byte for byte; a file that
cannot be read as its format is refused, never overwritten.
"""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autoresearch.errors import ConfigError

SERVER = "autoresearch"
BEGIN = "<!-- autoresearch:begin (written by `autoresearch setup`; edits here are replaced) -->"
END = "<!-- autoresearch:end -->"
TOOLS = ("claude-code", "codex", "gemini")

LOOP = """\
This repository runs improvement campaigns with autoresearch in the agent-driven mode:
you decide what to try, the engine measures and decides whether it is kept.

1. `autoresearch start` (MCP tool `start`) sets the campaign up from
   `autoresearch.toml` and measures the baseline. It prints the workspace folder
   (`autoresearch workspace` prints it again). Edit files only there, never in the
   checkout itself, and only files in the campaign's scope.
2. Make ONE focused change in the workspace, then run
   `autoresearch step --description "<what you changed, one line>"` (MCP tool `step`).
   The engine screens it (no change, harness, scope), commits it, measures it in its
   sandbox, keeps it only if it is really better and otherwise rolls the workspace back
   to the best version, and logs it. Read its verdict, reason and `next:` line.
3. Never run the metric yourself and never report a number: only `step` measures, and
   nothing unmeasured can be kept. Never edit the harness (the benchmark, its tests,
   `autoresearch.toml`): that halts the campaign.
4. After a rollback the workspace is the best version again: build on it. Use
   `autoresearch status`, `autoresearch log` and `autoresearch show N` (tools `status`,
   `log`, `show`) to see what was tried and why it failed.
5. Stop when `step` says the campaign stopped; `autoresearch diff` shows the best change
   and `autoresearch apply` puts it in the checkout for the user to review.

With `--json`, `step` prints the same report as JSON (`attempt.status`, `best`, `next`).
"""

SKILL = f"""\
---
name: autoresearch
description: Improve a measurable property of this code base (speed, loss, size, score)
  with autoresearch's agent-driven loop - you edit the campaign workspace, `autoresearch
  step` measures and keeps or rolls back. Use when asked to optimise a metric, run
  autoresearch, or continue a campaign.
---

# autoresearch: the agent-driven loop

{LOOP}"""

SECTION = f"""{BEGIN}
## autoresearch (agent-driven campaigns)

{LOOP}{END}
"""


@dataclass(frozen=True)
class Written:
    path: Path
    action: str  # created, updated, unchanged

    def to_json(self) -> dict[str, str]:
        return {"path": str(self.path), "action": self.action}


def server_entry(command: str, args: list[str]) -> dict[str, Any]:
    return {"command": command, "args": args}


def setup(
    tool: str, root: Path, *, user: bool = False, home: Path | None = None, command: str = SERVER
) -> list[Written]:
    """Write the tool's skill or instructions and register the server; every file, with
    what was done to it."""
    if tool not in TOOLS:
        raise ConfigError(f"unknown tool {tool!r}; use one of: {', '.join(TOOLS)}.")
    base = (home or Path.home()) if user else root
    args = ["mcp"]
    entry = server_entry(command, args)
    if tool == "claude-code":
        servers = (home or Path.home()) / ".claude.json" if user else root / ".mcp.json"
        return [
            _write_text(base / ".claude" / "skills" / SERVER / "SKILL.md", SKILL),
            _merge_json(servers, entry),
        ]
    if tool == "codex":
        return [
            _write_section(base / "AGENTS.md" if not user else base / ".codex" / "AGENTS.md"),
            _merge_codex(base / ".codex" / "config.toml", command, args),
        ]
    return [
        _write_section(base / "GEMINI.md" if not user else base / ".gemini" / "GEMINI.md"),
        _merge_json(base / ".gemini" / "settings.json", entry),
    ]


def _store(path: Path, text: str, before: str | None) -> Written:
    if before == text:
        return Written(path, "unchanged")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".autoresearch-tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    return Written(path, "created" if before is None else "updated")


def _read(path: Path) -> str | None:
    if path.is_symlink() and not path.exists():
        raise ConfigError(f"{path} is a broken symbolic link; remove it and run setup again.")
    if not path.exists():
        return None
    if not path.is_file():
        raise ConfigError(f"{path} is not a file; move it away and run setup again.")
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path} cannot be read ({exc}); fix it and run setup again.") from None


def _write_text(path: Path, text: str) -> Written:
    return _store(path, text, _read(path))


def _write_section(path: Path) -> Written:
    """Our marked section of a markdown file: replaced where it is, else appended."""
    before = _read(path)
    if before is None:
        return _store(path, SECTION, None)
    start, end = before.find(BEGIN), before.find(END)
    if start != -1 and end > start:
        after = before[end + len(END) :].removeprefix("\n")
        return _store(path, before[:start] + SECTION + after, before)
    if start != -1 or end != -1:
        raise ConfigError(
            f"{path} holds only one of the autoresearch section's markers; remove the "
            "stray marker and run setup again."
        )
    ending = len(before) - len(before.rstrip("\n"))
    gap = "\n" * max(0, 2 - ending)
    return _store(path, before + gap + SECTION, before)


def _merge_json(path: Path, entry: dict[str, Any]) -> Written:
    """`mcpServers.autoresearch` in a JSON settings file; every other key kept."""
    before = _read(path)
    data: Any = {}
    if before is not None and before.strip():
        try:
            data = json.loads(before)
        except json.JSONDecodeError as exc:
            raise ConfigError(
                f"{path} is not valid JSON ({exc.msg} at line {exc.lineno}); fix it and run "
                "setup again."
            ) from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must hold a JSON object; fix it and run setup again.")
    servers = data.get("mcpServers")
    if servers is None:
        servers = data["mcpServers"] = {}
    if not isinstance(servers, dict):
        raise ConfigError(f"{path}: 'mcpServers' must be an object; fix it and run setup again.")
    if servers.get(SERVER) == entry:
        return Written(path, "unchanged")
    servers[SERVER] = entry
    return _store(path, json.dumps(data, indent=2) + "\n", before)


_TABLE = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")


def _merge_codex(path: Path, command: str, args: list[str]) -> Written:
    """`[mcp_servers.autoresearch]` in Codex's config.toml: that table (and its sub-tables)
    replaced where it is, else appended; the rest of the file kept as written."""
    before = _read(path)
    text = before or ""
    try:
        current = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(
            f"{path} is not valid TOML ({exc}); fix it and run setup again."
        ) from None
    wanted = {"command": command, "args": args}
    servers = current.get("mcp_servers")
    if isinstance(servers, dict) and servers.get(SERVER) == wanted:
        return Written(path, "unchanged")
    block = (
        f"[mcp_servers.{SERVER}]\n"
        f"command = {json.dumps(command)}\n"
        f"args = [{', '.join(json.dumps(a) for a in args)}]\n"
    )
    lines = text.splitlines(keepends=True)
    own = {f"mcp_servers.{SERVER}", f'mcp_servers."{SERVER}"'}
    out: list[str] = []
    inside = replaced = False
    for line in lines:
        header = _TABLE.match(line)
        if header:
            name = header.group(1).replace(" ", "")
            inside = name in own or any(name.startswith(o + ".") for o in own)
            if inside and not replaced:
                out.append(block)
                replaced = True
        if not inside:
            out.append(line)
    if not replaced:
        if out and not out[-1].endswith("\n"):
            out.append("\n")
        if out and out[-1].strip():
            out.append("\n")
        out.append(block)
    new = "".join(out)
    try:
        merged = tomllib.loads(new)
    except tomllib.TOMLDecodeError:
        merged = {}
    if merged.get("mcp_servers", {}).get(SERVER) != wanted:
        raise ConfigError(
            f"{path}: the [mcp_servers.{SERVER}] entry could not be written without changing "
            "the rest of the file (it is defined inline); move it to its own table and run "
            "setup again."
        )
    return _store(path, new, before)
