"""Inspect and take results: one attempt in full, its diff, a branch at it, or its change.

A campaign's change is what it did between its base (the baseline's commit, the user's
HEAD when it started) and a chosen attempt. `apply` merges exactly that change into the
user's current HEAD (three-way, so the user's later commits stay as they are), and never
the difference between HEAD and the attempt, which would undo everything committed since.
Commit names read from the ledger reach git only after they are checked to be object
names (hex), so that a ledger line can never pass an option to git.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Generator
from dataclasses import dataclass
from pathlib import Path

from autoresearch.attempt import AttemptRecord, Status
from autoresearch.errors import AutoresearchError, ConfigError
from autoresearch.gitcmd import IDENTITY, Git
from autoresearch.store.ledger import Ledger
from autoresearch.store.summary import summarize
from autoresearch.workspace.refused import refused_diff_path

OBJECT_NAME = re.compile(r"[0-9a-f]{4,64}")


def object_name(value: object, what: str = "commit") -> str:
    """`value` when it is a git object name; anything else (an option, a ref expression)
    is refused before it can reach git."""
    if isinstance(value, str) and OBJECT_NAME.fullmatch(value):
        return value
    raise AutoresearchError(
        f"the ledger's {what} {str(value)[:80]!r} is not a git object name; the ledger was "
        "edited by hand (see `autoresearch verify`)."
    )


def attempt(state_dir: Path, iteration: int) -> AttemptRecord:
    for record in Ledger(state_dir).read():
        if record.iteration == iteration:
            return record
    raise ConfigError(
        f"campaign '{state_dir.name}' has no attempt {iteration}; see `autoresearch log`."
    )


def base_commit(state_dir: Path) -> str:
    """The commit the campaign started from: the baseline record's."""
    for record in Ledger(state_dir).read():
        if record.status is Status.BASELINE and record.commit:
            return object_name(record.commit, "baseline commit")
    raise AutoresearchError(
        f"campaign '{state_dir.name}' has no baseline yet; run it first (`autoresearch run`)."
    )


def best_attempt(state_dir: Path) -> AttemptRecord:
    records = Ledger(state_dir).read()
    summary = summarize(state_dir.name, "minimize", records)
    if summary.best_commit is None:
        raise AutoresearchError(f"campaign '{state_dir.name}' has no result yet.")
    return attempt(state_dir, summary.best_iteration or 0)


def attempt_logs(state_dir: Path, iteration: int) -> list[Path]:
    """Every file the attempt left: its prompt, the proposer's output, each metric sample
    (the candidate's and the incumbent's), the guard's, in the order they were written."""
    stem = f"{iteration:04d}"
    prompt = state_dir / "prompts" / f"{stem}.md"
    logs = sorted((state_dir / "logs").glob(f"{stem}-*"), key=_log_order)
    return ([prompt] if prompt.is_file() else []) + [p for p in logs if p.is_file()]


def _log_order(path: Path) -> tuple[int, int, int, str]:
    """proposer, metric and incumbent samples by number, guard last; stdout before stderr."""
    name = path.name.split("-", 1)[1]
    kind, _, rest = name.split(".")[0].partition("-")
    number = rest
    rank = {"proposer": 0, "metric": 1, "incumbent": 1, "guard": 2}.get(kind, 3)
    stream = {".out": 0, ".err": 1}.get(path.suffix, 2)
    return rank, int(number) if number.isdigit() else 0, stream, name


def chosen_commit(
    state_dir: Path, iteration: int | None, force: bool = False
) -> tuple[str, AttemptRecord]:
    """The commit of attempt `iteration`, or of the best result when it is None. A failed
    attempt (a crash, a guard or scope failure, ...) is given out only with `force`."""
    record = best_attempt(state_dir) if iteration is None else attempt(state_dir, iteration)
    if record.status.is_failure and not force:
        why = f": {record.reason}" if record.reason else ""
        raise AutoresearchError(
            f"attempt {record.iteration} failed ({record.status}{why}); pass --force to "
            "take it anyway."
        )
    if not record.commit:
        raise AutoresearchError(
            f"attempt {record.iteration} ({record.status}) changed nothing; there is no commit."
        )
    return object_name(record.commit), record


