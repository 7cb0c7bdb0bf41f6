"""Ablation: leave-one-out over the kept changes, through the engine's measurement, and a
branch with only the changes that carry the gain."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from autoresearch.attempt import Status
from autoresearch.checks.ablation import run_ablation
from autoresearch.config import load_campaign
from autoresearch.engine import Engine
from autoresearch.proposers.base import Proposal
from autoresearch.store.ledger import Ledger
from campaigns import campaign_toml
from conftest import Runner, git, make_repo
from unit.memory import MemoryExecutor, ScriptedProposer


def value(workspace: Path, name: str) -> float:
    return float((workspace / f"{name}.py").read_text().split("=")[1])


class Lucky:
    """|A - 3| + |B - 3|, minus 0.5 on the metric runs listed: noise that lets a neutral
    change be kept."""

    def __init__(self, lucky: set[int]) -> None:
        self.lucky = lucky
        self.runs = 0

    def __call__(self, workspace: Path) -> float:
        self.runs += 1
        real = abs(value(workspace, "a") - 3) + abs(value(workspace, "b") - 3)
        return real - (0.5 if self.runs in self.lucky else 0.0)


def setter(name: str, number: int) -> object:
    def edit(workspace: Path) -> Proposal:
        (workspace / f"{name}.py").write_text(f"X = {number}\n")
        return Proposal(description=f"set {name} to {number}")

    return edit


def note(name: str) -> object:
    def edit(workspace: Path) -> Proposal:
        (workspace / "notes").mkdir(exist_ok=True)
        (workspace / "notes" / f"{name}.py").write_text(f"# {name}\n")
        return Proposal(description=f"add note {name}")

    return edit


def campaign(tmp_path: Path, files: dict[str, str] | None = None, **overrides: object) -> Path:
    config = campaign_toml(
        **{
            "scope": ["*.py", "notes/*.py"],
            "harness": [],
            "metric.command": "metric",
            "guard": None,
            "metric.target": None,
            **overrides,
        }  # type: ignore[arg-type]
    )
    return make_repo(
        tmp_path / "repo",
        {"a.py": "X = 10\n", "b.py": "X = 10\n", **(files or {}), "autoresearch.toml": config},
    )


def run_campaign(repo: Path, executor: MemoryExecutor) -> Engine:
    proposer = ScriptedProposer(setter("a", 3), note("first"), setter("b", 3), note("second"))
    made = Engine(
        load_campaign(repo),
        proposer=proposer,  # type: ignore[arg-type]
        executor=executor,  # type: ignore[arg-type]
        max_iterations=4,
    )
    made.run()
    return made


def test_ablation_finds_the_neutral_kept_changes(tmp_path: Path, invoke: Runner) -> None:
    repo = campaign(tmp_path)
    # Runs: baseline 1, then attempts 1..4; attempts 2 and 4 are lucky.
    run_campaign(repo, MemoryExecutor(Lucky({3, 5})))
    records = Ledger(repo / ".autoresearch" / "toy").read()
    assert [str(r.status) for r in records] == ["baseline", "keep", "keep", "keep", "keep"]
    checkout = git(repo, "rev-parse", "HEAD")
    executor = MemoryExecutor(Lucky(set()))
    report = run_ablation(load_campaign(repo), executor=executor)  # type: ignore[arg-type]
    assert report.carrying == [1, 3]
    assert report.neutral == [2, 4]
    assert report.minimal is not None
    assert "as good as the best" in report.minimal_note
    # Measured in the engine's measurement folder, never in the checkout or workspace.
    measure = repo / ".autoresearch" / "toy" / "measure"
    assert {where for _, where in executor.runs} == {measure}
    assert git(repo, "rev-parse", "HEAD") == checkout
    data = json.loads((repo / ".autoresearch" / "toy" / "ablation.json").read_text())
    assert data["neutral"] == [2, 4] and data["metric_runs"] == report.runs
    # The minimal branch holds the real changes only.
    result = invoke(repo, "branch", "lean", "--minimal")
    assert result.returncode == 0, result.stderr
    files = git(repo, "ls-tree", "-r", "--name-only", "lean").split()
    assert "notes/first.py" not in files and "notes/second.py" not in files
    assert git(repo, "show", "lean:a.py") == "X = 3\n"
    assert git(repo, "show", "lean:b.py") == "X = 3\n"
    assert invoke(repo, "verify").returncode == 0


def test_a_change_later_ones_build_on_is_kept(tmp_path: Path) -> None:
    repo = campaign(tmp_path)

    def twice(workspace: Path) -> Proposal:
        (workspace / "a.py").write_text("X = 3\n")
        return Proposal(description="a to 3")

    proposer = ScriptedProposer(setter("a", 5), twice)
    Engine(
        load_campaign(repo),
        proposer=proposer,  # type: ignore[arg-type]
        executor=MemoryExecutor(Lucky(set())),  # type: ignore[arg-type]
        max_iterations=2,
    ).run()
    report = run_ablation(load_campaign(repo), executor=MemoryExecutor(Lucky(set())))  # type: ignore[arg-type]
    verdicts = [r.verdict for r in report.removals]
    assert verdicts == ["entangled", "carries"]
    assert report.neutral == []


def test_ablate_without_a_kept_change_is_one_sentence(tmp_path: Path, invoke: Runner) -> None:
    repo = campaign(tmp_path)
    result = invoke(repo, "ablate")
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert "no measurements" in result.stderr or "run it first" in result.stderr
    missing = invoke(repo, "branch", "x", "--minimal")
    assert missing.returncode != 0 and "Traceback" not in missing.stderr


def test_ablate_at_the_end_of_a_campaign(tmp_path: Path) -> None:
    repo = campaign(tmp_path, **{"stop.ablate": True})
    run_campaign(repo, MemoryExecutor(Lucky({3, 5})))
    data = json.loads((repo / ".autoresearch" / "toy" / "ablation.json").read_text())
    assert data["carrying"] == [1, 3] and data["neutral"] == [2, 4]
    assert (
        "Neutral (removable): #2, #4"
        in (repo / ".autoresearch" / "toy" / "ablation.md").read_text()
    )


def test_a_loss_beyond_one_standard_error_is_not_removed() -> None:
    from types import SimpleNamespace

    from autoresearch.checks.ablation import _error, _loss
    from autoresearch.measure.evaluation import Evaluation

    book = SimpleNamespace(book=SimpleNamespace(groups={}))
    without = Evaluation(samples=[10.4, 10.6, 10.5])  # minimize: worse without the change
    best = Evaluation(samples=[10.0, 10.2, 10.1])
    loss, error = _loss("minimize", without, best), _error(book, without, best)  # type: ignore[arg-type]
    assert loss > error > 0  # kept as unsure: the rule's 2-sigma bar may not be cleared
    same = Evaluation(samples=[10.1, 10.0, 10.2])
    assert _loss("minimize", same, best) <= _error(book, same, best)  # type: ignore[arg-type]
    assert _loss("maximize", without, best) < 0


FILLER = "".join(f"def helper_{i}():\n    return {i}\n\n\n" for i in range(5))


def drop_filler(workspace: Path) -> Proposal:
    (workspace / "c.py").write_text("# helpers removed\n")
    return Proposal(description="remove the unused helpers")


def test_a_simplification_is_kept_for_the_code_it_removes(tmp_path: Path, invoke: Runner) -> None:
    repo = campaign(tmp_path, {"c.py": FILLER}, **{"decision.simplicity": True})
    proposer = ScriptedProposer(setter("a", 3), drop_filler, note("first"), setter("b", 3))
    Engine(
        load_campaign(repo),
        proposer=proposer,  # type: ignore[arg-type]
        executor=MemoryExecutor(Lucky({4})),  # type: ignore[arg-type]  # attempt 3 is lucky
        max_iterations=4,
    ).run()
    records = Ledger(repo / ".autoresearch" / "toy").read()
    assert [str(r.status) for r in records] == ["baseline", "keep", "keep", "keep", "keep"]
    assert str(records[2].reason).startswith("simplification:")
    report = run_ablation(load_campaign(repo), executor=MemoryExecutor(Lucky(set())))  # type: ignore[arg-type]
    verdicts = {r.iteration: r.verdict for r in report.removals}
    assert verdicts == {1: "carries", 2: "simplification", 3: "neutral", 4: "carries"}
    assert report.simplifications == [2] and report.neutral == [3]
    assert report.carrying == [1, 2, 4]  # what the minimal version holds
    text = (repo / ".autoresearch" / "toy" / "ablation.md").read_text()
    assert "Simplifications (kept for the code they remove): #2" in text
    assert "Neutral (removable): #3" in text and "Carrying the gain: #1, #4" in text
    # The minimal branch does not put the removed helpers back.
    result = invoke(repo, "branch", "lean", "--minimal")
    assert result.returncode == 0, result.stderr
    assert "#2" in result.stdout
    assert git(repo, "show", "lean:c.py") == "# helpers removed\n"
    files = git(repo, "ls-tree", "-r", "--name-only", "lean").split()
    assert "notes/first.py" not in files
    assert (
        git(repo, "show", "lean:a.py") == "X = 3\n" and git(repo, "show", "lean:b.py") == "X = 3\n"
    )


def test_a_merged_keep_is_ablated_like_a_keep(tmp_path: Path) -> None:
    repo = campaign(tmp_path)
    run_campaign(repo, MemoryExecutor(Lucky({3, 5})))
    state = repo / ".autoresearch" / "toy"
    # The ledger as a campaign with several jobs writes it: the last two keeps combined as
    # `merged` (written again through the ledger, so its hash chain holds).
    records = Ledger(state).read()
    for name in ("ledger.jsonl", "results.tsv"):
        (state / name).unlink()
    for r in records:
        merged = r.iteration == 4
        Ledger(state).append(replace(r, status=Status.MERGED, combined=(3, 4)) if merged else r)
    assert Ledger(state).read()[4].status is Status.MERGED
    report = run_ablation(load_campaign(repo), executor=MemoryExecutor(Lucky(set())))  # type: ignore[arg-type]
    assert [r.iteration for r in report.removals] == [1, 2, 3, 4]
    assert report.carrying == [1, 3] and report.neutral == [2, 4]
    assert report.best == records[4].commit
