"""What `status` and `log` read: the ledger and the state file, never the engine itself.

Nothing here takes the engine's lock (see `liveness`): a reader polling while a `run`
starts must never be the reason that run finds its campaign locked.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from autoresearch.attempt import Status
from autoresearch.learning.escalation import search_notes
from autoresearch.stats.robust import ESTIMATORS, fold_group, robust_sigma
from autoresearch.stats.sample_book import sample_groups
from autoresearch.store.ledger import Ledger, StateFile
from autoresearch.store.liveness import is_running, lock_holder
from autoresearch.store.locate import find_state_dir, no_measurements, read_records
from autoresearch.store.summary import summarize

__all__ = ["campaign_status", "find_state_dir", "is_running", "read_records"]


def campaign_status(state_dir: Path) -> dict[str, Any]:
    state = StateFile(state_dir).read()
    records = Ledger(state_dir).read()
    name = str(state.get("name") or state_dir.name)
    direction = str(state.get("direction") or "minimize")
    pid = lock_holder(state_dir)
    running = pid is not None
    if not records and not running:
        raise no_measurements(state_dir, name)
    summary = summarize(name, direction, records).to_json()
    summary.update(search_notes(records, direction, summary.get("noise")))
    attempts = {k: v for k, v in summary["counts"].items() if k != Status.BASELINE}
    summary.update(
        {
            "stop_reason": None if running else state.get("stop_reason"),
            "stop_message": None if running else state.get("stop_message") or None,
            "running": running,
            # Agent-driven: paused between `step` calls, not stopped.
            "waiting": bool(state.get("waiting")) and not running and not state.get("stop_reason"),
            "pid": pid,
            "phase": (state.get("phase") or "starting") if running else "stopped",
            "current_iteration": state.get("iteration") if running else None,
            # The attempts by status, the baseline apart: they add up to `iterations`.
            "attempt_counts": attempts,
            "target": state.get("target"),
            "max_iterations": state.get("max_iterations"),
            # The rule in force and why (`rule = "auto"` says what it chose).
            "decision": state.get("decision"),
            "detectable": state.get("detectable"),
            # What the campaign's noise looks like, once learned, and every change of
            # estimator `noise = "auto"` made, with why.
            "noise_shape": state.get("noise_shape"),
            "estimator_switches": list(state.get("estimator_switches") or []),
            "branch": f"autoresearch/{name}",
            "ledger": str(state_dir / "ledger.jsonl"),
            "slots": slot_status(state.get("slots")) if running else [],
        }
    )
    # The spread the rule in force sees (its estimator's), `median` before one is known.
    estimator = state.get("estimator")
    if estimator not in ESTIMATORS or estimator == "mean":
        estimator = "median"
    groups = list(sample_groups(records).values())
    gap = state.get("speed_states")
    if estimator == "states" and isinstance(gap, float) and gap > 0:
        # The spread within one speed state, as the rule sees it.
        groups = [fold_group(group, gap) for group in groups]
    robust = robust_sigma(groups, str(estimator), direction)
    baseline = summary.get("baseline")
    summary["noise_robust"] = None if robust is None else robust[0]
    summary["noise_robust_pct"] = (
        None if robust is None or not baseline else 100.0 * robust[0] / abs(baseline)
    )
    return summary


def slot_line(slot: dict[str, Any]) -> str:
    """One slot as `status` prints it."""
    if slot.get("iteration") is None:
        return f"  slot {slot['slot']}: idle"
    elapsed = slot.get("elapsed_seconds")
    took = "" if elapsed is None else f", {elapsed:.0f} s"
    return f"  slot {slot['slot']}: attempt {slot['iteration']}, {slot['phase']}{took}"


def slot_status(slots: Any) -> list[dict[str, Any]]:
    """What each slot of a run with several jobs is doing: attempt, phase, seconds."""
    if not isinstance(slots, dict):
        return []
    now = datetime.now(UTC)
    out = []
    for key, info in sorted(slots.items(), key=lambda kv: int(kv[0]) if kv[0].isdigit() else 0):
        if not isinstance(info, dict):
            continue
        elapsed = None
        since = info.get("started_utc")
        if isinstance(since, str):
            try:
                began = datetime.fromisoformat(since.replace("Z", "+00:00"))
                elapsed = round((now - began).total_seconds(), 1)
            except ValueError:
                elapsed = None
        out.append(
            {
                "slot": int(key) if str(key).isdigit() else key,
                "iteration": info.get("iteration"),
                "phase": info.get("phase") or "idle",
                "elapsed_seconds": elapsed,
            }
        )
    return out
