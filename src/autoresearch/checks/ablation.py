"""Ablation of the result: which kept changes carry the gain.

Leave-one-out over the kept changes: for each, the best commit with that change taken back
out (its own diff reversed onto the best tree, in an index of the engine's own) is measured
against the best with the campaign's decision rule, through the engine's measurement folder
and evaluator. The best is then compared as the candidate and the version without the
change as the incumbent: when the rule keeps the best, the change carries part of the gain;
when it does not, nothing shows that it matters. A change that cannot be taken out alone
(later kept changes build on its lines) is kept as carrying. A change kept as a
simplification (no better within noise, less code: review.py) is not measured: its value is
the code it removes, which taking it out would put back, so it is kept too. A `merged`
record (winners of several slots combined) is a kept change like a `keep`.

The changes that carry the gain are then applied, in order, onto the campaign's starting
commit: the minimal version, measured against the best once more, under
`refs/autoresearch/<name>/ablation/minimal` for `autoresearch branch NAME --minimal`. The
report is `.autoresearch/<name>/ablation.json` and `ablation.md`.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from autoresearch.attempt import AttemptRecord, Status, num
from autoresearch.config import Campaign
from autoresearch.errors import AutoresearchError
from autoresearch.executors import Executor
from autoresearch.gitcmd import IDENTITY, Git
from autoresearch.isolation.owned import write_text
from autoresearch.measure.evaluation import Evaluation, Evaluator
from autoresearch.measure.integrity import Fingerprint
from autoresearch.measure.tree import Tree
from autoresearch.stats.decide import Verdict, estimate, pooled_noise
from autoresearch.workspace import Candidate, Workspace

REPORT_JSON = "ablation.json"
REPORT_MD = "ablation.md"
CARRIES, NEUTRAL, ENTANGLED, BROKEN = "carries", "neutral", "entangled", "breaks"
UNSURE = "unsure"  # looks worse without it, though not by the rule's bar: kept
SIMPLIFICATION = "simplification"  # kept for the code it removes, not for a gain
# How review.py begins the reason of a change kept as a simplification.
SIMPLIFICATION_REASON = "simplification:"


def is_simplification(record: AttemptRecord) -> bool:
    """The change was kept for removing code with the metric unchanged within noise."""
    return (record.reason or "").startswith(SIMPLIFICATION_REASON)


def kept_changes(records: Sequence[AttemptRecord]) -> list[AttemptRecord]:
    """The kept changes in the order they were kept: `keep` and `merged` records."""
    return [r for r in records if r.status.kept_change and r.commit and r.parent]


@dataclass
class Removal:
    """One kept change, taken out of the best version and measured."""

    iteration: int
    description: str
    files: list[str]
    verdict: str  # carries, unsure, simplification, neutral, entangled (not alone), breaks
    reason: str
    commit: str | None = None  # the best without this change
    metric: float | None = None  # of the version without it
    best_metric: float | None = None  # of the best, measured beside it
    runs: int = 0

    @property
    def carries(self) -> bool:
        return self.verdict != NEUTRAL


@dataclass
class Report:
    name: str
    direction: str
    base: str
    best: str
    removals: list[Removal] = field(default_factory=list)
    minimal: str | None = None
    minimal_metric: float | None = None
    minimal_note: str = ""
    runs: int = 0

    @property
    def carrying(self) -> list[int]:
        """The changes the minimal version keeps: those that carry the gain, the unsure, the
        entangled and the simplifications."""
        return [r.iteration for r in self.removals if r.carries]

    @property
    def neutral(self) -> list[int]:
        return [r.iteration for r in self.removals if not r.carries]

    @property
    def simplifications(self) -> list[int]:
        return [r.iteration for r in self.removals if r.verdict == SIMPLIFICATION]

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "direction": self.direction,
            "base": self.base,
            "best": self.best,
            "carrying": self.carrying,
            "neutral": self.neutral,
            "simplifications": self.simplifications,
            "minimal": self.minimal,
            "minimal_metric": self.minimal_metric,
            "minimal_note": self.minimal_note,
            "metric_runs": self.runs,
            "changes": [asdict(r) for r in self.removals],
        }


def _diff(git: Git, parent: str, commit: str) -> bytes:
    return git.run_bytes("diff", "--binary", "--no-renames", "--full-index", parent, commit)


class TreeBuilder:
    """Builds trees from the best tree and kept changes in a scratch index, through the
    engine's git directory: nothing of the workspace or the checkout is touched."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self.git = workspace.git

    def _apply(self, start: str, patches: Sequence[tuple[bytes, bool]]) -> str | None:
        """The tree of `start` with `patches` applied (reversed when flagged); None when
        one does not apply."""
        fd, index = tempfile.mkstemp(prefix="ablation-index-", dir=self.workspace.state_dir)
        os.close(fd)
        os.unlink(index)  # git writes its own; a zero-byte file is not an index
        env = {"GIT_INDEX_FILE": index}
        try:
            self.git.run("read-tree", start, extra_env=env)
            for patch, reverse in patches:
                if not patch.strip():
                    continue
                args = ["apply", "--cached", "--whitespace=nowarn"] + (["-R"] if reverse else [])
                try:
                    self.git.run_bytes(*args, input=patch, extra_env=env)
                except AutoresearchError:
                    return None
            return self.git.run("write-tree", extra_env=env).strip()
        finally:
            Path(index).unlink(missing_ok=True)

    def commit(self, tree: str, parent: str, message: str, ref: str) -> str:
        commit = self.git.run(
            "commit-tree", tree, "-p", parent, "-m", message, extra_env=IDENTITY
        ).strip()
        self.workspace.repo.run("update-ref", ref, commit)
        return commit

    def without(self, best: str, record: AttemptRecord) -> str | None:
        assert record.commit and record.parent
        return self._apply(best, [(_diff(self.git, record.parent, record.commit), True)])

    def only(self, base: str, kept: Sequence[AttemptRecord]) -> str | None:
        patches = [(_diff(self.git, r.parent or "", r.commit or ""), False) for r in kept]
        return self._apply(base, patches)


