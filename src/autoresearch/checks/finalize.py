"""`autoresearch finalize`: the kept changes as reviewable pieces.

Each kept change (a `keep` or `merged` record) is its own diff, parent to commit. A piece
is one change, or the changes that must stay together, committed onto the campaign's
starting commit (the baseline's) as a branch of its own:
`autoresearch-finalize/<name>/<k>-<slug>`. A change whose diff does not apply onto the
base without earlier kept changes (it edits lines they wrote, or next to them) joins the
pieces of those that touch the same files; a change the last ablation (`ablation.json`)
found `entangled` joins the later changes on its files. Every piece is checked to apply
on the base alone and to hold exactly its changes.

The branches are written with `update-ref` through a scratch index: the user's checkout,
index and other branches are never touched. The campaign's own branch is
`autoresearch/<name>`, and git keeps no branch below another branch's name, hence the
`autoresearch-finalize/` prefix.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autoresearch.attempt import AttemptRecord, Status, num
from autoresearch.checks.ablation import ENTANGLED, REPORT_JSON, kept_changes
from autoresearch.errors import AutoresearchError, ConfigError
from autoresearch.gitcmd import IDENTITY, Git
from autoresearch.stats.decide import gain
from autoresearch.store.ledger import StateFile

PREFIX = "autoresearch-finalize"
SLUG_CHARS = 40


def branch_prefix(name: str) -> str:
    return f"{PREFIX}/{name}/"


def slug(text: str, fallback: str) -> str:
    words = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return words[:SLUG_CHARS].rstrip("-") or fallback


@dataclass
class Piece:
    """One reviewable branch: the kept changes it holds and why they go together."""

    number: int
    changes: list[AttemptRecord]
    why: str = ""  # why these changes stay together; "" for a single change
    branch: str = ""
    commit: str = ""
    files: list[str] = field(default_factory=list)

    @property
    def attempts(self) -> list[int]:
        return [r.iteration for r in self.changes]

    def to_json(self, direction: str) -> dict[str, Any]:
        return {
            "branch": self.branch,
            "commit": self.commit,
            "attempts": self.attempts,
            "files": self.files,
            "together": self.why or None,
            # the effect measured when each change was kept, against the best before it
            "effects": [
                {
                    "iteration": r.iteration,
                    "metric": r.metric,
                    "previous_best": r.previous_best,
                    "delta": r.delta,
                    "gain": None if r.delta is None else gain(r.delta, 0.0, direction),
                }
                for r in self.changes
            ],
        }


class Builder:
    """Trees from the base and kept changes, in a scratch index through the user's object
    store: the checkout's index and files are not read or written."""

    def __init__(self, root: Path, scratch: Path) -> None:
        self.git = Git(root)
        self.scratch = scratch
        self.diffs: dict[int, bytes] = {}

    def diff(self, record: AttemptRecord) -> bytes:
        if record.iteration not in self.diffs:
            assert record.parent and record.commit
            self.diffs[record.iteration] = self.git.run_bytes(
                "diff", "--binary", "--no-renames", "--full-index", record.parent, record.commit
            )
        return self.diffs[record.iteration]

    def tree(self, base: str, changes: Sequence[AttemptRecord]) -> str | None:
        """The base's tree with `changes` applied in order; None when one does not apply."""
        fd, index = tempfile.mkstemp(prefix="finalize-index-", dir=self.scratch)
        os.close(fd)
        os.unlink(index)  # git writes its own; a zero-byte file is not an index
        env = {"GIT_INDEX_FILE": index}
        try:
            self.git.run("read-tree", base, extra_env=env)
            for record in changes:
                patch = self.diff(record)
                if not patch.strip():
                    continue
                args = ("apply", "--cached", "--whitespace=nowarn")
                if not self.git.ok(*args, input=patch, extra_env=env):
                    return None
            return self.git.run("write-tree", extra_env=env).strip()
        finally:
            Path(index).unlink(missing_ok=True)

    def files(self, record: AttemptRecord) -> set[str]:
        assert record.parent and record.commit
        out = self.git.run(
            "diff", "--name-only", "--no-renames", "-z", record.parent, record.commit
        )
        return {p for p in out.split("\0") if p}


