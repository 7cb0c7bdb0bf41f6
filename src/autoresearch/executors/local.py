"""Run measurements in the campaign's worktree on this machine, one at a time."""

from __future__ import annotations

from pathlib import Path

from autoresearch.attempt import Status
from autoresearch.errors import ConfigError
from autoresearch.executors.base import OK, CommandSpec, Executor, ExecutorSetup, Measurement
from autoresearch.process import ChildRecord, network_isolation_problem, run_command
from autoresearch.readout import MetricParseError, read_metric

CHILD_RECORD = "child.pgid"


def leftover_warning(pgid: int) -> str:
    return f"killed process group {pgid} left by an engine that was stopped abruptly"


def network_refused(source: str, problem: str) -> str:
    return (
        f"{source}: key 'sandbox.network': false needs network namespaces, which this "
        f"system refuses ({problem}); set it to true or run where `unshare --net` works."
    )


class LocalExecutor(Executor):
    """Runs each command with `process.run_command` in the workspace it is given.

    `child` is where the running command's process group is written down; `start` sets it
    to the campaign's `child.pgid` unless one was given.
    """

    def __init__(self, child: ChildRecord | None = None) -> None:
        self.child = child

    def start(self, setup: ExecutorSetup) -> list[str]:
        if self.child is None:
            setup.state_dir.mkdir(parents=True, exist_ok=True)
            self.child = ChildRecord(setup.state_dir / CHILD_RECORD)
        warnings = []
        leftover = self.child.kill_leftover()
        if leftover:
            warnings.append(leftover_warning(leftover))
        if not setup.network:
            problem = network_isolation_problem()
            if problem:
                raise ConfigError(network_refused(setup.source, problem))
        return warnings

    def close(self) -> None:
        self.child = None

    def run(
        self, spec: CommandSpec, *, workspace: Path, env: dict[str, str], log_stem: Path
    ) -> Measurement:
        result = run_command(
            spec.command,
            cwd=workspace,
            env=env,
            timeout=spec.timeout,
            stdout_path=log_stem.with_suffix(".out"),
            stderr_path=log_stem.with_suffix(".err"),
            limits=spec.limits,
            child=self.child,
        )
        if result.timed_out:
            return Measurement(
                Status.TIMEOUT,
                None,
                result.seconds,
                f"timed out after {spec.timeout:g} s",
                result.stdout_path,
            )
        if result.returncode != 0:
            tail = result.stderr_tail()
            reason = f"exited with code {result.returncode}" + (f": {tail}" if tail else "")
            return Measurement(Status.CRASH, None, result.seconds, reason, result.stdout_path)
        if not spec.parse:
            return Measurement(OK, None, result.seconds, "", result.stdout_path)
        try:
            budget = max(spec.timeout - result.seconds, 1.0)  # the rest of the metric timeout
            value = read_metric(spec, result.stdout_text(), workspace, budget=budget)
        except MetricParseError as exc:
            return Measurement(Status.CRASH, None, result.seconds, str(exc), result.stdout_path)
        return Measurement(OK, value, result.seconds, "", result.stdout_path)
