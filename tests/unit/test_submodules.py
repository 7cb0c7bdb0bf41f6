"""A repository with submodules: the workspace has them checked out at the recorded commit,
from the user's own checkout of them, without writing the user's checkout or config; when
that is impossible the engine says why in one sentence."""

from __future__ import annotations

import subprocess
from pathlib import Path

from autoresearch.attempt import Status
from autoresearch.config import load_campaign
from autoresearch.engine import Engine
from autoresearch.executors import LocalExecutor
from autoresearch.store.ledger import Ledger
from autoresearch.workspace import Workspace, ensure_state_dir
from campaigns import campaign_toml
from conftest import git, make_repo, snapshot
from unit.memory import ScriptedProposer, set_n

LOCAL = ["-c", "protocol.file.allow=always"]
BENCH = "import calc\nprint(calc.N * int(open('lib/weight.txt').read()))\n"


def with_submodule(tmp_path: Path, *, init: bool = True) -> Path:
    make_repo(tmp_path / "lib", {"weight.txt": "4\n"})
    config = campaign_toml(
        **{
            "metric.command": "python bench.py",
            "metric.pattern": None,
            "metric.target": None,
            "guard": None,
            "harness": [],
        }
    )
    repo = make_repo(
        tmp_path / "repo", {"calc.py": "N = 10\n", "bench.py": BENCH, "autoresearch.toml": config}
    )
    git(repo, *LOCAL, "submodule", "add", "-q", "../lib", "lib")
    git(repo, "commit", "-qm", "add lib")
    if not init:
        git(repo, "submodule", "deinit", "-q", "-f", "lib")
    return repo


def user_state(repo: Path) -> tuple[object, ...]:
    return (
        snapshot(repo),
        (repo / ".git" / "config").read_bytes(),
        git(repo, "status", "--porcelain", "--ignore-submodules=none"),
        git(repo, "submodule", "status"),
    )


def test_the_workspace_checks_out_the_submodule_without_touching_the_user(
    tmp_path: Path,
) -> None:
    repo = with_submodule(tmp_path)
    ensure_state_dir(repo)
    before = user_state(repo)
    workspace = Workspace(repo, "toy", repo / ".autoresearch" / "toy", [])
    assert workspace.ensure(git(repo, "rev-parse", "HEAD").strip()) == []
    assert (workspace.path / "lib" / "weight.txt").read_text() == "4\n"
    gitdir = workspace.submodule_gitdirs()["lib"]
    assert gitdir.is_relative_to(repo / ".autoresearch" / "toy"), "the clone is the engine's own"
    assert user_state(repo) == before


def test_the_metric_sees_the_submodule_and_the_user_checkout_is_untouched(
    tmp_path: Path,
) -> None:
    repo = with_submodule(tmp_path)
    before = user_state(repo)
    engine = Engine(
        load_campaign(repo),
        proposer=ScriptedProposer(set_n("7")),  # type: ignore[arg-type]
        executor=LocalExecutor(),
        max_iterations=1,
    )
    result = engine.run()
    records = Ledger(repo / ".autoresearch" / "toy").read()
    assert [r.status for r in records] == [Status.BASELINE, Status.KEEP], result
    assert [r.metric for r in records] == [40, 28], "lib/weight.txt was read in the workspace"
    worktree = repo / ".autoresearch" / "toy" / "worktree"
    assert (worktree / "lib" / "weight.txt").read_text() == "4\n"
    assert user_state(repo) == before


def test_a_submodule_that_cannot_be_fetched_is_named_in_one_sentence(tmp_path: Path) -> None:
    repo = with_submodule(tmp_path, init=False)
    ensure_state_dir(repo)
    before = user_state(repo)
    workspace = Workspace(repo, "toy", repo / ".autoresearch" / "toy", [])
    head = git(repo, "rev-parse", "HEAD").strip()
    warnings = workspace.ensure(head)
    assert warnings == [
        "submodule lib is not checked out in the workspace: its URL in .gitmodules is "
        "relative and your checkout has not initialised it; run `git submodule update "
        "--init` in your checkout and start again"
    ]
    assert user_state(repo) == before


def test_a_proposer_that_edits_inside_the_submodule_is_undone_on_reset(tmp_path: Path) -> None:
    repo = with_submodule(tmp_path)
    ensure_state_dir(repo)
    workspace = Workspace(repo, "toy", repo / ".autoresearch" / "toy", [])
    head = git(repo, "rev-parse", "HEAD").strip()
    assert workspace.ensure(head) == []
    lib = workspace.path / "lib"
    (lib / "weight.txt").write_text("1\n")
    (lib / "new.txt").write_text("x\n")
    subprocess.run(["git", "-C", str(lib), "commit", "-qam", "cheat"], check=True)
    workspace.reset_to(head)
    assert (lib / "weight.txt").read_text() == "4\n"
    assert not (lib / "new.txt").exists()