Phase = Callable[..., None]


def _loss(direction: str, without: Evaluation, best: Evaluation) -> float:
    """How much worse the version without the change measured than the best."""
    other = [*without.samples, *best.incumbent_samples]
    if not other or not best.samples:
        return 0.0
    gap = estimate(other) - estimate(best.samples)
    return gap if direction == "minimize" else -gap


def _error(evaluator: Evaluator, without: Evaluation, best: Evaluation) -> float:
    """The standard error of that difference: the noise of these samples, else the
    campaign's pooled noise; 0 for a metric that never varied."""
    other = [*without.samples, *best.incumbent_samples]
    noise = pooled_noise([other, best.samples]) or pooled_noise(
        list(evaluator.book.groups.values())
    )
    if noise is None or not other or not best.samples:
        return 0.0
    return noise.sigma * math.sqrt(1 / len(other) + 1 / len(best.samples))


def compare(
    evaluator: Evaluator, label: int, best: str, other: str
) -> tuple[Evaluation, Evaluation]:
    """Measure `other` (as a baseline is measured), then the best against it with the
    campaign's rule: the rule's verdict says whether the best is really better."""
    measured = evaluator.baseline(other)
    if measured.failure:
        return measured, Evaluation()
    judged = evaluator.evaluate(label, Candidate(tree=""), best, other)
    return measured, judged


