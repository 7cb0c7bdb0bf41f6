"""The evaluator in-process: it runs what the comparison asks for, and names failures."""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from autoresearch.attempt import Status
from autoresearch.config import Campaign, parse_config
from autoresearch.executors import CommandSpec, Measurement
from autoresearch.measure.evaluation import Evaluator
from autoresearch.measure.integrity import Fingerprint
from autoresearch.stats.decide import Verdict
from autoresearch.workspace import Candidate

NOWHERE = Path("/nonexistent")

CONFIG = """
name = "e"
scope = ["x"]
[metric]
command = "true"
direction = "minimize"
[decision]
rule = "sequential"
[proposer]
kind = "command"
command = "true"
"""


class Stage:
    """Executor and measurement tree at once: each run prints the next number of the
    commit shown."""

    path = NOWHERE  # never read or written: runs are answered from `values`

    def __init__(self, values: dict[str, list[float | None]]) -> None:
        self.values = values
        self.showing = ""
        self.runs: list[str] = []

    def show(self, commit: str) -> None:
        self.showing = commit

    def settle(self) -> None:
        pass

    def discard(self) -> None:
        pass

    def run(self, spec: CommandSpec, **_: Any) -> Measurement:
        self.runs.append(self.showing)
        value = self.values[self.showing].pop(0)
        if value is None:
            return Measurement("crash", None, 0.0, "exited with 1", NOWHERE / "log")
        return Measurement("ok", value, 0.0, "", NOWHERE / "log")


class Unchanged(Fingerprint):
    """No harness file, and nothing ever changes."""

    def changed(
        self, campaign: Campaign, workspace: Path, expect: Mapping[str, str] | None = None
    ) -> None:
        return None


def evaluator(stage: Stage, phases: list[tuple[Any, ...]], rule: str = "sequential") -> Evaluator:
    config = parse_config("e", tomllib.loads(CONFIG.replace('"sequential"', f'"{rule}"')))
    nowhere = Path("/nonexistent")
    return Evaluator(
        Campaign(config, nowhere, nowhere),
        stage,  # type: ignore[arg-type]
        stage,
        Unchanged(),  # type: ignore[arg-type]
        nowhere,
        lambda *args, **kwargs: phases.append((*args, kwargs)),
        tree=stage,
    )


def test_a_kept_incumbent_is_remeasured_first_and_a_clear_gain_kept() -> None:
    stage = Stage({"b": [10.0, 10.1, 9.9, 10.0, 10.0], "c": [5.0]})
    phases: list[tuple[Any, ...]] = []
    ev = evaluator(stage, phases)
    assert ev.baseline("b").samples == [10.0, 10.1, 9.9, 10.0]
    ev.kept("b")  # as if b had been selected: its own samples do not count as reference
    out = ev.evaluate(1, Candidate(tree=""), "c", "b")
    assert stage.runs[4:] == ["b", "c"]
    assert out.verdict is Verdict.KEEP and out.samples == [5.0] and out.runs == 2
    assert out.incumbent_samples == [10.0] and out.failure is None
    assert phases[4:] == [
        ("measuring", 1, {"sample": 1, "samples": 8, "side": "incumbent"}),
        ("measuring", 1, {"sample": 1, "samples": 8}),
    ]


def test_a_failed_run_is_a_status() -> None:
    stage = Stage({"b": [10.0, 10.1, 9.9, 10.0, None], "c": [None]})
    ev = evaluator(stage, [])
    ev.baseline("b")
    out = ev.evaluate(1, Candidate(tree=""), "c", "b")
    assert out.failure is Status.CRASH and out.reason == "metric exited with 1"
    ev.kept("b")
    out = ev.evaluate(2, Candidate(tree=""), "d", "b")
    assert out.failure is Status.CRASH
    assert out.reason == "re-measuring the incumbent: metric exited with 1"


def test_a_failed_run_a_held_drop_waits_for_leaves_the_drop() -> None:
    """Under `auto` a drop waits for one more incumbent run, which only tells carry-over
    (`Rule.probe`): when that run fails, the candidate is still dropped, not charged with a
    crash of the incumbent's, and the ledger's replay gives the same verdict."""
    stage = Stage({"b": [10.0, 10.1, 9.9, 10.05, None], "c": [20.0, 20.1, 19.9, 20.2, 20.0]})
    ev = evaluator(stage, [], rule="auto")
    ev.baseline("b")
    assert ev.rule.probe
    out = ev.evaluate(1, Candidate(tree=""), "c", "b")
    assert out.failure is None and out.verdict is Verdict.DISCARD, out.reason
    assert stage.runs[-1] == "b" and out.incumbent_samples == []
    replay = ev.book.comparison("b")
    replay.feed(out.samples, out.incumbent_samples)
    assert replay.verdict is Verdict.DISCARD
