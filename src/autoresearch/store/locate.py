"""Finding a campaign's folder and its records from the command line's point of view."""

from __future__ import annotations

from pathlib import Path

from autoresearch.attempt import AttemptRecord
from autoresearch.config import Campaign, load_campaign
from autoresearch.errors import AutoresearchError, ConfigError
from autoresearch.store.ledger import Ledger, StateFile
from autoresearch.store.liveness import is_running


def find_state_dir(root: Path, config: Path | None) -> Path:
    """The campaign folder: from the config, or the only campaign in `.autoresearch/`."""
    try:
        campaign: Campaign = load_campaign(root, config)
        return campaign.state_dir
    except ConfigError:
        base = root / ".autoresearch"
        found = sorted(p for p in base.glob("*/ledger.jsonl")) if base.is_dir() else []
        if config is None and len(found) == 1:
            return found[0].parent
        raise


def no_measurements(state_dir: Path, name: str) -> AutoresearchError:
    return AutoresearchError(
        f"campaign '{name}' has no measurements yet (no {state_dir / 'ledger.jsonl'}); "
        "start it with `autoresearch run` (or `autoresearch start` to drive it yourself)."
    )


def read_records(state_dir: Path) -> list[AttemptRecord]:
    """The ledger for `log`: the same refusal as `status` when nothing was ever measured."""
    records = Ledger(state_dir).read()
    if not records and not is_running(state_dir):
        name = str(StateFile(state_dir).read().get("name") or state_dir.name)
        raise no_measurements(state_dir, name)
    return records


__all__ = ["find_state_dir", "no_measurements", "read_records"]
