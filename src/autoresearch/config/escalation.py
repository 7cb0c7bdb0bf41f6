"""`[[proposer]]`: several proposer tables in order, read into `proposer` (the first) and
`proposers` (all), so that every reader of `proposer` works as with one `[proposer]`."""

from __future__ import annotations

from typing import Any


def split_proposers(data: Any) -> Any:
    if not isinstance(data, dict) or "proposers" in data:
        if isinstance(data, dict) and "proposers" in data:
            raise ValueError(
                "'proposers' is not a key; write [[proposer]] tables to list several proposers"
            )
        return data
    chain = data.get("proposer")
    if not isinstance(chain, list):
        return data
    if not chain:
        raise ValueError("[[proposer]] must list at least one proposer table")
    if not all(isinstance(p, dict) for p in chain):
        raise ValueError("every [[proposer]] entry must be a table")
    return {**data, "proposer": chain[0], "proposers": chain}