# What `diff` and `campaign_diff` give as one text (the dashboard, tracking, the MCP
# tool); the command line streams the whole of it instead.
DIFF_TEXT_LIMIT = 8 << 20
CHUNK = 1 << 16


def diff_chunks(root: Path, record: AttemptRecord) -> Generator[bytes, None, None]:
    """What the attempt changed against the version it was tried on (its parent), as git
    writes it, a piece at a time: a large change is never held whole. The baseline
    changes nothing: it is the starting point."""
    if record.status is Status.BASELINE or not record.commit or not record.parent:
        return
    commit = object_name(record.commit)
    parent = object_name(record.parent, "parent")
    yield from _stream(Git(root), "diff", "--end-of-options", parent, commit, "--")


def refused_change(state_dir: Path, iteration: int) -> str | None:
    """What a refused attempt (scope_violation, tampered, edit_refused) changed, as the
    text kept in the campaign folder when it was screened out; None when none was kept."""
    path = refused_diff_path(state_dir, iteration)
    try:
        if path.is_symlink() or not path.is_file():
            return None
        with path.open("rb") as handle:
            data = handle.read(DIFF_TEXT_LIMIT)
    except OSError:
        return None
    return data.decode("utf-8", errors="replace")


def refused_banner(state_dir: Path, record: AttemptRecord) -> str:
    """The line that marks a refused attempt's change as refused: never kept, never in the
    repository."""
    where = refused_diff_path(state_dir, record.iteration)
    return (
        f"REFUSED: attempt {record.iteration} ({record.status}) was not kept and its content "
        f"is not in the repository; what it changed, as kept in {where}:"
    )


def campaign_diff_chunks(root: Path, state_dir: Path) -> Generator[bytes, None, None]:
    """The campaign's change, from its base to the best result, a piece at a time."""
    base = base_commit(state_dir)
    record = best_attempt(state_dir)
    if not record.commit:
        return
    commit = object_name(record.commit)
    yield from _stream(Git(root), "diff", "--end-of-options", base, commit, "--")


def diff(root: Path, record: AttemptRecord, limit: int = DIFF_TEXT_LIMIT) -> str:
    """The attempt's change as text, cut at `limit` bytes (with a line that says so)."""
    return _text(diff_chunks(root, record), limit)


def campaign_diff(root: Path, state_dir: Path, limit: int = DIFF_TEXT_LIMIT) -> str:
    """The campaign's change as text, cut at `limit` bytes (with a line that says so)."""
    return _text(campaign_diff_chunks(root, state_dir), limit)


def _text(chunks: Generator[bytes, None, None], limit: int) -> str:
    kept = bytearray()
    for chunk in chunks:
        kept += chunk
        if len(kept) > limit:
            del kept[limit:]
            chunks.close()  # git is stopped: the rest is never read
            kept += f"\n[... cut at {limit} bytes: `autoresearch diff` shows all ...]\n".encode()
            break
    return kept.decode("utf-8", errors="surrogateescape")


def _stream(repo: Git, *args: str) -> Generator[bytes, None, None]:
    proc = repo.popen(*args)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.close()
    finished = False
    try:
        while chunk := proc.stdout.read(CHUNK):
            yield chunk
        finished = True
    finally:
        proc.stdout.close()
        if not finished:
            proc.kill()
        proc.wait()
    if proc.returncode != 0:
        raise AutoresearchError(
            f"git {args[0]} failed in {repo.cwd} (exit code {proc.returncode}); check that "
            "the campaign's commits are still in the repository (`autoresearch verify`)."
        )


def make_branch(root: Path, name: str, commit: str, force: bool = False) -> None:
    repo = Git(root)
    commit = object_name(commit)
    if name.startswith("-") or not repo.ok("check-ref-format", "--branch", name):
        raise ConfigError(f"{name!r} is not a valid branch name; choose another.")
    if repo.rev(f"refs/heads/{name}") is not None and not force:
        raise ConfigError(f"branch {name} already exists; choose another name or pass --force.")
    current = repo.run("symbolic-ref", "-q", "HEAD", check=False).strip()
    if current == f"refs/heads/{name}":
        raise AutoresearchError(
            f"branch {name} is checked out here; switch to another branch to move it."
        )
    repo.run("update-ref", "-m", "autoresearch branch", f"refs/heads/{name}", commit)


