"""Run measurements in the campaign's worktree on this machine, one at a time."""

from __future__ import annotations

from pathlib import Path

from autoresearch.executors.base import CommandSpec, Measurement
from autoresearch.harness import MetricParseError, read_metric, run_command


class LocalExecutor:
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
        )
        if result.timed_out:
            return Measurement(
                "timeout",
                None,
                result.seconds,
                f"timed out after {spec.timeout:g} s",
                result.stdout_path,
            )
        if result.returncode != 0:
            tail = result.stderr_tail()
            reason = f"exited with code {result.returncode}" + (f": {tail}" if tail else "")
            return Measurement("crash", None, result.seconds, reason, result.stdout_path)
        if not spec.parse:
            return Measurement("ok", None, result.seconds, "", result.stdout_path)
        try:
            value = read_metric(spec, result.stdout_text(), workspace)
        except MetricParseError as exc:
            return Measurement("crash", None, result.seconds, str(exc), result.stdout_path)
        return Measurement("ok", value, result.seconds, "", result.stdout_path)