def ablate(
    name: str,
    direction: str,
    records: Sequence[AttemptRecord],
    workspace: Workspace,
    evaluator: Evaluator,
    logs: Path,
    warn: Callable[[str], None] = lambda message: None,
) -> Report:
    """Leave-one-out over the kept changes of `records`, measured with `evaluator`."""
    kept = kept_changes(records)
    base = records[0].commit if records and records[0].status is Status.BASELINE else None
    if not kept or base is None:
        raise AutoresearchError(
            f"campaign '{name}' has kept no change yet; there is nothing to ablate."
        )
    best = kept[-1].commit
    assert best is not None
    builder = TreeBuilder(workspace)
    prefix = f"{workspace.ref_prefix}/ablation"
    report = Report(name, direction, base, best)
    for n, record in enumerate(kept, 1):
        what = Removal(record.iteration, record.description, list(record.files), NEUTRAL, "")
        if is_simplification(record):
            # Taking it out would only put the removed code back: nothing to measure.
            what.verdict = SIMPLIFICATION
            what.reason = (
                "kept as a simplification: its value is the code it removes; "
                f"{(record.reason or '').removeprefix(SIMPLIFICATION_REASON).strip()}"
            )
            report.removals.append(what)
            continue
        tree = builder.without(best, record)
        if tree is None:
            what.verdict = ENTANGLED
            what.reason = "later kept changes build on its lines: it cannot be taken out alone"
            report.removals.append(what)
            continue
        what.commit = builder.commit(
            tree, best, f"ablation: attempt {record.iteration} left out", f"{prefix}/{n}"
        )
        evaluator.logs = logs / f"without-{record.iteration:04d}"
        evaluator.logs.mkdir(parents=True, exist_ok=True)
        measured, judged = compare(evaluator, record.iteration, best, what.commit)
        what.runs = measured.runs + judged.runs
        report.runs += what.runs
        what.metric = measured.metric
        what.best_metric = judged.metric
        if measured.failure:
            what.verdict = BROKEN
            what.reason = f"without it the metric fails: {measured.reason}"
        elif judged.failure:
            what.verdict = CARRIES
            what.reason = f"the best could not be re-measured ({judged.reason}); kept to be safe"
            warn(f"ablation of attempt {record.iteration}: {what.reason}")
        elif judged.verdict is Verdict.KEEP:
            what.verdict = CARRIES
            what.reason = f"without it the metric is worse: {judged.reason}"
        elif (loss := _loss(direction, measured, judged)) > (
            se := _error(evaluator, measured, judged)
        ):
            # The rule guards against keeping noise; here its caution would drop a change
            # that may be real, so a change goes only when removing it does not even look
            # worse by one standard error.
            what.verdict = UNSURE
            what.reason = (
                f"without it the metric looks worse by {num(loss)} (more than one standard "
                f"error, {num(se)}) though not by the rule's bar ({judged.reason}); kept"
            )
        else:
            what.verdict = NEUTRAL
            what.reason = f"without it the metric is not worse: {judged.reason}"
        report.removals.append(what)
    carrying = [r for r, w in zip(kept, report.removals, strict=True) if w.carries]
    if len(carrying) == len(kept):
        report.minimal, report.minimal_metric = best, kept[-1].metric
        report.minimal_note = (
            "every kept change carries part of the gain"
            if not report.simplifications
            else "every kept change carries part of the gain or is a simplification"
        )
    else:
        _minimal(report, builder, evaluator, logs, base, best, carrying, prefix)
    return report


def _minimal(
    report: Report,
    builder: TreeBuilder,
    evaluator: Evaluator,
    logs: Path,
    base: str,
    best: str,
    carrying: Sequence[AttemptRecord],
    prefix: str,
) -> None:
    tree = builder.only(base, carrying)
    if tree is None:
        report.minimal_note = (
            "the carrying changes do not apply without the others; no minimal version"
        )
        return
    shown = ", ".join(f"#{r.iteration}" for r in carrying) or "none"
    commit = builder.commit(tree, base, f"ablation: only {shown}", f"{prefix}/minimal")
    evaluator.logs = logs / "minimal"
    evaluator.logs.mkdir(parents=True, exist_ok=True)
    measured, judged = compare(evaluator, 0, best, commit)
    report.runs += measured.runs + judged.runs
    report.minimal_metric = measured.metric
    if measured.failure:
        report.minimal_note = f"the minimal version fails to measure: {measured.reason}"
        return
    report.minimal = commit
    if judged.verdict is Verdict.KEEP:
        report.minimal_note = (
            "the best is better than the minimal version (the changes interact): "
            f"{judged.reason}; prefer the full branch"
        )
    else:
        report.minimal_note = f"the minimal version is as good as the best: {judged.reason}"


