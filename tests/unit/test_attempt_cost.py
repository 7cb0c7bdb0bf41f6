"""What an attempt costs stays cheap without giving up what it promises: the ledger and the
committed candidate are its durable writes, the chain holds across writers, the proposer's
own `.git` is current whenever a proposer that runs commands (or a person) may read it,
the history's line counts are git's, and the home folder's allowlist follows the disk."""

from __future__ import annotations

import itertools
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from autoresearch.attempt import AttemptRecord, Status
from autoresearch.config import load_campaign
from autoresearch.engine import Engine
from autoresearch.isolation import sandbox
from autoresearch.proposers.base import Proposal
from autoresearch.store.ledger import Ledger, line_hash
from campaigns import campaign_toml
from conftest import git, make_repo
from unit.memory import MemoryExecutor, ScriptedProposer, score, set_n


def toy_repo(tmp_path: Path, attempts: int = 4, **overrides: object) -> Path:
    config = campaign_toml(
        **{
            "metric.command": "metric",
            "guard": None,
            "stop.max_iterations": attempts,
            **overrides,
        }
    )
    return make_repo(
        tmp_path / "repo",
        {
            "calc.py": "# the number to tune\nN = 10\n",
            "bench.py": "# the judge\n",
            "autoresearch.toml": config,
        },
    )


def run(repo: Path, proposer: ScriptedProposer, **kwargs: object) -> list[AttemptRecord]:
    executor = MemoryExecutor(score)
    Engine(load_campaign(repo), proposer=proposer, executor=executor, **kwargs).run()  # type: ignore[arg-type]
    return Ledger(repo / ".autoresearch" / "toy").read()


def test_an_attempt_fsyncs_its_ledger_line_and_its_committed_candidate_and_nothing_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = toy_repo(tmp_path, attempts=4)
    synced: list[str] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.path.basename(os.readlink(f"/proc/self/fd/{fd}")))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    marks: list[int] = []
    edits = [set_n(v) for v in ("7", "12", "6", "13")]

    def marked(edit: Callable[[Path], Proposal | None]) -> Callable[[Path], Proposal | None]:
        def propose(workspace: Path) -> Proposal | None:
            marks.append(len(synced))
            return edit(workspace)

        return propose

    records = run(repo, ScriptedProposer(*[marked(e) for e in edits]))
    assert [r.status for r in records[1:]] == [Status.KEEP, Status.DISCARD] * 2
    # From one proposal to the next: the state with the committed candidate (written to a
    # scratch file, then renamed), then the ledger's line.
    for start, end in itertools.pairwise(marks):
        names = synced[start:end]
        assert len(names) == 2, names
        assert names[0].startswith(".state.json.") and names[1] == "ledger.jsonl", names


def test_the_chain_holds_when_another_writer_appends_between(tmp_path: Path) -> None:
    state = tmp_path / "state"
    mine, other = Ledger(state), Ledger(state)
    for k in range(6):
        writer = mine if k % 3 else other
        writer.append(AttemptRecord(iteration=k, status=Status.DISCARD, reason=f"by {k}"))
    lines = (state / "ledger.jsonl").read_text().splitlines()
    records = Ledger(state).read()
    assert records[0].prev_hash is None
    for before, record in zip(lines, records[1:], strict=False):
        assert record.prev_hash == line_hash(before)


def test_the_chain_holds_after_the_file_was_replaced(tmp_path: Path) -> None:
    state = tmp_path / "state"
    ledger = Ledger(state)
    ledger.append(AttemptRecord(iteration=0, status=Status.BASELINE))
    ledger.append(AttemptRecord(iteration=1, status=Status.DISCARD))
    # Cut back to its first line by someone else (same size is not needed: a new file).
    first = (state / "ledger.jsonl").read_text().splitlines()[0]
    (state / "ledger.jsonl").unlink()
    (state / "ledger.jsonl").write_text(first + "\n")
    stored = ledger.append(AttemptRecord(iteration=1, status=Status.KEEP))
    assert stored.prev_hash == line_hash(first)


