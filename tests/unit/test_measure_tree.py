"""What is measured is exactly the commit: attacks on the measurement, each asserting the
number that counts (never the mechanism)."""

from __future__ import annotations

import itertools
import os
import subprocess
from pathlib import Path

from autoresearch.attempt import Status
from autoresearch.config import load_campaign
from autoresearch.engine import Engine
from autoresearch.measure import materialise
from autoresearch.measure.tree import MeasureTree
from autoresearch.proposers.base import Proposal
from autoresearch.store.ledger import Ledger
from autoresearch.testing.repo import git, make_repo
from campaigns import campaign_toml
from unit.memory import ScriptedProposer

BENCH = 'import calc\nprint(f"score: {abs(calc.N - 3)}")\n'


def repo_with(tmp_path: Path, **overrides: object) -> Path:
    config = campaign_toml(guard=None, **{"metric.target": None, **overrides})  # type: ignore[arg-type]
    return make_repo(
        tmp_path / "repo",
        {
            "calc.py": "N = 10\n",
            "other.py": "x = 1\n",
            "bench.py": BENCH,
            "autoresearch.toml": config,
        },
    )


def run(repo: Path, *edits: object, iterations: int = 1) -> list:
    proposer = ScriptedProposer(*edits)  # type: ignore[arg-type]
    Engine(load_campaign(repo), proposer=proposer, max_iterations=iterations).run()  # type: ignore[arg-type]
    return Ledger(repo / ".autoresearch" / "toy").read()


def touch_other(workspace: Path) -> None:
    (workspace / "other.py").write_text("x = 2\n")


def test_a_skip_worktree_file_is_measured_as_committed(tmp_path: Path) -> None:
    def cheat(workspace: Path) -> Proposal:
        (workspace / "calc.py").write_text("N = 3\n")  # would score 0
        git(workspace, "update-index", "--skip-worktree", "calc.py")
        touch_other(workspace)
        return Proposal(description="cheat with skip-worktree")

    repo = repo_with(tmp_path, scope=["calc.py", "other.py"])
    record = run(repo, cheat)[-1]
    # The engine reads the files on disk, whatever the proposer's index says: the commit
    # holds N = 3, and the number is what that committed calc.py gives.
    assert git(repo, "show", f"{record.commit}:calc.py") == "N = 3\n"
    assert record.metric == 0


def test_an_assume_unchanged_file_is_measured_as_committed(tmp_path: Path) -> None:
    def cheat(workspace: Path) -> Proposal:
        git(workspace, "update-index", "--assume-unchanged", "calc.py")
        (workspace / "calc.py").write_text("N = 3\n")
        touch_other(workspace)
        return Proposal(description="cheat with assume-unchanged")

    repo = repo_with(tmp_path, scope=["calc.py", "other.py"])
    record = run(repo, cheat)[-1]
    assert git(repo, "show", f"{record.commit}:calc.py") == "N = 3\n"
    assert record.metric == 0  # what the committed calc.py gives


def test_a_smudge_filter_planted_in_the_repository_does_not_touch_the_measurement(
    tmp_path: Path,
) -> None:
    def cheat(workspace: Path) -> Proposal:
        git(workspace, "config", "filter.cheat.smudge", "sed s/10/3/")
        (workspace / ".gitattributes").write_text("calc.py filter=cheat\n")
        touch_other(workspace)
        return Proposal(description="cheat with a smudge filter")

    repo = repo_with(tmp_path, scope=["calc.py", "other.py", ".gitattributes"])
    record = run(repo, cheat)[-1]
    assert record.metric == 7 and record.status is Status.DISCARD


