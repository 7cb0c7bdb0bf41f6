"""`autoresearch check`: run the metric and guard once on HEAD, exactly as a campaign would."""

from __future__ import annotations

import os
import shutil
import statistics
from dataclasses import dataclass, field

from autoresearch.attempt import Status
from autoresearch.config import Campaign
from autoresearch.evaluation import measurement_env
from autoresearch.executors import CommandSpec, LocalExecutor, Measurement, metric_spec
from autoresearch.executors.base import OK
from autoresearch.gitcmd import Git
from autoresearch.integrity import harness_files
from autoresearch.judge import Judge
from autoresearch.process import Limits
from autoresearch.proposers import create_proposer, validate_proposer
from autoresearch.workspace import Workspace, ensure_state_dir, head_of


@dataclass
class CheckReport:
    commit: str
    metric: list[Measurement] = field(default_factory=list)
    guard: Measurement | None = None
    harness: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(m.ok for m in self.metric) and (self.guard is None or self.guard.ok)

    def values(self) -> list[float]:
        return [m.value for m in self.metric if m.value is not None]

    def spread(self) -> dict[str, float]:
        values = self.values()
        if not values:
            return {}
        median = statistics.median(values)
        return {
            "median": median,
            "mad": statistics.median(abs(v - median) for v in values),
            "min": min(values),
            "max": max(values),
        }


def run_check(campaign: Campaign, repeat: int = 1) -> CheckReport:
    """Validate everything that can be validated, then measure HEAD in a scratch worktree."""
    cfg = campaign.config
    proposer = create_proposer(campaign)
    commit = head_of(campaign.root)
    ensure_state_dir(campaign.root)
    scratch = campaign.state_dir / f"check-{os.getpid()}"
    campaign.state_dir.mkdir(parents=True, exist_ok=True)
    repo = Git(campaign.root)
    repo.run("worktree", "add", "-q", "--detach", "-f", str(scratch), commit)
    try:
        view = Workspace(campaign.root, campaign.name, campaign.state_dir, list(cfg.share))
        view.path = scratch
        view.link_shares()
        validate_proposer(proposer, scratch)
        report = CheckReport(commit=commit, harness=harness_files(campaign, scratch))
        executor = LocalExecutor()
        env = measurement_env(cfg.sandbox.pass_env)
        env["AUTORESEARCH_ITERATION"] = "0"
        env["AUTORESEARCH_WORKSPACE"] = str(scratch)
        logs = campaign.state_dir / "logs"
        sandbox = cfg.sandbox
        limits = Limits(sandbox.memory_mb, sandbox.cpu_seconds, sandbox.network)
        spec = metric_spec(cfg.metric, limits)
        judge = Judge(cfg.judge, campaign) if cfg.metric.command is None and cfg.judge else None
        for k in range(repeat):
            stem = logs / f"check-metric-{k + 1}"
            if judge is not None:
                verdict = judge.score(scratch, stem)
                outcome = OK if verdict.score is not None else Status.CRASH
                report.metric.append(
                    Measurement(
                        outcome,
                        verdict.score,
                        verdict.seconds,
                        verdict.reason,
                        stem.with_suffix(".out"),
                    )
                )
            else:
                report.metric.append(executor.run(spec, workspace=scratch, env=env, log_stem=stem))
            if not report.metric[-1].ok:
                break
        if cfg.guard is not None and report.metric[-1].ok:
            guard = CommandSpec(cfg.guard.command, cfg.guard.timeout, parse=False, limits=limits)
            report.guard = executor.run(
                guard, workspace=scratch, env=env, log_stem=logs / "check-guard"
            )
        return report
    finally:
        repo.run("worktree", "remove", "--force", str(scratch), check=False)
        if scratch.exists():
            shutil.rmtree(scratch, ignore_errors=True)
        repo.run("worktree", "prune", check=False)
