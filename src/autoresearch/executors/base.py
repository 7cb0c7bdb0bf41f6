"""Where measurements run. The engine asks an executor to run a metric or guard command.

The engine talks to measurement only through this protocol: `start` before the first run
(it may refuse the campaign's sandbox settings, and it cleans up after an engine that was
killed), `run` per metric or guard run, `close` at the end.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from autoresearch.attempt import Status
from autoresearch.config import Campaign, MetricConfig
from autoresearch.isolation.process import Limits

OK: Literal["ok"] = "ok"


@dataclass(frozen=True)
class Measurement:
    """One run of a metric or guard command.

    `outcome` is "ok", or the status the run gives its attempt: `Status.CRASH` or
    `Status.TIMEOUT`.
    """

    outcome: Literal["ok"] | Status
    value: float | None
    seconds: float
    reason: str
    stdout_path: Path
    # The signal that ended the command when the engine did not send it (an OOM killer,
    # another process's kill): not the candidate's doing, so the run is made again.
    signal: int | None = None
    # What the machine's GPUs did during the run (`gpus`: which, model, memory, use) and
    # how long it waited for the last run's GPU processes (`gpu_wait_s`): machine.jsonl.
    hygiene: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.outcome == OK


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
    # Files of the folder (relative) the command may read but never change: the harness.
    protected: tuple[str, ...] = ()


@dataclass(frozen=True)
class ExecutorSetup:
    """What an executor learns about the campaign before its first run."""

    state_dir: Path  # the campaign's own folder (`.autoresearch/<name>`)
    network: bool = True  # `[sandbox] network`: false asks for runs without network
    source: str = "autoresearch.toml"  # the config file, as messages name it
    root: Path | None = None  # the user's checkout: hidden from sandboxed commands
    isolation: str = "none"  # `[sandbox] isolation`: auto, bwrap or none
    deny_read: tuple[str, ...] = ()  # more paths hidden from sandboxed commands
    writable: tuple[str, ...] = ()  # more paths sandboxed commands may write
    share: tuple[str, ...] = ()  # shared paths of the checkout, shown read-only
    pass_env: tuple[str, ...] = ()  # environment names passed beside the allowlist
    home_readable: tuple[str, ...] = ()  # home paths shown besides the toolchains
    # `[sandbox] devices`: "auto" (the machine's GPU nodes), "none", or the nodes to show
    devices: str | tuple[str, ...] = "auto"


class Executor:
    """Runs metric and guard commands. Subclass it: `run` is the one method a kind must
    write; the lifecycle (`start`, `cancel`, `close`) is a no-op until overridden."""

    def start(self, setup: ExecutorSetup) -> list[str]:
        """Get ready to run; return warnings for the user. Raises ConfigError when the
        campaign's settings cannot be honoured here."""
        return []

    @property
    def isolation(self) -> str:
        """The isolation in force for the commands it runs (after `start`)."""
        return "none"

    def run(
        self, spec: CommandSpec, *, workspace: Path, env: dict[str, str], log_stem: Path
    ) -> Measurement:
        raise NotImplementedError

    def cancel(self) -> None:
        """Stop the runs in flight, from another thread, when the campaign stops. Runs on
        this machine end with their process group; an executor that runs elsewhere (Ray)
        cancels its tasks."""
        return None

    def close(self) -> None:
        """Release what `start` took. Safe to call more than once, or without `start`."""
        return None


def executor_setup(campaign: Campaign) -> ExecutorSetup:
    """What an executor learns of `campaign` before its first run."""
    sandbox = campaign.config.sandbox
    return ExecutorSetup(
        campaign.state_dir,
        network=sandbox.network,
        source=campaign.display_path(),
        root=campaign.root,
        isolation=sandbox.isolation,
        deny_read=tuple(sandbox.deny_read),
        writable=tuple(sandbox.writable),
        share=tuple(campaign.config.share),
        pass_env=tuple(sandbox.pass_env),
        home_readable=tuple(sandbox.home_readable),
        devices=sandbox.devices if isinstance(sandbox.devices, str) else tuple(sandbox.devices),
    )


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
