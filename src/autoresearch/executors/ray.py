"""Measure on a Ray cluster: `[executor] kind = "ray"` (needs `autoresearch[ray]`).

The engine still materialises each commit in its own measurement folder (the harness is
verified there before and after every run), but the command runs on a Ray worker. The
candidate travels as git objects: the first commit measured goes out once as a full
bundle (Ray's object store hands it to each node once); every later one as a thin bundle
against it. The worker keeps a bare repository per base commit, writes the commit's files
into a fresh folder and runs the command there with the local executor, inside the
sandbox where the worker has one. The run's number, its seconds and the tails of its
output come back; only the engine writes the ledger. A worker or node lost during a run
is retried once (spread over the cluster), then the run is a `crash` naming the loss.

The command on a worker is sandboxed as a local one is: what leaves the engine is the
environment already reduced to the allowlist (no secret of the engine's travels through
the cluster) and, beside the settings' `deny_read`, the engine's checkout and campaign
folder as paths to hide (they exist on a worker that shares the engine's file system);
the worker adds its node's Ray folder (sessions, sockets, logs) and its own folder of
cached repositories and other runs. A cluster the engine starts has no dashboard and
answers only requests carrying its token (`ray_token`), which no sandbox can read.
"""

from __future__ import annotations

import fcntl
import io
import logging
import os
import shutil
import socket
import subprocess
import tarfile
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from autoresearch.attempt import Status
from autoresearch.config import ExecutorConfig
from autoresearch.errors import ConfigError, GitError
from autoresearch.executors.base import OK, CommandSpec, Executor, ExecutorSetup, Measurement
from autoresearch.executors.ray_token import ClusterToken
from autoresearch.gitcmd import IDENTITY, git_env, require_git
from autoresearch.isolation.owned import remove
from autoresearch.isolation.sandbox import allowed_env, interpreter_dirs, shared_paths
from autoresearch.measure.integrity import sha256_file

# Output a run sends back, per stream: its last bytes.
LOG_TAIL = 64 * 1024
# Beyond the command's own timeout: the time a run may take to be scheduled and shipped.
GRACE_SECONDS = 300.0
# A commit made for the same tree is the same commit: dated once and for all.
FIXED_DATE = {"GIT_AUTHOR_DATE": "@0 +0000", "GIT_COMMITTER_DATE": "@0 +0000"}


def missing_ray(source: str) -> str:
    return (
        f"{source}: key 'executor.kind': \"ray\" needs Ray; install it with "
        "pip install 'autoresearch[ray]', or set kind = \"local\"."
    )


@dataclass(frozen=True)
class Shipment:
    """What a worker needs to materialise one commit."""

    base: str  # the base commit, fetched once per node
    commit: str
    thin: bytes | None  # the objects of `commit` not in the base; None when it is the base


class Shipper:
    """Turns the tree shown in a measurement folder into a commit and its thin bundle. The
    commits and refs are written in a git directory of the executor's own, which borrows
    the repository's objects (where every measured tree already is)."""

    def __init__(self) -> None:
        self.gitdir: Path | None = None
        self.lock = threading.Lock()
        self.base: str | None = None
        self.base_bundle: bytes | None = None
        self.cache: dict[str, Shipment] = {}

    def open(self, gitdir: Path, root: Path) -> None:
        objects = _git("rev-parse", "--git-path", "objects", cwd=root).decode().strip()
        remove(gitdir)  # a link planted here is removed, not followed
        _git("init", "-q", "--bare", str(gitdir))
        alternates = gitdir / "objects" / "info" / "alternates"
        alternates.write_text(f"{(root / objects).resolve()}\n", encoding="utf-8")
        self.gitdir = gitdir

    def ship(self, folder: Path) -> Shipment:
        assert self.gitdir is not None, "open() first"
        env = {**git_env(), **IDENTITY, **FIXED_DATE}

        def run(*args: str, gitdir: Path = self.gitdir) -> bytes:
            proc = subprocess.run(
                [require_git(), f"--git-dir={gitdir}", *args],
                env=env,
                capture_output=True,
                stdin=subprocess.DEVNULL,
            )
            if proc.returncode != 0:
                detail = proc.stderr.decode(errors="replace").strip()
                raise GitError(f"git {args[0]} failed in {gitdir}: {detail}")
            return proc.stdout

        # The tree of the measurement folder's index: the commit it shows.
        tree = run("write-tree", gitdir=folder.with_name(folder.name + ".git")).decode().strip()
        with self.lock:
            if tree in self.cache:
                return self.cache[tree]
            commit = run("commit-tree", tree, "-m", "measured on a Ray worker").decode().strip()
            run("update-ref", f"refs/ray/{commit}", commit)
            if self.base is None:
                self.base = commit
                self.base_bundle = run("bundle", "create", "-", f"refs/ray/{commit}")
                shipment = Shipment(commit, commit, None)
            elif commit == self.base:
                shipment = Shipment(self.base, commit, None)
            else:
                thin = run("bundle", "create", "-", f"refs/ray/{commit}", f"^{self.base}")
                shipment = Shipment(self.base, commit, thin)
            self.cache[tree] = shipment
            return shipment


