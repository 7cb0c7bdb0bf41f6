"""No repeated work: a candidate whose files an earlier attempt already measured is answered
from the ledger, and the same failure over and over trips a breaker.

Everything here is derived from the ledger's records (their commits and statuses), never
from what a proposer says, so a resumed campaign reaches the same answers.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence

from autoresearch.attempt import AttemptRecord, Screened, Status, num, without_holdout
from autoresearch.gitcmd import Git

# Trees of commits, looked up in one git call: commit -> tree, missing commits left out.
TreeLookup = Callable[[Sequence[str]], dict[str, str]]


class TreeIndex:
    """The tree of every measured attempt, oldest first: which attempt measured a tree."""

    def __init__(self, lookup: TreeLookup) -> None:
        self.lookup = lookup
        self.first: dict[str, AttemptRecord] = {}

    def load(self, records: Iterable[AttemptRecord]) -> None:
        measured = [r for r in records if r.status.measured and r.commit]
        trees = self.lookup([r.commit for r in measured if r.commit])
        for record in measured:
            tree = trees.get(record.commit or "")
            if tree is not None:
                self.first.setdefault(tree, record)

    def add(self, record: AttemptRecord, tree: str | None) -> None:
        if tree and record.status.measured:
            self.first.setdefault(tree, record)

    def earlier(self, tree: str) -> AttemptRecord | None:
        """The first measured attempt whose files were exactly `tree`, if any."""
        return self.first.get(tree)

    def screen(self, tree: str) -> Screened | None:
        """`duplicate` for a candidate whose files were measured before, else None."""
        earlier = self.earlier(tree)
        return None if earlier is None else Screened(Status.DUPLICATE, duplicate_reason(earlier))

    def answer(self, record: AttemptRecord) -> float | None:
        """The number a proposer is told for `record`: a duplicate's is the earlier
        attempt's measurement, read from the ledger."""
        if record.status is not Status.DUPLICATE:
            return record.metric
        number = duplicate_of(record)
        found = next((r for r in self.first.values() if r.iteration == number), None)
        return None if found is None else found.metric


def git_trees(git: Git) -> TreeLookup:
    """Look trees up with one `git cat-file --batch-check`; a commit git no longer has
    (its objects pruned) is left out."""

    def lookup(commits: Sequence[str]) -> dict[str, str]:
        if not commits:
            return {}
        query = "".join(f"{c}^{{tree}}\n" for c in commits).encode()
        out = git.run_bytes("cat-file", "--batch-check=%(objectname) %(objecttype)", input=query)
        found: dict[str, str] = {}
        for commit, line in zip(commits, out.decode().splitlines(), strict=False):
            parts = line.split()
            if len(parts) == 2 and parts[1] == "tree":
                found[commit] = parts[0]
        return found

    return lookup


def duplicate_reason(earlier: AttemptRecord) -> str:
    """Why a candidate was not measured: it names the attempt that already was."""
    what = "the baseline" if earlier.status is Status.BASELINE else f"attempt {earlier.iteration}"
    outcome = str(earlier.status)
    if earlier.metric is not None:
        outcome += f", metric {num(earlier.metric)}"
    return f"the same files as {what} ({outcome}); answered from the ledger, not measured again"


def duplicate_of(record: AttemptRecord) -> int | None:
    """The earlier attempt a `duplicate` record names (0 for the baseline)."""
    if record.status is not Status.DUPLICATE or not record.reason:
        return None
    if "as the baseline" in record.reason:
        return 0
    found = re.search(r"as attempt (\d+)", record.reason)
    return int(found.group(1)) if found else None


_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?", re.IGNORECASE)


def failure_signature(record: AttemptRecord) -> str | None:
    """What makes two failures "the same": the status and the reason with its numbers
    blanked (seconds, codes, attempt numbers vary between repeats of one mistake). A
    duplicate's signature is the attempt it repeats. A better candidate a later check
    refused (a constraint, the holdout, a person) is a failure too; None for the outcomes
    that are not (`Status.failed_or_refused`: a keep, a measured discard, no change, a
    parked candidate)."""
    status = record.status
    if status is Status.DUPLICATE:
        return f"duplicate:{duplicate_of(record)}"
    if not status.failed_or_refused:
        return None
    reason = _NUMBER.sub("#", (record.reason or "").strip().lower())[:200]
    return f"{status}:{reason}"


def _signature(record: AttemptRecord, seen: dict[int, str | None]) -> str | None:
    """A duplicate of a failed attempt repeats that failure: it shares its signature."""
    if record.status is Status.DUPLICATE:
        number = duplicate_of(record)
        earlier = seen.get(number) if number is not None else None
        return earlier or failure_signature(record)
    return failure_signature(record)


def breaker_trips(records: Sequence[AttemptRecord], limit: int) -> int:
    """How often, since the last keep, `limit` attempts in a row failed the same way.
    Each run of `limit` identical failures is one trip; the count restarts after a trip, so
    a proposer that goes on repeating itself trips the breaker again."""
    if limit <= 0:
        return 0
    trips = 0
    run = 0
    last: str | None = None
    seen: dict[int, str | None] = {}
    for record in records:
        seen[record.iteration] = _signature(record, seen)
        if record.status.sets_best:
            trips, run, last = 0, 0, None
            continue
        if record.status is Status.INTERRUPTED:
            continue  # says nothing about the search
        signature = seen[record.iteration]
        if signature is None:
            run, last = 0, None
            continue
        run = run + 1 if signature == last else 1
        last = signature
        if run >= limit:
            trips += 1
            run, last = 0, None
    return trips


def repeated_failure(records: Sequence[AttemptRecord], limit: int) -> str | None:
    """The failure the last `limit` attempts repeated, when they just tripped the breaker."""
    if limit <= 0:
        return None
    seen: dict[int, str | None] = {}
    for record in records:
        seen[record.iteration] = _signature(record, seen)
    recent = [r for r in records if r.status is not Status.INTERRUPTED][-limit:]
    if len(recent) < limit or any(r.status.sets_best for r in recent):
        return None
    signatures = {seen[r.iteration] for r in recent}
    if len(signatures) != 1 or None in signatures:
        return None
    last = recent[-1]
    reason = (without_holdout(last).reason or "").strip()
    return f"{last.status}" + (f": {reason[:300]}" if reason else "")
