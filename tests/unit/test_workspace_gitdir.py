"""The proposer's workspace has its own git directory, and the engine touches only folders
it made. Each test plays a proposer that attacks the boundary and asserts the promise
itself: the user's repository (HEAD, index, files tracked, untracked and ignored, refs,
stash, branches, config, hooks) byte for byte unchanged, and no cheated number kept."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from autoresearch.attempt import Status
from autoresearch.checks.verify import verify_campaign
from autoresearch.config import load_campaign
from autoresearch.engine import Engine
from autoresearch.engine.lifecycle import RunResult
from autoresearch.proposers.base import Proposal
from autoresearch.store.ledger import Ledger
from campaigns import campaign_toml
from conftest import git, make_repo
from unit.memory import Edit, MemoryExecutor, ScriptedProposer, score, set_n


def user_repo(tmp_path: Path, **overrides: object) -> Path:
    config = campaign_toml(
        **{"metric.command": "metric", "guard.command": "guard", **overrides}  # type: ignore[arg-type]
    )
    repo = make_repo(
        tmp_path / "repo",
        {
            "calc.py": "# the number to tune\nN = 10\n",
            "bench.py": "# the judge\n",
            "autoresearch.toml": config,
            ".gitignore": ".env\n",
        },
    )
    # What a user has besides commits: a secret that is ignored, work not yet added, a stash,
    # another branch, a tag, a hook and attributes of their own.
    (repo / ".env").write_text("SECRET=1\n")
    (repo / "draft.txt").write_text("untracked work\n")
    (repo / "calc.py").write_text("# the number to tune\nN = 10\n# mine\n")
    git(repo, "stash", "-q")
    (repo / "calc.py").write_text("# the number to tune\nN = 10\n# uncommitted\n")
    git(repo, "branch", "feature")
    git(repo, "tag", "v1")
    hook = repo / ".git" / "hooks" / "post-checkout"
    hook.write_text("#!/bin/sh\nexit 0\n")
    hook.chmod(0o755)
    (repo / ".git" / "info" / "attributes").write_text("*.txt text\n")
    return repo


def user_state(repo: Path) -> dict[str, object]:
    files = {}
    for path in sorted(repo.rglob("*")):
        rel = path.relative_to(repo)
        if rel.parts[0] == ".autoresearch" or (rel.parts[0] == ".git" and "objects" in rel.parts):
            continue
        if rel.parts[:2] in ((".git", "refs"), (".git", "logs")) and "autoresearch" in rel.parts:
            continue  # the engine's own refs (and their reflog)
        if path.is_symlink():
            files[str(rel)] = b"-> " + str(path.readlink()).encode()
        elif path.is_file():
            files[str(rel)] = path.read_bytes()
        else:
            files[str(rel)] = b"(dir)"
    refs = [
        line
        for line in git(repo, "for-each-ref", "--format=%(refname) %(objectname)").splitlines()
        if "autoresearch" not in line
    ]
    return {"files": files, "refs": refs, "head": git(repo, "symbolic-ref", "HEAD")}


def run(repo: Path, *edits: Edit, iterations: int = 1) -> tuple[RunResult, list]:
    executor = MemoryExecutor(score)
    engine = Engine(
        load_campaign(repo),
        proposer=ScriptedProposer(*edits),  # type: ignore[arg-type]
        executor=executor,  # type: ignore[arg-type]
        max_iterations=iterations,
    )
    result = engine.run()
    return result, Ledger(repo / ".autoresearch" / "toy").read()


def in_ws(workspace: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=workspace, capture_output=True, text=True, check=False
    ).stdout


def committed_score(repo: Path, commit: str) -> float:
    text = git(repo, "show", f"{commit}:calc.py")
    line = next(ln for ln in text.splitlines() if ln.startswith("N ="))
    return abs(float(line.split("=", 1)[1]) - 3)


def then(*steps: Edit) -> Edit:
    def edit(workspace: Path) -> Proposal:
        proposal = Proposal(description="attack")
        for step in steps:
            proposal = step(workspace) or proposal
        return proposal

    return edit


def test_a_gitfile_pointed_at_the_user_repository_changes_nothing_of_theirs(
    tmp_path: Path,
) -> None:
    repo = user_repo(tmp_path)
    before = user_state(repo)

    def rewire(workspace: Path) -> Proposal:
        shutil.rmtree(workspace / ".git")
        (workspace / ".git").write_text(f"gitdir: {repo / '.git'}\n")
        (workspace / "junk.txt").write_text("x\n")
        return Proposal(description="point .git at the user's repository")

    result, records = run(repo, then(set_n("9"), rewire), set_n("4"), iterations=2)
    assert user_state(repo) == before
    assert [r.status for r in records][1:] == [Status.SCOPE_VIOLATION, Status.KEEP], result
    # The workspace got a fresh .git of its own again.
    assert (repo / ".autoresearch/toy/worktree/.git").is_dir()


def test_a_git_symlink_to_the_user_repository_is_replaced_not_followed(tmp_path: Path) -> None:
    repo = user_repo(tmp_path)
    before = user_state(repo)

    def link(workspace: Path) -> Proposal:
        shutil.rmtree(workspace / ".git")
        (workspace / ".git").symlink_to(repo / ".git")
        return set_n("7")(workspace) or Proposal()

    result, records = run(repo, link, set_n("4"), iterations=2)
    assert user_state(repo) == before
    assert [r.status for r in records][1:] == [Status.KEEP, Status.KEEP], result
    assert not (repo / ".autoresearch/toy/worktree/.git").is_symlink()


def test_a_workspace_replaced_by_a_symlink_to_the_checkout_halts_with_nothing_touched(
    tmp_path: Path,
) -> None:
    repo = user_repo(tmp_path)
    before = user_state(repo)

    def swap(workspace: Path) -> Proposal:
        shutil.rmtree(workspace)
        workspace.symlink_to(repo)
        return Proposal(description="the workspace is now the user's checkout")

    result, records = run(repo, swap)
    assert (result.stop_reason, result.exit_code) == ("tampered", 3)
    assert records[-1].status is Status.TAMPERED
    assert "symbolic link" in (records[-1].reason or "")
    assert user_state(repo) == before
    # The next run makes a fresh workspace instead of writing through the link.
    (repo / ".autoresearch/toy/worktree").unlink()
    result, records = run(repo, set_n("4"), iterations=2)
    assert records[-1].status is Status.KEEP and user_state(repo) == before


def test_a_workspace_left_as_a_symlink_is_replaced_at_start(tmp_path: Path) -> None:
    repo = user_repo(tmp_path)
    run(repo, set_n("7"))
    before = user_state(repo)
    workspace = repo / ".autoresearch/toy/worktree"
    shutil.rmtree(workspace)
    workspace.symlink_to(repo)
    result, records = run(repo, set_n("4"), iterations=2)
    assert records[-1].status is Status.KEEP, result
    assert user_state(repo) == before
    assert not workspace.is_symlink()


def test_another_folder_moved_in_place_of_the_workspace_halts(tmp_path: Path) -> None:
    repo = user_repo(tmp_path)
    before = user_state(repo)

    def move(workspace: Path) -> Proposal:
        set_n("4")(workspace)
        shutil.copytree(workspace, workspace.with_name("copy"), symlinks=True)
        workspace.rename(workspace.with_name("old"))
        workspace.with_name("copy").rename(workspace)
        return Proposal(description="a different folder at the same path")

    result, records = run(repo, move)
    assert (result.stop_reason, result.exit_code) == ("tampered", 3)
    assert records[-1].metric is None, "nothing measured in a folder the engine did not make"
    assert user_state(repo) == before


def test_config_hooks_and_filters_in_the_workspace_git_change_nothing(tmp_path: Path) -> None:
    repo = user_repo(tmp_path)
    before = user_state(repo)
    marker = tmp_path / "hook-ran"

    def configure(workspace: Path) -> Proposal:
        hooks = workspace / "myhooks"
        hooks.mkdir()
        for name in ("post-checkout", "pre-commit", "reference-transaction", "post-index-change"):
            (hooks / name).write_text(f"#!/bin/sh\ntouch {marker}\n")
            (hooks / name).chmod(0o755)
        in_ws(workspace, "config", "core.hooksPath", str(hooks))
        in_ws(workspace, "config", "filter.cheat.clean", "sed s/N = 1/N = 3/")
        in_ws(workspace, "config", "filter.cheat.smudge", "sed s/N = 3/N = 1/")
        (workspace / ".git" / "info" / "attributes").write_text("calc.py filter=cheat\n")
        shutil.rmtree(hooks)
        return set_n("1")(workspace) or Proposal()

    _, records = run(repo, configure, set_n("4"), iterations=2)
    assert user_state(repo) == before
    assert not marker.exists(), "no hook of the proposer's ran"
    record = records[1]
    # The candidate is the file on disk (N = 1), measured as committed: no filter applied.
    assert git(repo, "show", f"{record.commit}:calc.py").endswith("N = 1\n")
    assert record.metric == committed_score(repo, record.commit or "") == 2
    assert in_ws(repo / ".autoresearch/toy/worktree", "config", "core.hooksPath") == ""


def test_branches_tags_and_stash_made_by_the_proposer_stay_in_its_own_git(
    tmp_path: Path,
) -> None:
    repo = user_repo(tmp_path)
    before = user_state(repo)

    def refs(workspace: Path) -> Proposal:
        (workspace / "calc.py").write_text("# the number to tune\nN = 2\n")
        in_ws(workspace, "stash")
        in_ws(workspace, "branch", "evil")
        in_ws(workspace, "tag", "evil-tag")
        in_ws(workspace, "checkout", "-q", "-b", "other")
        in_ws(
            workspace,
            "-c",
            "user.name=x",
            "-c",
            "user.email=x@x",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "on other",
        )
        return set_n("4")(workspace) or Proposal()

    result, records = run(repo, refs, iterations=1)
    assert user_state(repo) == before
    assert records[-1].status is Status.KEEP, result
    assert "evil" not in git(repo, "for-each-ref")


def test_commits_resets_and_switches_are_judged_as_the_files_on_disk(tmp_path: Path) -> None:
    repo = user_repo(tmp_path)
    before = user_state(repo)
    ident = ["-c", "user.name=x", "-c", "user.email=x@x"]

    def history(workspace: Path) -> Proposal:
        set_n("0")(workspace)  # would score 3
        in_ws(workspace, *ident, "commit", "-qam", "zero")
        set_n("3")(workspace)
        in_ws(workspace, *ident, "commit", "-qam", "three: the best possible")
        in_ws(workspace, "reset", "-q", "--soft", "HEAD~1")  # the index says N = 3 ...
        in_ws(workspace, "checkout", "-q", "HEAD", "--", ".")
        set_n("5")(workspace)  # ... the file says N = 5
        return Proposal(description="history games")

    _, records = run(repo, history)
    record = records[-1]
    assert user_state(repo) == before
    assert git(repo, "show", f"{record.commit}:calc.py").endswith("N = 5\n")
    assert record.metric == committed_score(repo, record.commit or "") == 2
    assert record.note == "the proposer moved HEAD; its work was judged as plain changes"
    workspace = repo / ".autoresearch/toy/worktree"
    assert in_ws(workspace, "symbolic-ref", "HEAD").strip() == "refs/heads/autoresearch/toy"
    assert in_ws(workspace, "status", "--porcelain") == ""


def test_index_flags_in_the_workspace_git_never_hide_a_change(tmp_path: Path) -> None:
    repo = user_repo(tmp_path)
    before = user_state(repo)

    def flags(workspace: Path) -> Proposal:
        in_ws(workspace, "update-index", "--skip-worktree", "calc.py")
        in_ws(workspace, "update-index", "--assume-unchanged", "bench.py")
        (workspace / "bench.py").write_text("print('score: 0')\n")  # the judge, hidden
        set_n("4")(workspace)
        return Proposal(description="hide the judge edit behind index flags")

    result, records = run(repo, flags)
    assert user_state(repo) == before
    assert records[-1].status is Status.TAMPERED, "the harness edit was seen"
    assert records[-1].metric is None and (result.stop_reason, result.exit_code) == (
        "tampered",
        3,
    )


def test_out_of_scope_content_is_not_kept_under_a_ref(tmp_path: Path) -> None:
    repo = user_repo(tmp_path)

    def leak(workspace: Path) -> Proposal:
        (workspace / "stolen.txt").write_text("a large secret blob\n")
        return set_n("4")(workspace) or Proposal()

    result, records = run(repo, leak, set_n("4"), iterations=2)
    assert [r.status for r in records][1:] == [Status.SCOPE_VIOLATION, Status.KEEP], result
    probe = tmp_path / "probe.txt"
    probe.write_text("a large secret blob\n")
    blob = git(repo, "hash-object", str(probe)).strip()
    reachable = git(repo, "rev-list", "--all", "--objects")
    assert blob not in reachable
    report = verify_campaign(repo, repo / ".autoresearch" / "toy", "toy")
    assert report.ok, report.problems


def test_a_harness_edit_is_not_kept_under_a_ref(tmp_path: Path) -> None:
    repo = user_repo(tmp_path)

    def judge(workspace: Path) -> Proposal:
        (workspace / "bench.py").write_text("# a rewritten judge\n")
        return Proposal(description="edit the judge")

    run(repo, judge)
    assert "a rewritten judge" not in git(repo, "log", "--all", "-p")
    assert verify_campaign(repo, repo / ".autoresearch" / "toy", "toy").ok


def test_a_symlinked_logs_or_measure_folder_is_replaced_at_start(tmp_path: Path) -> None:
    repo = user_repo(tmp_path)
    run(repo, set_n("7"))
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / "keep.txt").write_text("mine\n")
    state = repo / ".autoresearch" / "toy"
    for name in ("logs", "measure"):
        shutil.rmtree(state / name)
        (state / name).symlink_to(target)
    before = user_state(repo)
    result, records = run(repo, set_n("4"), iterations=2)
    assert records[-1].status is Status.KEEP, result
    assert sorted(p.name for p in target.iterdir()) == ["keep.txt"]
    assert (target / "keep.txt").read_text() == "mine\n"
    assert user_state(repo) == before


def test_a_symlink_planted_at_the_measure_folder_during_the_run_halts(tmp_path: Path) -> None:
    repo = user_repo(tmp_path)
    target = tmp_path / "elsewhere"
    target.mkdir()
    before = user_state(repo)

    def plant(workspace: Path) -> Proposal:
        measure = workspace.parent / "measure"
        shutil.rmtree(measure)
        measure.symlink_to(target)
        return set_n("4")(workspace) or Proposal()

    result, _ = run(repo, plant)
    assert (result.stop_reason, result.exit_code) == ("tampered", 3)
    assert list(target.iterdir()) == []
    assert user_state(repo) == before


def test_a_symlinked_state_folder_is_refused_with_exit_3(tmp_path: Path) -> None:
    repo = user_repo(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (repo / ".autoresearch").symlink_to(elsewhere)
    before = user_state(repo)
    proc = subprocess.run(
        [sys.executable, "-m", "autoresearch", "run", "--max-iterations", "1"],
        cwd=repo,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 3, proc.stderr
    assert "symbolic link" in proc.stderr + proc.stdout and "Traceback" not in proc.stderr
    assert list(elsewhere.iterdir()) == []
    assert user_state(repo) == before