def plan(
    builder: Builder, base: str, kept: Sequence[AttemptRecord], entangled: set[int]
) -> list[Piece]:
    """The pieces: each change alone where it applies on the base alone, else with the
    earlier pieces on its files (all of them, when even that does not apply)."""
    pieces: list[Piece] = []
    for record in kept:
        files = builder.files(record)
        if builder.tree(base, [record]) is not None and not _follows_entangled(
            pieces, files, entangled, builder
        ):
            pieces.append(Piece(0, [record]))
            continue
        near = [p for p in pieces if files & _files(p, builder)]
        # The fewest pieces it needs: one of those on its files (the latest first), else
        # all of them.
        touching = near
        for option in [[p] for p in reversed(near)] + [near]:
            touching = option
            if builder.tree(base, _joined(option, record)) is not None:
                break
        together = _joined(touching, record)
        shared = sorted(files & {f for p in touching for f in _files(p, builder)})
        if touching and builder.tree(base, together) is not None:
            reasons = [p.why for p in touching if p.why]
            why = "; ".join([*reasons, _why(record, touching, shared, entangled)])
            pieces = [p for p in pieces if p not in touching]
        else:
            together = sorted([r for p in pieces for r in p.changes] + [record], key=_order)
            why = (
                f"attempt {record.iteration} applies on the base only with every change "
                "kept before it"
            )
            pieces = []
        pieces.append(Piece(0, together, why))
    pieces.sort(key=lambda p: _order(p.changes[0]))
    for k, piece in enumerate(pieces, 1):
        piece.number = k
    return pieces


def _joined(pieces: Sequence[Piece], record: AttemptRecord) -> list[AttemptRecord]:
    return sorted([r for p in pieces for r in p.changes] + [record], key=_order)


def _order(record: AttemptRecord) -> int:
    return record.iteration


def _files(piece: Piece, builder: Builder) -> set[str]:
    return {f for r in piece.changes for f in builder.files(r)}


def _follows_entangled(
    pieces: Sequence[Piece], files: set[str], entangled: set[int], builder: Builder
) -> bool:
    """A change on the files of an earlier one the ablation could not take out alone."""
    return any(
        r.iteration in entangled and files & builder.files(r) for p in pieces for r in p.changes
    )


def _why(
    record: AttemptRecord, touching: Sequence[Piece], shared: list[str], tangled: set[int]
) -> str:
    earlier = ", ".join(f"#{i}" for p in touching for i in p.attempts)
    on = ", ".join(shared[:3]) + (", ..." if len(shared) > 3 else "")
    caught = [i for p in touching for i in p.attempts if i in tangled]
    if caught:
        named = ", ".join(f"#{i}" for i in caught)
        return (
            f"the ablation could not take {named} out alone, and attempt {record.iteration} "
            f"changes its files ({on})"
        )
    return f"attempt {record.iteration} does not apply without {earlier} (both change {on})"


def message(piece: Piece, name: str, direction: str, ablation: dict[int, dict[str, Any]]) -> str:
    """The commit message: what changed, and the effect measured when each change was kept
    (and, after `autoresearch ablate`, without it)."""
    first = piece.changes[0]
    title = first.description or f"attempt {first.iteration}"
    if len(piece.changes) > 1:
        title = f"{title} (and {len(piece.changes) - 1} more)"
    lines = [title[:72], ""]
    for record in piece.changes:
        effect = "-"
        if record.delta is not None:
            g = gain(record.delta, 0.0, direction)
            effect = f"gain {g:+.4g}, delta {record.delta:+.4g}"
        before = record.previous_best
        measured = (
            f"{num(before)} -> {num(record.metric)}" if before is not None else num(record.metric)
        )
        lines.append(
            f"autoresearch {name}, attempt {record.iteration} ({record.status}): "
            f"metric {measured} ({effect}, {direction})"
        )
        if record.description and record is not first:
            lines.append(f"  {record.description}")
        found = ablation.get(record.iteration)
        if found:
            lines.append(f"  ablation: {found.get('verdict')}: {found.get('reason')}")
    if piece.why:
        lines += ["", f"Kept together: {piece.why}."]
    return "\n".join(lines) + "\n"


