"""Starting or resuming a campaign: the lock, the start commit, the same judge, lost attempts."""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from filelock import FileLock, Timeout

from autoresearch.attempt import AttemptRecord, Status
from autoresearch.config import Campaign
from autoresearch.engine.screening import Rules
from autoresearch.errors import CampaignLocked, ConfigError, GitError
from autoresearch.measure.integrity import Fingerprint, harness_files, measurement_changes
from autoresearch.scope import PathMatcher
from autoresearch.store.ledger import Ledger, StateFile
from autoresearch.store.summary import summarize
from autoresearch.workspace import Workspace, checkout_state, head_of


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def mark_running(state: StateFile, campaign: Campaign, max_iterations: int) -> None:
    """What `status` shows of a running engine before its first attempt."""
    cfg = campaign.config
    state.update(
        name=cfg.name,
        direction=cfg.metric.direction,
        target=cfg.metric.target,
        config=str(campaign.config_path),
        pid=os.getpid(),
        running=True,
        stop_reason=None,
        started_utc=utc_now(),
        max_iterations=max_iterations,
    )


def lock_campaign(campaign: Campaign) -> FileLock:
    """One engine per campaign; a second one is told who holds the lock."""
    state = StateFile(campaign.state_dir)
    lock = FileLock(str(campaign.state_dir / "engine.lock"), timeout=0)
    try:
        lock.acquire()
    except Timeout:
        pid = state.read().get("pid")
        who = f"process {pid}" if pid else "another process"
        raise CampaignLocked(
            f"campaign '{campaign.name}' is already running ({who}); wait for it to finish "
            "or stop it first."
        ) from None
    return lock


def start_commit(
    campaign: Campaign, workspace: Workspace, ledger: Ledger, records: Sequence[AttemptRecord]
) -> str:
    """The user's HEAD for a new campaign; the best kept commit for a resumed one."""
    root = campaign.root
    head = head_of(root)
    current = workspace.repo.run("symbolic-ref", "-q", "HEAD", check=False).strip()
    if current == workspace.branch_ref:
        raise GitError(
            f"your checkout is on the campaign branch {workspace.branch}; switch to "
            "another branch first, the engine moves this one."
        )
    if not records:
        if workspace.branch_commit() not in (None, head):
            raise ConfigError(
                f"branch {workspace.branch} already exists but "
                f"{ledger.path.relative_to(root)} does not; delete the branch "
                f"(git worktree prune && git branch -D {workspace.branch}) or choose "
                "another name."
            )
        return head
    best = summarize(campaign.name, str(campaign.config.metric.direction), records).best_commit
    if not best or workspace.repo.rev(best) is None:
        raise GitError(
            f"the best commit {best} recorded in {ledger.path.name} is missing from "
            "the repository; the campaign cannot resume."
        )
    return best


# Stop reasons a campaign halts on (rather than finishing): a resume from one is said.
HALTED = ("tampered", "checkout_changed", "proposer_failed", "baseline_failed")


def resume_notes(
    campaign: Campaign,
    workspace: Workspace,
    before: dict[str, Any],
    records: Sequence[AttemptRecord],
) -> list[str]:
    """What changed since the campaign's last run, said once on resume: the halt it goes
    on from, and commits made on the user's HEAD that its base does not hold."""
    if not records:
        return []
    notes: list[str] = []
    halted = before.get("stop_reason")
    if halted in HALTED:
        why = before.get("stop_message") or ""
        notes.append(
            f"resuming campaign '{campaign.name}' after it halted ({halted}"
            + (f": {why}" if why else "")
            + "); `autoresearch log` shows the attempt that halted it"
        )
    base = records[0].commit
    head = head_of(campaign.root)
    if base and head != base and head != before.get("head_seen"):
        repo = workspace.repo
        count = repo.run("rev-list", "--count", f"{base}..{head}", check=False).strip()
        if count.isdigit() and int(count) > 0:
            notes.append(
                f"your HEAD has {count} commit{'s' if int(count) > 1 else ''} that the "
                f"campaign's base {base[:10]} does not; the campaign goes on from its own "
                "best without them (`autoresearch apply` merges its change onto your HEAD; "
                "a new campaign under another name starts from it)"
            )
    return notes


