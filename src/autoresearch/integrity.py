"""Harness fingerprints: what the judge is made of, hashed once and verified before each run."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from autoresearch.config import Campaign
from autoresearch.errors import ConfigError
from autoresearch.gitcmd import workspace_files
from autoresearch.scope import PathMatcher


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    try:
        if path.is_symlink():
            digest.update(b"symlink:" + os.readlink(path).encode())
            return digest.hexdigest()
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    except FileNotFoundError:
        return "missing"
    return digest.hexdigest()


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def judge_settings(campaign: Campaign) -> str:
    """The settings that define the judge: a change to them invalidates earlier numbers."""
    cfg = campaign.config
    judge = None
    if cfg.judge is not None:
        judge = cfg.judge.model_dump(exclude={"api_key_env", "request_timeout", "max_retries"})
    data = {
        "metric": cfg.metric.model_dump(),
        "judge": judge,
        "guard": cfg.guard.model_dump() if cfg.guard else None,
        "decision": cfg.decision.model_dump(),
        "harness": cfg.harness,
    }
    return json.dumps(data, sort_keys=True)


def harness_files(campaign: Campaign, workspace: Path) -> list[str]:
    """Expand the `harness` globs over the files of the workspace."""
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

    @classmethod
    def take(cls, campaign: Campaign, workspace: Path, paths: list[str]) -> Fingerprint:
        return cls(
            files={p: sha256_file(workspace / p) for p in paths},
            settings=sha256_text(judge_settings(campaign)),
            config_hash=sha256_file(campaign.config_path),
        )

    def changed(self, campaign: Campaign, workspace: Path) -> str | None:
        """Name the first harness file (or the config) that differs, else None."""
        if sha256_file(campaign.config_path) != self.config_hash:
            return campaign.display_path()
        for path, digest in self.files.items():
            if sha256_file(workspace / path) != digest:
                return path
        return None

    def to_json(self) -> dict[str, object]:
        return {"files": self.files, "settings": self.settings}
