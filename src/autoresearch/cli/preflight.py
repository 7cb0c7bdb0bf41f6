"""`autoresearch check`: run the metric and guard once on HEAD, exactly as a campaign would."""

from __future__ import annotations

import os
import shlex
import shutil
import statistics
from dataclasses import dataclass, field, replace
from pathlib import Path

from autoresearch.attempt import Status
from autoresearch.checks.holdout import holdout_text
from autoresearch.cli.probe import GpuView, frameworks_named, interpreter, probe, read_harness
from autoresearch.config import Campaign, CampaignConfig
from autoresearch.errors import AutoresearchError, ConfigError
from autoresearch.executors import CommandSpec, LocalExecutor, Measurement, metric_spec
from autoresearch.executors.base import OK, executor_setup
from autoresearch.gitcmd import Git, workspace_files
from autoresearch.isolation.process import Limits
from autoresearch.isolation.proxy import ProposerNetwork
from autoresearch.isolation.sandbox import (
    always_hidden,
    bwrap_problem,
    home_text,
    interpreter_dirs,
    isolation_text,
    keyrings_text,
    limits_text,
    shared_paths,
    sockets_text,
    user_paths,
)
from autoresearch.measure.evaluation import last_lines, measurement_env
from autoresearch.measure.integrity import harness_files
from autoresearch.measure.judge import Judge
from autoresearch.measure.metrics import Readings, checked_readings
from autoresearch.proposers import create_proposer, proposer_confinement, validate_proposer
from autoresearch.proposers.base import Proposer
from autoresearch.scope import PathMatcher
from autoresearch.stats.auto_rule import recommend
from autoresearch.stats.decide import Noise, Rule, detectable_gain
from autoresearch.stats.robust import robust_sigma
from autoresearch.workspace import Workspace, ensure_state_dir, head_of

# What `check` says before it knows: `run_check` replaces it with the isolation in force
# for the metric and guard (`sandbox.isolation_text`).
ISOLATION = "none"
# Files in scope read for the name of a GPU framework (the first ones, by path).
SCOPE_FILES_READ = 200


@dataclass(frozen=True)
class ProposerCheck:
    """What `check` found out about the proposer: `detail` when it can work, else `problem`."""

    kind: str
    detail: str = ""
    problem: str = ""

    @property
    def ok(self) -> bool:
        return not self.problem


@dataclass
class CheckReport:
    commit: str
    metric: list[Measurement] = field(default_factory=list)
    guard: Measurement | None = None
    harness: list[str] = field(default_factory=list)
    proposer: ProposerCheck | None = None
    decision: str = ""
    isolation: str = ISOLATION
    sockets: str = ""  # the host's abstract unix sockets, as the sandbox leaves them
    # what the proposer's commands may reach, one entry per [[proposer]] that runs any
    network: list[ProposerNetwork] = field(default_factory=list)
    home: str = ""  # what a sandboxed command sees of the home folder
    keyrings: str = ""  # the kernel's keyrings, as the sandbox leaves them
    holdout: str = ""  # what tells a holdout run from a metric run
    limits: str = ""
    gpu: GpuView | None = None  # what the metric sees of the GPU
    devices: str = '"auto"'  # [sandbox] devices, as written
    direction: str = "minimize"
    noise: str = "symmetric"  # [metric] noise
    max_samples: int = 8  # [decision] max_samples
    confidence: float = 0.95
    # Metric or guard commands naming a path the sandbox hides: one sentence each.
    hidden: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        measured = all(m.ok for m in self.metric) and (self.guard is None or self.guard.ok)
        return measured and not self.hidden and (self.proposer is None or self.proposer.ok)

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

    def noise_figures(self) -> dict[str, float]:
        """The noise the robust rule sees (spikes left out), beside the standard deviation."""
        values = self.values()
        if len(values) < 2:
            return {}
        estimator = "time" if self.noise == "time" else "robust"
        found = robust_sigma([values], estimator, self.direction)
        return {"robust_sigma": found[0] if found else 0.0, "sigma": statistics.stdev(values)}

    def detectable_pct(self) -> float | None:
        """The smallest gain (in % of the median) the robust sequential rule keeps 4 times
        in 5 within max_samples runs a side, at the spread these runs show."""
        values = self.values()
        figures = self.noise_figures()
        center = statistics.median(values) if values else 0.0
        if not figures or not center:
            return None
        estimator = "time" if self.noise == "time" else "robust"
        rule = Rule("sequential", max_samples=self.max_samples, confidence=self.confidence,
                    estimator=estimator)  # fmt: skip
        smallest = detectable_gain(rule, Noise(figures["robust_sigma"], len(values) - 1))
        return None if smallest is None else 100 * smallest / abs(center)

    def recommendation(self) -> dict[str, str]:
        """The rule and min_delta these runs call for (`auto_rule.recommend`)."""
        rule, min_delta = recommend(self.values(), self.direction, self.noise)
        return {"rule": rule, "min_delta": min_delta}


