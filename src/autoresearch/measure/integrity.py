"""Harness fingerprints: what the judge is made of, hashed once and verified before each run."""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from autoresearch.config import Campaign, DecisionConfig
from autoresearch.errors import ConfigError
from autoresearch.gitcmd import workspace_files
from autoresearch.scope import PathMatcher


def sha256_file(path: Path) -> str:
    """The content's hash; a link hashes its target's name, and anything but a regular
    file (a pipe, a device, a folder put in a harness file's place) its kind, so that it
    differs from the file it replaced and is never opened: a pipe would block forever."""
    digest = hashlib.sha256()
    try:
        st = os.lstat(path)
        if stat.S_ISLNK(st.st_mode):
            digest.update(b"symlink:" + os.readlink(path).encode())
            return digest.hexdigest()
        if not stat.S_ISREG(st.st_mode):
            return f"not a file (mode {stat.S_IFMT(st.st_mode):o})"
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                return "not a file"
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    except FileNotFoundError:
        return "missing"
    except OSError as exc:
        return f"unreadable ({exc.strerror})"
    return digest.hexdigest()


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


# What is measured: a change to any of these makes earlier numbers incomparable. Timeouts,
# stop rules, the decision rule, the proposer and the sandbox change how a campaign goes on,
# not what a number means, so a resume lets them through.
MEASUREMENT_KEYS = (
    "metric.command",
    "metric.direction",
    "metric.pattern",
    "metric.file",
    "metric.key",
    "metric.name",
    "metric.score",
    "metrics",
    "guard.command",
    "judge.base_url",
    "judge.model",
    "judge.temperature",
    "judge.rubric",
    "judge.files",
    "judge.rounds",
    "harness",
)


def measurement_settings(campaign: Campaign) -> dict[str, object]:
    """Each measurement setting by its key (`metric.command`, ...); None when unset."""
    cfg = campaign.config
    tables: dict[str, object] = {
        "metric": cfg.metric,
        "guard": cfg.guard,
        "judge": cfg.judge,
    }
    out: dict[str, object] = {}
    for key in MEASUREMENT_KEYS:
        if key == "harness":
            out[key] = list(cfg.harness)
            continue
        if key == "metrics":  # how the secondary numbers are read (constraints may change)
            out[key] = [
                m.model_dump(include={"name", "pattern", "file", "key"}) for m in cfg.metrics
            ]
            continue
        table, _, name = key.partition(".")
        model = tables[table]
        out[key] = None if model is None else getattr(model, name)
    return out


def measurement_digests(campaign: Campaign) -> dict[str, str]:
    return {
        key: sha256_text(json.dumps(value, sort_keys=True))
        for key, value in measurement_settings(campaign).items()
    }


# The fields each table had in 0.1.0, whose state.json holds one digest over all of them.
_V1_FIELDS = {
    "metric": {"command", "direction", "pattern", "timeout", "target", "file", "key", "name"},
    "judge": {"base_url", "model", "price_per_mtok", "temperature", "rubric", "files", "rounds"},
    "guard": {"command", "timeout"},
    "decision": {"rule", "min_delta", "repeats", "max_samples", "confidence"},
}


def judge_settings(campaign: Campaign) -> str:
    """The settings as 0.1.0 composed them for its single fingerprint."""
    cfg = campaign.config
    judge = cfg.judge.model_dump(include=_V1_FIELDS["judge"]) if cfg.judge else None
    guard = cfg.guard.model_dump(include=_V1_FIELDS["guard"]) if cfg.guard else None
    data = {
        "metric": cfg.metric.model_dump(include=_V1_FIELDS["metric"]),
        "judge": judge,
        "guard": guard,
        "decision": _v1_decision(cfg.decision),
        "harness": cfg.harness,
    }
    return json.dumps(data, sort_keys=True)


