"""Run measurements on this machine, one at a time, in the folder the engine gives (the
measurement folder), inside the OS sandbox where one is available."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

from autoresearch.attempt import Status
from autoresearch.errors import ConfigError
from autoresearch.executors.base import OK, CommandSpec, Executor, ExecutorSetup, Measurement
from autoresearch.isolation import gpu
from autoresearch.isolation.process import (
    ChildRecord,
    CommandResult,
    network_isolation_problem,
    run_command,
)
from autoresearch.isolation.sandbox import (
    Boundary,
    NoSandbox,
    Sandbox,
    allowed_env,
    choose_sandbox,
    engine_boundary,
    fresh_tmpdir,
    shared_paths,
    user_paths,
)
from autoresearch.measure.readout import MetricParseError, read_metric

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
        self.sandbox: Sandbox = NoSandbox()
        self.setup: ExecutorSetup | None = None
        self.devices: tuple[Path, ...] = ()  # the device nodes sandboxed commands see
        self.gpus: list[gpu.Gpu] = []  # what nvidia-smi said at start: maps ids to nodes
        self.last_session = 0  # the last command's session, whose GPU processes must end
        # How long a run waits for the last one's GPU processes to end.
        self.release_seconds = gpu.RELEASE_SECONDS

    @property
    def isolation(self) -> str:
        return self.sandbox.name

    def start(self, setup: ExecutorSetup) -> list[str]:
        if self.child is None:
            setup.state_dir.mkdir(parents=True, exist_ok=True)
            self.child = ChildRecord(setup.state_dir / CHILD_RECORD)
        warnings = []
        leftover = self.child.kill_leftover()
        if leftover:
            warnings.append(leftover_warning(leftover))
        self.setup = setup
        self.sandbox, warning = choose_sandbox(setup.isolation, setup.source)
        if warning:
            warnings.append(warning)
        if not setup.network and isinstance(self.sandbox, NoSandbox):
            problem = network_isolation_problem()
            if problem:
                raise ConfigError(network_refused(setup.source, problem))
        self.devices = gpu.configured_devices(setup.devices, setup.source)
        if any(gpu.PER_GPU.match(d.name) for d in self.devices):
            self.gpus = gpu.gpus(gpu.smi_path())
        return warnings

    def close(self) -> None:
        self.child = None
        self.sandbox = NoSandbox()

    def run(
        self, spec: CommandSpec, *, workspace: Path, env: dict[str, str], log_stem: Path
    ) -> Measurement:
        hygiene: dict[str, Any] = {}
        if self.last_session:
            waited = gpu.wait_released(self.last_session, self.release_seconds)
            if waited is not None:
                hygiene["gpu_wait_s"] = round(waited, 2)
        wrap = launch = None
        if not isinstance(self.sandbox, NoSandbox) and self.setup is not None:
            boundary = measurement_boundary(
                self.setup,
                workspace,
                env,
                spec.limits.network,
                spec.protected,
                devices=self.devices,
                gpus=self.gpus,
            )
            sandbox = self.sandbox
            env = sandbox.environment(boundary)
            launch = sandbox.launcher()

            def wrap(argv: list[str], status_fd: int) -> list[str]:
                return sandbox.command(argv, boundary, status_fd)

        with gpu.Watch(env) as watch:
            result = run_command(
                spec.command,
                cwd=workspace,
                env=env,
                timeout=spec.timeout,
                stdout_path=log_stem.with_suffix(".out"),
                stderr_path=log_stem.with_suffix(".err"),
                limits=spec.limits,
                child=self.child,
                wrap=wrap,
                launch=launch,
            )
        self.last_session = result.pid
        seen = watch.record()
        if seen:
            hygiene["gpus"] = seen
        return self._measured(spec, result, workspace, hygiene)

    def _measured(
        self, spec: CommandSpec, result: CommandResult, workspace: Path, hygiene: dict[str, Any]
    ) -> Measurement:
        seconds, out = result.seconds, result.stdout_path
        if result.timed_out:
            reason = f"timed out after {spec.timeout:g} s"
            return Measurement(Status.TIMEOUT, None, seconds, reason, out, hygiene=hygiene)
        if result.returncode != 0:
            outside = signal_from_outside(result.returncode)
            if outside is not None:
                reason = f"killed by {signal.Signals(outside).name} from outside the engine"
                return Measurement(Status.CRASH, None, seconds, reason, out, outside, hygiene)
            memory = gpu.out_of_memory(result.stderr_path, result.stdout_path)
            if memory is not None:
                reason = f"out of GPU memory: {memory}"
            else:
                tail = result.stderr_tail()
                reason = f"exited with code {result.returncode}" + (f": {tail}" if tail else "")
            return Measurement(Status.CRASH, None, seconds, reason, out, hygiene=hygiene)
        if not spec.parse:
            return Measurement(OK, None, seconds, "", out, hygiene=hygiene)
        try:
            budget = max(spec.timeout - seconds, 1.0)  # the rest of the metric timeout
            value = read_metric(spec, result.stdout_text(), workspace, budget=budget)
        except MetricParseError as exc:
            return Measurement(Status.CRASH, None, seconds, str(exc), out, hygiene=hygiene)
        return Measurement(OK, value, seconds, "", out, hygiene=hygiene)


# Signals that end a command from outside: the kernel's OOM killer and another process's
# `kill`. The engine itself ends a command only on its timeout or when the campaign stops.
OUTSIDE_SIGNALS = (signal.SIGKILL, signal.SIGTERM, signal.SIGHUP)


def signal_from_outside(returncode: int | None) -> int | None:
    """The signal a command's exit status says ended it, when it is one the engine never
    sends but on a timeout (which the run reports as `timeout` instead): the shell's
    128 + N, or -N for the process itself."""
    if returncode is None or returncode == 0:
        return None
    number = -returncode if returncode < 0 else returncode - 128
    return number if number in OUTSIDE_SIGNALS else None


def measurement_boundary(
    setup: ExecutorSetup,
    workdir: Path,
    env: dict[str, str],
    network: bool,
    protected: tuple[str, ...] = (),
    *,
    devices: tuple[Path, ...] = (),
    gpus: list[gpu.Gpu] | None = None,
) -> Boundary:
    """What a metric or guard run may see: its folder (read-write, but the harness files
    `protected` read-only), a fresh private TMPDIR, the machine read-only minus the user's
    checkout (which holds `.autoresearch/`), the credential folders and all of the home
    folder but its toolchains; the shared paths and the checkout's interpreters read-only;
    the GPU nodes `devices`, narrowed to the GPUs its `CUDA_VISIBLE_DEVICES` names where
    `gpus` (nvidia-smi's table) maps them, and the GPU caches in its TMPDIR."""
    root = setup.root or workdir
    tmpdir = fresh_tmpdir(setup.state_dir / "tmp")
    writable = user_paths(setup.writable)
    shown, reduced = gpu.narrow(devices, allowed_env(env, setup.pass_env), gpus or [])
    return engine_boundary(
        workdir,
        tmpdir,
        root,
        gpu.cache_env(reduced, env, tmpdir, writable),
        path_env=env.get("PATH", ""),
        deny_read=user_paths(setup.deny_read),
        readonly=shared_paths(root, setup.share),
        writable=writable,
        network=network,
        home_readable=setup.home_readable,
        protected=protected,
        devices=shown,
    )