def test_a_name_with_a_tab_or_newline_gets_git_own_line_counts(tmp_path: Path) -> None:
    repo = toy_repo(tmp_path, attempts=1, scope=["calc.py", "data/*"])

    def edit(workspace: Path) -> Proposal:
        set_n("7")(workspace)
        (workspace / "data").mkdir()
        (workspace / "data" / "a\tb").write_text("one\ntwo\n")
        return Proposal(description="two files")

    records = run(repo, ScriptedProposer(edit))
    last = records[-1]
    assert last.commit is not None and last.diffstat is not None
    raw = subprocess.run(
        ["git", "diff", "-z", "--numstat", "--no-renames", f"{last.commit}^", last.commit],
        cwd=repo,
        capture_output=True,
        check=True,
    ).stdout
    expected = []
    for item in raw.decode().split("\0"):
        if item:
            added, removed, path = item.split("\t", 2)
            expected.append(f"{path} +{added}/-{removed}")
    assert last.diffstat == ", ".join(expected)
    assert "calc.py +1/-1" in last.diffstat and "data/a\tb +2/-0" in last.diffstat


def private_git_view(worktree: Path) -> tuple[str, str, str]:
    """What a proposer's `git` shows in the workspace: HEAD, the branch, the status."""
    head = git(worktree, "rev-parse", "HEAD").strip()
    branch = git(worktree, "symbolic-ref", "HEAD").strip()
    return head, branch, git(worktree, "status", "--porcelain")


def test_the_proposers_git_is_current_when_the_run_ends(tmp_path: Path) -> None:
    repo = toy_repo(tmp_path, attempts=3)

    def meddle(value: str) -> Callable[[Path], Proposal | None]:
        def edit(workspace: Path) -> Proposal | None:
            # Code of its own may write anywhere: its `.git` is not the engine's to trust.
            (workspace / ".git" / "HEAD").write_text("ref: refs/heads/elsewhere\n")
            return set_n(value)(workspace)

        return edit

    records = run(repo, ScriptedProposer(meddle("7"), meddle("12"), meddle("6")))
    best = git(repo, "rev-parse", "autoresearch/toy").strip()
    assert best == records[3].commit
    worktree = repo / ".autoresearch" / "toy" / "worktree"
    assert private_git_view(worktree) == (best, "refs/heads/autoresearch/toy", "")


class Switching(ScriptedProposer):
    """Writes through its own code at first, then runs commands (as a chain of proposers
    may): from then on it reads its `.git` as it starts."""

    def __init__(self, *edits: Callable[[Path], Proposal | None]) -> None:
        super().__init__(*edits)
        self.seen: list[tuple[str, str, str]] = []

    def propose(self, ctx):  # type: ignore[no-untyped-def]
        if self.runs_commands:
            self.seen.append(private_git_view(ctx.workspace))
        proposal = super().propose(ctx)
        if len(self.contexts) == 2:
            self.runs_commands = True
        return proposal


def test_a_proposer_that_runs_commands_finds_its_git_at_the_incumbent(tmp_path: Path) -> None:
    repo = toy_repo(tmp_path, attempts=4)

    def meddle(value: str) -> Callable[[Path], Proposal | None]:
        def edit(workspace: Path) -> Proposal | None:
            (workspace / ".git" / "HEAD").write_text("ref: refs/heads/elsewhere\n")
            (workspace / ".git" / "index").write_bytes(b"not an index")
            return set_n(value)(workspace)

        return edit

    proposer = Switching(meddle("7"), meddle("12"), set_n("6"), set_n("13"))
    records = run(repo, proposer)
    assert [r.status for r in records[1:]] == [Status.KEEP, Status.DISCARD] * 2
    branch = "refs/heads/autoresearch/toy"
    # Before each proposal once it runs commands: the best so far, nothing changed.
    assert proposer.seen == [(records[1].commit, branch, ""), (records[3].commit, branch, "")]


