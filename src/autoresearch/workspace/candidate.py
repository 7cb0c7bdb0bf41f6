"""What a candidate is, in the workspace's terms: the changes git found, the scan, the
paths named to git."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Change:
    status: str  # A, M, D or T, as git reports it
    path: str


@dataclass
class Candidate:
    tree: str
    changes: list[Change] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)
    head_moved: bool = False
    # False when a refused path kept everything out of the repository: nothing to commit
    staged: bool = True
    # Why git could not store the change (a name it refuses, such as `lib/.GIT`), if so
    unstorable: str = ""
    # `path +added/-removed` per changed file, as `git diff --numstat` counts the lines
    # (None: not counted yet)
    diffstat: str | None = None

    @property
    def paths(self) -> list[str]:
        return [c.path for c in self.changes]


@dataclass
class Scan:
    head: str | None = None
    branch: str | None = None
    staged: list[str] = field(default_factory=list)
    unstaged: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    untracked: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)


def under(rel: str, paths: list[str]) -> bool:
    """Whether `rel` is one of `paths` or lies in a folder among them."""
    return any(rel == p or rel.startswith(f"{p}/") for p in paths)


def outermost(paths: list[str]) -> list[str]:
    """`paths` without those inside another of them: `git add -A` of a folder (or of a link
    that replaced one) takes in what lies below it, and refuses a path named beyond a link."""
    named = set(paths)

    def inside(path: str) -> bool:
        parent = path.rpartition("/")[0]
        while parent:
            if parent in named:
                return True
            parent = parent.rpartition("/")[0]
        return False

    return [p for p in sorted(named) if not inside(p)]


def nul_join(paths: list[str]) -> bytes:
    return b"\0".join(p.encode("utf-8", "surrogateescape") for p in paths)


def split_nul(raw: bytes) -> list[str]:
    return [p.decode("utf-8", errors="surrogateescape") for p in raw.split(b"\0") if p]


def message_bytes(text: str) -> bytes:
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a surrogate no file name produced
        return text.encode("utf-8", "backslashreplace")


def numstat_text(lines: list[str]) -> str:
    """`git diff --numstat` lines (`added<TAB>removed<TAB>path`) as the history shows them:
    `path +added/-removed` for the first eight files."""
    parts = []
    for line in lines[:8]:
        added, removed, path = line.split("\t", 2)
        parts.append(f"{path} +{added}/-{removed}")
    return ", ".join(parts)
