"""Every tree the engine stages is the one plain `git add -A && git write-tree` gives for
the same files, whatever they hold (attributes, links, executable bits, odd names, folders
turned files), and a path the scope refuses is still seen."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from autoresearch.workspace import Workspace
from conftest import commit_all, git, make_repo

Edit = Callable[[Path], None]


def plain_tree(folder: Path, scratch: Path) -> str:
    """The tree plain git writes for `folder`'s files: copied (links, modes and all) into a
    repository of its own, `git add -A && git write-tree`, no configuration of anyone's."""
    shutil.rmtree(scratch, ignore_errors=True)
    shutil.copytree(folder, scratch, symlinks=True, ignore=shutil.ignore_patterns(".git"))
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(scratch.parent),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
    }
    run = {"cwd": scratch, "env": env, "check": True, "capture_output": True}
    subprocess.run(["git", "init", "-q"], **run)  # type: ignore[call-overload]
    subprocess.run(["git", "-c", "core.autocrlf=false", "add", "-A"], **run)  # type: ignore[call-overload]
    done = subprocess.run(["git", "write-tree"], **run)  # type: ignore[call-overload]
    return str(done.stdout.decode().strip())


def user_repo(tmp_path: Path) -> tuple[Path, str]:
    files = {f"pkg/m{i:02d}.py": f"X = {i}\n" for i in range(30)}
    files.update(
        {
            "calc.py": "N = 1\n",
            "notes.txt": "one\ntwo\n",
            "data.dat": "lower case\n",
            "helper.py": "H = 1\n",
            "docs/a.md": "a\n",
            "docs/b.md": "b\n",
            # Line endings and a clean filter, as the user's attributes ask.
            ".gitattributes": "*.txt text eol=crlf\n*.dat filter=upper\n",
        }
    )
    repo = make_repo(tmp_path / "repo", files)
    # A filter only the user's own configuration defines: the engine reads no one's config.
    git(repo, "config", "filter.upper.clean", "tr a-z A-Z")
    (repo / "run.sh").write_text("echo hi\n")
    (repo / "run.sh").chmod(0o755)
    os.symlink("calc.py", repo / "alias.py")
    return repo, commit_all(repo, "exec bit and a link")


def edit_content(ws: Path) -> None:
    (ws / "calc.py").write_text("N = 2\n")


def crlf_and_filter(ws: Path) -> None:
    (ws / "notes.txt").write_bytes(b"one\r\ntwo\r\nthree\n")
    (ws / "new.txt").write_bytes(b"a\r\nb\n")
    (ws / "data.dat").write_text("still lower\n")


def exec_bits(ws: Path) -> None:
    (ws / "run.sh").chmod(0o644)
    (ws / "calc.py").chmod(0o755)


def links(ws: Path) -> None:
    (ws / "alias.py").unlink()
    os.symlink("helper.py", ws / "alias.py")
    os.symlink("../calc.py", ws / "docs" / "link.py")
    (ws / "helper.py").unlink()
    os.symlink("/nowhere", ws / "helper.py")  # a file made a link


def deletions_and_renames(ws: Path) -> None:
    (ws / "docs" / "a.md").unlink()
    os.rename(ws / "pkg" / "m01.py", ws / "pkg" / "moved.py")
    os.rename(ws / "docs", ws / "manual")


def file_turned_folder(ws: Path) -> None:
    (ws / "helper.py").unlink()
    (ws / "helper.py").mkdir()
    (ws / "helper.py" / "inner.py").write_text("inner\n")
    shutil.rmtree(ws / "docs")
    (ws / "docs").write_text("a file now\n")


def odd_names(ws: Path) -> None:
    (ws / "line\nbreak.py").write_text("n\n")
    (ws / os.fsdecode(b"caf\xe9.py")).write_text("latin-1\n")
    (ws / "tab\there.py").write_text("t\n")


def every_file(ws: Path) -> None:
    """A change to every file of a folder."""
    for path in sorted((ws / "pkg").iterdir()):
        path.write_text(path.read_text() + "# more\n")


EDITS: list[Edit] = [
    edit_content,
    crlf_and_filter,
    exec_bits,
    links,
    deletions_and_renames,
    file_turned_folder,
    odd_names,
    every_file,
]


@pytest.mark.parametrize("sealed", [True, False], ids=["kernel", "scan"])
@pytest.mark.parametrize("edit", EDITS, ids=[e.__name__ for e in EDITS])
def test_the_staged_tree_is_plain_gits(tmp_path: Path, edit: Edit, sealed: bool) -> None:
    repo, start = user_repo(tmp_path)
    workspace = Workspace(repo, "toy", repo / ".autoresearch" / "toy", [])
    workspace.ensure(start)
    incumbent = start
    # The edit discarded, then kept, then another one over what the kept one left.
    for round_, keep in enumerate((False, True, False)):
        workspace.watch(sealed=sealed)
        if round_ < 2:
            edit(workspace.path)
        else:  # after the kept one, whose shape the edit may not apply to again
            (workspace.path / "calc.py").write_text(f"N = {round_ + 10}\n")
        expected = plain_tree(workspace.path, tmp_path / f"plain{round_}")
        before = workspace.tree_of(incumbent)
        candidate = workspace.collect(incumbent, before, admit=lambda _: True)
        assert candidate.tree == expected, round_
        assert candidate.tree != before
        if keep:
            made = workspace.commit(candidate, incumbent, edit.__name__, round_)
            assert git(repo, "rev-parse", f"{made}^{{tree}}").strip() == expected
            workspace.advance(made, incumbent)
            incumbent = made
        workspace.roll_back(candidate, incumbent, kept=keep, fast=True)
        # Rolled back: the files are the incumbent's.
        assert plain_tree(workspace.path, tmp_path / "back") == workspace.tree_of(incumbent)
    workspace.close()


def test_a_path_outside_the_scope_is_still_seen(tmp_path: Path) -> None:
    repo, start = user_repo(tmp_path)
    workspace = Workspace(repo, "toy", repo / ".autoresearch" / "toy", [])
    workspace.ensure(start)
    tree = workspace.tree_of(start)
    for sealed in (True, False, True):
        workspace.watch(sealed=sealed)
        (workspace.path / "calc.py").write_text("N = 3\n")
        (workspace.path / "docs" / "a.md").write_text("out of scope\n")
        candidate = workspace.collect(start, tree, admit=lambda p: p == "calc.py")
        assert not candidate.staged
        assert "docs/a.md" in candidate.paths
        # Nothing of it was written into the repository's trees through the index.
        assert workspace.git.run("write-tree").strip() == tree
        workspace.roll_back(candidate, start, kept=False, fast=False)
        assert plain_tree(workspace.path, tmp_path / "back") == tree
    workspace.close()