class RayExecutor(Executor):
    """Runs each metric and guard command on a Ray worker; see the module's docstring."""

    def __init__(self, config: ExecutorConfig, source: str = "autoresearch.toml") -> None:
        self.config = config
        self.source = source
        self.setup: ExecutorSetup | None = None
        self.shipper = Shipper()
        self.base_ref: Any = None
        self.started_ray = False
        self.token: ClusterToken | None = None
        # Paths of the engine's machine hidden from the command on every worker.
        self.hide: tuple[str, ...] = ()
        self.running: set[Any] = set()
        self.lock = threading.Lock()

    @property
    def isolation(self) -> str:
        return f"ray ({self.setup.isolation if self.setup else 'auto'} on the workers)"

    def start(self, setup: ExecutorSetup) -> list[str]:
        try:
            import ray
        except ImportError:
            raise ConfigError(missing_ray(setup.source)) from None
        self.setup = setup
        if setup.root is not None:
            self.shipper.open(setup.state_dir / "ray.git", setup.root)
        if not ray.is_initialized():
            local = self.config.address == "local"
            problem = unreachable(self.config.address)
            if problem:
                raise ConfigError(
                    f"{setup.source}: key 'executor.address': cannot reach the Ray cluster at "
                    f"{self.config.address!r} ({problem}); start it (`ray start --head`) or "
                    "fix the address."
                )
            options: dict[str, Any] = {}
            if local:
                # A cluster of the engine's own: no dashboard (its job API runs whatever it
                # is sent), and every server it opens wants the token no sandbox can read.
                self.token = ClusterToken(setup.state_dir)
                self.token.enable()
                options["include_dashboard"] = False
            try:
                ray.init(
                    address=self.config.address,
                    runtime_env=dict(self.config.runtime_env) or None,
                    log_to_driver=False,
                    logging_level=logging.ERROR,
                    configure_logging=False,
                    **options,
                )
            except (ConnectionError, RuntimeError, ValueError) as exc:
                self._forget_token()
                raise ConfigError(
                    f"{setup.source}: key 'executor.address': cannot reach the Ray cluster at "
                    f"{self.config.address!r} ({_first_line(exc)}); "
                    "start it (`ray start --head`) or fix the address."
                ) from None
            self.started_ray = True
        hide = [str(setup.state_dir.resolve())]
        if setup.root is not None:
            hide.append(str(setup.root.resolve()))
        hide += ray_folders()
        self.hide = tuple(dict.fromkeys(hide))
        return []

    def close(self) -> None:
        self.cancel()
        if self.started_ray:
            import ray

            ray.shutdown()
            self.started_ray = False
        self._forget_token()
        self.base_ref = None

    def _forget_token(self) -> None:
        if self.token is not None:
            self.token.disable()
            self.token = None

    def cancel(self) -> None:
        """Stop the runs in flight on the workers (a signal, or a halted campaign)."""
        import ray

        with self.lock:
            refs = list(self.running)
        for ref in refs:
            try:
                ray.cancel(ref, force=True)
            except Exception:
                pass

    def run(
        self, spec: CommandSpec, *, workspace: Path, env: dict[str, str], log_stem: Path
    ) -> Measurement:
        import ray
        from ray import exceptions as rex

        assert self.setup is not None, "start() first"
        shipment = self.shipper.ship(workspace)
        with self.lock:
            if self.base_ref is None:
                self.base_ref = ray.put(self.shipper.base_bundle)
        # The engine's environment never leaves it: only what a sandboxed command may see.
        env = allowed_env(env, self.setup.pass_env)
        setup = replace(
            self.setup,
            state_dir=Path("."),
            root=None,
            share=self._shown_again(env.get("PATH", "")),
            deny_read=(*self.setup.deny_read, *self.hide),
        )
        lost = ""
        for attempt in (1, 2):
            options: dict[str, Any] = {
                "num_cpus": self.config.num_cpus,
                "num_gpus": self.config.num_gpus,
                "max_retries": 0,
            }
            if attempt == 2:
                options["scheduling_strategy"] = "SPREAD"
            ref = (
                _remote()
                .options(**options)
                .remote(self.base_ref, shipment, spec, env, setup, log_stem.name)
            )
            with self.lock:
                self.running.add(ref)
            try:
                result = ray.get(ref, timeout=spec.timeout + GRACE_SECONDS)
            except rex.TaskCancelledError:
                return Measurement(
                    Status.CRASH, None, 0.0, "the run was cancelled", log_stem.with_suffix(".out")
                )
            except rex.RayTaskError as exc:
                out = log_stem.with_suffix(".out")
                _write(out, b"")
                _write(log_stem.with_suffix(".err"), str(exc).encode())
                first = _first_line(exc, last=True)
                return Measurement(Status.CRASH, None, 0.0, f"on the Ray worker: {first}", out)
            except (rex.RayError, TimeoutError) as exc:
                lost = f"{type(exc).__name__}: {_first_line(exc)}"
                continue
            finally:
                with self.lock:
                    self.running.discard(ref)
            return self._landed(result, log_stem)
        out = log_stem.with_suffix(".out")
        _write(out, b"")
        reason = f"the Ray worker was lost twice (retried once elsewhere): {lost}"
        return Measurement(Status.CRASH, None, 0.0, reason, out)

    def _shown_again(self, path_env: str) -> tuple[str, ...]:
        """What the local boundary shows again read-only inside the hidden checkout (the
        shared paths, the interpreters PATH runs from it), as absolute paths: a worker
        that shares the engine's file system shows them the same way."""
        assert self.setup is not None
        root = self.setup.root
        if root is None:
            return ()
        shown = (*shared_paths(root, self.setup.share), *interpreter_dirs(path_env, root))
        return tuple(str(path) for path in shown)

    def _landed(self, result: dict[str, Any], log_stem: Path) -> Measurement:
        out = log_stem.with_suffix(".out")
        _write(out, result["stdout"])
        _write(log_stem.with_suffix(".err"), result["stderr"])
        outcome = result["outcome"]
        status: Any = OK if outcome == OK else Status(outcome)
        return Measurement(
            status,
            result["value"],
            result["seconds"],
            result["reason"],
            out,
            result.get("signal"),
            result.get("hygiene") or {},
        )


