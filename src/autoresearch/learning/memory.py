"""The campaign's research memory: what worked, what failed and why, and the dead ends,
derived from the ledger alone.

A proposer's own notes can be wrong or lost when its context is compacted; the ledger's
records are what the engine measured. The memory is rebuilt from them before every
attempt, written to `.autoresearch/<name>/memory.md` and handed to the proposer (a prompt
section, or `Outcome.memory` for proposers without a prompt). It is bounded: the newest
entries of each section are kept, so a long campaign's memory stays the same size.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path

from autoresearch.attempt import AttemptRecord, Status, num, without_holdout
from autoresearch.isolation.owned import write_text

MEMORY_FILE = "memory.md"
MAX_CHARS = 6000  # the whole memory; each section gets a share
WORKED_LIMIT = 12
FAILED_LIMIT = 12
DEAD_END_LIMIT = 10
LINE_CHARS = 240


def _one_line(text: str, limit: int = LINE_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _files(record: AttemptRecord) -> str:
    files = list(record.files)
    if not files:
        return "no files"
    shown = ", ".join(files[:3])
    return shown + (f" and {len(files) - 3} more" if len(files) > 3 else "")


_STAT = re.compile(r"\+(\d+|-)/-(\d+|-)")


def change_kind(record: AttemptRecord) -> str:
    """The kind of change, from what git recorded: parameters, additions, removals, edits."""
    if record.params:
        names = sorted(k for k in record.params if k != "optuna_trial")
        return "parameters " + ", ".join(names[:4])
    added = removed = 0
    for a, r in _STAT.findall(record.diffstat or ""):
        added += int(a) if a.isdigit() else 0
        removed += int(r) if r.isdigit() else 0
    if added and not removed:
        return "additions"
    if removed and not added:
        return "removals"
    return "edits"


def _idea(record: AttemptRecord) -> str:
    hypothesis = record.hypothesis
    return f" [hypothesis: {_one_line(hypothesis, 120)}]" if hypothesis else ""


def _gain(record: AttemptRecord, direction: str) -> str:
    before = record.previous_best
    if record.metric is None or before is None:
        return "gain ?"
    gain = before - record.metric if direction == "minimize" else record.metric - before
    pct = f", {100.0 * gain / abs(before):.2f}%" if before else ""
    return f"gain {num(gain)}{pct}"


def worked(records: Sequence[AttemptRecord], direction: str) -> list[str]:
    return [
        f"- #{r.iteration} {_gain(r, direction)} ({num(r.metric)}), {_files(r)}: "
        f"{_one_line(r.description, 160)}{_idea(r)}"
        for r in records
        if r.status.kept_change
    ]


def failed(records: Sequence[AttemptRecord]) -> list[str]:
    """Every attempt that was not kept for a reason (`Status.failed_or_refused`: a failure,
    a duplicate, a better candidate a check refused), with the engine's reason (a failed
    guard's reason holds the guard's last lines); a parked candidate is listed as waiting
    for approval, not as a failure. Discards are the dead ends."""
    decided = {r.approval_of: r for r in records if r.approval_of is not None}
    out = []
    for r in records:
        status = str(r.status)
        if r.status is Status.AWAITING_APPROVAL:
            by = decided.get(r.iteration)
            status = (
                "awaiting_approval (parked for a person, not a failure)"
                if by is None
                else f"awaiting_approval (parked, then decided by #{by.iteration}: {by.status})"
            )
        elif not r.status.failed_or_refused:
            continue
        reason = without_holdout(r).reason
        why = f": {_one_line(reason)}" if reason else ""
        what = _one_line(r.description or "", 120) or _files(r)
        out.append(f"- #{r.iteration} {status}, {_files(r)} ({what}){why}{_idea(r)}")
    return out


def dead_ends(records: Sequence[AttemptRecord]) -> list[str]:
    """Measured changes that did not help, grouped by the files they touched and the kind
    of change; those tried before the last keep are marked, since the code they were
    tried on has changed."""
    last_keep = max((r.iteration for r in records if r.status.sets_best), default=0)
    groups: OrderedDict[tuple[str, str], list[AttemptRecord]] = OrderedDict()
    for r in records:
        if r.status.dead_end and r.commit:
            key = (_files(r), change_kind(r))
            groups.setdefault(key, []).append(r)
            groups.move_to_end(key)
    lines = []
    for (files, kind), group in groups.items():
        statuses: dict[str, int] = {}
        for r in group:
            statuses[str(r.status)] = statuses.get(str(r.status), 0) + 1
        counted = ", ".join(f"{s} x{n}" for s, n in statuses.items())
        tried = "; ".join(f"#{r.iteration} {_one_line(r.description, 60)}" for r in group[-4:])
        older = (
            " (all before the last keep: the premise may have changed)"
            if all(r.iteration < last_keep for r in group)
            else ""
        )
        lines.append(f"- {files}, {kind}: {counted}. Tried: {tried}{older}")
    return lines


def _bounded(title: str, lines: list[str], limit: int, chars: int) -> list[str]:
    if not lines:
        return []
    shown = lines[-limit:]
    while shown and sum(len(s) + 1 for s in shown) > chars:
        shown = shown[1:]
    dropped = len(lines) - len(shown)
    head = [f"## {title}", ""]
    if dropped:
        head.append(f"({dropped} older entries left out; the ledger has them all)")
    return [*head, *shown, ""]


def memory_text(name: str, direction: str, records: Sequence[AttemptRecord]) -> str:
    """The memory as markdown, at most about MAX_CHARS characters."""
    attempts = [r for r in records if r.status is not Status.BASELINE]
    share = MAX_CHARS // 3
    lines = [
        f"# Research memory: {name}",
        "",
        f"Derived by the engine from the ledger ({len(attempts)} attempts); every number "
        "was measured.",
        "",
    ]
    lines += _bounded("What worked", worked(records, direction), WORKED_LIMIT, share)
    lines += _bounded("What failed and why", failed(records), FAILED_LIMIT, share)
    lines += _bounded(
        "Dead ends (by files and kind of change)", dead_ends(records), DEAD_END_LIMIT, share
    )
    if len(lines) == 4:
        lines += ["Nothing tried yet.", ""]
    return "\n".join(lines)


def write_memory(state_dir: Path, text: str) -> Path:
    path = state_dir / MEMORY_FILE
    write_text(path, text)
    return path