def check_same_judge(
    campaign: Campaign, state: StateFile, settings: dict[str, Any], resumed: bool
) -> None:
    """Refuse to resume when what is measured changed (the numbers would not be
    comparable); settings that do not change a number (timeouts, stop rules, the proposer)
    pass. The fingerprint is then stored in today's format."""
    stored = state.read().get("fingerprint")
    if resumed and isinstance(stored, dict):
        changed = measurement_changes(campaign, stored, settings)
        if changed:
            raise ConfigError(
                f"the measurement settings changed since campaign '{campaign.name}' started "
                f"({', '.join(changed)}); numbers would not be comparable. Restore them in "
                f"{campaign.display_path()}, or start a new campaign under another name."
            )
    state.update(fingerprint=settings)


def lost_attempt(
    state: StateFile, records: Sequence[AttemptRecord], incumbent: str
) -> AttemptRecord | None:
    """The attempt that was in flight when an engine died, to be logged, never lost: with
    what was known of it (its commit, description, files, cost) once it was collected."""
    data = state.read()
    in_flight = data.get("in_flight")
    last = max((r.iteration for r in records), default=0)
    if in_flight is None or int(in_flight) <= last or not records:
        return None
    known = data.get("in_flight_record")
    if isinstance(known, dict) and known.get("iteration") == int(in_flight):
        try:
            return AttemptRecord.from_json(known)
        except (TypeError, ValueError):
            pass  # a state file from elsewhere: log what is certain
    return AttemptRecord(
        iteration=int(in_flight),
        status=Status.INTERRUPTED,
        parent=incumbent,
        reason=LOST_REASON,
    )


LOST_REASON = "the engine stopped while this attempt was in flight"


def dirty_checkout_warning(campaign: Campaign) -> str | None:
    # The ideas backlog is the engine's to append to: not a change the user forgot.
    skip = ("(branch)", "(HEAD)", campaign.config.ideas)
    dirty = [k for k in checkout_state(campaign.root) if k not in skip]
    if not dirty:
        return None
    more = ", ..." if len(dirty) > 3 else ""
    message = (
        f"your checkout has uncommitted changes ({', '.join(dirty[:3])}{more}); the campaign "
        "starts from HEAD without them"
    )
    try:
        config = campaign.config_path.resolve().relative_to(campaign.root.resolve()).as_posix()
    except ValueError:
        return message
    if config in dirty:
        message += f", but reads {config} as it is on disk"
    return message


def fix_judge(
    campaign: Campaign, workspace: Workspace, state: StateFile, resumed: bool
) -> tuple[Fingerprint, Rules]:
    """Fingerprint what judges the campaign (refusing a resume with a different one), and
    the rules a candidate is screened by."""
    refuse_config_in_scope(campaign)
    paths = harness_files(campaign, workspace.path)
    fingerprint = Fingerprint.take(campaign, workspace.path, paths)
    check_same_judge(campaign, state, fingerprint.to_json(), resumed)
    cfg = campaign.config
    scope, harness = PathMatcher(cfg.scope), PathMatcher(cfg.harness)
    caps = cfg.scope_limits.caps()
    return fingerprint, Rules(scope, harness, fingerprint.files, workspace.escapes, caps)


def refuse_config_in_scope(campaign: Campaign) -> None:
    """A config file the proposer may edit would let it rewrite its own judge."""
    try:
        rel = campaign.config_path.resolve().relative_to(campaign.root.resolve()).as_posix()
    except ValueError:
        return  # outside the repository: out of the proposer's reach by scope
    if PathMatcher(campaign.config.scope).matches(rel):
        raise ConfigError(
            f"{campaign.display_path()}: key 'scope': it matches the config file {rel}, so the "
            "proposer could rewrite its own judge; narrow 'scope' to leave the config out."
        )


def to_measure(lost: AttemptRecord, workspace: Workspace) -> bool:
    """Whether an interrupted attempt's candidate is measured on resume: when a paid
    proposer (one that reported a cost or tokens) made it and it was committed."""
    return bool(lost.commit and lost.cost and workspace.repo.rev(lost.commit))
