"""The command line: `commands` (every command), `options` (what every command shares) and the
logic behind the commands that is not the engine (check, demo, results, housekeeping)."""

import importlib
from typing import Any


def __getattr__(name: str) -> Any:
    # `autoresearch.cli:main` (the console script) and the names the one-module CLI had.
    return getattr(importlib.import_module(f"{__name__}.commands"), name)
