"""The MCP server's tools in-process: typed schemas, one sentence for a user's error, and an
optional tool wired by its module alone once that module exists."""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from autoresearch.agent import mcp_server
from autoresearch.errors import AutoresearchError
from conftest import make_repo

pytest.importorskip("mcp")

from mcp.server.mcpserver.exceptions import ToolError


class Confirmed(BaseModel):
    confirmed: bool
    runs: int


def test_an_optional_tool_is_wired_by_its_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = types.ModuleType("autoresearch.fake_confirm")

    def factory(tools: mcp_server.CampaignTools) -> Any:
        def confirm(runs: int = 3) -> Confirmed:
            """Re-measure the best result."""
            if runs < 1:
                raise AutoresearchError("runs must be at least 1.")
            return Confirmed(confirmed=tools.root == tmp_path, runs=runs)

        return confirm

    module.mcp_confirm = factory  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "autoresearch.fake_confirm", module)
    monkeypatch.setitem(
        mcp_server.OPTIONAL_TOOLS, "confirm", ("fake_confirm", "mcp_confirm", "Confirm.")
    )
    # A tool whose module does not exist is listed and says so.
    monkeypatch.setitem(mcp_server.OPTIONAL_TOOLS, "ideas", ("no_such_module", "x", "Ideas."))
    server = mcp_server.make_server(tmp_path)

    async def drive() -> tuple[Any, Any, Any]:
        tools = {t.name: t for t in await server.list_tools()}
        ok = await server.call_tool("confirm", {"runs": 2})
        ideas = await server.call_tool("ideas", {})
        return tools, ok, ideas

    tools, ok, ideas = anyio.run(drive)
    assert tools["confirm"].input_schema["properties"]["runs"]["type"] == "integer"
    assert tools["confirm"].output_schema["properties"]["confirmed"]["type"] == "boolean"
    assert ok.structured_content == {"confirmed": True, "runs": 2}
    assert ideas.structured_content["available"] is False
    with pytest.raises(ToolError, match=r"runs must be at least 1\.$"):
        anyio.run(server.call_tool, "confirm", {"runs": 0})


def test_every_tool_has_typed_inputs_and_outputs(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"a.txt": "a\n"})
    server = mcp_server.make_server(repo)

    tools = {t.name: t for t in anyio.run(server.list_tools)}
    expected = {"start", "step", "status", "log", "show", "diff", "confirm", "ideas"}
    assert expected <= set(tools)
    for name in expected:
        assert tools[name].output_schema is not None, name
    assert tools["show"].input_schema["required"] == ["iteration"]
    with pytest.raises(ToolError, match=r"no autoresearch\.toml"):
        anyio.run(server.call_tool, "status", {})


def test_the_ideas_tool_lists_and_adds_to_the_backlog(tmp_path: Path) -> None:
    from campaigns import campaign_toml

    repo = make_repo(
        tmp_path / "repo",
        {
            "calc.py": "N = 10\n",
            "bench.py": "import calc\nprint(abs(calc.N - 3))\n",
            "autoresearch.toml": campaign_toml(guard=None, **{"metric.pattern": None}),
            "autoresearch.ideas.md": "- try a smaller N\n",
        },
    )
    server = mcp_server.make_server(repo)
    added = anyio.run(server.call_tool, "ideas", {"add": "try N = 3"}).structured_content
    assert added["added"] == ["try N = 3"]
    assert [i["text"] for i in added["ideas"]] == ["try a smaller N", "try N = 3"]
    assert all(i["outcome"] == "pending" for i in added["ideas"])
    backlog = (repo / "autoresearch.ideas.md").read_text()
    assert "- try N = 3\n" in backlog and "(attempt" not in backlog  # no attempt had it
    again = anyio.run(server.call_tool, "ideas", {"add": "try N = 3"}).structured_content
    assert again["added"] == [] and len(again["ideas"]) == 2


def test_the_step_tool_shows_the_hypothesis_its_next_step_is_recorded_against(
    tmp_path: Path,
) -> None:
    from autoresearch.learning.ideas import queue_hypotheses
    from autoresearch.store.ledger import Ledger
    from campaigns import campaign_toml

    repo = make_repo(
        tmp_path / "repo",
        {
            "calc.py": "N = 10\n",
            "bench.py": 'import calc\nprint(f"score: {abs(calc.N - 3)}")\n',
            "autoresearch.toml": campaign_toml(
                **{"guard": None, "metric.target": None, "proposer": None}
            ),
        },
    )
    tools = mcp_server.CampaignTools(repo)
    started = tools.start()
    assert started.hypothesis is None and started.memory_file
    state = tools.campaign().state_dir
    queue_hypotheses(state, ["lower N to 6"])
    workspace = Path(started.workspace)
    (workspace / "calc.py").write_text("N = 8\n")
    first = tools.step("N to 8")
    assert first.attempt is not None and first.attempt.status == "keep"
    assert Ledger(state).read()[-1].hypothesis is None  # queued unseen: not what it tested
    assert first.hypothesis == "lower N to 6"
    (workspace / "calc.py").write_text("N = 6\n")
    tools.step("N to 6")
    assert Ledger(state).read()[-1].hypothesis == "lower N to 6"


def test_the_server_reports_the_package_version_in_its_initialize_answer(
    tmp_path: Path,
) -> None:
    """The official client over stdio, against `autoresearch mcp` in a process of its own:
    the version it announces is the one the package is released as (pyproject.toml)."""
    import os
    import tomllib

    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    src = Path(__file__).resolve().parents[2] / "src"
    released = tomllib.loads((src.parent / "pyproject.toml").read_text())["project"]["version"]
    repo = make_repo(tmp_path / "repo", {"calc.py": "N = 1\n"})
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "autoresearch", "mcp"],
        cwd=str(repo),
        env={**os.environ, "PYTHONPATH": str(src)},
    )

    async def drive() -> Any:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            return await session.initialize()

    answer = anyio.run(drive)
    assert answer.server_info.name == mcp_server.SERVER_NAME
    assert answer.server_info.version == released != ""