def ray_folders() -> list[str]:
    """This node's Ray folder (its sessions: sockets, logs, the cluster's address), as the
    process connected to the cluster sees it; none when it cannot say (Ray Client)."""
    import ray

    try:
        temp = Path(ray.get_runtime_context().get_temp_dir()).resolve()
    except Exception:
        return []
    # A folder that holds the machine (a temp dir of "/") is no folder to hide.
    return [str(temp)] if temp.parent != temp else []


def unreachable(address: str) -> str | None:
    """Why nothing listens at `host:port` (Ray would wait minutes to say so), or None."""
    if address in ("auto", "local"):
        return None
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        return "not of the form host:port, ray://host:port, auto or local"
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=3):
            return None
    except OSError as exc:
        return exc.strerror or str(exc)


def _first_line(exc: BaseException, last: bool = False) -> str:
    lines = [line for line in str(exc).strip().splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    return (lines[-1] if last else lines[0]).strip()


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


_REMOTE: Any = None


def _remote() -> Any:
    global _REMOTE
    if _REMOTE is None:
        import ray

        _REMOTE = ray.remote(measure_on_worker)
    return _REMOTE


# -- on the worker ----------------------------------------------------------------------------


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _git(*args: str, cwd: Path | None = None, input: bytes | None = None) -> bytes:
    proc = subprocess.run(
        [require_git(), *args],
        cwd=cwd,
        env={**git_env(), "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull},
        input=input,
        capture_output=True,
    )
    if proc.returncode != 0:
        raise GitError(f"git {args[0]} failed: {proc.stderr.decode(errors='replace').strip()}")
    return proc.stdout


def materialise(base_bundle: bytes, shipment: Shipment, folder: Path) -> None:
    """Write `shipment.commit`'s files into `folder`, from this node's cached repository of
    the base commit (made once, from the base bundle)."""
    home = Path(tempfile.gettempdir()) / f"autoresearch-ray-{os.getuid()}"
    home.mkdir(mode=0o700, exist_ok=True)
    cache = home / f"{shipment.base}.git"
    with _locked(home / f"{shipment.base}.lock"):
        if not (cache / "HEAD").is_file():
            shutil.rmtree(cache, ignore_errors=True)
            _git("init", "-q", "--bare", str(cache))
            _fetch(cache, base_bundle)
        if shipment.thin is not None and not _has(cache, shipment.commit):
            _fetch(cache, shipment.thin)
    tar = _git(f"--git-dir={cache}", "archive", "--format=tar", shipment.commit)
    with tarfile.open(fileobj=io.BytesIO(tar)) as archive:
        archive.extractall(folder, filter="tar")


def _has(cache: Path, commit: str) -> bool:
    proc = subprocess.run(
        [require_git(), f"--git-dir={cache}", "cat-file", "-e", f"{commit}^{{commit}}"],
        capture_output=True,
        env=git_env(),
    )
    return proc.returncode == 0


def _fetch(cache: Path, bundle: bytes) -> None:
    with tempfile.NamedTemporaryFile(dir=cache, suffix=".bundle") as handle:
        handle.write(bundle)
        handle.flush()
        _git(f"--git-dir={cache}", "fetch", "-q", handle.name, "+refs/ray/*:refs/ray/*")


def _tail(path: Path) -> bytes:
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - LOG_TAIL))
            return handle.read()
    except OSError:
        return b""