def _ablation(state_dir: Path, best: str) -> dict[int, dict[str, Any]]:
    """The last ablation's verdicts per attempt, when it ablated this best."""
    try:
        data = json.loads((state_dir / REPORT_JSON).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("best") != best:
        return {}
    changes = data.get("changes") or []
    return {
        int(c["iteration"]): c
        for c in changes
        if isinstance(c, dict) and isinstance(c.get("iteration"), int)
    }


def finalize(
    root: Path, state_dir: Path, records: Sequence[AttemptRecord], force: bool = False
) -> list[Piece]:
    """Write one branch per piece from the campaign's base; refused when branches of an
    earlier finalize exist (unless `force`, which replaces them)."""
    state = StateFile(state_dir).read()
    name = str(state.get("name") or state_dir.name)
    direction = str(state.get("direction") or "minimize")
    if direction not in ("minimize", "maximize"):
        direction = "minimize"
    base = records[0].commit if records and records[0].status is Status.BASELINE else None
    kept = kept_changes(records)
    if base is None or not kept:
        raise AutoresearchError(
            f"campaign '{name}' has kept no change yet; there is nothing to finalize."
        )
    git = Git(root)
    prefix = branch_prefix(name)
    head = git.run("symbolic-ref", "-q", "HEAD", check=False).strip()
    if head.startswith(f"refs/heads/{prefix}"):
        raise AutoresearchError(
            f"your checkout is on {head.removeprefix('refs/heads/')}; switch to another "
            "branch first, finalize rewrites that one."
        )
    existing = git.run("for-each-ref", "--format=%(refname)", f"refs/heads/{prefix}").split()
    if existing and not force:
        raise ConfigError(
            f"branches of an earlier finalize exist ({len(existing)} under {prefix}); pass "
            "--force to replace them."
        )
    best = kept[-1].commit or ""
    ablation = _ablation(state_dir, best)
    entangled = {i for i, c in ablation.items() if c.get("verdict") == ENTANGLED}
    state_dir.mkdir(parents=True, exist_ok=True)
    builder = Builder(root, state_dir)
    pieces = plan(builder, base, kept, entangled)
    made: list[tuple[str, str]] = []
    for piece in pieces:
        tree = builder.tree(base, piece.changes)
        if tree is None:  # plan() checked it: a changed repository under our feet
            raise AutoresearchError(
                f"attempts {piece.attempts} no longer apply on the base {base[:10]}; "
                "nothing was written."
            )
        text = message(piece, name, direction, ablation)
        commit = git.run(
            "commit-tree", tree, "-p", base, "-F", "-", input=text.encode(), extra_env=IDENTITY
        ).strip()
        first = piece.changes[0]
        piece.branch = (
            f"{prefix}{piece.number}-{slug(first.description, f'attempt-{first.iteration}')}"
        )
        piece.commit = commit
        piece.files = sorted({f for r in piece.changes for f in builder.files(r)})
        made.append((piece.branch, commit))
    for ref in existing:
        git.run("update-ref", "-d", ref)
    for branch, commit in made:
        # "" as the old value: created only where no branch stands.
        git.run("update-ref", "-m", "autoresearch finalize", f"refs/heads/{branch}", commit, "")
    return pieces


__all__ = ["PREFIX", "Piece", "branch_prefix", "finalize", "plan", "slug"]
