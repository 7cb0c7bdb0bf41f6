"""The measurement folder moved path by path on the kernel's word: every way a run can leave
something behind is tried, and the folder must then hold exactly the next commit's files,
byte for byte, mode for mode, as git itself would write them."""

from __future__ import annotations

import json
import mmap
import os
import shutil
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from autoresearch.isolation.watch import FolderWatch
from autoresearch.measure.tree import MeasureTree
from autoresearch.workspace import Workspace
from conftest import WATCHED_FILES, commit_all, make_repo

pytestmark = pytest.mark.skipif(
    FolderWatch.open(Path("/"), [], []) is None, reason="no inotify on this system"
)


def expected(repo: Path, commit: str) -> dict[str, object]:
    """What git writes for `commit`, checked out afresh in a folder of its own."""
    out = repo.parent / f"expected-{commit[:8]}"
    if not out.exists():
        out.mkdir()
        env = {**os.environ, "GIT_INDEX_FILE": str(out.parent / f"index-{commit[:8]}")}
        subprocess.run(
            ["git", f"--work-tree={out}", "read-tree", "--reset", "-u", commit],
            cwd=repo,
            env=env,
            check=True,
        )
    return listing(out)


def listing(folder: Path) -> dict[str, object]:
    """A folder byte for byte: each path's kind, permission bits and content."""
    seen: dict[str, object] = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            rel = str(path.relative_to(folder))
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                seen[rel] = ("link", os.readlink(path))
            elif stat.S_ISDIR(st.st_mode):
                seen[rel] = ("dir", stat.S_IMODE(st.st_mode))
            elif stat.S_ISREG(st.st_mode):
                seen[rel] = ("file", stat.S_IMODE(st.st_mode), path.read_bytes())
            else:
                seen[rel] = ("other", stat.S_IFMT(st.st_mode))
        dirnames[:] = [d for d in dirnames if not (Path(dirpath) / d).is_symlink()]
    return seen


def tree_of(repo: Path) -> MeasureTree:
    state = repo / ".autoresearch" / "toy"
    state.mkdir(parents=True)
    (state / "exclude").write_text("")
    return MeasureTree(repo, state / "measure", [], state / "exclude", sealed=lambda: True)


# Everything a run may do to the folder; each leaves it differing from the commit.
def hard_link_elsewhere(folder: Path) -> None:
    os.mkdir(folder / "made")
    os.link(folder / "helper.py", folder / "made" / "h")
    (folder / "made" / "h").write_text("OFFSET = -20\n")  # the same inode as helper.py
    shutil.rmtree(folder / "made")


def mapped_write(folder: Path) -> None:
    handle = open(folder / "lib" / "a.py", "r+b")  # noqa: SIM115 - left open on purpose
    view = mmap.mmap(handle.fileno(), 0)
    view[:] = b"A = 9\n"
    view.flush()
    del view
    handle.close()


def same_size_and_mtime(folder: Path) -> None:
    target = folder / "lib" / "deep" / "b.py"
    st = os.stat(target)
    target.write_text("B = 7\n")
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))


def folder_moved_and_forged(folder: Path) -> None:
    os.rename(folder / "lib" / "deep", folder / "lib" / "gone")
    (folder / "lib" / "deep").mkdir()
    (folder / "lib" / "deep" / "b.py").write_text("B = -1\n")


def folder_replaced_by_a_link(folder: Path) -> None:
    (folder / "stash").mkdir()
    (folder / "stash" / "a.py").write_text("A = -5\n")
    shutil.rmtree(folder / "lib")
    os.symlink("stash", folder / "lib")


def modes_changed(folder: Path) -> None:
    (folder / "calc.py").chmod(0o755)
    (folder / "lib").chmod(0o700)
    (folder / "run.sh").chmod(0o600)


def leftovers(folder: Path) -> None:
    (folder / "__pycache__").mkdir()
    (folder / "__pycache__" / "calc.pyc").write_bytes(b"\0pyc")
    (folder / "lib" / "cache.json").write_text("{}")
    os.mkfifo(folder / "lib" / "deep" / "pipe")
    (folder / "docs").exists() and shutil.rmtree(folder / "docs")