def measure_on_worker(
    base_bundle: bytes,
    shipment: Shipment,
    spec: CommandSpec,
    env: dict[str, str],
    setup: ExecutorSetup,
    stem: str,
) -> dict[str, Any]:
    """Materialise the commit in a fresh folder, run the command there, send back the
    number and the tails of the output; the folder goes."""
    from autoresearch.executors.local import LocalExecutor

    home = Path(tempfile.gettempdir()) / f"autoresearch-ray-{os.getuid()}"
    home.mkdir(mode=0o700, exist_ok=True)
    work = Path(tempfile.mkdtemp(dir=home, prefix="run-"))
    try:
        folder = work / "measure"
        folder.mkdir()
        materialise(base_bundle, shipment, folder)
        executor = LocalExecutor()
        # Hidden as the user's checkout is locally: this node's cached repositories and the
        # folders of other runs (the command's own folders are shown again), with this
        # node's Ray folder beside the paths the engine named.
        hidden = (*setup.deny_read, *ray_folders())
        executor.start(replace(setup, state_dir=work / "state", root=home, deny_read=hidden))
        try:
            env = {**env, "AUTORESEARCH_WORKSPACE": str(folder)}
            stem_path = work / "logs" / stem
            stem_path.parent.mkdir()
            # The harness is checked where it ran, before and after: the engine's own check
            # sees its own folder, never this one (and without a sandbox here nothing made
            # the harness read-only).
            before = _digests(folder, spec.protected)
            measured = executor.run(spec, workspace=folder, env=env, log_stem=stem_path)
            changed = _first_changed(folder, before)
        finally:
            executor.close()
        outcome, reason = str(measured.outcome), measured.reason
        if changed is not None:
            outcome = str(Status.TAMPERED)
            reason = f"{changed} changed while it ran on the Ray worker"
        return {
            "outcome": outcome,
            "value": measured.value,
            "seconds": measured.seconds,
            "reason": reason,
            "signal": measured.signal,
            "hygiene": measured.hygiene,
            "stdout": _tail(stem_path.with_suffix(".out")),
            "stderr": _tail(stem_path.with_suffix(".err")),
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _digests(folder: Path, names: tuple[str, ...]) -> dict[str, str]:
    return {name: sha256_file(folder / name) for name in names}


def _first_changed(folder: Path, before: dict[str, str]) -> str | None:
    after = _digests(folder, tuple(before))
    return next((name for name, digest in before.items() if after[name] != digest), None)
