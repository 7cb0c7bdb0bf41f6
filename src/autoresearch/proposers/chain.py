"""Several `[[proposer]]` tables as one proposer: the engine's escalation step says which one
is asked (`ProposalContext.proposer_index`), e.g. a cheaper model first and a stronger one
when the campaign is stuck; it hears the outcome of its own proposal."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from autoresearch.isolation.proxy import ProposerNetwork
from autoresearch.proposers.base import Outcome, Proposal, ProposalContext, Proposer


class ProposerChain(Proposer):
    def __init__(self, members: Sequence[Proposer], kinds: Sequence[str]) -> None:
        self.members = list(members)
        self.kinds = list(kinds)
        self.active: int | None = None
        # The checkout is watched unless every member writes only through its own code or
        # runs confined.
        self.runs_commands = any(m.runs_commands for m in self.members)
        self.confined = all(m.confined for m in self.members)

    def pick(self, index: int) -> int:
        return min(max(index, 0), len(self.members) - 1)

    def propose(self, ctx: ProposalContext) -> Proposal:
        self.active = self.pick(ctx.proposer_index)
        proposal = self.members[self.active].propose(ctx)
        if len(self.members) > 1 and proposal.description:
            who = f"[proposer {self.active + 1}, {self.kinds[self.active]}]"
            proposal.description = f"{who} {proposal.description}"
        return proposal

    def observe(self, outcome: Outcome) -> None:
        if self.active is not None:
            active, self.active = self.active, None
            self.members[active].observe(outcome)

    def close(self) -> None:
        for member in self.members:
            member.close()

    def validate(self, workspace: Path) -> None:
        for member in self.members:
            member.validate(workspace)

    def preflight(self, workspace: Path, offline: bool) -> str:
        found = []
        for kind, member in zip(self.kinds, self.members, strict=True):
            found.append(member.preflight(workspace, offline) or kind)
        return "; then ".join(found)

    def reach(self) -> tuple[ProposerNetwork, ...]:
        return tuple(n for member in self.members for n in member.reach())

    def exhausted(self) -> bool:
        """Every member has nothing left to try."""
        return all(m.exhausted() for m in self.members)
