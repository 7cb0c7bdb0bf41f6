"""The engine: the campaign loop (`loop`), the one attempt procedure every place runs
(`procedure`), the candidate queue (`queue`), the places attempts run in (`slots`), the
merging of parallel winners (`merging`), and the steps' values (`recording`, `screening`),
which the checks below the engine return."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from autoresearch.engine.loop import PROPOSER_FAILURE_LIMIT, Engine

__all__ = ["PROPOSER_FAILURE_LIMIT", "Engine"]


def __getattr__(name: str) -> Any:
    # Lazy, so that a step's values (`engine.recording`) import without the whole loop.
    if name in __all__:
        return getattr(importlib.import_module(f"{__name__}.loop"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
