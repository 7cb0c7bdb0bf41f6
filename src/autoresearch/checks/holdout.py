"""`[holdout]`: a measurement the proposer never sees, against overfitting the benchmark.

Its files (`files`, globs in the user's checkout) must not be part of the campaign's
commits: the proposer's workspace holds the commit's files only, so untracked holdout
files never reach it, and neither the holdout command nor its files appear in a prompt or
context. They are copied at the start into `.autoresearch/<name>/holdout/`, fingerprinted,
and copied into the measurement folder for each holdout run only; the folder is cleaned
after it.

The holdout runs when a candidate is about to be kept (against the incumbent's holdout
samples, measured once per incumbent) and on the final best. A keep the holdout
contradicts - worse than the incumbent beyond its noise and `min_delta` - is `overfit`.
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
from collections.abc import Sequence
from typing import Any

from autoresearch.attempt import AttemptRecord
from autoresearch.config import Campaign
from autoresearch.config.criteria import HoldoutConfig, parse_tolerance
from autoresearch.errors import ConfigError
from autoresearch.executors import CommandSpec
from autoresearch.isolation.owned import real_parents, write_file
from autoresearch.isolation.process import Limits
from autoresearch.measure.evaluation import Evaluator
from autoresearch.measure.integrity import sha256_file
from autoresearch.scope import PathMatcher
from autoresearch.stats.decide import estimate, gain, pooled_noise, t_quantile

TAMPERED = "tampered: "


def holdout_gain(record: AttemptRecord) -> str:
    """The holdout's gain on a record, for the report's side-by-side column."""
    data = record.holdout or {}
    value = data.get("gain")
    return "-" if value is None else f"{float(value):+.4g}"


class Holdout:
    def __init__(self, campaign: Campaign, evaluator: Evaluator, start: str) -> None:
        cfg = campaign.config
        assert cfg.holdout is not None
        self.campaign = campaign
        self.config: HoldoutConfig = cfg.holdout
        self.direction = self.config.direction or str(cfg.metric.direction)
        self.evaluator = evaluator
        self.snapshot = campaign.state_dir / "holdout"
        sandbox = cfg.sandbox
        limits = Limits(sandbox.memory_mb, sandbox.cpu_seconds, sandbox.network)
        self.spec = CommandSpec(
            self.config.command,
            self.config.timeout,
            self.config.pattern,
            file=self.config.file,
            key=self.config.key,
            name=self.config.name,
            limits=limits,
        )
        self.samples: dict[str, list[float]] = {}  # holdout samples per commit
        self.files = self._take(start)
        self.digests = {rel: sha256_file(self.snapshot / rel) for rel in self.files}

    # -- setup --------------------------------------------------------------------------

    def _take(self, start: str) -> list[str]:
        """Copy the holdout files out of the checkout; refuse any the campaign commits."""
        root = self.campaign.root
        source = self.campaign.display_path()
        matcher = PathMatcher(self.config.files)
        scope = PathMatcher(self.campaign.config.scope)
        tracked = subprocess.run(
            ["git", "-C", str(root), "ls-tree", "-r", "--name-only", start],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.splitlines()
        # ... or about to be: tracked in the checkout, the next campaign would commit it
        tracked += subprocess.run(
            ["git", "-C", str(root), "ls-files", "--cached", "-z"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.split("\0")
        for rel in tracked:
            if matcher.matches(rel):
                raise ConfigError(
                    f"{source}: key 'holdout.files': {rel} is committed, so the proposer would "
                    "see it; keep holdout files untracked (list them in .gitignore)."
                )
        untracked = subprocess.run(
            ["git", "-C", str(root), "ls-files", "--others", "-z"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.split("\0")
        found = []
        for rel in sorted(untracked):
            path = root / rel
            if not rel or rel.startswith(".autoresearch/") or not path.is_file():
                continue
            if path.is_symlink():
                raise ConfigError(
                    f"{source}: key 'holdout.files': {rel} is a symbolic link; holdout files "
                    "must be regular files in the checkout."
                )
            if matcher.matches(rel):
                shared = [s for s in self.campaign.config.share if PathMatcher([s]).matches(rel)]
                if shared:
                    raise ConfigError(
                        f"{source}: key 'holdout.files': {rel} lies in the share path "
                        f"{shared[0].strip().rstrip('/')!r}, which the proposer and every run "
                        "read; keep the holdout outside 'share'."
                    )
                if scope.matches(rel):
                    raise ConfigError(
                        f"{source}: key 'holdout.files': {rel} is in scope; the proposer must "
                        "never see the holdout. Narrow 'scope'."
                    )
                found.append(rel)
        if self.config.files and not found:
            raise ConfigError(
                f"{source}: key 'holdout.files' matches no file in {root}; add the holdout "
                "data or fix the globs."
            )
        shutil.rmtree(self.snapshot, ignore_errors=True)
        for rel in found:
            target = self.snapshot / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(root / rel, target)
        return found

    def load(self, records: Sequence[AttemptRecord]) -> None:
        """The holdout samples the ledger holds (a resumed campaign). Its samples were taken
        on the holdout files as they were: a resume with other files is refused."""
        digests = self.campaign.state_dir / "holdout.json"
        if records and digests.is_file():
            try:
                before = json.loads(digests.read_text())
            except (OSError, ValueError):
                before = None
            if before != self.digests:
                changed = sorted(
                    set(before or {}) ^ set(self.digests)
                    | {k for k in self.digests if (before or {}).get(k) != self.digests[k]}
                )
                raise ConfigError(
                    f"{self.campaign.display_path()}: key 'holdout.files': "
                    f"{', '.join(changed[:3]) or 'the files'} changed since the campaign started, "
                    "so its holdout numbers no longer compare; restore them or start a new "
                    "campaign (another name)."
                )
        digests.parent.mkdir(parents=True, exist_ok=True)
        digests.write_text(json.dumps(self.digests, sort_keys=True))
        for record in records:
            data = record.holdout or {}
            if record.commit and isinstance(data.get("samples"), list):
                self.samples[record.commit] = [float(v) for v in data["samples"]]
            if record.parent and isinstance(data.get("incumbent_samples"), list):
                self.samples.setdefault(
                    record.parent, [float(v) for v in data["incumbent_samples"]]
                )

    # -- measuring ----------------------------------------------------------------------

    def measure(self, iteration: int, commit: str, label: str) -> tuple[list[float], str, float]:
        """Holdout samples of `commit`; an empty list and why when a run failed."""
        count = self.evaluator.rule.baseline_samples
        tree, logs = self.evaluator.tree, self.evaluator.logs
        values: list[float] = []
        seconds = 0.0
        for k in range(count):
            self.evaluator.phase("holdout", iteration, sample=k + 1, samples=count)
            tree.show(commit)
            tampered = self.evaluator.fingerprint.changed(self.campaign, tree.path)
            changed = [r for r in self.files if sha256_file(self.snapshot / r) != self.digests[r]]
            if tampered or changed:
                return [], f"{TAMPERED}{tampered or changed[0]} changed during the campaign", 0
            for rel in self.files:
                # Into the measurement folder only: a link the last run planted on the way
                # (to the checkout, to the workspace) is removed, never written through.
                write_file(real_parents(tree.path, rel), (self.snapshot / rel).read_bytes())
            stem = logs / f"{iteration:04d}-holdout-{label}-{k + 1}"
            result = self.evaluator.executor.run(
                self.spec, workspace=tree.path, env=self.evaluator.env(iteration), log_stem=stem
            )
            seconds += result.seconds
            tree.settle()
            if not result.ok or result.value is None:
                return [], f"holdout {result.reason}", seconds
            values.append(result.value)
        return values, "", seconds

    def check(
        self, iteration: int, commit: str, incumbent: str
    ) -> tuple[str | None, dict[str, Any] | None, float]:
        """(why the holdout contradicts the keep or None, the record's `holdout`, seconds)."""
        seconds = 0.0
        fresh: list[float] = []
        if incumbent not in self.samples:
            fresh, problem, spent = self.measure(iteration, incumbent, "incumbent")
            seconds += spent
            if not fresh:
                return problem, {"error": problem}, seconds
            self.samples[incumbent] = fresh
        samples, problem, spent = self.measure(iteration, commit, "candidate")
        seconds += spent
        if not samples:
            return problem, {"error": problem}, seconds
        self.samples[commit] = samples
        reference = self.samples[incumbent]
        ref = estimate(reference)
        g = gain(estimate(samples), ref, self.direction)
        record: dict[str, Any] = {
            "value": estimate(samples),
            "samples": samples,
            "incumbent": ref,
            "gain": g,
        }
        if fresh:
            record["incumbent_samples"] = fresh
        amount, percent = parse_tolerance(self.config.min_delta)
        allowed = abs(ref) * amount / 100.0 if percent else amount
        noise = pooled_noise([samples, reference])
        margin = 0.0
        if noise is not None and noise.sigma > 0:
            se = noise.sigma * math.sqrt(1 / len(samples) + 1 / len(reference))
            margin = t_quantile(self.evaluator.rule.confidence, noise.dof) * se
        if -g > allowed + margin:
            # The reason reaches the proposer's history: it says that, never by how much
            # (the numbers stay in the record's `holdout`, shown to people only).
            record["margin"] = margin + allowed
            return (
                "better on the metric, but worse on unseen data beyond its noise (overfit)",
                record,
                seconds,
            )
        return None, record, seconds

    def final(self, best: str, baseline: str) -> dict[str, Any] | None:
        """The holdout on the final best against the baseline, for state.json and the
        report; None when nothing was kept or a run failed."""
        if best == baseline:
            return None
        samples, _, _ = self.measure(0, best, "final")
        if not samples:
            return None
        if baseline not in self.samples:
            base, _, _ = self.measure(0, baseline, "baseline")
            if not base:
                return None
            self.samples[baseline] = base
        ref = estimate(self.samples[baseline])
        return {
            "best": estimate(samples),
            "baseline": ref,
            "gain": gain(estimate(samples), ref, self.direction),
        }
