"""What `status` and `log` read: the ledger and the state file, never the engine itself."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from autoresearch.config import Campaign, load_campaign
from autoresearch.errors import AutoresearchError, ConfigError
from autoresearch.ledger import Ledger, StateFile
from autoresearch.summary import summarize


def _pid_alive(pid: object) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def is_running(state_dir: Path) -> bool:
    lock_path = state_dir / "engine.lock"
    if not lock_path.exists():
        return False
    lock = FileLock(str(lock_path), timeout=0)
    try:
        lock.acquire()
    except Timeout:
        return True
    lock.release()
    return False


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


def campaign_status(state_dir: Path) -> dict[str, Any]:
    state = StateFile(state_dir).read()
    records = Ledger(state_dir).read()
    name = str(state.get("name") or state_dir.name)
    direction = str(state.get("direction") or "minimize")
    if not records and not is_running(state_dir):
        raise AutoresearchError(
            f"campaign '{name}' has no measurements yet (no {state_dir / 'ledger.jsonl'}); "
            "start it with `autoresearch run`."
        )
    summary = summarize(name, direction, records).to_json()
    running = is_running(state_dir)
    summary.update(
        {
            "stop_reason": None if running else state.get("stop_reason"),
            "stop_message": None if running else state.get("stop_message") or None,
            "running": running,
            "pid": state.get("pid") if running and _pid_alive(state.get("pid")) else None,
            "phase": state.get("phase") if running else "stopped",
            "current_iteration": state.get("iteration") if running else None,
            "target": state.get("target"),
            "max_iterations": state.get("max_iterations"),
            "branch": f"autoresearch/{name}",
            "ledger": str(state_dir / "ledger.jsonl"),
        }
    )
    return summary
