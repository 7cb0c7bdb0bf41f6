"""The command line: `commands` (every command), `options` (what every command shares) and the
logic behind the commands that is not the engine (check, demo, results, housekeeping)."""

import importlib
import sys
from typing import Any


def __getattr__(name: str) -> Any:
    # `autoresearch.cli:main` (the console script) and the names the one-module CLI had.
    if name == "main" and sys.argv[1:2] == ["mcp"]:
        # An MCP client waits for the server it starts: the other commands (and the
        # engine they import) stay unloaded.
        from autoresearch.agent.mcp_command import light_main

        return light_main()
    return getattr(importlib.import_module(f"{__name__}.commands"), name)