def test_a_toolchain_installed_meanwhile_is_shown_from_the_next_period(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    now = [1000.0]
    monkeypatch.setattr(sandbox.time, "monotonic", lambda: now[0])
    assert sandbox.home_allowlist((), "/usr/bin") == (home.resolve(), ())
    tool = home / ".cargo" / "bin"
    tool.mkdir(parents=True)
    now[0] += 31
    assert sandbox.home_allowlist((), "/usr/bin") == (home.resolve(), (tool.resolve(),))


def git_entries(dotgit: Path) -> dict[str, str]:
    """Every entry of a `.git`: its kind, and a file's content when small."""
    out = {}
    for path in sorted(dotgit.rglob("*")):
        rel = str(path.relative_to(dotgit))
        if path.is_symlink():
            out[rel] = "link"
        elif path.is_dir():
            out[rel] = "dir"
        elif path.is_file():
            st = path.stat()
            out[rel] = f"file nlink={st.st_nlink} " + (
                path.read_text(errors="replace") if rel != "index" else str(st.st_size)
            )
        else:
            out[rel] = "other"
    return out


class Planting(ScriptedProposer):
    """Runs commands that plant what git would obey in its `.git`, then looks at the
    `.git` it is given next time."""

    runs_commands = True

    def __init__(self, victim: Path, *edits: Callable[[Path], Proposal | None]) -> None:
        super().__init__(*edits)
        self.victim = victim
        self.seen: list[dict[str, str]] = []

    def propose(self, ctx):  # type: ignore[no-untyped-def]
        dotgit = ctx.workspace / ".git"
        self.seen.append(git_entries(dotgit))
        k = len(self.contexts)
        if k == 0:
            (dotgit / "hooks").mkdir()
            (dotgit / "hooks" / "pre-commit").write_text("#!/bin/sh\necho owned\n")
            with (dotgit / "config").open("a") as config:
                config.write("[core]\n\tfsmonitor = touch /tmp/owned\n")
        elif k == 1:
            # Its index made another name of a file elsewhere: rewritten in place, that
            # file would take the engine's bytes.
            (dotgit / "index").unlink()
            os.link(self.victim, dotgit / "index")
        elif k == 2:
            (dotgit / "HEAD").unlink()
            (dotgit / "HEAD").symlink_to(ctx.workspace / "calc.py")
            os.mkfifo(dotgit / "refs" / "tags" / "pipe")
        return super().propose(ctx)


def test_what_a_proposer_plants_in_its_git_is_gone_before_it_works_again(
    tmp_path: Path,
) -> None:
    repo = toy_repo(tmp_path, attempts=4)
    victim = tmp_path / "victim.txt"
    victim.write_text("a file of the user's\n")
    proposer = Planting(victim, set_n("7"), set_n("12"), set_n("6"), set_n("13"))
    records = run(repo, proposer)
    assert [r.status for r in records[1:]] == [Status.KEEP, Status.DISCARD] * 2
    assert victim.read_text() == "a file of the user's\n"
    pristine = proposer.seen[0]
    assert "hooks" not in pristine
    assert all(v.startswith(("dir", "file nlink=1")) for v in pristine.values())
    for seen in proposer.seen[1:]:
        # The same entries, each a real folder or a file of one name: HEAD and the branch
        # say the same, the config is the engine's, no hook, no link, no pipe.
        assert set(seen) == set(pristine), seen
        assert seen["HEAD"] == pristine["HEAD"] and seen["config"] == pristine["config"]
        assert all(v.startswith(("dir", "file nlink=1")) for v in seen.values()), seen
    worktree = repo / ".autoresearch" / "toy" / "worktree"
    assert private_git_view(worktree)[2] == ""
