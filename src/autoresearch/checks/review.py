"""What a careful engineer checks once the numbers are in, in order, first refusal wins:

    the rule's verdict (or a simplification: equal within noise, less code)
    -> Constraints: [[metrics]]               constraint_failed
    -> Simplicity: the gain pays its lines    discard
    -> Guard (sent back for rework)           rework, guard_failed
    -> Holdout, unseen by the proposer        overfit
    -> Approval: critical paths               awaiting_approval, rejected
    -> keep

Each check is one class with one method: it looks at the `Case` and returns a refusal (the
`Judged` the attempt ends with) or None. A new check is one class in `Review.checks`, not
a branch. The guard runs only for a candidate every cheaper check let through, the holdout
only for one about to be kept.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from autoresearch.attempt import Incumbent, Status
from autoresearch.checks.simplicity import Lines, parse_numstat, pays, settings, within_noise
from autoresearch.config import Campaign
from autoresearch.engine.recording import Judged
from autoresearch.measure.evaluation import Evaluation, Evaluator
from autoresearch.measure.metrics import check
from autoresearch.scope import PathMatcher
from autoresearch.stats.decide import Verdict, estimate

HoldoutCheck = Callable[[int, str, str], tuple[str | None, dict[str, object] | None, float]]


@dataclass
class Case:
    """A candidate the rule let through (or a simplification), as the checks see it. The
    checks that run commands add what they spent and found."""

    iteration: int
    commit: str
    files: tuple[str, ...]
    measured: Evaluation
    incumbent: Incumbent
    reason: str | None
    lines: dict[str, Any] | None  # the diff size, when simplicity weighs it
    diff: Lines | None
    rework_left: int = 0
    approved: bool = False  # re-checking a change a person approved: no parking
    seconds: float = 0.0  # spent by the checks' own commands
    holdout: dict[str, Any] | None = None

    def refuse(self, status: Status, reason: str | None) -> Judged:
        return Judged(status, reason, self.measured, self.seconds, self.lines, self.holdout)


class Check(Protocol):
    def __call__(self, case: Case) -> Judged | None: ...


@dataclass
class Constraints:
    campaign: Campaign
    evaluator: Evaluator

    def __call__(self, case: Case) -> Judged | None:
        cfg = self.campaign.config
        violation = check(
            cfg.metrics,
            case.measured.secondary,
            self.evaluator.incumbent_secondary(case.incumbent.commit, case.measured),
            cfg.decision.confidence,
        )
        return (
            None if violation is None else case.refuse(Status.CONSTRAINT_FAILED, violation.reason)
        )


@dataclass
class Simplicity:
    campaign: Campaign

    def __call__(self, case: Case) -> Judged | None:
        simplicity = settings(self.campaign.config.decision.simplicity)
        measured, incumbent = case.measured, case.incumbent
        if simplicity is None or case.diff is None or measured.verdict is not Verdict.KEEP:
            return None
        if measured.metric is None or incumbent.metric is None:
            return None
        direction = str(self.campaign.config.metric.direction)
        short = pays(simplicity, case.diff, measured.metric, incumbent.metric, direction)
        return None if short is None else case.refuse(Status.DISCARD, short)


@dataclass
class Guard:
    evaluator: Evaluator

    def __call__(self, case: Case) -> Judged | None:
        guard = self.evaluator.run_guard(case.iteration, case.commit)
        case.seconds += guard.seconds
        if not guard.failure:
            return None
        if guard.failure in (Status.TAMPERED, Status.INTERRUPTED):
            return case.refuse(Status(guard.failure), guard.reason)
        if case.rework_left > 0:
            why = f"{guard.reason}; sent back for rework ({case.rework_left} left)"
            return case.refuse(Status.REWORK, why)
        return case.refuse(Status.GUARD_FAILED, guard.reason)


@dataclass
class Holdout:
    run: HoldoutCheck

    def __call__(self, case: Case) -> Judged | None:
        overfit, found, spent = self.run(case.iteration, case.commit, case.incumbent.commit)
        case.seconds += spent
        case.holdout = found
        if overfit is None:
            return None
        status = Status.OVERFIT
        if overfit.startswith("tampered: "):
            status, overfit = Status.TAMPERED, overfit.removeprefix("tampered: ")
        elif found is not None and "error" in found:
            status = Status.CRASH  # the holdout could not say: nothing is kept
        return case.refuse(status, overfit)


@dataclass
class Approval:
    campaign: Campaign
    unattended: bool

    def __call__(self, case: Case) -> Judged | None:
        approval = self.campaign.config.approval
        if approval is None or case.approved:
            return None
        matcher = PathMatcher(approval.paths)
        critical = [f for f in case.files if matcher.matches(f)]
        if not critical:
            return None
        why = f"touches {', '.join(critical)} ([approval] paths); {case.reason or 'better'}"
        if self.unattended:
            why = f"{why}; rejected: unattended run, nobody to approve it"
            return case.refuse(Status.REJECTED, why)
        return case.refuse(Status.AWAITING_APPROVAL, why)


@dataclass
class Review:
    campaign: Campaign
    evaluator: Evaluator
    numstat: Callable[[str, str], str]  # git diff --numstat parent commit
    holdout: HoldoutCheck | None = None  # (iteration, candidate, incumbent) -> why overfit
    unattended: bool = False
    checks: list[Check] = field(init=False, default_factory=list)

    def __post_init__(self) -> None:
        self.checks = self.make_checks()

    def make_checks(self) -> list[Check]:
        checks: list[Check] = [
            Constraints(self.campaign, self.evaluator),
            Simplicity(self.campaign),
            Guard(self.evaluator),
        ]
        if self.holdout is not None:
            checks.append(Holdout(self.holdout))
        checks.append(Approval(self.campaign, self.unattended))
        return checks

    def judge(
        self,
        iteration: int,
        commit: str,
        files: tuple[str, ...],
        measured: Evaluation,
        incumbent: Incumbent,
        rework_left: int = 0,
        *,
        approved: bool = False,
    ) -> Judged:
        simplicity = settings(self.campaign.config.decision.simplicity)
        diff: Lines | None = None
        if simplicity is not None:
            diff = parse_numstat(self.numstat(incumbent.commit, commit))
        recorded = diff.to_json(simplicity) if diff and simplicity else None
        reason = measured.reason or None
        if measured.verdict is not Verdict.KEEP:
            simpler = self._simplification(measured, incumbent, diff)
            if simpler is None:
                return Judged(Status.DISCARD, reason, measured, lines=recorded)
            reason = simpler
        case = Case(
            iteration, commit, files, measured, incumbent, reason, recorded, diff,
            rework_left, approved,
        )  # fmt: skip
        for one in self.checks:
            refusal = one(case)
            if refusal is not None:
                return refusal
        return case.refuse(Status.KEEP, reason)

    def _simplification(
        self, measured: Evaluation, incumbent: Incumbent, lines: Lines | None
    ) -> str | None:
        """Why a candidate the rule did not find better is kept as a simplification."""
        simplicity = settings(self.campaign.config.decision.simplicity)
        if simplicity is None or not simplicity.keep_simplifications or lines is None:
            return None
        if not lines.shrinks or not measured.samples:
            return None
        reference = measured.incumbent_samples or self.evaluator.book.groups.get(
            incumbent.commit, []
        )
        equal, how = within_noise(
            measured.samples,
            reference,
            str(self.campaign.config.metric.direction),
            self.evaluator.rule,
        )
        if not equal:
            return None
        return (
            f"simplification: removes {lines.removed - lines.added} lines net "
            f"(+{lines.added}/-{lines.removed}) with the metric {how} "
            f"({estimate(measured.samples):.4g} vs {estimate(reference):.4g})"
        )