def decision_text(cfg: CampaignConfig) -> str:
    """The decision rule in force, in the words of the noise page (docs/noise.md)."""
    d = cfg.decision
    delta = f"by more than {d.min_delta}" if d.min_delta not in (0, "0", "0%") else ""
    if d.rule == "auto":
        how = " (noise = time)" if cfg.metric.noise == "time" else ""
        return (
            "auto: chosen from the baseline's 4 runs: identical -> one run per attempt, "
            f"equal is not better; they differ -> the robust sequential rule{how}"
        )
    if d.rule == "strict":
        return "strict: one run, kept only if better (equal is not better)"
    if d.rule == "threshold":
        return f"threshold: one run, kept only if better {delta or 'by more than 0'}"
    if d.rule == "repeats":
        extra = f" and {delta}" if delta else ""
        return f"repeats: {d.repeats} runs, kept only if the mean is better by 2 sigma{extra}"
    extra = f", {delta}" if delta else ""
    return (
        f"sequential: up to {d.max_samples} runs per side, kept only when better at "
        f"{d.confidence:g} confidence{extra}"
    )


def sandbox_hides(command: str, campaign: Campaign) -> list[tuple[str, str]]:
    """The paths `command` names that its sandbox will not show, each with what hides it:
    the checkout (every command runs on the commit's files elsewhere), `deny_read`, the
    engine's private folders. What the sandbox shows again (the checkout's interpreters,
    `share`, `writable`, the campaign's workspace) is not reported."""
    cfg = campaign.config
    root = campaign.root.resolve()
    hiders = [(root, "your checkout, which the sandbox hides")]
    hiders += [(p, "[sandbox] deny_read") for p in user_paths(cfg.sandbox.deny_read)]
    hiders += [(p, "a folder the sandbox always hides") for p in always_hidden()]
    shown = (
        *interpreter_dirs(os.environ.get("PATH", ""), root),
        *shared_paths(root, cfg.share),
        *user_paths(cfg.sandbox.writable),
        campaign.state_dir.resolve() / "worktree",
    )
    try:
        words = shlex.split(command, comments=True)
    except ValueError:
        return []
    found: list[tuple[str, str]] = []
    for word in words:
        for part in word.split("="):  # `--script=/path` too
            if not part.startswith(("/", "~")):
                continue
            path = Path(os.path.expanduser(part)).resolve()
            if any(path.is_relative_to(s) for s in shown):
                continue
            hider = next((why for base, why in hiders if path.is_relative_to(base)), None)
            if hider is not None and (part, hider) not in found:
                found.append((part, hider))
    return found


def hidden_sentence(what: str, path: str, hider: str) -> str:
    where = "inside " + hider if hider.startswith("your checkout") else f"hidden by {hider}"
    return (
        f"the {what} names {path}, {where}: every run would fail with 'No such file or "
        "directory'; move it out of the repository (or commit it and name it relative to "
        "the repository's top)"
    )


def compact_paths(paths: list[str]) -> str:
    """Files grouped by their top folder and counted: `bench.py, tests/ (56 files)`."""
    folders: dict[str, list[str]] = {}
    for path in paths:
        top = path.split("/", 1)[0] + "/" if "/" in path else path
        folders.setdefault(top, []).append(path)
    parts = []
    for top, inside in sorted(folders.items()):
        if len(inside) == 1:
            parts.append(inside[0])
        else:
            parts.append(f"{top} ({len(inside)} files)")
    total = f"{len(paths)} files: " if len(folders) < len(paths) else ""
    return total + ", ".join(parts)


def proposer_commands(cfg: CampaignConfig) -> list[str]:
    """The commands of the `[proposer]` tables that run one."""
    tables = cfg.proposers or [cfg.proposer]
    return [str(t.options()["command"]) for t in tables if t.options().get("command")]


def devices_text(devices: str | list[str]) -> str:
    """`[sandbox] devices` as the config file writes it."""
    if isinstance(devices, str):
        return f'"{devices}"'
    return "[" + ", ".join(f'"{d}"' for d in devices) + "]"


def proposer_check(
    proposer: Proposer | None, kind: str, workspace: Path, offline: bool
) -> ProposerCheck:
    """Ask the proposer whether it can work here (its executable, its endpoint)."""
    if proposer is None:
        return ProposerCheck(kind)
    try:
        return ProposerCheck(kind, detail=proposer.preflight(workspace, offline) or kind)
    except ConfigError:
        raise
    except AutoresearchError as exc:
        return ProposerCheck(kind, problem=str(exc))


def _hidden_paths(campaign: Campaign, report: CheckReport) -> None:
    """What `check` would otherwise pass and every attempt then fail on: a command naming
    a path the sandbox does not show (a proposer script kept in the checkout, say)."""
    cfg = campaign.config
    for command in proposer_commands(cfg):
        found = sandbox_hides(command, campaign)
        if found and (report.proposer is None or report.proposer.ok):
            kind = report.proposer.kind if report.proposer else cfg.proposer.kind
            report.proposer = ProposerCheck(
                kind, problem=hidden_sentence("proposer command", *found[0]) + "."
            )
    commands: dict[str, str | None] = {
        "metric": cfg.metric.command,
        "guard": cfg.guard.command if cfg.guard is not None else None,
    }
    for what, line in commands.items():
        for path, hider in sandbox_hides(line, campaign) if line else []:
            report.hidden.append(hidden_sentence(f"{what} command", path, hider))


