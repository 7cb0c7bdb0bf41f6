"""Where measurements run. The engine asks an executor to run a metric or guard command."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from autoresearch.config import MetricConfig
from autoresearch.harness import Limits


@dataclass(frozen=True)
class Measurement:
    """One run of a metric or guard command."""

    outcome: str  # "ok", "crash" or "timeout"
    value: float | None
    seconds: float
    reason: str
    stdout_path: Path

    @property
    def ok(self) -> bool:
        return self.outcome == "ok"


@dataclass(frozen=True)
class CommandSpec:
    command: str
    timeout: float
    pattern: str | None = None
    parse: bool = True  # False for guards: only the exit code counts
    file: str | None = None  # read the number from this file in the workspace
    key: str | None = None  # dotted path into a JSON/YAML/TOML file
    name: str | None = None  # pick `METRIC <name>=<value>` from stdout
    limits: Limits = field(default_factory=Limits)


class Executor(Protocol):
    def run(
        self, spec: CommandSpec, *, workspace: Path, env: dict[str, str], log_stem: Path
    ) -> Measurement: ...


def metric_spec(metric: MetricConfig, limits: Limits | None = None) -> CommandSpec:
    return CommandSpec(
        metric.command or "",
        metric.timeout,
        metric.pattern,
        file=metric.file,
        key=metric.key,
        name=metric.name,
        limits=limits or Limits(),
    )
