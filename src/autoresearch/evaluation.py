"""Measuring code: the baseline, a candidate against the incumbent, and the guard.

The decision rule says how many samples it needs; under `sequential` the incumbent is
re-measured between candidate samples (candidate, incumbent, candidate, ...), so drift of
the machine affects both sides alike. Every run is verified against the harness
fingerprint first, and whatever a run leaves in the worktree is undone after it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autoresearch.config import Campaign
from autoresearch.decide import (
    REFERENCE_MIN,
    Noise,
    Verdict,
    decide,
    estimate,
    pooled_noise,
    samples_needed,
)
from autoresearch.executors import CommandSpec, Executor, metric_spec
from autoresearch.harness import Limits
from autoresearch.integrity import Fingerprint
from autoresearch.judge import Judge
from autoresearch.summary import sample_groups
from autoresearch.workspace import Candidate, Workspace

Phase = Callable[..., None]


@dataclass
class Evaluation:
    samples: list[float] = field(default_factory=list)
    incumbent_samples: list[float] = field(default_factory=list)
    verdict: Verdict = Verdict.DISCARD
    failure: str | None = None  # crash, timeout or tampered
    reason: str = ""
    seconds: float = 0.0
    runs: int = 0
    carried: int = 0  # reference samples earlier evaluations left when this one began
    cost_usd: float = 0.0  # what an LLM judge cost
    tokens_in: int = 0
    tokens_out: int = 0

    @property
    def metric(self) -> float | None:
        return estimate(self.samples) if self.samples else None


SECRET_RE = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?)$", re.IGNORECASE)


def measurement_env(pass_env: list[str]) -> dict[str, str]:
    """The engine's environment minus secrets (`*_KEY`, `*_TOKEN`, ...), unless passed."""
    allowed = set(pass_env)
    return {k: v for k, v in os.environ.items() if k in allowed or not SECRET_RE.search(k)}