def _v1_decision(decision: DecisionConfig) -> dict[str, object]:
    """The decision table as 0.1.0 saw it: its default rule was `strict` (now `auto`)."""
    data = decision.model_dump(include=_V1_FIELDS["decision"])
    if "rule" not in decision.model_fields_set:
        data["rule"] = "strict"
    return data


def measurement_changes(
    campaign: Campaign, stored: dict[str, object], current: dict[str, object]
) -> list[str]:
    """What differs between the fingerprint a campaign started with and today's: the
    measurement settings by key, then the harness files. A fingerprint written by 0.1.0
    holds one digest of its own composition; it can only say that some setting changed."""
    old_files = stored.get("files")
    old_files = old_files if isinstance(old_files, dict) else {}
    new_files = current.get("files")
    new_files = new_files if isinstance(new_files, dict) else {}
    files = sorted(
        p for p in set(old_files) | set(new_files) if old_files.get(p) != new_files.get(p)
    )
    old = stored.get("measurement")
    new = current.get("measurement")
    keys: list[str] = []
    if isinstance(old, dict) and isinstance(new, dict):
        keys = sorted(k for k in set(old) & set(new) if old[k] != new[k])
    elif stored.get("settings") not in (None, sha256_text(judge_settings(campaign))):
        keys = ["metric, guard, decision or judge settings, recorded by 0.1.0 as one digest"]
    return keys + [f"harness file {p}" for p in files]


def harness_files(campaign: Campaign, workspace: Path, files: list[str] | None = None) -> list[str]:
    """Expand the `harness` globs over the files of the workspace (or over `files`, those
    of a folder that is not a work tree of its own: the measurement folder)."""
    cfg = campaign.config
    rubric = [cfg.judge.rubric] if cfg.judge is not None else []
    if rubric and PathMatcher(cfg.scope).matches(rubric[0]):
        raise ConfigError(
            f"{campaign.display_path()}: key 'judge.rubric': {rubric[0]} is in scope; the "
            "proposer must never change (or be shown) the judge's rubric. Narrow 'scope'."
        )
    if rubric and not (workspace / rubric[0]).is_file():
        raise ConfigError(
            f"{campaign.display_path()}: key 'judge.rubric': {rubric[0]} does not exist in the "
            "repository; commit it (or fix the path)."
        )
    if not cfg.harness:
        return rubric
    if files is None:
        files = workspace_files(workspace)
    matcher = PathMatcher(cfg.harness)
    found = sorted(p for p in files if matcher.matches(p))
    for pattern in cfg.harness:
        if (
            not any(PathMatcher([pattern]).matches(p) for p in found)
            and not (workspace / pattern).exists()
        ):
            raise ConfigError(
                f"{campaign.display_path()}: key 'harness': {pattern!r} matches no file in the "
                "repository; fix the pattern or commit the file."
            )
    scope = PathMatcher(cfg.scope)
    for path in found:
        if scope.matches(path):
            raise ConfigError(
                f"{campaign.display_path()}: {path} is both in scope and in harness; a file the "
                "proposer may change cannot be part of its judge. Narrow 'scope' or 'harness'."
            )
    return sorted({*found, *rubric})


