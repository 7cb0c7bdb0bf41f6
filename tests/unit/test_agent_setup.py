"""`autoresearch setup`: each tool's files written once, then left alone; the user's own
content in them kept byte for byte; a file that cannot be read is refused, not replaced."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from autoresearch.agent.setup import BEGIN, END, setup
from autoresearch.errors import ConfigError
from conftest import Runner, make_repo

FILES = {
    "claude-code": [".claude/skills/autoresearch/SKILL.md", ".mcp.json"],
    "codex": ["AGENTS.md", ".codex/config.toml"],
    "gemini": ["GEMINI.md", ".gemini/settings.json"],
}


def tree(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(root).parts
    }


@pytest.mark.parametrize("tool", sorted(FILES))
def test_setup_twice_changes_nothing_the_second_time(
    tmp_path: Path, invoke: Runner, tool: str
) -> None:
    repo = make_repo(tmp_path / "repo", {"README.md": "hi\n"})
    first = invoke(repo, "setup", tool, "--json")
    assert first.returncode == 0, first.stderr
    listed = json.loads(first.stdout)
    assert [Path(w["path"]).relative_to(repo).as_posix() for w in listed] == FILES[tool]
    assert {w["action"] for w in listed} == {"created"}
    written = tree(repo)
    second = invoke(repo, "setup", tool)
    assert second.returncode == 0
    assert second.stdout.count("unchanged") == 2
    assert tree(repo) == written
    for rel in FILES[tool]:
        assert rel in second.stdout


def test_claude_code_files(tmp_path: Path) -> None:
    skill, servers = setup("claude-code", tmp_path)
    text = skill.path.read_text()
    assert text.startswith("---\nname: autoresearch\ndescription: ")
    assert "autoresearch step" in text and "Never run the metric yourself" in text
    assert json.loads(servers.path.read_text()) == {
        "mcpServers": {"autoresearch": {"command": "autoresearch", "args": ["mcp"]}}
    }


def test_the_users_own_entries_and_text_are_kept(tmp_path: Path) -> None:
    (tmp_path / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"other": {"command": "x"}}, "extra": [1, 2]})
    )
    (tmp_path / ".codex").mkdir()
    toml = '# mine\nmodel = "o4"\n\n[mcp_servers.other]\ncommand = "y"\n'
    (tmp_path / ".codex" / "config.toml").write_text(toml)
    (tmp_path / "AGENTS.md").write_text("# Rules\n\nBe nice.\n")
    setup("claude-code", tmp_path, command="/opt/ar/bin/autoresearch")
    setup("codex", tmp_path)
    servers = json.loads((tmp_path / ".mcp.json").read_text())
    assert servers["mcpServers"]["other"] == {"command": "x"} and servers["extra"] == [1, 2]
    assert servers["mcpServers"]["autoresearch"]["command"] == "/opt/ar/bin/autoresearch"
    config = (tmp_path / ".codex" / "config.toml").read_text()
    assert config.startswith(toml)
    parsed = tomllib.loads(config)
    assert parsed["mcp_servers"]["autoresearch"] == {"command": "autoresearch", "args": ["mcp"]}
    assert parsed["model"] == "o4"
    agents = (tmp_path / "AGENTS.md").read_text()
    assert agents.startswith("# Rules\n\nBe nice.\n\n" + BEGIN)
    # A changed command replaces our entry and section in place, nothing else.
    (tmp_path / "AGENTS.md").write_text(agents + "\n## Later\n")
    setup("codex", tmp_path, command="ar")
    again = (tmp_path / ".codex" / "config.toml").read_text()
    assert again.count("[mcp_servers.autoresearch]") == 1 and again.startswith(toml)
    assert tomllib.loads(again)["mcp_servers"]["autoresearch"]["command"] == "ar"
    final = (tmp_path / "AGENTS.md").read_text()
    assert final.count(BEGIN) == 1 and final.count(END) == 1 and final.endswith("## Later\n")


@pytest.mark.parametrize(
    ("tool", "rel", "content", "says"),
    [
        ("claude-code", ".mcp.json", "{not json", "not valid JSON"),
        ("gemini", ".gemini/settings.json", "[1, 2]", "JSON object"),
        ("codex", ".codex/config.toml", "x = = 1\n", "not valid TOML"),
        ("codex", "AGENTS.md", f"# x\n{BEGIN}\n", "stray marker"),
    ],
)
def test_unreadable_files_are_refused_and_kept(
    tmp_path: Path, invoke: Runner, tool: str, rel: str, content: str, says: str
) -> None:
    repo = make_repo(tmp_path / "repo", {rel: content})
    out = invoke(repo, "setup", tool)
    assert out.returncode != 0 and says in out.stderr and "Traceback" not in out.stderr
    assert (repo / rel).read_text() == content


def test_user_scope_writes_under_home(tmp_path: Path) -> None:
    home = tmp_path / "home"
    written = setup("gemini", tmp_path / "project", user=True, home=home)
    assert [w.path for w in written] == [
        home / ".gemini" / "GEMINI.md",
        home / ".gemini" / "settings.json",
    ]
    assert not (tmp_path / "project").exists()
    with pytest.raises(ConfigError, match="unknown tool"):
        setup("cursor", tmp_path)
