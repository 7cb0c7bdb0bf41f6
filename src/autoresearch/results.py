"""Inspect and take results: one attempt in full, its diff, a branch at it, or its changes."""

from __future__ import annotations

from pathlib import Path

from autoresearch.attempt import AttemptRecord
from autoresearch.errors import AutoresearchError, ConfigError
from autoresearch.gitcmd import Git
from autoresearch.ledger import Ledger
from autoresearch.summary import summarize


def attempt(state_dir: Path, iteration: int) -> AttemptRecord:
    for record in Ledger(state_dir).read():
        if record.iteration == iteration:
            return record
    raise ConfigError(
        f"campaign '{state_dir.name}' has no attempt {iteration}; see `autoresearch log`."
    )


def chosen_commit(state_dir: Path, iteration: int | None) -> tuple[str, AttemptRecord]:
    """The commit of attempt `iteration`, or of the best result when it is None."""
    if iteration is None:
        records = Ledger(state_dir).read()
        summary = summarize(state_dir.name, "minimize", records)
        if summary.best_commit is None:
            raise AutoresearchError(f"campaign '{state_dir.name}' has no result yet.")
        iteration = summary.best_iteration or 0
    record = attempt(state_dir, iteration)
    if not record.commit:
        raise AutoresearchError(
            f"attempt {iteration} ({record.status}) changed nothing; there is no commit."
        )
    return record.commit, record


def diff(root: Path, record: AttemptRecord) -> str:
    if not record.commit:
        return ""
    repo = Git(root)
    if not record.parent:
        return repo.run("show", "--format=", "--patch", record.commit)
    return repo.run("diff", record.parent, record.commit)


def make_branch(root: Path, name: str, commit: str, force: bool = False) -> None:
    repo = Git(root)
    if not repo.ok("check-ref-format", "--branch", name):
        raise ConfigError(f"{name!r} is not a valid branch name; choose another.")
    if repo.rev(f"refs/heads/{name}") is not None and not force:
        raise ConfigError(f"branch {name} already exists; choose another name or pass --force.")
    repo.run("branch", *(["--force"] if force else []), name, commit)


def apply_changes(root: Path, record: AttemptRecord) -> list[str]:
    """Put the attempt's changes (against the user's HEAD) into the working tree, uncommitted."""
    repo = Git(root)
    status = repo.run("status", "--porcelain", "--untracked-files=no")
    if status.strip():
        raise AutoresearchError(
            "your working tree has uncommitted changes; commit or stash them first, "
            "`apply` only writes into a clean tree."
        )
    commit = str(record.commit)
    head = repo.rev("HEAD")
    base = head or commit
    patch = repo.run_bytes("diff", "--binary", base, commit)
    if not patch.strip():
        return []
    check = repo.run_bytes("apply", "--check", "--whitespace=nowarn", "-", input=patch, check=False)
    del check
    repo.run_bytes("apply", "--whitespace=nowarn", "-", input=patch)
    return repo.run("diff", "--name-only", base, commit).split()