@dataclass
class Fingerprint:
    files: dict[str, str] = field(default_factory=dict)
    settings: str = ""
    config_hash: str = ""
    measurement: dict[str, str] = field(default_factory=dict)

    @classmethod
    def take(cls, campaign: Campaign, workspace: Path, paths: list[str]) -> Fingerprint:
        measurement = measurement_digests(campaign)
        return cls(
            files={p: sha256_file(workspace / p) for p in paths},
            settings=sha256_text(json.dumps(measurement, sort_keys=True)),
            config_hash=sha256_file(campaign.config_path),
            measurement=measurement,
        )

    def changed(
        self, campaign: Campaign, workspace: Path, expect: Mapping[str, str] | None = None
    ) -> str | None:
        """Name the first harness file (or the config) that differs, else None. `expect`
        gives the digest of a harness file the engine put other bytes in (the holdout's)."""
        if sha256_file(campaign.config_path) != self.config_hash:
            return campaign.display_path()
        for path, digest in self.files.items():
            if sha256_file(workspace / path) != (expect or {}).get(path, digest):
                return path
        return None

    def around(self, campaign: Campaign, workspace: Path) -> frozenset[str]:
        """The files where a new one would join the judge: below each harness glob's
        literal folder, and beside each harness module. Taken before a run; `joined`
        compares after it."""
        found: set[str] = set()
        for folder, deep in _judge_folders(campaign.config.harness, self.files):
            found |= _listing(workspace, folder, deep)
        return frozenset(found)

    def joined(self, campaign: Campaign, workspace: Path, before: frozenset[str]) -> str | None:
        """A file that appeared during the run and now takes part in the judge: one a
        harness glob matches (a test pytest collects), or a module beside a harness module
        (a standard module's name, compiled bytecode, an extension), which the harness would
        import in place of the real one. None when nothing joined."""
        matcher = PathMatcher(campaign.config.harness) if campaign.config.harness else None
        modules = {str(Path(p).parent) for p in self.files if p.endswith(".py")}
        for path in sorted(self.around(campaign, workspace) - before):
            folder = str(Path(path).parent)
            if matcher is not None and matcher.matches(path) and not _cache(path):
                return path
            if folder in modules and _module(Path(path).name):
                return path
        return None

    def to_json(self) -> dict[str, object]:
        """As state.json keeps it: `settings` is one digest over `measurement`, the digest
        of each measurement setting by its key."""
        return {"files": self.files, "settings": self.settings, "measurement": self.measurement}


# What Python imports besides a module's source, and the folders tools write caches to
# (a harness glob such as `tests/**` covers them, and pytest writes them on every run).
IMPORTABLE = (".py", ".pyc", ".so", ".pyd")
CACHE_NAMES = ("__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".hypothesis")
_GLOB = re.compile(r"[*?\[]")


def _module(name: str) -> bool:
    """Whether `import <x>` could load a file of this name (`statistics.py`,
    `scorer.cpython-311-x86_64-linux-gnu.so`)."""
    return name.endswith(IMPORTABLE) and name.split(".", 1)[0].isidentifier()


def _cache(path: str) -> bool:
    return any(part in CACHE_NAMES for part in Path(path).parts)


def _judge_folders(patterns: list[str], files: Mapping[str, str]) -> list[tuple[str, bool]]:
    """(folder, walk below it) pairs: each glob's literal folder, walked; each harness
    module's folder, its own entries only."""
    found: dict[str, bool] = {}
    for pattern in patterns:
        literal: list[str] = []
        for part in pattern.strip("/").split("/"):
            if _GLOB.search(part):
                break
            literal.append(part)
        else:
            continue  # a plain path: the file itself, fingerprinted
        found[("/".join(literal)) or "."] = True
    for path in files:
        if path.endswith(".py"):
            found.setdefault(str(Path(path).parent), False)
    return list(found.items())


# A run may write much; a walk that finds more than this many entries stops (what it found
# is compared; the fingerprint of the known files still holds).
_WALK_CAP = 100_000


def _listing(workspace: Path, folder: str, deep: bool) -> set[str]:
    base = workspace / folder
    found: set[str] = set()
    if not deep:
        try:
            with os.scandir(base) as entries:
                for entry in entries:
                    found.add(os.path.normpath(os.path.join(folder, entry.name)))
        except OSError:
            pass
        return found
    for top, dirs, names in os.walk(base):
        dirs[:] = [d for d in dirs if d not in CACHE_NAMES]
        rel = os.path.relpath(top, workspace)
        for name in (*names, *dirs):
            found.add(os.path.normpath(os.path.join(rel, name)))
        if len(found) > _WALK_CAP:
            break
    return found
