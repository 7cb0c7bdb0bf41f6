"""`[holdout]`: a measurement the proposer never sees, against overfitting the benchmark.

Its files (`files`, globs in the user's checkout, and the keys of `in_place_of`) must not
be part of the campaign's commits: the proposer's workspace holds the commit's files only,
so untracked holdout files never reach it, and neither the holdout command nor its files
appear in a prompt or context. They are copied at the start into
`.autoresearch/<name>/holdout/` and fingerprinted.

A holdout run is a metric run, seen from inside: the same measurement folder, working
directory, TMPDIR, environment, sandbox and read-only harness (`Evaluator.measure_swapped`);
without `command` the metric's own command; with `in_place_of` the holdout's bytes written
over the commit's data file it stands in for (same path, same file, its times kept), so
nothing but the data's contents tells the two apart. What a holdout run printed never
leaves the campaign's logs: a failed run's reason is `FAILED`, the same every time, and no
view that a program can query serves the holdout's numbers.

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
from dataclasses import replace
from typing import Any

from autoresearch.attempt import HOLDOUT_FAILED, AttemptRecord, Status
from autoresearch.checks.review import HoldoutCheck
from autoresearch.config import Campaign, CampaignConfig
from autoresearch.config.criteria import HoldoutConfig, parse_tolerance
from autoresearch.errors import ConfigError
from autoresearch.executors import CommandSpec
from autoresearch.isolation.process import Limits
from autoresearch.measure.evaluation import Evaluator, Swap
from autoresearch.measure.integrity import sha256_file
from autoresearch.scope import PathMatcher
from autoresearch.stats.decide import estimate, gain, pooled_noise, t_quantile

TAMPERED = "tampered: "
# Why a holdout run that gave no number is refused: the same words whatever it printed or
# however it ended, since the reason reaches the next prompt (its output stays in the logs).
FAILED = HOLDOUT_FAILED


COMMAND_GIVES_AWAY = (
    "[holdout] command differs from the metric's, so a candidate can tell the holdout run "
    "apart by its command line; leave holdout.command out to run the metric's command on the "
    "holdout data"
)


def files_give_away(rel: str) -> str:
    return (
        f"holdout file {rel} appears in the measurement folder only for the holdout run, so a "
        "candidate can tell that run apart; map each holdout file to the data file it stands "
        "in for in holdout.in_place_of"
    )


def holdout_text(cfg: CampaignConfig) -> str:
    """What `check` says of the holdout: what tells its run from a metric run."""
    holdout = cfg.holdout
    if holdout is None:
        return ""
    found = []
    if holdout.command is not None and holdout.command != cfg.metric.command:
        found.append(COMMAND_GIVES_AWAY)
    alone = [p for p in holdout.files if p not in holdout.in_place_of]
    if alone:
        found.append(files_give_away(alone[0]))
    if found:
        return "; ".join(found)
    swapped = ", ".join(f"{rel} in place of {place}" for rel, place in holdout.in_place_of.items())
    return (
        f"the metric's own run with {swapped or 'the same files'}: told apart from a metric "
        "run by the data's contents and its timing only"
    )


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
        own = self.config
        if cfg.executor.kind == "ray":
            # A worker materialises the commit it is sent, never the folder's other files.
            raise ConfigError(
                f"{campaign.display_path()}: key 'executor.kind': a Ray worker measures the "
                "commit's files only, never the holdout's, so [holdout] needs kind = "
                '"local"; set it, or remove [holdout].'
            )
        if own.command is None and cfg.metric.command is None:
            raise ConfigError(
                f"{campaign.display_path()}: key 'holdout.command' is needed here: without it "
                "the holdout runs the metric's command, and [metric] has none (the judge "
                "scores it); set holdout.command."
            )
        if own.command is not None:
            self.spec = CommandSpec(
                own.command,
                own.timeout,
                own.pattern,
                file=own.file,
                key=own.key,
                name=own.name,
                limits=limits,
            )
        elif own.pattern or own.file or own.name:
            self.spec = replace(
                evaluator.metric, pattern=own.pattern, file=own.file, key=own.key, name=own.name
            )
        else:
            self.spec = evaluator.metric  # the very metric run: its number read as the metric's
        self.samples: dict[str, list[float]] = {}  # holdout samples per commit
        self.files = self._take(start)
        self.digests = {rel: sha256_file(self.snapshot / rel) for rel in self.files}
        # Where each holdout file goes in the measurement folder: over the file it stands in
        # for, or (files not mapped) at its own path.
        self.places = {own.in_place_of.get(rel, rel): rel for rel in self.files}

    def warnings(self) -> list[str]:
        """What lets a candidate tell a holdout run from a metric run, in this config."""
        out = []
        metric = self.campaign.config.metric.command
        if self.config.command is not None and self.config.command != metric:
            out.append(COMMAND_GIVES_AWAY)
        alone = [rel for rel in self.files if rel not in self.config.in_place_of]
        if alone:
            out.append(files_give_away(alone[0]))
        return out

    # -- setup --------------------------------------------------------------------------

    def _take(self, start: str) -> list[str]:
        """Copy the holdout files out of the checkout; refuse any the campaign commits."""
        root = self.campaign.root
        source = self.campaign.display_path()
        matcher = PathMatcher([*self.config.files, *self.config.in_place_of])
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
        # ... or was, once: the proposer's git reads the history of the start commit.
        history = subprocess.run(
            ["git", "-C", str(root), "log", "--format=", "--name-only", "--no-renames", start],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.splitlines()
        for rel in dict.fromkeys(history):
            if rel and matcher.matches(rel):
                raise ConfigError(
                    f"{source}: key 'holdout.files': {rel} was committed in the history of "
                    f"{start[:12]}, which the proposer reads (git log -p); use holdout data "
                    "that was never committed, or start from history without it."
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
        committed = set(tracked)
        shares = PathMatcher(self.campaign.config.share)
        for rel, place in self.config.in_place_of.items():
            if rel not in found:
                raise ConfigError(
                    f"{source}: key 'holdout.in_place_of': {rel} is not an untracked file in "
                    f"{root}; add the holdout data there (listed in .gitignore)."
                )
            if place not in committed or shares.matches(place):
                raise ConfigError(
                    f"{source}: key 'holdout.in_place_of': {place} is not a file of the "
                    "campaign's commits; name the committed data file the metric reads, "
                    "which the holdout's bytes replace for the holdout run."
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

    def check_with(self, evaluator: Evaluator) -> HoldoutCheck:
        """The check, its runs made by `evaluator`: a slot's, so that they run in the very
        folder, TMPDIR and environment of that slot's metric runs."""

        def check(
            iteration: int, commit: str, incumbent: str
        ) -> tuple[str | None, dict[str, Any] | None, float]:
            return self.check(iteration, commit, incumbent, evaluator)

        return check

    def measure(
        self, iteration: int, commit: str, label: str, evaluator: Evaluator | None = None
    ) -> tuple[list[float], str, float]:
        """Holdout samples of `commit`; an empty list and why when a run failed (`FAILED`,
        never what it printed)."""
        runner = evaluator or self.evaluator
        count = runner.rule.baseline_samples
        swap = Swap(
            {place: self.snapshot / rel for place, rel in self.places.items()},
            {place: self.digests[rel] for place, rel in self.places.items()},
        )
        values: list[float] = []
        seconds = 0.0
        for k in range(count):
            runner.phase("holdout", iteration, sample=k + 1, samples=count)
            changed = [r for r in self.files if sha256_file(self.snapshot / r) != self.digests[r]]
            if changed:
                return [], f"{TAMPERED}{changed[0]} changed during the campaign", seconds
            stem = f"{iteration:04d}-holdout-{label}-{k + 1}"
            # The metric's spec as the runner knows it: a slot's evaluator has its own.
            spec = runner.metric if self.spec is self.evaluator.metric else self.spec
            out = runner.measure_swapped(spec, commit, iteration, stem, swap)
            seconds += out.seconds
            if out.failure is Status.TAMPERED:
                return [], f"{TAMPERED}{out.reason}", seconds
            if not out.samples:
                return [], FAILED, seconds
            values.extend(out.samples)
        return values, "", seconds

    def check(
        self, iteration: int, commit: str, incumbent: str, evaluator: Evaluator | None = None
    ) -> tuple[str | None, dict[str, Any] | None, float]:
        """(why the holdout contradicts the keep or None, the record's `holdout`, seconds)."""
        seconds = 0.0
        fresh: list[float] = []
        if incumbent not in self.samples:
            fresh, problem, spent = self.measure(iteration, incumbent, "incumbent", evaluator)
            seconds += spent
            if not fresh:
                return problem, {"error": problem}, seconds
            self.samples[incumbent] = fresh
        samples, problem, spent = self.measure(iteration, commit, "candidate", evaluator)
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

    def final(self, best: str, baseline: str, iteration: int = 0) -> dict[str, Any] | None:
        """The holdout on the final best against the baseline, for state.json and the
        report; None when nothing was kept or a run failed. `iteration` is the last
        attempt's, which the runs are told as a metric run of it would be."""
        if best == baseline:
            return None
        samples, _, _ = self.measure(iteration, best, "final")
        if not samples:
            return None
        if baseline not in self.samples:
            base, _, _ = self.measure(iteration, baseline, "baseline")
            if not base:
                return None
            self.samples[baseline] = base
        ref = estimate(self.samples[baseline])
        return {
            "best": estimate(samples),
            "baseline": ref,
            "gain": gain(estimate(samples), ref, self.direction),
        }
