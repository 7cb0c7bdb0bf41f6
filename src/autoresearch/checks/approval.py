"""`[approval] paths`: a better candidate touching them waits for a person.

The engine measures such a candidate like any other, then parks it as
`awaiting_approval` (rolled back; the loop goes on). `autoresearch approve N` re-checks it
against the current best: its change (parent -> candidate) is merged onto the current
incumbent in a scratch index, and that tree is measured, guarded and reviewed as a new
attempt whose `approval_of` is N; it is kept only if it still wins. `autoresearch reject
N` appends a `rejected` record. Under `run --unattended` nobody can approve, so such a
candidate is `rejected` at once, with that reason.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

from autoresearch.attempt import AttemptRecord, Status
from autoresearch.config import Campaign
from autoresearch.engine.startup import lock_campaign, utc_now
from autoresearch.errors import AutoresearchError
from autoresearch.proposers.base import Outcome, Proposal, ProposalContext, Proposer
from autoresearch.stats.decide import JUDGE_VERSION
from autoresearch.store.ledger import Ledger


class ApprovalError(AutoresearchError):
    """The attempt cannot be approved or rejected (with the reason and what to do)."""

    exit_code = 2


def parked(records: list[AttemptRecord], iteration: int) -> AttemptRecord:
    """The `awaiting_approval` record `iteration`, not yet decided."""
    found = next((r for r in records if r.iteration == iteration), None)
    if found is None:
        raise ApprovalError(f"there is no attempt {iteration}; see `autoresearch log`.")
    if found.status is not Status.AWAITING_APPROVAL:
        raise ApprovalError(
            f"attempt {iteration} is {found.status}, not awaiting_approval; only a parked "
            "candidate can be approved or rejected."
        )
    decided = next((r for r in records if r.approval_of == iteration), None)
    if decided is not None:
        raise ApprovalError(
            f"attempt {iteration} was decided already by attempt {decided.iteration} "
            f"({decided.status})."
        )
    return found


def pending(records: list[AttemptRecord]) -> list[AttemptRecord]:
    """Parked candidates nobody decided yet."""
    decided = {r.approval_of for r in records if r.approval_of is not None}
    return [
        r for r in records if r.status is Status.AWAITING_APPROVAL and r.iteration not in decided
    ]


def best_commit(records: list[AttemptRecord]) -> str | None:
    return next((r.commit for r in reversed(records) if r.status.sets_best), None)


def reject(campaign: Campaign, iteration: int, reason: str | None) -> AttemptRecord:
    """Append the `rejected` record of parked attempt `iteration` (the engine must not run)."""
    lock = lock_campaign(campaign)
    try:
        ledger = Ledger(campaign.state_dir)
        records = ledger.read()
        record = parked(records, iteration)
        best = next((r for r in reversed(records) if r.status.sets_best), None)
        why = reason or "rejected by a person"
        number = records[-1].iteration + 1
        if record.commit:  # every recorded commit stays reachable under its attempt's ref
            subprocess.run(
                [
                    "git",
                    "-C",
                    str(campaign.root),
                    "update-ref",
                    f"refs/autoresearch/{campaign.name}/{number}",
                    record.commit,
                ],
                check=True,
                capture_output=True,
            )
        return ledger.append(
            AttemptRecord(
                iteration=number,
                status=Status.REJECTED,
                commit=record.commit,
                parent=best.commit if best else None,
                files=record.files,
                description=record.description,
                reason=why,
                approval_of=iteration,
                judge=JUDGE_VERSION,
                closed=True,
                best=best.metric if best else None,
                utc=utc_now(),
            )
        )
    finally:
        lock.release()


def merged_tree(root: Path, record: AttemptRecord, onto: str) -> str:
    """The tree of `record`'s change (its parent -> its commit) applied to `onto`.

    A three-way merge of trees in a scratch index: a file both sides changed is a
    conflict, reported, never resolved by guessing."""
    assert record.commit and record.parent
    if record.parent == onto:
        return record.commit
    with tempfile.TemporaryDirectory() as scratch:
        env = {**os.environ, "GIT_INDEX_FILE": str(Path(scratch) / "index")}

        def git(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                ["git", "-C", str(root), *args], env=env, capture_output=True, text=True
            )

        merge = git("read-tree", "-m", "-i", record.parent, onto, record.commit)
        tree = git("write-tree") if merge.returncode == 0 else merge
        if tree.returncode != 0:
            both = git("ls-files", "-u").stdout.split("\n")
            paths = sorted({line.split("\t", 1)[1] for line in both if "\t" in line})
            shown = ", ".join(paths[:5]) or (merge.stderr.strip() or "unknown")
            raise ApprovalError(
                f"attempt {record.iteration}'s change no longer applies to the current best "
                f"(both changed {shown}); reject it with `autoresearch reject "
                f"{record.iteration}`."
            )
        return tree.stdout.strip()


class ApprovedChange(Proposer):
    """Stands in for the proposer while an approved change is re-checked: it proposes
    nothing (the engine loads the change itself) and hears the verdict."""

    runs_commands = False

    def __init__(self) -> None:
        self.outcome: Outcome | None = None

    def propose(self, ctx: ProposalContext) -> Proposal:
        return Proposal(description="approved change")

    def observe(self, outcome: Outcome) -> None:
        self.outcome = outcome

    def close(self) -> None:
        return None