def file_becomes_folder(folder: Path) -> None:
    (folder / "calc.py").unlink(missing_ok=True)
    (folder / "calc.py").mkdir()
    (folder / "calc.py" / "x").write_text("x")


def link_swapped(folder: Path) -> None:
    if os.path.lexists(folder / "alias.py"):
        os.unlink(folder / "alias.py")
    os.symlink("/etc/passwd", folder / "alias.py")


def overflowing(folder: Path) -> None:
    # More events than the kernel queues: the watch cannot vouch, git compares instead.
    # (The modes end as they began: git's own pass does not put back a mode it does not
    # record, such as a file made unreadable; the path-by-path one does.)
    limit = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
    # Two names in turn: the kernel merges an event into an identical one just before it.
    a, b = folder / "lib" / "a.py", folder / "run.sh"
    for _ in range(limit // 2 + 10):
        for path in (a, b):
            mode = stat.S_IMODE(os.lstat(path).st_mode)
            path.chmod(mode ^ 0o040)
            path.chmod(mode)
    a.write_text("A = 0 # cached\n")


RUNS: list[Callable[[Path], None]] = [
    hard_link_elsewhere,
    mapped_write,
    same_size_and_mtime,
    folder_moved_and_forged,
    folder_replaced_by_a_link,
    modes_changed,
    leftovers,
    file_becomes_folder,
    link_swapped,
    overflowing,
]


def attempt(run: Callable[[Path], None], folder: Path) -> None:
    try:
        run(folder)
    except OSError:
        pass  # a run whose attack the commit's shape did not allow leaves what it did


@pytest.mark.parametrize("run", RUNS, ids=[r.__name__ for r in RUNS])
def test_after_any_run_the_folder_is_exactly_the_next_commit(
    commits: tuple[Path, list[str]], run: Callable[[Path], None]
) -> None:
    repo, shas = commits
    tree = tree_of(repo)
    # Every commit after every other, the run in between: the same one and the next.
    order = [shas[0], shas[0], shas[1], shas[2], shas[0], shas[2], shas[1], shas[1]]
    for sha in order:
        tree.show(sha)
        assert listing(tree.path) == expected(repo, sha), sha
        attempt(run, tree.path)
        tree.settle()
    tree.discard()
    assert listing(tree.path) == expected(repo, order[-1])


def test_path_by_path_unless_the_kernel_cannot_vouch(commits: tuple[Path, list[str]]) -> None:
    repo, shas = commits
    tree = tree_of(repo)
    tree.show(shas[0])
    whole = tree.passes["whole"]
    for sha in (shas[1], shas[2], shas[0]):
        leftovers(tree.path)
        tree.settle()
        tree.show(sha)
    assert tree.passes["whole"] == whole  # no pass over the whole folder
    assert tree.passes["paths"] == 3
    overflowing(tree.path)
    tree.settle()
    tree.show(shas[1])
    assert tree.passes["whole"] == whole + 1
    assert listing(tree.path) == expected(repo, shas[1])


def test_an_unsealed_run_is_compared_by_git(commits: tuple[Path, list[str]]) -> None:
    repo, shas = commits
    tree = tree_of(repo)
    tree.sealed = lambda: False  # a process may outlive the run: the kernel's word is not enough
    tree.show(shas[0])
    hard_link_elsewhere(tree.path)
    tree.settle()
    tree.show(shas[2])
    assert tree.passes["paths"] == 0
    assert listing(tree.path) == expected(repo, shas[2])


def test_a_new_engine_takes_over_a_folder_moved_path_by_path(
    commits: tuple[Path, list[str]],
) -> None:
    # A `step` is a process of its own: the files written path by path are not in the
    # index the next engine finds, which must not trust it for them.
    repo, shas = commits
    tree = tree_of(repo)
    tree.show(shas[0])
    tree.settle()
    tree.show(shas[2])  # helper.py, c.txt written path by path
    (tree.path / "helper.py").write_text("OFFSET = -20\n")  # a run no engine saw
    (tree.path / "lib" / "deep" / "c.txt").write_text("c changed\n")
    later = MeasureTree(repo, tree.path, [], tree.exclude_file, sealed=lambda: True)
    later.show(shas[2])
    assert listing(later.path) == expected(repo, shas[2])


def test_the_watch_names_what_changed_by_any_name(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "f").write_text("f")
    (tmp_path / "g").write_text("g")
    watch = FolderWatch.open(tmp_path, ["d/f", "g"], ["d"])
    assert watch is not None
    assert watch.changes() == set()
    os.link(tmp_path / "d" / "f", tmp_path / "link")
    (tmp_path / "link").write_text("changed")
    os.unlink(tmp_path / "link")
    (tmp_path / "new" / "deeper").mkdir(parents=True)
    (tmp_path / "new" / "deeper" / "x").write_text("x")
    changed = watch.changes()
    assert changed is not None and {"d/f", "link", "new"} <= changed
    assert "g" not in changed
    watch.settle()
    assert watch.changes() == set()
    watch.close()
    assert watch.changes() is None


# -- the proposer's workspace: what it changed, read from the marks alone ---------------------


def full_read(workspace: Workspace) -> str:
    """The tree git finds in the workspace when it reads every file (a fresh index)."""
    index = workspace.state_dir / "oracle-index"
    index.unlink(missing_ok=True)
    env = {"GIT_INDEX_FILE": str(index)}
    git_ = workspace.git
    git_.run("read-tree", "HEAD", extra_env=env)
    git_.run("add", "-A", extra_env=env)
    return git_.run("write-tree", extra_env=env).strip()


def edit_in_place(ws: Path) -> None:
    (ws / "calc.py").write_text("N = 5\n")


def new_nested_folder(ws: Path) -> None:
    (ws / "pkg" / "sub").mkdir(parents=True, exist_ok=True)
    (ws / "pkg" / "sub" / "m.py").write_text("M = 1\n")
    (ws / "pkg" / "__init__.py").write_text("")


def edit_in_the_kept_folder(ws: Path) -> None:
    # pkg/ came with a kept candidate: its files must be watched as the commit's own.
    (ws / "pkg" / "sub" / "m.py").write_text("M = 2\n")


def link_write_to_a_kept_file(ws: Path) -> None:
    os.link(ws / "pkg" / "sub" / "m.py", ws / "alias")
    (ws / "alias").write_text("M = 3\n")
    os.unlink(ws / "alias")


def delete_rename_and_mode(ws: Path) -> None:
    (ws / "docs" / "readme.md").unlink()
    os.rename(ws / "lib" / "a.py", ws / "lib" / "renamed.py")
    (ws / "run.sh").chmod(0o644)


def file_to_link_and_folder_swap(ws: Path) -> None:
    (ws / "helper.py").unlink()
    os.symlink("calc.py", ws / "helper.py")
    os.rename(ws / "lib" / "deep", ws / "lib" / "deeper")


def hard_link_in_place(ws: Path) -> None:
    (ws / "made").mkdir()
    os.link(ws / "lib" / "deep" / "c.txt", ws / "made" / "c")
    (ws / "made" / "c").write_text("through a link\n")
    shutil.rmtree(ws / "made")


def nothing(ws: Path) -> None:
    pass


EDITS = [
    (edit_in_place, True),
    (new_nested_folder, True),
    (edit_in_the_kept_folder, False),
    (link_write_to_a_kept_file, True),
    (hard_link_in_place, False),
    (delete_rename_and_mode, False),
    (file_to_link_and_folder_swap, True),
    (nothing, False),
]


def test_the_watched_workspace_finds_what_reading_it_all_finds(
    commits: tuple[Path, list[str]],
) -> None:
    repo, shas = commits
    state = repo / ".autoresearch" / "toy"
    workspace = Workspace(repo, "toy", state, [])
    workspace.ensure(shas[0])
    incumbent = shas[0]
    for edit, keep in EDITS:
        workspace.watch(sealed=True)
        edit(workspace.path)
        tree = workspace.tree_of(incumbent)
        candidate = workspace.collect(incumbent, tree, admit=lambda _: True)
        assert candidate.tree == full_read(workspace), edit.__name__
        assert (candidate.tree != tree) == (edit is not nothing), edit.__name__
        if keep:
            commit = workspace.commit(candidate, incumbent, edit.__name__, 1)
            workspace.advance(commit, incumbent)
            incumbent = commit
        workspace.roll_back(candidate, incumbent, kept=keep, fast=True)
        assert full_read(workspace) == workspace.tree_of(incumbent), edit.__name__
    assert workspace._watch is not None  # the marks were used, not a full read each time


# -- staging straight from the marks: the same candidate a scan makes -------------------------


def ignored_beside_an_edit(ws: Path) -> None:
    (ws / "calc.py").write_text("N = 6\n")
    (ws / "calc.log").write_text("a run's log\n")


def same_bytes_written_again(ws: Path) -> None:
    (ws / "calc.py").write_text((ws / "calc.py").read_text())


def in_scope_deleted(ws: Path) -> None:
    (ws / "lib" / "a.py").unlink()


def refused_path_touched_too(ws: Path) -> None:
    (ws / "calc.py").write_text("N = 7\n")
    (ws / "helper.py").write_text("OFFSET = 9\n")


def refused_path_rewritten_unchanged(ws: Path) -> None:
    (ws / "calc.py").write_text("N = 8\n")
    (ws / "helper.py").write_text((ws / "helper.py").read_text())


def only_an_ignored_file(ws: Path) -> None:
    (ws / "lib" / "trace.log").write_text("x\n")


def a_file_made_a_link_out(ws: Path) -> None:
    (ws / "calc.py").unlink()
    os.symlink("/etc/passwd", ws / "calc.py")


def package_made_a_module(ws: Path) -> None:
    # lib/deep/c.txt is refused: gone with its folder, it must be named, never dropped quietly.
    shutil.rmtree(ws / "lib" / "deep")
    (ws / "lib" / "deep").write_text("a module now\n")


def package_made_a_looping_link(ws: Path) -> None:
    shutil.rmtree(ws / "lib" / "deep")
    os.symlink("deep", ws / "lib" / "deep")


def package_made_a_link_to_another(ws: Path) -> None:
    (ws / "lib" / "other").mkdir()
    (ws / "lib" / "other" / "b.py").write_text("B = 3\n")
    (ws / "lib" / "deep" / "c.txt").unlink()
    shutil.rmtree(ws / "lib" / "deep")
    os.symlink("other", ws / "lib" / "deep")


def ignore_rules_rewritten(ws: Path) -> None:
    (ws / "lib" / "keep.log").write_text("kept?\n")
    (ws / ".gitignore").write_text("*.log\n!lib/keep.log\n")


def strays_beside_an_edit(ws: Path) -> None:
    # Nothing git sees, so no candidate holds them; a nested .git would hide lib/ from
    # every later scan.
    (ws / "calc.py").write_text("N = 11\n")
    os.mkfifo(ws / "lib" / "pipe")
    (ws / "lib" / ".git").mkdir()
    (ws / "lib" / ".git" / "HEAD").write_text("ref: refs/heads/main\n")


STAGINGS = [
    strays_beside_an_edit,
    package_made_a_module,
    package_made_a_looping_link,
    package_made_a_link_to_another,
    ignore_rules_rewritten,
    ignored_beside_an_edit,
    same_bytes_written_again,
    in_scope_deleted,
    refused_path_touched_too,
    refused_path_rewritten_unchanged,
    only_an_ignored_file,
    a_file_made_a_link_out,
]


def _candidates(tmp_path: Path, sealed: bool) -> list[tuple[object, ...]]:
    repo = make_repo(tmp_path / ("sealed" if sealed else "scanned"), WATCHED_FILES)
    (repo / ".gitignore").write_text("*.log\n")
    base = commit_all(repo, "ignore logs")
    state = repo / ".autoresearch" / "toy"
    workspace = Workspace(repo, "toy", state, [])
    workspace.ensure(base)
    tree = workspace.tree_of(base)
    admitted = {"calc.py", "lib/a.py", "calc.log", "lib/trace.log", "lib/deep", "lib/deep/b.py"}
    admitted |= {"lib/other", "lib/other/b.py", ".gitignore", "lib/keep.log"}
    found = []
    for edit in STAGINGS:
        workspace.watch(sealed=sealed)
        edit(workspace.path)
        candidate = workspace.collect(base, tree, admit=lambda p: p in admitted)
        found.append(
            (
                edit.__name__,
                candidate.tree,
                sorted((c.status, c.path) for c in candidate.changes),
                sorted(candidate.ignored),
                candidate.staged,
            )
        )
        workspace.roll_back(candidate, base, kept=False, fast=True)
        assert full_read(workspace) == tree, edit.__name__
        assert not list(workspace.path.rglob("*.log")), edit.__name__  # ignored files dropped
        if sealed:  # the kernel named them: nothing git cannot see is left either
            strays = ["lib/pipe", "lib/.git"]
            assert not [p for p in strays if os.path.lexists(workspace.path / p)], edit.__name__
    if sealed:
        assert workspace._watch is not None
    return found


def test_staged_from_the_marks_is_the_candidate_a_scan_finds(tmp_path: Path) -> None:
    sealed = _candidates(tmp_path, sealed=True)
    assert sealed == _candidates(tmp_path, sealed=False)
    found = {name: rest for name, *rest in sealed}
    for name in ("package_made_a_module", "package_made_a_looping_link"):
        _tree, changes, _ignored, staged = found[name]
        assert not staged and ("D", "lib/deep/c.txt") in changes, name  # named, not stored
    assert ("A", "lib/keep.log") in found["ignore_rules_rewritten"][1]


def test_a_name_git_refuses_is_an_edit_refused_and_the_campaign_goes_on(tmp_path: Path) -> None:
    from autoresearch.config import load_campaign
    from autoresearch.engine import Engine
    from campaigns import script_campaign

    repo = script_campaign(
        tmp_path,
        'if [ "$AUTORESEARCH_ITERATION" = 1 ]; then mkdir -p lib; echo x > lib/.GIT; fi\n'
        'echo "N = $((10 - AUTORESEARCH_ITERATION))" > calc.py\n',
        scope=["calc.py", "lib"],
    )
    result = Engine(load_campaign(repo)).run()
    assert result.stop_reason == "max_iterations", result
    records = [json.loads(line) for line in (repo / ".autoresearch/t/ledger.jsonl").open()]
    assert [r["status"] for r in records[1:]] == ["edit_refused", "keep", "keep"]
    assert "git cannot store" in records[1]["reason"]


def _share_candidate(tmp_path: Path, sealed: bool) -> tuple[object, ...]:
    repo = make_repo(tmp_path / ("sealed" if sealed else "scanned"), WATCHED_FILES)
    (repo / ".gitignore").write_text("*.log\n")
    base = commit_all(repo, "ignore logs")
    (repo / "share").mkdir()
    (repo / "share" / "d.txt").write_text("data\n")
    workspace = Workspace(repo, "toy", repo / ".autoresearch" / "toy", ["share"])
    workspace.ensure(base)
    tree = workspace.tree_of(base)
    workspace.watch(sealed=sealed)
    # Only .gitignore is touched, but what it says changes what git sees of an untouched
    # path: the share link the engine keeps ignored.
    (workspace.path / ".gitignore").write_text("*.log\n!/share\n")
    candidate = workspace.collect(base, tree, admit=lambda p: p == ".gitignore")
    return candidate.tree, sorted((c.status, c.path) for c in candidate.changes), candidate.staged


def test_ignore_rules_rewritten_are_read_for_the_whole_workspace(tmp_path: Path) -> None:
    sealed = _share_candidate(tmp_path, sealed=True)
    assert sealed == _share_candidate(tmp_path, sealed=False)
    _tree, changes, staged = sealed
    assert ("A", "share") in changes and not staged  # the share link, named and refused
