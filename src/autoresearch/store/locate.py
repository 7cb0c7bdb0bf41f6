"""Finding a campaign's folder and its records from the command line's point of view
(where the command runs: `place`)."""

from __future__ import annotations

from pathlib import Path

from autoresearch.attempt import AttemptRecord
from autoresearch.config import CONFIG_FILE, Campaign, load_campaign
from autoresearch.errors import AutoresearchError, ConfigError
from autoresearch.store.ledger import Ledger, StateFile
from autoresearch.store.liveness import is_running
from autoresearch.store.place import STATE_FOLDER, Place, place_of, recorded_config


def campaigns_in(root: Path) -> list[str]:
    """The campaigns that have a folder of records in the repository, by name."""
    base = root / STATE_FOLDER
    if not base.is_dir():
        return []
    return sorted(
        p.name
        for p in base.iterdir()
        if p.is_dir() and ((p / "ledger.jsonl").is_file() or (p / "state.json").is_file())
    )


def find_campaign(root: Path, config: Path | None, name: str | None = None) -> Campaign:
    """The campaign to run: the config given, or the one named (its config being the
    default one, or the file its last run read)."""
    if config is not None or name is None:
        campaign = load_campaign(root, config)
        if name is not None and campaign.name != name:
            raise ConfigError(
                f"{campaign.display_path()} is the config of campaign '{campaign.name}', not "
                f"'{name}'; pass the config of '{name}' with --config, or run from {root} "
                "without --name."
            )
        return campaign
    seen: list[str] = []
    for explicit in (None, recorded_config(root, name)):
        try:
            campaign = load_campaign(root, explicit)
        except ConfigError as exc:
            if explicit is None and name not in campaigns_in(root):
                raise _unknown(root, name, exc) from None
            continue
        if campaign.name == name:
            return campaign
        seen.append(f"{campaign.display_path()} is campaign '{campaign.name}'")
    found = f" ({'; '.join(seen)})" if seen else ""
    raise ConfigError(
        f"no config of campaign '{name}' found{found}; pass its file with --config "
        f"(a path relative to {root} works from anywhere in it)."
    )


def _unknown(root: Path, name: str, cause: Exception | None = None) -> ConfigError:
    known = campaigns_in(root)
    if known:
        return ConfigError(
            f"no campaign '{name}' in {root}; the campaigns here are {', '.join(known)}."
        )
    return ConfigError(str(cause) if cause else f"no campaign '{name}' in {root} yet.")


def find_state_dir(root: Path, config: Path | None, name: str | None = None) -> Path:
    """The campaign folder: the named campaign's, the config's, or the only campaign's."""
    if name is not None and config is None:
        if name in campaigns_in(root):
            return root / STATE_FOLDER / name
        try:
            return find_campaign(root, None, name).state_dir  # set up, nothing recorded yet
        except ConfigError:
            raise _unknown(root, name) from None
    try:
        return find_campaign(root, config, name).state_dir
    except ConfigError:
        found = campaigns_in(root)
        if config is None and len(found) == 1:
            return root / STATE_FOLDER / found[0]
        if config is None and len(found) > 1:
            raise ConfigError(
                f"{len(found)} campaigns in {root} ({', '.join(found)}) and no "
                f"{CONFIG_FILE} naming one; pass --name NAME."
            ) from None
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


__all__ = [
    "Place",
    "campaigns_in",
    "find_campaign",
    "find_state_dir",
    "no_measurements",
    "place_of",
    "read_records",
]
