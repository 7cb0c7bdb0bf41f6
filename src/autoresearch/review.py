"""What a careful engineer checks once the numbers are in, in order, first refusal wins:

    the rule's verdict (or a simplification: equal within noise, less code)
    -> constraints of [[metrics]]          constraint_failed
    -> simplicity: the gain pays its lines discard
    -> the guard (sent back for rework)    rework, guard_failed
    -> the holdout, unseen by the proposer overfit
    -> critical paths                      awaiting_approval
    -> keep

The guard runs only for a candidate every cheaper check let through, the holdout only for
one about to be kept.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from autoresearch.attempt import Incumbent, Status
from autoresearch.config import Campaign
from autoresearch.decide import Verdict, estimate
from autoresearch.evaluation import Evaluation, Evaluator
from autoresearch.metrics import check
from autoresearch.recording import Judged
from autoresearch.scope import PathMatcher
from autoresearch.simplicity import Lines, parse_numstat, pays, settings, within_noise

HoldoutCheck = Callable[[int, str, str], tuple[str | None, dict[str, object] | None, float]]


@dataclass
class Review:
    campaign: Campaign
    evaluator: Evaluator
    numstat: Callable[[str, str], str]  # git diff --numstat parent commit
    holdout: HoldoutCheck | None = None  # (iteration, candidate, incumbent) -> why overfit
    unattended: bool = False

    def judge(
        self,
        iteration: int,
        commit: str,
        files: tuple[str, ...],
        measured: Evaluation,
        incumbent: Incumbent,
        rework_left: int = 0,
        *,
        approved: bool = False,  # re-checking a change a person approved: no parking
    ) -> Judged:
        cfg = self.campaign.config
        direction = str(cfg.metric.direction)
        simplicity = settings(cfg.decision.simplicity)
        lines: Lines | None = None
        if simplicity is not None:
            lines = parse_numstat(self.numstat(incumbent.commit, commit))
        recorded = lines.to_json(simplicity) if lines and simplicity else None
        reason = measured.reason or None
        if measured.verdict is not Verdict.KEEP:
            simpler = self._simplification(measured, incumbent, lines)
            if simpler is None:
                return Judged(Status.DISCARD, reason, measured, lines=recorded)
            reason = simpler
        violation = check(
            cfg.metrics,
            measured.secondary,
            self.evaluator.incumbent_secondary(incumbent.commit, measured),
            cfg.decision.confidence,
        )
        if violation is not None:
            return Judged(Status.CONSTRAINT_FAILED, violation.reason, measured, lines=recorded)
        if (
            simplicity is not None
            and lines is not None
            and measured.verdict is Verdict.KEEP
            and measured.metric is not None
            and incumbent.metric is not None
        ):
            short = pays(simplicity, lines, measured.metric, incumbent.metric, direction)
            if short is not None:
                return Judged(Status.DISCARD, short, measured, lines=recorded)
        guard = self.evaluator.run_guard(iteration, commit)
        if guard.failure:
            if guard.failure == Status.TAMPERED:
                return Judged(Status.TAMPERED, guard.reason, measured, guard.seconds, recorded)
            if rework_left > 0:
                why = f"{guard.reason}; sent back for rework ({rework_left} left)"
                return Judged(Status.REWORK, why, measured, guard.seconds, recorded)
            return Judged(Status.GUARD_FAILED, guard.reason, measured, guard.seconds, recorded)
        seconds = guard.seconds
        holdout: dict[str, object] | None = None
        if self.holdout is not None:
            overfit, holdout, spent = self.holdout(iteration, commit, incumbent.commit)
            seconds += spent
            if overfit is not None:
                status = Status.OVERFIT
                if overfit.startswith("tampered: "):
                    status, overfit = Status.TAMPERED, overfit.removeprefix("tampered: ")
                elif holdout is not None and "error" in holdout:
                    status = Status.CRASH  # the holdout could not say: nothing is kept
                return Judged(status, overfit, measured, seconds, recorded, holdout)
        critical = [] if approved else self._critical(files)
        if critical:
            why = f"touches {', '.join(critical)} ([approval] paths); {reason or 'better'}"
            if self.unattended:
                why = f"{why}; rejected: unattended run, nobody to approve it"
                return Judged(Status.REJECTED, why, measured, seconds, recorded, holdout)
            return Judged(Status.AWAITING_APPROVAL, why, measured, seconds, recorded, holdout)
        return Judged(Status.KEEP, reason, measured, seconds, recorded, holdout)

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

    def _critical(self, files: tuple[str, ...]) -> list[str]:
        approval = self.campaign.config.approval
        if approval is None:
            return []
        matcher = PathMatcher(approval.paths)
        return [f for f in files if matcher.matches(f)]