def test_an_ignored_file_the_proposer_planted_is_not_seen(tmp_path: Path) -> None:
    def cheat(workspace: Path) -> Proposal:
        (workspace / ".gitignore").write_text("calc_override.py\n")
        (workspace / "calc_override.py").write_text("N = 3\n")
        (workspace / "calc.py").write_text(
            "try:\n    from calc_override import N\nexcept ImportError:\n    N = 10\n"
        )
        return Proposal(description="read an ignored file")

    repo = repo_with(tmp_path, scope=["calc.py", ".gitignore"])
    record = run(repo, cheat)[-1]
    assert record.metric == 7 and record.status is Status.DISCARD


def test_what_a_run_writes_is_never_seen_by_the_next(tmp_path: Path) -> None:
    # The candidate caches a "result" on its first run; the next runs must not find it.
    cached = (
        "import os\nif os.path.exists('cache.txt'):\n    N = 3\nelse:\n"
        "    open('cache.txt', 'w').write('x')\n    N = 12\n"
    )

    def cache(workspace: Path) -> Proposal:
        (workspace / "calc.py").write_text(cached)
        return Proposal(description="cache the result")

    repo = repo_with(tmp_path, **{"decision.rule": "repeats", "decision.repeats": 3})
    record = run(repo, cache)[-1]
    assert record.samples == (9.0, 9.0, 9.0) and record.status is Status.DISCARD


def test_the_judge_edited_while_the_metric_runs_is_tampered(tmp_path: Path) -> None:
    rewrite = (
        "N = 10\nimport pathlib\npathlib.Path('bench.py').write_text('print(\"score: 0\")\\n')\n"
    )

    def tamper(workspace: Path) -> Proposal:
        (workspace / "calc.py").write_text(rewrite)
        return Proposal(description="rewrite the judge while it runs")

    # Without a sandbox, where the fingerprint is the only line (in one, the harness is
    # read-only where it runs and the write itself fails: `test_isolation_channels`).
    repo = repo_with(tmp_path, **{"sandbox.isolation": "none"})
    records = run(repo, tamper, iterations=3)
    assert records[-1].status is Status.TAMPERED and len(records) == 2
    assert "bench.py changed while the metric ran" in (records[-1].reason or "")
    assert git(repo, "rev-parse", "autoresearch/toy") == git(repo, "rev-parse", "HEAD")


def test_the_tree_moves_by_changed_paths_and_rebuilds_when_damaged(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"a.txt": "1\n", "b/c.txt": "2\n"})
    first = git(repo, "rev-parse", "HEAD").strip()
    (repo / "a.txt").write_text("changed\n")
    (repo / "b" / "c.txt").unlink()
    git(repo, "commit", "-qam", "second")
    second = git(repo, "rev-parse", "HEAD").strip()
    exclude = tmp_path / "exclude"
    exclude.write_text("")
    tree = MeasureTree(repo, tmp_path / "state" / "measure", [], exclude)
    tree.show(first)
    assert (tree.path / "b" / "c.txt").read_text() == "2\n"
    untouched = (tree.path / "b" / "c.txt").stat().st_ino
    (tree.path / "junk").write_text("left by a run")
    (tree.path / "a.txt").write_text("edited by a run")
    tree.settle()
    tree.discard()
    assert not (tree.path / "junk").exists() and (tree.path / "a.txt").read_text() == "1\n"
    assert (tree.path / "b" / "c.txt").stat().st_ino == untouched
    tree.show(second)
    assert (tree.path / "a.txt").read_text() == "changed\n"
    # What a run wrote is gone when the next commit is shown, undone in the same pass.
    (tree.path / "junk").write_text("left by a run")
    (tree.path / "b").mkdir()
    (tree.path / "b" / "c.txt").write_text("planted where the next commit has a file")
    (tree.path / "a.txt").write_text("edited by a run")
    tree.settle()
    tree.show(first)
    assert not (tree.path / "junk").exists()
    assert (tree.path / "a.txt").read_text() == "1\n" and (
        tree.path / "b/c.txt"
    ).read_text() == "2\n"
    tree.show(second)
    assert not (tree.path / "b" / "c.txt").exists()
    (tree.gitdir / "index").unlink()  # damaged: rebuilt from scratch
    tree.show(first)
    assert (tree.path / "a.txt").read_text() == "1\n" and (tree.path / "b" / "c.txt").exists()


