"""`autoresearch confirm` and `autoresearch compare`: two versions measured in interleaved
pairs, and the gain with a confidence interval.

The best kept commit was selected because its samples looked good, so its recorded gain is
inflated (the winner's curse). `confirm` measures it again against the baseline, N pairs
taken in alternating order (A B, B A, A B, ...) so that a trend of the machine hits both
alike, and reports the paired gain (`paired`). `compare A B` does the same for any two
attempts or commits. Unless told an exact number of pairs, both take them in two looks: N,
then N more where the first N leave a gain open (the interval holds 0, the estimate is a
gain), each look's interval at the level that keeps the two together at 95%.

Every run goes through the engine's own machinery: the metric command runs in a
measurement folder of the engine's (`MeasureTree`, its own folder beside the campaign's),
under the campaign's sandbox, with the harness fingerprinted before and after each run;
never in the user's checkout.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from autoresearch.attempt import AttemptRecord, Status
from autoresearch.config import Campaign
from autoresearch.errors import AutoresearchError
from autoresearch.executors import LocalExecutor
from autoresearch.executors.base import executor_setup
from autoresearch.gitcmd import Git
from autoresearch.measure.evaluation import Evaluation, Evaluator
from autoresearch.measure.integrity import Fingerprint, harness_files
from autoresearch.measure.tree import MeasureTree
from autoresearch.stats.paired import (
    PairedGain,
    in_looks,
    looks,
    pairs_asked,
    pairs_for,
    percent,
)
from autoresearch.store.ledger import Ledger
from autoresearch.store.summary import summarize
from autoresearch.workspace import Workspace

CONFIRM_FILE = "confirm.json"


@dataclass(frozen=True)
class Version:
    label: str  # how the user named it: "baseline", "attempt 7", a commit
    commit: str


@dataclass
class Outcome:
    a: Version
    b: Version
    a_samples: list[float]
    b_samples: list[float]
    result: PairedGain
    direction: str
    raw_gain: float | None = None  # the ledger's gain of B over A (confirm: best - baseline)
    raw_reference: float | None = None  # A's metric in the ledger, for the raw percentage
    plan: tuple[int, ...] = ()  # the pairs at each look it could take (none: one look)

    def to_json(self) -> dict[str, Any]:
        r = self.result
        return {
            "a": {"label": self.a.label, "commit": self.a.commit},
            "b": {"label": self.b.label, "commit": self.b.commit},
            "direction": self.direction,
            "pairs": r.pairs,
            "a_samples": self.a_samples,
            "b_samples": self.b_samples,
            "gain": r.estimate,
            "gain_pct": r.pct(r.estimate),
            "low": r.low,
            "high": r.high,
            "low_pct": r.pct(r.low),
            "high_pct": r.pct(r.high),
            "level": r.level,
            "confidence": r.confidence,
            "confirmed": r.confirmed,
            "raw_gain": self.raw_gain,
            "raw_gain_pct": percent(self.raw_gain, self.raw_reference),
            "looks": [n for n in self.plan or (r.pairs,) if n <= r.pairs],
            "up_to": max(self.plan or (r.pairs,)),
        }


def _records(campaign: Campaign) -> list[AttemptRecord]:
    records = Ledger(campaign.state_dir).read()
    if not records or records[0].status is not Status.BASELINE or not records[0].commit:
        raise AutoresearchError(
            f"campaign '{campaign.name}' has no baseline yet; start it with `autoresearch run`."
        )
    return records


def version(campaign: Campaign, records: Sequence[AttemptRecord], spec: str) -> Version:
    """`baseline`, `best`, an attempt number, or a commit (anything git can name)."""
    text = spec.strip()
    if text == "baseline":
        return Version("baseline", str(records[0].commit))
    if text == "best":
        best = summarize(campaign.name, "minimize", records).best_commit or records[0].commit
        return Version("best", str(best))
    if re.fullmatch(r"[0-9]{1,6}", text):
        found = next((r for r in records if r.iteration == int(text)), None)
        if found is None or not found.commit:
            raise AutoresearchError(
                f"attempt {text} has no commit in the ledger of campaign '{campaign.name}'; "
                "name an attempt that was measured (see `autoresearch log`) or a commit."
            )
        return Version(f"attempt {text}", found.commit)
    commit = Git(campaign.root).rev(f"{text}^{{commit}}") if text else None
    if commit is None:
        raise AutoresearchError(
            f"{spec!r} is neither 'baseline', 'best', an attempt number nor a commit of "
            f"{campaign.root}."
        )
    return Version(text, commit)


Progress = Callable[[str, int, int], None]  # side label, pair, pairs


def measure_pairs(
    campaign: Campaign,
    a: str,
    b: str,
    plan: Sequence[int],
    direction: str,
    progress: Progress | None = None,
) -> tuple[list[float], list[float], PairedGain]:
    """Runs of commits a and b, interleaved A B / B A / A B ..., in the looks of `plan`
    (`paired.in_looks`); the gain at the look it stopped."""
    cfg = campaign.config
    workspace = Workspace(campaign.root, campaign.name, campaign.state_dir, list(cfg.share))
    tree = MeasureTree(
        campaign.root,
        campaign.state_dir / f"confirm-{os.getpid()}",
        list(cfg.share),
        workspace.exclude_file,
    )
    logs = campaign.state_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    executor = LocalExecutor()
    executor.start(executor_setup(campaign))
    try:
        tree.show(a)
        harness = harness_files(campaign, tree.path, tree.files())
        fingerprint = Fingerprint.take(campaign, tree.path, harness)
        evaluator = Evaluator(
            campaign, workspace, executor, fingerprint, logs, lambda *_, **__: None, tree=tree
        )
        taken = 0

        def take(count: int) -> tuple[list[float], list[float]]:
            nonlocal taken
            out: dict[str, list[float]] = {a: [], b: []}
            pairs = taken + count
            for i in range(taken, pairs):
                order = (a, b) if i % 2 == 0 else (b, a)
                for commit in order:
                    if progress is not None:
                        progress("A" if commit == a else "B", i + 1, pairs)
                    run = Evaluation()
                    side = "a" if commit == a else "b"
                    value = evaluator.measure_once(commit, f"confirm-{side}-{i + 1}", run)
                    if value is None:
                        raise AutoresearchError(
                            f"measuring {commit[:12]} failed: {run.reason}; see {logs}/"
                        )
                    out[commit].append(value)
            taken = pairs
            return out[a], out[b]

        return in_looks(plan, direction, take)
    finally:
        executor.close()
        for folder in (tree.path, tree.gitdir):
            if folder.is_dir() and not folder.is_symlink():
                shutil.rmtree(folder, ignore_errors=True)


def compare(
    campaign: Campaign,
    a_spec: str,
    b_spec: str,
    pairs: int,
    progress: Progress | None = None,
    up_to: int | None = None,
) -> Outcome:
    """B's gain over A from `pairs` interleaved pairs, and, where they leave a gain open,
    more up to `up_to`."""
    records = _records(campaign)
    direction = str(campaign.config.metric.direction or "minimize")
    a, b = version(campaign, records, a_spec), version(campaign, records, b_spec)
    if a.commit == b.commit:
        raise AutoresearchError(f"{a.label} and {b.label} are the same commit; name two versions.")
    plan = looks(pairs, up_to)
    a_samples, b_samples, result = measure_pairs(
        campaign, a.commit, b.commit, plan, direction, progress
    )
    raw, reference = _raw(records, a, b, direction)
    return Outcome(a, b, a_samples, b_samples, result, direction, raw, reference, plan)


def _raw(
    records: Sequence[AttemptRecord], a: Version, b: Version, direction: str
) -> tuple[float | None, float | None]:
    """B's gain over A by the bests the ledger recorded for them, and A's."""
    metric: dict[str, float] = {}
    for r in records:
        if r.commit and r.best_after is not None and r.status.sets_best:
            metric[r.commit] = r.best_after
    if a.commit not in metric or b.commit not in metric:
        return None, None
    gained = metric[a.commit] - metric[b.commit]
    return (gained if direction == "minimize" else -gained), metric[a.commit]


def confirm(
    campaign: Campaign, pairs: int, progress: Progress | None = None, up_to: int | None = None
) -> Outcome:
    """The best kept commit against the baseline; saved for the report."""
    records = _records(campaign)
    best = version(campaign, records, "best")
    if best.commit == records[0].commit:
        raise AutoresearchError(
            f"campaign '{campaign.name}' has kept nothing yet: there is no best to confirm."
        )
    outcome = compare(campaign, "baseline", "best", pairs, progress, up_to)
    save(campaign.state_dir, outcome)
    return outcome


def save(state_dir: Path, outcome: Outcome) -> None:
    path = state_dir / CONFIRM_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(outcome.to_json(), indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def load(state_dir: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((state_dir / CONFIRM_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def describe(data: dict[str, Any]) -> str:
    """One line: both versions by label and commit, the pairs (and whether a second look
    took more), the confirmed gain and its interval at the level it covers (at least 95%
    from 6 pairs on; below, the level it has and the pairs that give 95%), beside the raw
    gain the ledger recorded."""

    def pct(value: Any) -> str:
        return "" if value is None else f" ({value:+.2f}%)"

    verdict = "confirmed" if data.get("confirmed") else "NOT confirmed"
    raw = data.get("raw_gain")
    raw_text = (
        "" if raw is None else f"; raw gain in the ledger {raw:.6g}{pct(data.get('raw_gain_pct'))}"
    )
    level = 100 * float(data["level"])
    few = (
        f" (too few pairs for 95%: --repeat {pairs_for()} or more gives it)"
        if level < 95 - 1e-9
        else ""
    )
    a, b = data["a"], data["b"]
    taken = [int(n) for n in data.get("looks") or [data["pairs"]]]
    second = (
        f" ({taken[-1] - taken[-2]} more where the first {taken[-2]} left a gain open)"
        if len(taken) > 1
        else ""
    )
    return (
        f"{b['label']} [{str(b['commit'])[:10]}] vs {a['label']} [{str(a['commit'])[:10]}] "
        f"over {data['pairs']} interleaved pairs{second}: "
        f"gain {data['gain']:.6g}{pct(data.get('gain_pct'))}, "
        f"{level:.1f}% interval [{data['low']:.6g}, {data['high']:.6g}]{few}"
        f" — {verdict} (confidence {data['confidence']:.3f}){raw_text}"
    )


# -- the MCP tool -----------------------------------------------------------------------------


class ConfirmResult(BaseModel):
    """What `confirm` measured, as `autoresearch confirm --json` prints it."""

    confirmed: bool  # the whole confidence interval is a gain
    outcome: dict[str, Any]


def mcp_confirm(tools: Any) -> Callable[..., ConfirmResult]:
    """The `confirm` tool of `autoresearch mcp`: the best kept version against the baseline
    in interleaved pairs, measured by the engine as `autoresearch confirm` does."""

    def confirm_tool(repeat: int | None = None, up_to: int | None = None) -> ConfirmResult:
        """Re-measure the best result against the baseline in interleaved pairs: exactly
        `repeat` (unless `up_to` is given), or by default 10, and 10 more where they leave a
        gain open; the gain with a confidence interval, beside the raw gain the ledger
        recorded."""
        from autoresearch.config import load_campaign

        try:
            pairs, most = pairs_asked(repeat, up_to)
        except ValueError as exc:
            raise AutoresearchError(str(exc)) from None
        outcome = confirm(load_campaign(tools.root, tools.config), pairs, None, most).to_json()
        return ConfirmResult(confirmed=bool(outcome.get("confirmed")), outcome=outcome)

    return confirm_tool
