"""`autoresearch verify`: check the ledger's hash chain, the attempt refs and the branch, and
re-derive every verdict from the recorded samples and the campaign's decision rule."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from autoresearch.attempt import AttemptRecord, Status
from autoresearch.checks.replay import replay
from autoresearch.config import Campaign, load_campaign
from autoresearch.errors import AutoresearchError
from autoresearch.gitcmd import Git
from autoresearch.stats.auto_rule import resolve
from autoresearch.stats.decide import Rule
from autoresearch.store.ledger import StateFile, line_hash
from autoresearch.store.summary import summarize


@dataclass
class Report:
    records: int = 0
    problems: list[str] = field(default_factory=list)
    # The rule the verdicts were re-derived with; None when no config names it.
    rule: str | None = None
    # Verdicts an earlier version of the rule gave that today's would not: said, not failed.
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def verify_campaign(
    root: Path,
    state_dir: Path,
    name: str,
    running: bool = False,
    campaign: Campaign | None = None,
) -> Report:
    """Check the campaign whose state is in `state_dir`. The verdicts are re-derived under
    the decision rule of `campaign` (by default the config found at `root`, when it is this
    campaign's)."""
    report = Report()
    path = state_dir / "ledger.jsonl"
    try:
        lines = path.read_text(encoding="utf-8").split("\n")
    except FileNotFoundError:
        report.problems.append(f"{path} does not exist")
        return report
    if lines and lines[-1] == "":
        lines.pop()
    records: list[AttemptRecord] = []
    numbers: list[int] = []  # each record's line
    previous: str | None = None
    for number, line in enumerate(lines, 1):
        try:
            data = json.loads(line)
        except json.JSONDecodeError:
            report.problems.append(f"line {number} is not valid JSON (torn or edited)")
            previous = line
            continue
        if not isinstance(data, dict):
            report.problems.append(f"line {number} is not a JSON object")
            previous = line
            continue
        expected = None if previous is None else line_hash(previous)
        if data.get("prev_hash") != expected:
            where = "the first line" if previous is None else f"line {number - 1}"
            report.problems.append(
                f"line {number} (iteration {data.get('iteration')}): its prev_hash does not "
                f"match {where}; the ledger was altered at line {max(number - 1, 1)}"
            )
        previous = line
        try:
            record = AttemptRecord.from_json(data)
        except (TypeError, ValueError) as exc:
            report.problems.append(f"line {number} is not an attempt record ({exc})")
            continue
        seen = {r.iteration for r in records}
        expected_iteration = max(seen) + 1 if records else 0
        if record.slot is not None:
            # Several slots log in the order their attempts end, not the order they began.
            if record.iteration in seen:
                report.problems.append(
                    f"line {number}: iteration {record.iteration} is logged twice"
                )
        elif record.iteration != expected_iteration:
            report.problems.append(
                f"line {number}: iteration {record.iteration} where "
                f"{expected_iteration} was expected (a record is missing or repeated)"
            )
        records.append(record)
        numbers.append(number)
    report.records = len(records)
    numbered = {r.iteration for r in records}
    missing = sorted(set(range(max(numbered, default=0) + 1)) - numbered)
    if missing and not running:
        shown = ", ".join(str(i) for i in missing[:5])
        report.problems.append(f"iterations {shown} are missing from the ledger")
    state = StateFile(state_dir).read()
    decision = _decision(root, state_dir, campaign, state.get("config"))
    if decision is not None:
        rule, direction = decision
        # `auto` names the rule it chose from the baseline.
        first = records[0].samples if records and records[0].status is Status.BASELINE else ()
        report.rule = resolve(rule, first or (), direction).name
        for finding in replay(records, rule, direction):
            where = f"line {numbers[finding.index]} (attempt {finding.iteration})"
            if finding.earlier_judge is not None:
                report.notes.append(
                    f"{where}, decided by version {finding.earlier_judge} of the rule: under "
                    f"today's, {finding.message}"
                )
            else:
                report.problems.append(f"{where}: {finding.message}")
    repo = Git(root)
    # `autoresearch clean` removed the refs of the attempts logged before it ran.
    cleaned = state.get("cleaned_through")
    cleaned_through = cleaned if type(cleaned) is int else -1
    for record in records:
        if not record.commit:
            continue
        ref = f"refs/autoresearch/{name}/{record.iteration}"
        found = repo.rev(ref)
        if found is None and record.iteration <= cleaned_through:
            continue
        if found is None and record.status in (Status.SCOPE_VIOLATION, Status.TAMPERED):
            continue  # a candidate rejected for what it touched keeps no ref
        if found is None:
            report.problems.append(f"iteration {record.iteration}: {ref} is missing")
        elif found != record.commit:
            report.problems.append(
                f"iteration {record.iteration}: {ref} points at {found[:12]}, the ledger "
                f"says {record.commit[:12]}"
            )
    summary = summarize(name, "minimize", records)
    branch = repo.rev(f"refs/heads/autoresearch/{name}")
    removed = branch is None and bool(state.get("branch_removed"))
    if summary.best_commit and not running and not removed and branch != summary.best_commit:
        report.problems.append(
            f"branch autoresearch/{name} is at {str(branch)[:12]}, but the best kept commit "
            f"in the ledger is {summary.best_commit[:12]}"
        )
    return report


def _decision(
    root: Path, state_dir: Path, campaign: Campaign | None, recorded: object
) -> tuple[Rule, str] | None:
    """The rule and direction the verdicts are re-derived with: the campaign's config (the
    file its last run named, else the default one), when it is this campaign's."""
    if campaign is None:
        for explicit in (Path(recorded) if isinstance(recorded, str) else None, None):
            try:
                campaign = load_campaign(root, explicit)
            except AutoresearchError:
                continue
            if campaign.state_dir.resolve() == state_dir.resolve():
                break
            campaign = None
    if campaign is None or campaign.state_dir.resolve() != state_dir.resolve():
        return None
    direction = campaign.config.metric.direction
    if direction is None:
        return None
    return campaign.config.decision.to_rule(), str(direction)
