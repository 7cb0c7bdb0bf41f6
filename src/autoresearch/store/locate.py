"""Finding a campaign's folder and its records from the command line's point of view.

A command may run in the user's checkout, in any folder below it, or inside one of a
campaign's own folders (its workspace `.autoresearch/<name>/worktree`, a slot's, its logs):
an agent works in the workspace, which holds a `.git` of its own, so git alone would take
it for a repository apart. `place_of` walks up to the checkout instead and remembers the
campaign whose folder it came through.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from autoresearch.attempt import AttemptRecord
from autoresearch.config import CONFIG_FILE, Campaign, load_campaign
from autoresearch.errors import AutoresearchError, ConfigError, GitError
from autoresearch.gitcmd import repo_root
from autoresearch.store.ledger import Ledger, StateFile
from autoresearch.store.liveness import is_running

STATE_FOLDER = ".autoresearch"


@dataclass(frozen=True)
class Place:
    """Where a command runs: the user's checkout, and the campaign whose folder it is in."""

    root: Path
    campaign: str | None = None  # the campaign whose folder the command runs in
    worktree: Path | None = None  # that campaign's workspace (or a slot's), when inside one
    cwd: Path | None = None

    def config(self, explicit: Path | None) -> Path | None:
        """A `--config` path as the user meant it: inside a workspace, a relative path
        names the checkout's file (the workspace's copy is the proposer's to edit)."""
        if explicit is None or explicit.is_absolute() or self.cwd is None:
            return explicit
        if self.worktree is not None:
            below = self.cwd.relative_to(self.worktree)
            return self.root / below / explicit
        return self.cwd / explicit


def place_of(cwd: Path) -> Place:
    """The checkout and campaign of a folder; one sentence naming where to run from when
    it is in no repository."""
    cwd = cwd.resolve()
    for parent in (cwd, *cwd.parents):
        if parent.name != STATE_FOLDER or not (parent.parent / ".git").exists():
            continue
        root = parent.parent
        parts = cwd.relative_to(parent).parts
        name = parts[0] if parts else None
        worktree: Path | None = None
        if name is not None:
            if parts[1:2] == ("worktree",):
                worktree = parent / name / "worktree"
            elif parts[1:2] == ("slots",) and parts[3:4] == ("worktree",):
                worktree = parent.joinpath(*parts[:4])
        return Place(root=_top(root), campaign=name, worktree=worktree, cwd=cwd)
    return Place(root=_top(cwd), cwd=cwd)


def _top(folder: Path) -> Path:
    try:
        return repo_root(folder)
    except GitError:
        raise GitError(
            f"{folder} is not inside a git repository; run autoresearch from your repository "
            f"(the folder holding {CONFIG_FILE}) or a folder below it."
        ) from None


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


def _recorded_config(root: Path, name: str) -> Path | None:
    """The config file the campaign's last engine read (`state.json`)."""
    folder = root / STATE_FOLDER / name
    if not folder.is_dir():
        return None
    recorded = StateFile(folder).read().get("config")
    return Path(recorded) if isinstance(recorded, str) and recorded else None


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
    for explicit in (None, _recorded_config(root, name)):
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