def test_a_measurement_folder_swapped_for_a_link_is_never_written_through(
    tmp_path: Path,
) -> None:
    from conftest import snapshot

    # The candidate, while measured (no sandbox), moves its folder away and leaves a link
    # to the user's checkout in its place: the engine's clean-up must not run there.
    swap = (
        "N = 10\nimport os, pathlib\nhere = pathlib.Path.cwd()\n"
        "os.rename(here, here.with_name('elsewhere'))\n"
        "os.symlink(here.parents[2], here)\n"
    )

    def attack(workspace: Path) -> Proposal:
        (workspace / "calc.py").write_text(swap)
        return Proposal(description="swap the measurement folder")

    repo = repo_with(tmp_path, **{"sandbox.isolation": "none"})
    (repo / ".env").write_text("TOKEN=mine\n")  # untracked, like a user's secrets
    before = snapshot(repo)
    records = run(repo, attack, iterations=2)
    assert records[-1].status is Status.TAMPERED
    assert "measurement folder" in (records[-1].reason or "")
    assert snapshot(repo) == before


def test_what_the_last_run_wrote_is_gone_when_the_campaign_ends(tmp_path: Path) -> None:
    # The metric leaves a file and edits a tracked one in its folder on every run; when
    # the campaign stops, the measurement folder holds exactly the last commit again.
    bench = (
        "import calc\nopen('left.txt', 'w').write('x')\nopen('other.py', 'a').write('# run')\n"
        'print(f"score: {abs(calc.N - 3)}")\n'
    )
    repo = repo_with(tmp_path, **{"metric.command": "python bench.py"})
    (repo / "bench.py").write_text(bench)
    git(repo, "commit", "-qam", "a bench that writes")

    def better(workspace: Path) -> Proposal:
        (workspace / "calc.py").write_text("N = 4\n")
        return Proposal(description="N to 4")

    records = run(repo, better)
    assert [r.status for r in records] == [Status.BASELINE, Status.KEEP]
    folder = repo / ".autoresearch" / "toy" / "measure"
    assert not (folder / "left.txt").exists()
    assert (folder / "other.py").read_text() == "x = 1\n"
    assert (folder / "calc.py").read_text() == "N = 4\n"


def _commit_states(repo: Path) -> list[str]:
    """Commits that differ the awkward ways: a file made a folder and back, a link, the
    exec bit, a nested folder emptied, names with spaces, a newline and non-UTF-8 bytes."""
    commits = [git(repo, "rev-parse", "HEAD").strip()]

    def commit(message: str) -> None:
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", message)
        commits.append(git(repo, "rev-parse", "HEAD").strip())

    (repo / "a.txt").unlink()
    (repo / "a.txt").mkdir()
    (repo / "a.txt" / "inner").write_text("was a file\n")
    (repo / "deep" / "x" / "y").mkdir(parents=True)
    (repo / "deep" / "x" / "y" / "z.txt").write_text("z\n")
    (repo / "with space.txt").write_text("s\n")
    commit("file to folder")
    (repo / "b" / "c.txt").chmod(0o755)
    (repo / "link").symlink_to("b/c.txt")
    (repo / "new\nline").write_text("n\n")
    (repo / os.fsdecode(b"caf\xe9")).write_text("latin-1 name\n")
    commit("exec bit, link, odd names")
    for path in sorted((repo / "a.txt").iterdir()):
        path.unlink()
    (repo / "a.txt").rmdir()
    (repo / "a.txt").write_text("a file again\n")
    (repo / "deep" / "x" / "y" / "z.txt").unlink()
    (repo / "link").unlink()
    (repo / "link").write_text("a link made a file\n")
    commit("folder to file, folder emptied")
    return commits