def run_check(campaign: Campaign, repeat: int = 1, *, offline: bool = False) -> CheckReport:
    """Validate everything that can be validated, then measure HEAD in a scratch worktree.

    A proposer that cannot work (its tool missing, its endpoint not answering) is reported
    beside the measurement rather than instead of it; a wrong config still stops here."""
    cfg = campaign.config
    kind = cfg.proposer.kind
    missing: ProposerCheck | None = None
    proposer: Proposer | None = None
    try:
        # The sandbox a run gives it: `[proposer] network` other than "on" needs one.
        proposer = create_proposer(campaign, confinement=proposer_confinement(campaign, None))
    except ConfigError:
        raise
    except AutoresearchError as exc:
        missing = ProposerCheck(kind, problem=str(exc))
    commit = head_of(campaign.root)
    ensure_state_dir(campaign.root)
    scratch = campaign.state_dir / f"check-{os.getpid()}"
    campaign.state_dir.mkdir(parents=True, exist_ok=True)
    repo = Git(campaign.root)
    repo.run("worktree", "add", "-q", "--detach", "-f", str(scratch), commit)
    executor = LocalExecutor()
    try:
        view = Workspace(campaign.root, campaign.name, campaign.state_dir, list(cfg.share))
        view.path = scratch
        view.link_shares()
        if proposer is not None:
            validate_proposer(proposer, scratch)
        report = CheckReport(
            commit=commit,
            harness=harness_files(campaign, scratch),
            proposer=missing or proposer_check(proposer, kind, scratch, offline),
            decision=decision_text(cfg),
            direction=str(cfg.metric.direction or "minimize"),
            noise=cfg.metric.noise,
            max_samples=cfg.decision.max_samples,
            confidence=cfg.decision.confidence,
            network=list(proposer.reach()) if proposer is not None else [],
        )
        if cfg.sandbox.isolation != "none" and bwrap_problem() is None:
            _hidden_paths(campaign, report)
        executor.start(executor_setup(campaign))
        report.isolation = isolation_text(cfg.sandbox.isolation)
        report.sockets = sockets_text(cfg.sandbox.isolation)
        report.home = home_text(
            cfg.sandbox.isolation, cfg.sandbox.home_readable, os.environ.get("PATH", "")
        )
        report.keyrings = keyrings_text(cfg.sandbox.isolation)
        report.holdout = holdout_text(cfg)
        report.limits = limits_text(cfg.sandbox.memory_mb, cfg.sandbox.cpu_seconds)
        env = measurement_env(cfg.sandbox.pass_env)
        env["AUTORESEARCH_ITERATION"] = "0"
        env["AUTORESEARCH_WORKSPACE"] = str(scratch)
        logs = campaign.state_dir / "logs"
        sandbox = cfg.sandbox
        limits = Limits(sandbox.memory_mb, sandbox.cpu_seconds, sandbox.network)
        spec = metric_spec(cfg.metric, limits)
        report.devices = devices_text(cfg.sandbox.devices)
        if cfg.metric.command is not None:
            report.gpu = probe(
                executor,
                workspace=scratch,
                env=env,
                log_stem=logs / "check-gpu",
                limits=limits,
                listed=executor.devices,
                python=interpreter(cfg.metric.command),
            )
            named = [cfg.metric.command, cfg.guard.command if cfg.guard else ""]
            # The harness runs the code in scope: a training loop there names its framework.
            scope = PathMatcher(cfg.scope)
            code = [p for p in workspace_files(scratch) if scope.matches(p)][:SCOPE_FILES_READ]
            report.gpu.frameworks = frameworks_named(
                named + read_harness(scratch, [*report.harness, *code])
            )
        readings = Readings(cfg.metrics, cfg.metric.score)
        if cfg.metric.score is not None:
            spec = replace(spec, parse=False)
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
                measured = executor.run(spec, workspace=scratch, env=env, log_stem=stem)
                report.metric.append(checked_readings(readings, measured, scratch, spec.timeout))
            if not report.metric[-1].ok:
                break
        if cfg.guard is not None and report.metric[-1].ok:
            guard = CommandSpec(cfg.guard.command, cfg.guard.timeout, parse=False, limits=limits)
            report.guard = executor.run(
                guard, workspace=scratch, env=env, log_stem=logs / "check-guard"
            )
            if not report.guard.ok and report.guard.outcome is Status.CRASH:
                said = last_lines(report.guard.stdout_path, logs / "check-guard.err")
                report.guard = replace(report.guard, reason=report.guard.reason + said)
        return report
    finally:
        if proposer is not None:
            proposer.close()
        executor.close()
        repo.run("worktree", "remove", "--force", str(scratch), check=False)
        if scratch.exists():
            shutil.rmtree(scratch, ignore_errors=True)
        repo.run("worktree", "prune", check=False)
