"""Asking the proposer for one change, and watching the user's checkout while it works."""

from __future__ import annotations

import traceback
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from autoresearch.errors import AutoresearchError
from autoresearch.isolation.owned import write_text
from autoresearch.proposers.base import (
    REASON_CHARS,
    Proposal,
    ProposalContext,
    Proposer,
    clean_text,
)
from autoresearch.workspace import checkout_changes, checkout_state


def ask(proposer: Proposer, ctx: ProposalContext, trace: Path) -> Proposal:
    """The proposer's proposal; its failure, whatever it raised, is a failed proposal:
    a proposer's bug costs one attempt, not the campaign."""
    try:
        return proposer.propose(ctx)
    except AutoresearchError as exc:
        return Proposal(failed=True, reason=clean_text(str(exc), REASON_CHARS))
    except Exception as exc:
        write_text(trace, traceback.format_exc())
        reason = f"{type(exc).__name__}: {exc} (see {trace.name})"
        return Proposal(failed=True, reason=clean_text(reason, REASON_CHARS))


class CheckoutWatch:
    """The user's checkout (and shared paths) before the proposer ran, to compare after.

    A proposer that only writes through its own code (`runs_commands = False`) cannot
    reach the checkout, so it is not watched."""

    def __init__(self, root: Path, shares: list[str], enabled: bool) -> None:
        self.root = root
        self.shares = shares
        self.before = checkout_state(root, shares) if enabled else None
        self._after: Future[dict[str, str]] | None = None
        self._pool: ThreadPoolExecutor | None = None

    def scan_after(self) -> None:
        """Start the second scan in the background: it is an independent git process."""
        if self.before is not None:
            self._pool = ThreadPoolExecutor(max_workers=1)
            self._after = self._pool.submit(checkout_state, self.root, self.shares)

    def changes(self) -> list[str]:
        """What changed in the checkout while the proposer ran (waits for `scan_after`)."""
        if self.before is None or self._after is None or self._pool is None:
            return []
        try:
            return checkout_changes(self.before, self._after.result())
        finally:
            self._pool.shutdown()