class Evaluator:
    def __init__(
        self,
        campaign: Campaign,
        workspace: Workspace,
        executor: Executor,
        fingerprint: Fingerprint,
        logs: Path,
        phase: Phase,
    ) -> None:
        cfg = campaign.config
        self.campaign = campaign
        self.rule = cfg.decision
        self.direction = cfg.metric.direction
        self.workspace = workspace
        self.executor = executor
        self.fingerprint = fingerprint
        self.logs = logs
        self.phase = phase
        sandbox = cfg.sandbox
        limits = Limits(sandbox.memory_mb, sandbox.cpu_seconds, sandbox.network)
        self.metric = metric_spec(cfg.metric, limits)
        # With no metric command, the LLM judge is the metric.
        self.judge = (
            Judge(cfg.judge, campaign) if cfg.metric.command is None and cfg.judge else None
        )
        self.guard = (
            CommandSpec(cfg.guard.command, cfg.guard.timeout, parse=False, limits=limits)
            if cfg.guard
            else None
        )
        # Samples of each version of the code measured so far, for the pooled noise.
        self.groups: dict[str, list[float]] = {}
        # How many of a kept commit's samples were taken to select it. They are biased
        # in its favour (it was kept because they looked good), so comparisons use only
        # its later re-measurements.
        self.selected: dict[str, int] = {}
        # How many of a commit's samples were taken when it was measured itself (as the
        # baseline or as a candidate); the rest are re-measurements as the incumbent.
        self.own: dict[str, int] = {}
        self.incumbent = ""

    # -- bookkeeping --------------------------------------------------------------------

    def load(self, records: list[dict[str, Any]], incumbent: str) -> None:
        """Rebuild the samples per commit from the ledger (for a resumed campaign)."""
        self.groups = sample_groups(records)
        self.selected = {
            str(r["commit"]): len(r.get("samples") or [])
            for r in records
            if r.get("status") == "keep" and r.get("commit")
        }
        self.own = {
            str(r["commit"]): len(r.get("samples") or [])
            for r in records
            if r.get("status") in ("keep", "baseline") and r.get("commit")
        }
        self.incumbent = incumbent

    def incumbent_samples(self) -> list[float]:
        return self.groups.get(self.incumbent, [])

    def reference(self) -> list[float]:
        """The incumbent samples a candidate is compared with."""
        samples = self.incumbent_samples()
        if self.rule.rule == "sequential":
            unbiased = samples[self.selected.get(self.incumbent, 0) :]
            return unbiased[-self.rule.max_samples :]
        return samples

    def carried(self) -> int:
        """How many reference samples earlier candidates' evaluations left behind."""
        remeasured = len(self.incumbent_samples()) - self.own.get(self.incumbent, 0)
        return max(0, min(len(self.reference()), remeasured))

    def noise(self, extra: list[float] | None = None) -> Noise | None:
        groups = list(self.groups.values())
        if extra:
            groups.append(extra)
        return pooled_noise(groups)

    def env(self, iteration: int) -> dict[str, str]:
        env = measurement_env(self.campaign.config.sandbox.pass_env)
        env["AUTORESEARCH_ITERATION"] = str(iteration)
        env["AUTORESEARCH_WORKSPACE"] = str(self.workspace.path)
        env["AUTORESEARCH_CAMPAIGN"] = self.campaign.name
        return env

    # -- single runs --------------------------------------------------------------------

    def _run(self, spec: CommandSpec, iteration: int, stem: str, out: Evaluation) -> float | None:
        """One run in the worktree as it is; None (and `out.failure`) when it fails."""
        tampered = self.fingerprint.changed(self.campaign, self.workspace.path)
        if tampered:
            out.failure, out.reason = "tampered", f"{tampered} changed during the campaign"
            return None
        if self.judge is not None and spec is self.metric:
            return self._judge(stem, out)
        result = self.executor.run(
            spec, workspace=self.workspace.path, env=self.env(iteration), log_stem=self.logs / stem
        )
        out.seconds += result.seconds
        out.runs += 1
        self.workspace.settle()
        if not result.ok:
            out.failure = "timeout" if result.outcome == "timeout" else "crash"
            out.reason = f"{'guard' if not spec.parse else 'metric'} {result.reason}"
            return None
        return result.value if spec.parse else 0.0

    def _judge(self, stem: str, out: Evaluation) -> float | None:
        assert self.judge is not None
        verdict = self.judge.score(self.workspace.path, self.logs / stem)
        out.seconds += verdict.seconds
        out.runs += 1
        out.cost_usd += verdict.cost_usd
        out.tokens_in += verdict.tokens_in
        out.tokens_out += verdict.tokens_out
        if verdict.score is None:
            out.failure, out.reason = "crash", verdict.reason
        return verdict.score

    # -- the three things the engine asks for -------------------------------------------

    def baseline(self, commit: str) -> Evaluation:
        out = Evaluation(verdict=Verdict.KEEP)
        count = samples_needed(self.rule)
        for k in range(count):
            self.phase("measuring", 0, sample=k + 1, samples=count)
            value = self._run(self.metric, 0, f"0000-metric-{k + 1}", out)
            if value is None:
                return out
            out.samples.append(value)
        self.incumbent = commit
        self.groups[commit] = list(out.samples)
        self.own[commit] = len(out.samples)
        return out

    def evaluate(self, iteration: int, candidate: Candidate, commit: str) -> Evaluation:
        """Measure the candidate (and re-measure the incumbent) until the rule decides."""
        out = Evaluation()
        first = samples_needed(self.rule) if self.rule.rule == "repeats" else 1
        out.carried = self.carried()
        # A freshly kept incumbent has no unbiased sample yet: measure it first.
        while self.rule.rule == "sequential" and len(self.reference()) < REFERENCE_MIN:
            if not self._measure_incumbent(iteration, candidate, out):
                return out
        while True:
            wanted = first if not out.samples else len(out.samples) + 1
            while len(out.samples) < wanted:
                k = len(out.samples) + 1
                self.phase("measuring", iteration, sample=k, samples=self._cap())
                value = self._run(self.metric, iteration, f"{iteration:04d}-metric-{k}", out)
                if value is None:
                    return out
                out.samples.append(value)
            out.verdict = self._decide(out)
            if out.verdict is not Verdict.MORE:
                break
            if self.rule.rule == "sequential":
                # The incumbent again; its fresh sample may already settle the question.
                if not self._measure_incumbent(iteration, candidate, out):
                    return out
                out.verdict = self._decide(out)
                if out.verdict is not Verdict.MORE:
                    break
        self.groups[commit] = list(out.samples)
        return out

    def _decide(self, out: Evaluation) -> Verdict:
        return decide(
            self.reference(),
            out.samples,
            self.direction,
            self.rule,
            noise=self.noise(out.samples),
            fresh_incumbent=len(out.incumbent_samples),
            carried=out.carried,
        )

    def _cap(self) -> int:
        if self.rule.rule == "sequential":
            return self.rule.max_samples
        return samples_needed(self.rule)

    def _measure_incumbent(self, iteration: int, candidate: Candidate, out: Evaluation) -> bool:
        k = len(out.incumbent_samples) + 1
        self.phase("measuring", iteration, sample=k, samples=self._cap(), side="incumbent")
        self.workspace.show_incumbent(candidate, self.incumbent)
        value = self._run(self.metric, iteration, f"{iteration:04d}-incumbent-{k}", out)
        if value is None:
            out.reason = f"re-measuring the incumbent: {out.reason}"
            return False
        out.incumbent_samples.append(value)
        self.groups.setdefault(self.incumbent, []).append(value)
        return True

    def run_guard(self, iteration: int) -> Evaluation:
        out = Evaluation()
        if self.guard is not None:
            self.phase("guard", iteration)
            self._run(self.guard, iteration, f"{iteration:04d}-guard", out)
        return out

    def promote(self, commit: str) -> None:
        """The candidate `commit` was kept: it is the incumbent from now on."""
        self.selected[commit] = self.own[commit] = len(self.groups.get(commit, []))
        self.incumbent = commit