def _git_differences(repo: Path, old: str, new: str) -> dict[str, tuple[str, str] | None]:
    raw = subprocess.run(
        ["git", "diff-tree", "-r", "-z", "--raw", "--no-renames", old, new],
        cwd=repo,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    out: dict[str, tuple[str, str] | None] = {}
    for i in range(0, len(raw) - 1, 2):
        meta = raw[i].decode().lstrip(":").split()
        out[os.fsdecode(raw[i + 1])] = None if meta[4] == "D" else (meta[1], meta[3])
    return out


def test_the_differences_read_from_tree_objects_are_gits(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"a.txt": "1\n", "b/c.txt": "2\n"})
    commits = _commit_states(repo)
    reader = subprocess.Popen(
        ["git", "cat-file", "--batch"], cwd=repo, stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    with materialise.Blobs(reader) as objects:
        for old, new in itertools.permutations(commits, 2):
            found = materialise.tree_differences(objects, old, new)
            seen = {p: None if e is None else (e.mode, e.oid) for p, e in found.items()}
            assert seen == _git_differences(repo, old, new), (old, new)


def test_the_folder_shows_each_commit_exactly_however_it_moves(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"a.txt": "1\n", "b/c.txt": "2\n"})
    commits = _commit_states(repo)
    exclude = tmp_path / "exclude"
    exclude.write_text("")
    tree = MeasureTree(repo, tmp_path / "state" / "measure", [], exclude, sealed=lambda: True)
    for commit in [*commits, *reversed(commits), commits[0], commits[-1], commits[1]]:
        tree.show(commit)
        expected = os.fsdecode(
            subprocess.run(
                ["git", "ls-tree", "-r", "-z", commit], cwd=repo, capture_output=True, check=True
            ).stdout
        )
        shown = {}
        for path in sorted(tree.path.rglob("*")):
            rel = str(path.relative_to(tree.path))
            if path.is_symlink():
                shown[rel] = "link:" + os.readlink(path)
            elif path.is_file():
                shown[rel] = ("x:" if os.access(path, os.X_OK) else "") + path.read_text()
        wanted = {}
        for entry in expected.split("\0"):
            if entry:
                meta, _, rel = entry.partition("\t")
                mode, _, oid = meta.split()
                text = git(repo, "cat-file", "-p", oid)
                wanted[rel] = {"120000": "link:", "100755": "x:"}.get(mode, "") + text
        assert shown == wanted, commit
        tree.settle()
    assert tree.passes["paths"] > 0


def _git_entries(repo: Path, commit: str, paths: list[str]) -> dict[str, tuple[str, str]]:
    raw = subprocess.run(
        ["git", "ls-tree", "-r", "-z", "--full-tree", commit, "--", *paths],
        cwd=repo,
        capture_output=True,
        check=True,
        env={**os.environ, "GIT_LITERAL_PATHSPECS": "1"},
    ).stdout
    out = {}
    for item in raw.split(b"\0"):
        meta, _, name = item.partition(b"\t")
        if meta:
            mode, _, oid = meta.decode().split()
            out[os.fsdecode(name)] = (mode, oid)
    return out


def test_the_entries_read_from_tree_objects_are_what_git_lists(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"a.txt": "1\n", "b/c.txt": "2\n"})
    commits = _commit_states(repo)
    asked = [
        ["a.txt"],
        ["b"],
        ["deep"],
        ["deep/x", "b/c.txt", "missing", "a.txt/inner", "with space.txt"],
        ["link", "new\nline", os.fsdecode(b"caf\xe9"), "b/c.txt/below-a-file", "deep/x/y/z.txt"],
    ]
    reader = subprocess.Popen(
        ["git", "cat-file", "--batch"], cwd=repo, stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    with materialise.Blobs(reader) as objects:
        for commit in commits:
            for paths in asked:
                found = materialise.entries(objects, commit, paths)
                seen = {p: (e.mode, e.oid) for p, e in found.items()}
                assert seen == _git_entries(repo, commit, paths), (commit, paths)
