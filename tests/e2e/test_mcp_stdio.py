"""`autoresearch mcp` driven by the official SDK's own client over stdio: a whole campaign
through the tools only, the agent editing the workspace between `step` calls."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from conftest import git, ledger, snapshot

pytest.importorskip("mcp")

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client


def structured(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    data = result.structured_content
    assert isinstance(data, dict)
    return data


def edit(workspace: str, text: str, name: str = "calc.py") -> None:
    (Path(workspace) / name).write_text(text)


async def drive(repo: Path) -> dict[str, Any]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "autoresearch", "mcp"],
        cwd=str(repo),
        env=dict(os.environ),
    )
    seen: dict[str, Any] = {}
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools = {t.name: t for t in (await session.list_tools()).tools}
        seen["tools"] = sorted(tools)
        assert tools["step"].input_schema["properties"]["description"]["type"] == "string"
        assert tools["step"].output_schema is not None

        refused = await session.call_tool("step", {"description": "too early"})
        seen["early"] = (refused.is_error, refused.content[0].text)  # type: ignore[union-attr]

        started = structured(await session.call_tool("start", {}))
        ws = started["workspace"]
        seen["baseline"] = started["baseline"]

        edit(ws, "# the number to tune\nN = 7\n")
        seen["keep"] = structured(await session.call_tool("step", {"description": "N to 7"}))
        edit(ws, "# the number to tune\nN = 9\n")
        seen["discard"] = structured(await session.call_tool("step", {"description": "N to 9"}))
        edit(ws, "hi\n", "notes.txt")
        seen["scope"] = structured(await session.call_tool("step", {}))
        seen["nothing"] = structured(await session.call_tool("step", {}))
        edit(ws, "# the number to tune\nN = 3\n")
        seen["target"] = structured(await session.call_tool("step", {"description": "N to 3"}))

        seen["status"] = structured(await session.call_tool("status", {}))
        seen["log"] = structured(await session.call_tool("log", {"last": 3}))
        seen["show"] = structured(await session.call_tool("show", {"iteration": 1}))
        seen["diff"] = structured(await session.call_tool("diff", {}))
        seen["confirm"] = structured(await session.call_tool("confirm", {"repeat": 6}))
        seen["ideas"] = structured(await session.call_tool("ideas", {}))
        missing = await session.call_tool("show", {"iteration": 99})
        seen["missing"] = (missing.is_error, missing.content[0].text)  # type: ignore[union-attr]
    return seen


@pytest.mark.slow
def test_a_campaign_through_the_mcp_server(toy: Path) -> None:
    before = snapshot(toy)
    seen = anyio.run(drive, toy)
    assert {"start", "step", "status", "log", "show", "diff", "confirm", "ideas"} <= set(
        seen["tools"]
    )
    is_error, text = seen["early"]
    assert is_error and "autoresearch start" in text and "Traceback" not in text
    assert seen["baseline"] == 7
    assert seen["keep"]["attempt"]["status"] == "keep" and seen["keep"]["best"] == 4
    assert seen["discard"]["attempt"]["status"] == "discard"
    assert seen["scope"]["attempt"]["status"] == "scope_violation"
    assert seen["nothing"]["attempt"]["status"] == "no_change"
    target = seen["target"]
    assert target["attempt"]["status"] == "keep" and target["best"] == 0
    assert target["stopped"] and target["stop_reason"] == "target"
    assert seen["status"]["best"] == 0 and seen["status"]["state"] == "stopped"
    assert [a["iteration"] for a in seen["log"]["attempts"]] == [3, 4, 5]
    assert seen["show"]["attempt"]["description"] == "N to 7"
    assert "-N = 10" in seen["diff"]["diff"] and "+N = 3" in seen["diff"]["diff"]
    # The best (score 0) against the baseline (score 7), measured again by the engine.
    confirmed = seen["confirm"]
    assert confirmed["confirmed"] is True and confirmed["outcome"]["pairs"] == 6
    assert confirmed["outcome"]["a_samples"] == [7.0] * 6
    assert confirmed["outcome"]["b_samples"] == [0.0] * 6
    assert seen["ideas"]["added"] == [] and isinstance(seen["ideas"]["ideas"], list)
    assert seen["missing"][0] and "no attempt 99" in seen["missing"][1]
    # Everything the tools said is what the ledger holds; the checkout was not touched.
    assert [r["status"] for r in ledger(toy)] == [
        "baseline",
        "keep",
        "discard",
        "scope_violation",
        "no_change",
        "keep",
    ]
    assert snapshot(toy) == before
    assert git(toy, "rev-parse", "autoresearch/toy").strip() == ledger(toy)[-1]["commit"]
    json.dumps(seen)  # every answer is plain JSON
