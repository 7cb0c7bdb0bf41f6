"""Screening a candidate before it is measured: what the proposer did, judged from git alone."""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field

from autoresearch.attempt import Screened, Status
from autoresearch.proposers.base import Proposal
from autoresearch.scope import Caps, PathMatcher
from autoresearch.workspace import Candidate


@dataclass(frozen=True)
class Rules:
    """What a candidate may touch."""

    scope: PathMatcher
    harness: PathMatcher
    fingerprinted: Collection[str]  # harness files and the rubric (the config is refused in scope)
    escapes: Callable[[str], bool]  # a path is a symlink leading out of the workspace
    # how large and how many its files may be (`[scope] max_file_mb`, `max_files`)
    caps: Caps = field(default_factory=Caps)

    def admits(self, path: str) -> bool:
        """A path a candidate may change: its content may enter the repository."""
        return (
            self.scope.matches(path)
            and not self.harness.matches(path)
            and path not in self.fingerprinted
        )


def screen(
    proposal: Proposal, candidate: Candidate, checkout_changes: list[str], rules: Rules
) -> Screened | None:
    """The status of an attempt that must not be measured, or None to measure it.

    Checked in order of severity: the user's checkout changed (halts), the proposer failed,
    its edits were refused, nothing changed, the judge was touched (halts), the scope was left.
    """
    if checkout_changes:
        shown = ", ".join(checkout_changes[:5])
        return Screened(
            Status.CHECKOUT_CHANGED, f"your checkout changed while the proposer ran: {shown}"
        )
    if proposal.timed_out:
        return Screened(Status.TIMEOUT, proposal.reason)
    if proposal.failed:
        return Screened(Status.PROPOSER_FAILED, proposal.reason)
    if proposal.refused:
        return Screened(Status.EDIT_REFUSED, proposal.reason)
    if not candidate.changes:
        return Screened(Status.NO_CHANGE)
    touched = [p for p in candidate.paths if p in rules.fingerprinted or rules.harness.matches(p)]
    if touched:
        return Screened(Status.TAMPERED, f"the proposer changed the harness file {touched[0]}")
    outside = [
        c.path
        for c in candidate.changes
        if not rules.scope.matches(c.path) or (c.status != "D" and rules.escapes(c.path))
    ]
    if outside:
        return Screened(
            Status.SCOPE_VIOLATION, "changed outside the scope: " + ", ".join(outside[:5])
        )
    if candidate.unstorable:
        return Screened(Status.EDIT_REFUSED, candidate.unstorable)
    return None