def markdown(report: Report) -> str:
    gains = [i for i in report.carrying if i not in report.simplifications]
    lines = [
        f"# Ablation of campaign {report.name}",
        "",
        f"Best {report.best[:10]} against itself with each kept change left out, "
        f"{report.runs} metric runs.",
        "",
        "| attempt | verdict | without it | best | change | why |",
        "|---|---|---|---|---|---|",
    ]
    for r in report.removals:
        text = r.description.replace("|", "/")[:80]
        lines.append(
            f"| {r.iteration} | {r.verdict} | {num(r.metric)} | {num(r.best_metric)} | "
            f"{text} | {r.reason.replace('|', '/')[:160]} |"
        )
    lines += [
        "",
        "Carrying the gain: " + (", ".join(f"#{i}" for i in gains) or "none"),
        "Simplifications (kept for the code they remove): "
        + (", ".join(f"#{i}" for i in report.simplifications) or "none"),
        "Neutral (removable): " + (", ".join(f"#{i}" for i in report.neutral) or "none"),
        "",
        f"Minimal version: {report.minimal[:10] if report.minimal else 'none'} "
        f"(metric {num(report.minimal_metric)}); {report.minimal_note}",
        "",
    ]
    if report.minimal:
        lines.append("Make a branch of it: `autoresearch branch NAME --minimal`.")
    return "\n".join(lines) + "\n"


def save(state_dir: Path, report: Report) -> Path:
    write_text(state_dir / REPORT_JSON, json.dumps(report.to_json(), indent=2) + "\n")
    write_text(state_dir / REPORT_MD, markdown(report))
    return state_dir / REPORT_MD


def minimal_commit(state_dir: Path) -> tuple[str, dict[str, Any]]:
    """The minimal version the last ablation found, for `branch --minimal`."""
    try:
        data = json.loads((state_dir / REPORT_JSON).read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        raise AutoresearchError(
            f"campaign '{state_dir.name}' has no ablation yet; run `autoresearch ablate` first."
        ) from None
    commit = data.get("minimal") if isinstance(data, dict) else None
    if not isinstance(commit, str):
        note = data.get("minimal_note") if isinstance(data, dict) else ""
        raise AutoresearchError(f"the last ablation found no minimal version ({note}).")
    return commit, data


def ablate_campaign(
    campaign: Campaign,
    workspace: Workspace,
    executor: Executor,
    fingerprint: Fingerprint,
    records: Sequence[AttemptRecord],
    phase: Phase,
    warn: Callable[[str], None],
    tree: Tree | None = None,
) -> Report:
    """Ablate with an evaluator of its own (its samples apart from the campaign's), in the
    engine's measurement folder; the report is saved beside the ledger."""
    logs = campaign.state_dir / "logs" / "ablation"
    evaluator = Evaluator(campaign, workspace, executor, fingerprint, logs, phase, tree=tree)
    evaluator.load(records)
    cfg = campaign.config
    report = ablate(cfg.name, str(cfg.metric.direction), records, workspace, evaluator, logs, warn)
    save(campaign.state_dir, report)
    return report


def run_ablation(
    campaign: Campaign,
    executor: Executor | None = None,
    warn: Callable[[str], None] = lambda message: None,
) -> Report:
    """`autoresearch ablate`: holds the campaign's lock (refused while it runs), sets the
    workspace at the best kept commit and measures as the engine does."""
    from autoresearch.engine.lifecycle import Lifecycle, raise_interrupted
    from autoresearch.engine.startup import fix_judge
    from autoresearch.executors import LocalExecutor
    from autoresearch.store.ledger import Ledger, StateFile

    executor = executor or LocalExecutor()
    with Lifecycle(campaign, executor, warn, raise_interrupted):
        records = Ledger(campaign.state_dir).read()
        best = next((r.commit for r in reversed(records) if r.status.sets_best), None)
        if best is None:
            raise AutoresearchError(
                f"campaign '{campaign.name}' has no measurements yet; run it first."
            )
        workspace = Workspace(
            campaign.root, campaign.name, campaign.state_dir, list(campaign.config.share)
        )
        for warning in workspace.ensure(best):
            warn(warning)
        fingerprint, _ = fix_judge(campaign, workspace, StateFile(campaign.state_dir), True)
        return ablate_campaign(
            campaign, workspace, executor, fingerprint, records, lambda *a, **k: None, warn
        )
