"""The engine: the campaign loop (`loop`), the one attempt procedure every place runs
(`procedure`), the candidate queue (`queue`), the places attempts run in (`slots`) and
the merging of parallel winners (`merging`)."""

from autoresearch.engine.loop import PROPOSER_FAILURE_LIMIT, Engine

__all__ = ["PROPOSER_FAILURE_LIMIT", "Engine"]
