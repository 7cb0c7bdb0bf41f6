"""`run --ci` and `run --more`: a campaign run by a scheduler, and a finished one extended.

`--ci` prints no live view (the attempts go to stderr, one line each) and one JSON object
on stdout; its exit code says whether this run improved the best: 0 improved, 4 not
improved (it ran and stopped normally, nothing better was kept), the usual codes when it
failed (1 runtime failure, 2 bad config, 3 tampered, 130 interrupted)."""

from __future__ import annotations

from typing import Any

from autoresearch.attempt import AttemptRecord
from autoresearch.config import Campaign
from autoresearch.engine.lifecycle import EXIT_OK, RunResult
from autoresearch.errors import ConfigError
from autoresearch.store.ledger import Ledger

EXIT_NOT_IMPROVED = 4


def more_attempts(campaign: Campaign, more: int, max_iterations: int | None) -> tuple[int, int]:
    """The total of attempts `--more N` gives the campaign, and the last attempt so far."""
    if max_iterations is not None:
        raise ConfigError(
            "--more N and --max-iterations N both set how many attempts to make; pass one."
        )
    records = Ledger(campaign.state_dir).read()
    if not records:
        raise ConfigError(
            f"campaign '{campaign.name}' has not run yet; `autoresearch run` starts it "
            "(--more extends a campaign that ran)."
        )
    last = max(r.iteration for r in records)
    return last + more, last


def ci_summary(
    campaign: Campaign, before: list[AttemptRecord], result: RunResult
) -> tuple[dict[str, Any], int]:
    """The JSON `run --ci` prints and its exit code."""
    done = {r.iteration for r in before}
    records = Ledger(campaign.state_dir).read()
    new = [r for r in records if r.iteration not in done]
    kept = [r.iteration for r in new if r.status.sets_best and r.iteration != 0]
    improved = bool(kept)
    if result.exit_code != EXIT_OK:
        code, outcome = result.exit_code, "failed"
    elif improved:
        code, outcome = EXIT_OK, "improved"
    else:
        code, outcome = EXIT_NOT_IMPROVED, "not_improved"
    summary = result.summary
    data = {
        "campaign": campaign.name,
        "outcome": outcome,  # improved | not_improved | failed
        "improved": improved,
        "exit_code": code,
        "stop_reason": result.stop_reason or None,
        "message": result.message or None,
        "attempts": len([r for r in new if r.iteration != 0]),
        "kept": kept,
        "baseline": summary.get("baseline"),
        "best": summary.get("best"),
        "best_before": _best(before),
        "best_iteration": summary.get("best_iteration"),
        "best_commit": summary.get("best_commit"),
        "delta": summary.get("delta"),
        "improvement_pct": summary.get("improvement_pct"),
        "iterations": summary.get("iterations"),
        "branch": f"autoresearch/{campaign.name}",
        "ledger": str(campaign.state_dir / "ledger.jsonl"),
    }
    return data, code


def ci_failure(message: str, code: int) -> dict[str, Any]:
    """What `run --ci` prints when the run could not start or broke off with an error."""
    return {"outcome": "failed", "improved": False, "exit_code": code, "message": message}


def _best(records: list[AttemptRecord]) -> float | None:
    return next((r.metric for r in reversed(records) if r.status.sets_best), None)


__all__ = ["EXIT_NOT_IMPROVED", "ci_failure", "ci_summary", "more_attempts"]
