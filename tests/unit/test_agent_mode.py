"""The agent-driven mode: the agent edits the workspace, `step` judges through the engine.

In-process against real git and the real ledger; the metric is computed in-process
(`MemoryExecutor`), and the CLI cases go through the click command."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

from autoresearch.agent import mode as agent_mode
from autoresearch.checks.verify import verify_campaign
from autoresearch.config import load_campaign
from autoresearch.engine.startup import lock_campaign
from autoresearch.errors import AutoresearchError, CampaignLocked
from autoresearch.store.ledger import Ledger
from campaigns import campaign_toml
from conftest import Runner, git, ledger, make_repo, snapshot, statuses
from unit.memory import MemoryExecutor, score


def toy_repo(tmp_path: Path, **overrides: object) -> Path:
    config = campaign_toml(
        **{"metric.command": "metric", "guard.command": "guard", **overrides}  # type: ignore[arg-type]
    )
    return make_repo(
        tmp_path / "repo",
        {
            "calc.py": "# the number to tune\nN = 10\n",
            "bench.py": "# the judge\n",
            "tool.sh": "echo hi\n",
            "autoresearch.toml": config,
        },
    )


def executor() -> MemoryExecutor:
    return MemoryExecutor(score, guard=lambda ws: "N = 2.5" not in (ws / "calc.py").read_text())


def start(repo: Path) -> agent_mode.StepReport:
    return agent_mode.start(load_campaign(repo), executor=executor())


def step(repo: Path, description: str = "") -> agent_mode.StepReport:
    return agent_mode.step(load_campaign(repo), description, executor=executor())


def workspace(repo: Path) -> Path:
    return agent_mode.workspace_path(load_campaign(repo))


def set_n(repo: Path, value: str) -> None:
    path = workspace(repo) / "calc.py"
    path.write_text(path.read_text().replace(path.read_text().splitlines()[1], f"N = {value}"))


def branch(repo: Path) -> str:
    return git(repo, "rev-parse", "autoresearch/toy").strip()


def test_a_campaign_driven_only_through_step(tmp_path: Path) -> None:
    repo = toy_repo(tmp_path)
    before = snapshot(repo)
    started = start(repo)
    assert started.baseline == 7 and started.attempt is None and not started.stopped
    base = branch(repo)

    set_n(repo, "4")  # an improvement in scope
    kept = step(repo, "N to 4")
    assert kept.attempt is not None and kept.attempt["status"] == "keep"
    assert kept.best == 1 and kept.attempt["metric"] == 1
    assert "Kept" in kept.next and str(workspace(repo)) in kept.next
    assert branch(repo) != base
    assert "N = 4" in (workspace(repo) / "calc.py").read_text()
    best = branch(repo)

    (workspace(repo) / "bench.py").write_text("# the judge, rewritten\n")  # the harness
    tampered = step(repo, "edit the judge")
    assert tampered.attempt is not None and tampered.attempt["status"] == "tampered"
    assert tampered.stopped and tampered.exit_code == 3
    assert (workspace(repo) / "bench.py").read_text() == "# the judge\n"
    with pytest.raises(AutoresearchError, match="halted"):
        step(repo)
    start(repo)  # a person resumes it

    (workspace(repo) / "notes.txt").write_text("hi\n")  # out of scope
    out = step(repo)
    assert out.attempt is not None and out.attempt["status"] == "scope_violation"
    assert not (workspace(repo) / "notes.txt").exists()

    nothing = step(repo)
    assert nothing.attempt is not None and nothing.attempt["status"] == "no_change"

    set_n(repo, "8")  # measured worse: rolled back
    worse = step(repo)
    assert worse.attempt is not None and worse.attempt["status"] == "discard"
    assert "N = 4" in (workspace(repo) / "calc.py").read_text()

    set_n(repo, "'x'")  # the metric crashes: nothing unmeasured is kept
    crashed = step(repo)
    assert crashed.attempt is not None and crashed.attempt["status"] == "crash"

    set_n(repo, "2.5")  # better, but the guard fails
    guarded = step(repo)
    assert guarded.attempt is not None and guarded.attempt["status"] == "guard_failed"

    assert branch(repo) == best
    assert statuses(repo) == [
        "baseline",
        "keep",
        "tampered",
        "scope_violation",
        "no_change",
        "discard",
        "crash",
        "guard_failed",
    ]
    assert snapshot(repo) == before  # the user's checkout was never touched
    campaign = load_campaign(repo)
    assert verify_campaign(repo, campaign.state_dir, "toy", running=False).ok


@pytest.mark.parametrize("remade", [False, True], ids=["as-left", "remade"])
def test_edits_survive_until_step_collects_them(tmp_path: Path, remade: bool) -> None:
    """The agent's edit (a change, a new file, an executable bit) is still there after
    `start` resumes the campaign, also when the workspace has to be made afresh (here: the
    agent removed its `.git`), and `step` then judges exactly it."""
    repo = toy_repo(tmp_path, scope=["calc.py", "new.py", "tool.sh"])
    start(repo)
    ws = workspace(repo)
    (ws / "calc.py").write_text("# the number to tune\nN = 3\n")
    (ws / "new.py").write_text("X = 1\n")
    (ws / "tool.sh").chmod(0o755)
    files = {p: (ws / p).read_bytes() for p in ("calc.py", "new.py")}
    if remade:
        shutil.rmtree(ws / ".git")
    start(repo)
    assert (ws / ".git").is_dir()
    assert {p: (ws / p).read_bytes() for p in files} == files
    assert os.stat(ws / "tool.sh").st_mode & stat.S_IXUSR
    done = step(repo, "three things")
    assert done.attempt is not None and done.attempt["status"] == "keep"
    assert sorted(done.attempt["files"]) == ["calc.py", "new.py", "tool.sh"]
    assert done.stopped and done.stop_reason == "target"
    assert "no more steps" in done.next
    assert "unmeasured" not in done.next  # what this step brought was measured and kept


def test_a_stopped_campaign_keeps_unmeasured_edits(tmp_path: Path) -> None:
    repo = toy_repo(tmp_path, **{"stop.max_iterations": 1})
    start(repo)
    set_n(repo, "9")
    assert step(repo).attempt is not None
    set_n(repo, "4")
    refused = step(repo)
    assert refused.attempt is None and refused.stop_reason == "max_iterations"
    assert "unmeasured edits are still in the workspace" in refused.next
    assert "N = 4" in (workspace(repo) / "calc.py").read_text()
    assert len(Ledger(load_campaign(repo).state_dir).read()) == 2


def test_step_needs_a_started_campaign_and_the_lock(tmp_path: Path) -> None:
    repo = toy_repo(tmp_path)
    with pytest.raises(agent_mode.NotStarted, match="autoresearch start"):
        step(repo)
    with pytest.raises(agent_mode.NotStarted, match="autoresearch start"):
        workspace(repo)
    start(repo)
    set_n(repo, "4")
    lock = lock_campaign(load_campaign(repo))  # a `run` holds the campaign
    try:
        with pytest.raises(CampaignLocked):
            step(repo)
    finally:
        lock.release()
    assert "N = 4" in (workspace(repo) / "calc.py").read_text()
    assert step(repo).attempt is not None


def test_commits_in_the_private_git_are_not_what_is_judged(tmp_path: Path) -> None:
    """The agent may commit, reset or stash in the workspace's `.git`: the engine judges
    the files, and a reset that hid the edit in a commit leaves nothing to keep."""
    repo = toy_repo(tmp_path)
    start(repo)
    ws = workspace(repo)
    set_n(repo, "3")
    git(ws, "commit", "-qam", "my change")
    git(ws, "reset", "-q", "--hard", "HEAD~1")
    report = step(repo)
    assert report.attempt is not None and report.attempt["status"] == "no_change"
    assert report.best == 7


def test_cli_start_step_workspace(tmp_path: Path, invoke: Runner) -> None:
    repo = toy_repo(tmp_path, **{"metric.command": "python bench.py", "guard": None})
    (repo / "bench.py").write_text('import calc\nprint(f"score: {abs(calc.N - 3)}")\n')
    git(repo, "commit", "-qam", "bench")
    refused = invoke(repo, "step")
    assert refused.returncode == 1 and "autoresearch start" in refused.stderr
    assert "Traceback" not in refused.stderr
    started = invoke(repo, "start")
    assert started.returncode == 0, started.stderr
    assert "baseline 7" in started.stdout
    ws = Path(invoke(repo, "workspace").stdout.strip())
    assert ws == workspace(repo)
    (ws / "calc.py").write_text("N = 2\n")
    out = invoke(repo, "step", "--description", "N to 2", "--json")
    assert out.returncode == 0, out.stderr
    import json

    data = json.loads(out.stdout)
    assert data["attempt"]["status"] == "keep" and data["attempt"]["metric"] == 1
    assert data["best"] == 1 and data["next"]
    assert ledger(repo)[-1]["description"] == "N to 2"
    text = invoke(repo, "step")
    assert "no_change" in text.stdout and "next:" in text.stdout
    status = invoke(repo, "status")
    assert "waiting for the next" in status.stdout


def test_the_measurement_folder_left_between_steps_is_not_trusted(tmp_path: Path) -> None:
    """Each step reuses the measurement folder the last one left; a file changed there in
    between (same size, its modification time put back) and a file planted there do not
    reach the next measurement: it measures the committed tree."""
    repo = toy_repo(tmp_path)
    (repo / "offset.txt").write_text("0\n")
    git(repo, "add", "offset.txt")
    git(repo, "commit", "-qm", "offset")

    def metric(ws: Path) -> float:
        bonus = 50 if (ws / "planted.txt").exists() else 0
        return score(ws) - float((ws / "offset.txt").read_text()) - bonus

    def run(make: object) -> agent_mode.StepReport:
        return make(load_campaign(repo), executor=MemoryExecutor(metric))  # type: ignore[operator]

    run(agent_mode.start)
    set_n(repo, "6")
    assert run(agent_mode.step).attempt["status"] == "keep"  # type: ignore[index]
    measure = load_campaign(repo).state_dir / "measure"
    target = measure / "offset.txt"
    assert target.read_text() == "0\n"  # the folder is reused
    before = os.stat(target)
    target.write_text("9\n")
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))
    (measure / "planted.txt").write_text("x\n")
    set_n(repo, "8")  # worse: 5 against 3
    report = run(agent_mode.step)
    assert report.attempt is not None and report.attempt["metric"] == 5
    assert report.attempt["status"] == "discard" and report.best == 3


def test_a_step_carries_only_the_hypothesis_the_agent_was_shown(
    tmp_path: Path, invoke: Runner
) -> None:
    import json

    from autoresearch.learning.ideas import queue_hypotheses

    repo = toy_repo(
        tmp_path, **{"metric.command": "python bench.py", "guard": None, "metric.target": None}
    )
    (repo / "bench.py").write_text('import calc\nprint(f"score: {abs(calc.N - 3)}")\n')
    git(repo, "commit", "-qam", "bench")
    state = repo / ".autoresearch" / "toy"
    started = json.loads(invoke(repo, "start", "--json").stdout)
    assert started["hypothesis"] is None
    memory = Path(started["memory_file"])
    assert memory == state / "memory.md" and memory.is_file()
    # Queued behind the agent's back (by `run --hypotheses`, say): it has not seen it.
    queue_hypotheses(state, ["lower N to 2", "raise N to 5"])
    ws = workspace(repo)
    (ws / "calc.py").write_text("N = 4\n")
    first = json.loads(invoke(repo, "step", "-d", "N to 4", "--json").stdout)
    assert first["attempt"]["status"] == "keep"
    assert ledger(repo)[-1].get("hypothesis") is None  # not shown: not what it tested
    assert first["hypothesis"] == "lower N to 2"  # shown now, for the next change
    (ws / "calc.py").write_text("N = 3\n")
    second = invoke(repo, "step", "-d", "N to 3")
    assert ledger(repo)[-1]["hypothesis"] == "lower N to 2"
    assert "hypothesis to test in your next change: raise N to 5" in second.stdout
    assert f"research memory: {memory}" in second.stdout
    assert second.stdout.rstrip().splitlines()[-1].startswith("next:")
    listed = json.loads(invoke(repo, "ideas", "--json").stdout)
    assert [(e["text"], e["outcome"], e["iteration"]) for e in listed] == [
        ("lower N to 2", "keep", 2),
        ("raise N to 5", "pending", None),
    ]
    assert "#2 gain 1" in memory.read_text() and "[hypothesis: lower N to 2]" in memory.read_text()


def test_start_queues_hypotheses_and_shows_the_first(tmp_path: Path, invoke: Runner) -> None:
    repo = toy_repo(tmp_path, **{"metric.command": "python bench.py", "guard": None})
    (repo / "bench.py").write_text('import calc\nprint(f"score: {abs(calc.N - 3)}")\n')
    git(repo, "commit", "-qam", "bench")
    queue = tmp_path / "h.md"
    queue.write_text("- lower N to 2\n- raise N to 5\n")
    started = invoke(repo, "start", "--hypotheses", str(queue))
    assert started.returncode == 0, started.stderr
    assert "2 new hypotheses queued" in started.stdout
    assert "hypothesis to test in your next change: lower N to 2" in started.stdout
    (workspace(repo) / "calc.py").write_text("N = 2\n")
    assert invoke(repo, "step").returncode == 0
    assert ledger(repo)[-1]["hypothesis"] == "lower N to 2"