@dataclass(frozen=True)
class Applied:
    files: list[str]  # the paths written into the working tree


def _tree(repo: Git, commit: str) -> str:
    return repo.run("rev-parse", "--verify", "--end-of-options", f"{commit}^{{tree}}").strip()


def merged_tree(repo: Git, base: str, head: str, commit: str) -> str:
    """HEAD with the change base..commit merged in, as a tree; nothing of the checkout is
    touched. On a conflict the files are named and nothing has changed."""
    # A commit holding HEAD's tree on top of the base makes the base the merge base, even
    # when the user's history does not contain it (a rebase, another branch).
    ours = repo.run(
        "commit-tree", "-p", base, "-m", "autoresearch apply", _tree(repo, head), extra_env=IDENTITY
    ).strip()
    args = ("merge-tree", "--write-tree", "--name-only", "--no-messages", "-z", ours, commit)
    proc = repo.run_bytes(*args, check=False)
    fields = [f.decode("utf-8", "surrogateescape") for f in proc.split(b"\0") if f]
    tree = fields[0] if fields else ""
    conflicted = sorted(set(fields[1:]))
    if conflicted:
        raise AutoresearchError(
            "the campaign's change conflicts with your commits since it started in "
            + ", ".join(conflicted)
            + "; nothing was changed. Use `autoresearch branch NAME` and merge it yourself."
        )
    if not OBJECT_NAME.fullmatch(tree):
        raise AutoresearchError(
            "git cannot merge here (`git merge-tree --write-tree` needs git 2.38 or newer); "
            "nothing was changed. Use `autoresearch branch NAME` and merge it yourself."
        )
    return tree


def apply_changes(root: Path, state_dir: Path, record: AttemptRecord) -> Applied:
    """Merge the campaign's change (base -> the attempt) into the working tree, uncommitted.
    All or nothing: on any refusal the working tree, the index and HEAD are as they were."""
    repo = Git(root)
    status = repo.run("status", "--porcelain", "--untracked-files=no")
    if status.strip():
        raise AutoresearchError(
            "your working tree has uncommitted changes; commit or stash them first, "
            "`apply` only writes into a clean tree."
        )
    head = repo.rev("HEAD")
    if head is None:
        raise AutoresearchError("your repository has no commit yet; nothing to apply onto.")
    base = base_commit(state_dir)
    commit = object_name(record.commit)
    tree = merged_tree(repo, base, head, commit)
    if tree == _tree(repo, head):
        return Applied([])
    patch = repo.run_bytes("diff", "--binary", "--end-of-options", head, tree, "--")
    problem = _apply(repo, patch, check_only=True)
    if problem:
        raise AutoresearchError(
            f"the change cannot be written into your working tree ({problem}); nothing was "
            "changed. Move the files in the way, or use `autoresearch branch NAME`."
        )
    error = _apply(repo, patch, check_only=False)
    if error:
        raise AutoresearchError(f"git apply failed: {error}")
    names = repo.run("diff", "--name-only", "-z", "--end-of-options", head, tree, "--")
    return Applied([n for n in names.split("\0") if n])


def _apply(repo: Git, patch: bytes, *, check_only: bool) -> str:
    """Run `git apply` on the working tree; its last error line, or "" when it went well."""
    args = [*repo.prefix, "apply", "--whitespace=nowarn", *(["--check"] if check_only else []), "-"]
    proc = subprocess.run(args, cwd=repo.cwd, env=repo.env, input=patch, capture_output=True)
    if proc.returncode == 0:
        return ""
    lines = proc.stderr.decode(errors="replace").strip().splitlines()
    return lines[-1].removeprefix("error: ") if lines else f"exit code {proc.returncode}"
