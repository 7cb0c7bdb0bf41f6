"""The OS sandbox around the commands the engine starts.

A `Sandbox` turns a command line into one that runs inside an isolation boundary; the
engine describes what the command may see in a `Boundary`. `Bwrap` builds it with
bubblewrap (Linux): its own mount view (the machine read-only as the user sees it, minus
the hidden paths; the command's own folder and a private TMPDIR writable), its own PID
namespace that dies with the engine (killing the command kills every descendant, `setsid`
and daemons included), optionally its own network namespace, and `/proc` showing only its
own processes. `NoSandbox` runs the command as it is. Another platform's sandbox (macOS
Seatbelt, say) is one more class with the same two members.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Protocol

from autoresearch.errors import ConfigError
from autoresearch.isolation import landlock, launcher, seccomp
from autoresearch.isolation.process import SETUP_TRIES, Launch

# Credentials a measurement never needs to read (`[sandbox] deny_read` replaces the list).
DEFAULT_DENY_READ = (
    "~/.ssh",
    "~/.aws",
    "~/.gnupg",
    "~/.netrc",
    "~/.config/gcloud",
    "~/.azure",
    "~/.kube",
    "~/.docker/config.json",
    "~/.git-credentials",
    "~/.pypirc",
)

# What a sandboxed command sees of the home folder: toolchains, read-only, and nothing else
# (`[sandbox] home_readable` adds paths; "~" shows it whole). Credentials live in the home
# folder under more names than any deny list knows (package registries, cloud and agent
# logins, shell history), so it is an allowlist. Only folders that hold programs and
# libraries, never a tool's settings (where its tokens are).
DEFAULT_HOME_READABLE = (
    "~/.local/bin",
    "~/.local/lib",
    "~/.local/share/uv/python",
    "~/.local/share/uv/tools",
    "~/.local/pipx",
    "~/.local/share/pipx",
    "~/.pyenv",
    "~/.rye/py",
    "~/.conda/envs",
    "~/.conda/pkgs",
    "~/miniconda3",
    "~/anaconda3",
    "~/miniforge3",
    "~/mambaforge",
    "~/micromamba",
    "~/.cargo/bin",
    "~/.cargo/registry",
    "~/.cargo/git",
    "~/.rustup",
    "~/go/bin",
    "~/go/pkg",
    "~/.nvm",
    "~/.volta",
    "~/.fnm",
    "~/.bun/bin",
    "~/.deno/bin",
    "~/.sdkman/candidates",
    "~/.m2/repository",
    "~/.gradle/caches",
    "~/.gradle/wrapper",
    "~/.juliaup",
    "~/.julia/packages",
    "~/.julia/artifacts",
    "~/.julia/compiled",
    "~/.elan",
    "~/.ghcup/bin",
    "~/.nix-profile",
    # models and data sets already downloaded (the token beside them is not shown)
    "~/.cache/huggingface/hub",
    "~/.cache/huggingface/datasets",
    "~/.cache/torch",
)


# Where toolchains keep settings that may hold a token (a registry's, a channel's): hidden
# inside the toolchain folders the home allowlist shows, relative to each.
TOOLCHAIN_SETTINGS = (
    "pip.conf",
    "etc/pip.conf",
    ".condarc",
    "condarc",
    ".npmrc",
    "etc/npmrc",
    ".pypirc",
    "credentials",
    "credentials.toml",
    ".credentials.json",
    "auth.json",
    "versions/*/pip.conf",
    "versions/*/etc/pip.conf",
    "versions/node/*/etc/npmrc",
    "envs/*/pip.conf",
    "envs/*/.condarc",
    "envs/*/condarc",
)


@lru_cache(maxsize=8)
def settings_within(shown: tuple[Path, ...]) -> tuple[Path, ...]:
    """The settings files inside the shown toolchain folders (found once per process: the
    commands cannot write there)."""
    found: list[Path] = []
    for folder in shown:
        if folder.is_dir():
            for pattern in TOOLCHAIN_SETTINGS:
                found += folder.glob(pattern)
    return tuple(found)


# Hidden from every sandbox whatever the settings say: Ray's session folders (its sockets,
# logs, the cluster's address) and Kerberos ticket caches, which live outside the home.
def always_hidden(env: Mapping[str, str] | None = None) -> tuple[Path, ...]:
    env = os.environ if env is None else env
    found = [Path(env.get("RAY_TMPDIR") or "/tmp/ray"), Path.home() / ".ray"]
    found += Path("/tmp").glob(f"krb5cc_{os.getuid()}*")
    return tuple(dict.fromkeys(p.resolve() for p in found))


def home_allowlist(
    readable: Iterable[str], path_env: str, env: Mapping[str, str] | None = None
) -> tuple[Path | None, tuple[Path, ...]]:
    """The home folder to cover and what is shown of it: the defaults, `readable`, and the
    toolchains this engine and PATH run from (an interpreter under home, a virtual
    environment's folder, a `bin` on PATH). (None, ()) when there is no home to cover."""
    env = os.environ if env is None else env
    key = (tuple(readable), path_env, env.get("VIRTUAL_ENV", ""), env.get("CONDA_PREFIX", ""))
    return _home_allowlist(*key, os.environ.get("HOME", ""), int(time.monotonic() // 30))


# Every command the engine starts asks for the allowlist, which resolves some forty paths
# (10 ms on a loaded machine): it is looked up at most once per 30 seconds (the last
# argument), so a toolchain installed meanwhile is shown from the next period on.
@lru_cache(maxsize=8)
def _home_allowlist(
    readable: tuple[str, ...],
    path_env: str,
    venv: str,
    conda: str,
    home_env: str,
    period: int,
) -> tuple[Path | None, tuple[Path, ...]]:
    try:
        home = Path.home().resolve()
    except (KeyError, RuntimeError):
        return None, ()
    if home == Path("/") or not home.is_dir():
        return None, ()
    found = [Path(os.path.expanduser(p)) for p in (*DEFAULT_HOME_READABLE, *readable)]
    # This package too: what the engine runs inside the sandbox (the proposer's network
    # relay, say) comes from it, and an editable install's source may live under home.
    package = Path(__file__).resolve().parents[1]
    executable = str(Path(sys.executable).parent)
    for entry in [*path_env.split(os.pathsep), sys.prefix, sys.base_prefix, executable]:
        if entry:
            found.append(Path(entry))
    found += [Path(prefix) for prefix in (venv, conda) if prefix]
    found.append(package)
    shown: list[Path] = []
    for path in found:
        try:
            path = path.resolve()
        except OSError:
            continue
        if path == home or not path.is_relative_to(home):
            if path == home:
                shown.append(path)
            continue
        # A bin folder of an environment brings the environment (its libraries) along.
        if path.name in ("bin", "Scripts") and (
            (path.parent / "pyvenv.cfg").exists() or (path.parent / "conda-meta").is_dir()
        ):
            path = path.parent
        if path.exists():
            shown.append(path)
    kept = sorted(set(shown), key=lambda p: len(p.parts))
    # A path inside another shown one would only be mounted twice.
    outer = [p for i, p in enumerate(kept) if not any(p.is_relative_to(q) for q in kept[:i])]
    return home, tuple(outer)


# The environment a sandboxed command starts from; `[sandbox] pass_env` adds names.
ENV_ALLOWED = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "TERM",
    "TZ",
    "VIRTUAL_ENV",
    "PYTHONPATH",
    "CONDA_PREFIX",
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "OMP_NUM_THREADS",
    # where toolchains live: paths, never secrets
    "LD_LIBRARY_PATH",
    "CUDA_HOME",
    "CONDA_DEFAULT_ENV",
    "HF_HOME",
    "TORCH_HOME",
    "JAVA_HOME",
    "GOPATH",
    "CARGO_HOME",
    "RUSTUP_HOME",
    "NODE_PATH",
)
ENV_PREFIXES = ("LC_", "AUTORESEARCH_", "XDG_")


def allowed_env(env: Mapping[str, str], pass_env: Iterable[str] = ()) -> dict[str, str]:
    """`env` reduced to an allowlist: secrets are out unless named in `pass_env`."""
    extra = set(pass_env)
    return {
        k: v for k, v in env.items() if k in ENV_ALLOWED or k in extra or k.startswith(ENV_PREFIXES)
    }


@dataclass(frozen=True)
class Boundary:
    """What one command may see and touch."""

    workdir: Path  # its own folder: writable, and where it starts
    tmpdir: Path  # a private TMPDIR: writable
    hidden: tuple[Path, ...] = ()  # unreadable (an empty folder, or an empty file, instead)
    readonly: tuple[Path, ...] = ()  # shown again read-only, even inside a hidden folder
    writable: tuple[Path, ...] = ()  # more writable paths (`[sandbox] writable`)
    network: bool = True
    env: dict[str, str] = field(default_factory=dict)
    # Folders shown empty and read-only, with only the `readonly` and `writable` paths
    # inside them shown again: the home folder, seen through its allowlist.
    covered: tuple[Path, ...] = ()
    # Files of `workdir` (relative) the command may read but never change, replace, move or
    # remove: the harness, while the metric or guard runs.
    protected: tuple[str, ...] = ()
    # Device nodes shown in its /dev, usable (a GPU's): the sandbox's own /dev holds only
    # null, zero, random, tty and the like.
    devices: tuple[Path, ...] = ()


def _layers(boundary: Boundary) -> list[list[str]]:
    """The mounts that shape what the command sees, parents before what they hold: a path
    inside another is mounted after it and so wins, whichever kind each is. At one path, a
    path shown again read-only wins over hiding, and hiding over writable."""
    entries: list[tuple[Path, int, list[str]]] = []
    for path in boundary.covered:
        if path.is_dir():
            entries.append((path, 0, ["--tmpfs", str(path)]))
    for path in boundary.writable:
        if path.exists():
            entries.append((path, 1, ["--bind", str(path), str(path)]))
    inside = (*boundary.readonly, *boundary.writable)
    for path in boundary.hidden:
        if any(path.is_relative_to(c) for c in boundary.covered) and not any(
            path.is_relative_to(p) for p in inside
        ):
            continue  # already out of sight, and nothing shows it again
        if path.is_dir():
            entries.append((path, 2, ["--tmpfs", str(path)]))
        elif path.exists():
            entries.append((path, 2, ["--ro-bind", os.devnull, str(path)]))
    for path in boundary.readonly:
        if path.exists():
            entries.append((path, 3, ["--ro-bind", str(path), str(path)]))
    entries.sort(key=lambda e: (len(e[0].parts), e[1]))
    return [args for _, _, args in entries]


def _protect(boundary: Boundary) -> list[str]:
    """Read-only mounts of the harness files inside the command's folder, after it. Each
    folder between the two is bound onto itself first: a mount point cannot be renamed or
    removed, so the command cannot move a harness file's folder aside and put a fake in
    its place either."""
    args: list[str] = []
    folders: dict[Path, None] = {}
    files: list[Path] = []
    base = boundary.workdir
    for name in boundary.protected:
        path = base / name
        if path.is_symlink():
            # A link is fingerprinted by the name it points at; what it points at, when
            # that is in the folder, is the file the harness reads.
            target = path.resolve()
            if not target.is_relative_to(base) or not target.is_file():
                continue
            path = target
        if not path.is_file():
            continue
        for parent in reversed(path.relative_to(base).parents[:-1]):
            folders[base / parent] = None
        files.append(path)
    for folder in folders:
        args += ["--bind", str(folder), str(folder)]
    for path in files:
        args += ["--ro-bind", str(path), str(path)]
    # Beside a harness module, compiled bytecode would be imported in its place (Python
    # trusts a .pyc whose recorded source time and size match): its cache folder is empty
    # and read-only there, so the module is compiled from its protected source.
    caches = dict.fromkeys(p.parent / "__pycache__" for p in files if p.suffix == ".py")
    for cache in caches:
        args += ["--tmpfs", str(cache), "--remount-ro", str(cache)]
    return args


class Sandbox(Protocol):
    name: str

    def command(
        self, argv: list[str], boundary: Boundary, status_fd: int | None = None
    ) -> list[str]:
        """The command line that runs `argv` inside `boundary`. With `status_fd`, the
        sandbox writes there a line holding `"exit-code"` once the command inside has ended:
        a sandbox that exits without it failed to set itself up and started nothing."""
        ...

    def environment(self, boundary: Boundary) -> dict[str, str]:
        """The environment to start that command line with."""
        ...

    def child_setup(self) -> Callable[[], None] | None:
        """What the child runs between fork and exec (None: nothing)."""
        ...

    def launcher(self) -> Launch | None:
        """What starts the command line with the sandbox's restrictions on, in place of
        `child_setup` and without Python between fork and exec (None: nothing to put on)."""
        ...


class NoSandbox:
    """Runs commands as they are: nothing below is enforced (see `unprotected`)."""

    name = "none"

    def command(
        self, argv: list[str], boundary: Boundary, status_fd: int | None = None
    ) -> list[str]:
        return list(argv)

    def environment(self, boundary: Boundary) -> dict[str, str]:
        return dict(boundary.env)

    def child_setup(self) -> Callable[[], None] | None:
        return None

    def launcher(self) -> Launch | None:
        return None


class Bwrap:
    name = "bwrap"

    def __init__(self, executable: str = "bwrap") -> None:
        self.executable = executable
        self._launch: tuple[Launch | None] | None = None  # found once: see `launcher`

    def command(
        self, argv: list[str], boundary: Boundary, status_fd: int | None = None
    ) -> list[str]:
        args = [
            self.executable,
            # Bound to the engine's life once it runs. No `--new-session`: the engine
            # starts it in a session of its own already (no terminal to inject into), and
            # the sandbox's init must stay in that process group, so that killing the
            # group (a timeout, or the next engine after a SIGKILL came before bubblewrap
            # had bound itself) takes the whole PID namespace with it.
            "--die-with-parent",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
            # An engine run as root (a container, say) would hand its capabilities on: with
            # them a command unmounts what hides the checkout or remounts / read-write.
            "--cap-drop",
            "ALL",
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
        ]
        if not boundary.network:
            args.append("--unshare-net")
        for layer in _layers(boundary):
            args += layer
        # A read-only mount does not stop connect(): a daemon's socket (docker, ssh-agent,
        # tmux, the session bus) would run whatever the command asks, outside the sandbox.
        for path in host_sockets(boundary):
            args += ["--ro-bind", os.devnull, str(path)]
        # Every other mount is `nodev`: a device node is usable only bound this way. The
        # node alone, never its folder; the command keeps no capability to make others.
        for path in boundary.devices:
            if os.path.exists(path):
                args += ["--dev-bind", str(path), str(path)]
        for path in (boundary.tmpdir, boundary.workdir):
            args += ["--bind", str(path), str(path)]
        args += _protect(boundary)
        # The empty folders are made read-only last: the mounts above needed their mount
        # points made in them first (a remount is not recursive, so those stay as mounted).
        for path in boundary.covered:
            if path.is_dir():
                args += ["--remount-ro", str(path)]
        if status_fd is not None:
            args += ["--json-status-fd", str(status_fd)]
        args += ["--chdir", str(boundary.workdir), "--", *argv]
        return args

    def environment(self, boundary: Boundary) -> dict[str, str]:
        return {**boundary.env, "TMPDIR": str(boundary.tmpdir)}

    def child_setup(self) -> Callable[[], None] | None:
        """The kernel's keyrings out of reach (a seccomp filter), and a Landlock scope
        around bubblewrap where the kernel has one: the host's abstract unix sockets, which
        share the network namespace, are out of reach too."""
        scope = landlock.child_setup(_probe(self.executable))
        keyrings = seccomp.install if seccomp.problem() is None else None
        engine = os.getpid()

        def setup() -> None:
            # bubblewrap dies with its parent only once it runs: an engine killed between
            # this fork and that exec would otherwise leave the sandbox running for good.
            landlock.die_with_parent(engine)
            if keyrings is not None:
                keyrings()
            if scope is not None:
                scope()

        return setup

    def launcher(self) -> Launch | None:
        """The keyring filter and the Landlock scope of `child_setup`, put on a thread of
        the engine's that starts the commands (`launcher.py`). bubblewrap binds itself to
        the engine's life some milliseconds into its start, and nothing else does before:
        an engine killed before that leaves the sandbox to the record the command's
        process writes before bubblewrap starts (`process.PRELUDE`). Found at the first
        command: the probes behind it are asked once, not per command."""
        if self._launch is None:
            scope = landlock.scoping_problem(tuple(_probe(self.executable))) is None
            keyrings = seccomp.problem() is None
            found = launcher.shared(keyrings, scope) if scope or keyrings else None
            self._launch = (found,)
        return self._launch[0]


def _probe(executable: str) -> list[str]:
    return Bwrap(executable).command(["true"], Boundary(Path("/"), Path("/tmp"), network=False))


UNIX_SOCKETS = Path("/proc/net/unix")


def bound_sockets(table: Path = UNIX_SOCKETS) -> list[Path]:
    """The file-system paths of the unix sockets bound on this machine, as the kernel lists
    them: listening ones (a daemon's) and datagram ones (a log's) alike. Abstract names,
    which `--unshare-net` cuts off, are left out."""
    try:
        lines = table.read_text(encoding="utf-8", errors="surrogateescape").splitlines()[1:]
    except OSError:
        return []
    found = []
    for line in lines:
        fields = line.split(None, 7)
        if len(fields) == 8 and fields[7].startswith("/"):
            found.append(Path(fields[7]))
    return found


def host_sockets(boundary: Boundary, table: Path = UNIX_SOCKETS) -> list[Path]:
    """The sockets a command must not reach: every bound one but those inside its own
    folders or a `[sandbox] writable` path (which the user opened on purpose), and those
    already hidden."""
    open_to = (boundary.workdir, boundary.tmpdir, *boundary.writable)
    shown = (*boundary.readonly, *boundary.writable)
    masked = []
    for path in dict.fromkeys(bound_sockets(table)):
        if any(path.is_relative_to(p) for p in (*open_to, *boundary.hidden)):
            continue
        if any(path.is_relative_to(c) for c in boundary.covered) and not any(
            path.is_relative_to(p) for p in shown
        ):
            continue
        try:
            if not stat.S_ISSOCK(os.lstat(path).st_mode):
                continue
        except OSError:
            continue  # gone, or behind a folder this user cannot search
        masked.append(path)
    return masked


@lru_cache(maxsize=4)
def bwrap_problem(executable: str = "bwrap") -> str | None:
    """Why bubblewrap cannot sandbox commands here, or None when it can (probed once)."""
    found = shutil.which(executable)
    if found is None:
        return "bubblewrap is not installed (Debian/Ubuntu: apt install bubblewrap)"
    # Each try lists the sockets afresh: one removed between the listing and the mount
    # fails that try only, and must not pass for a machine where bubblewrap cannot work.
    for _ in range(SETUP_TRIES):
        try:
            proc = subprocess.run(
                _probe(found), capture_output=True, timeout=10, stdin=subprocess.DEVNULL
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"bubblewrap does not start ({exc})"
        if proc.returncode == 0:
            return None
    detail = proc.stderr.decode(errors="replace").strip().splitlines()
    return "bubblewrap cannot create namespaces here" + (f" ({detail[-1]})" if detail else "")


def user_paths(patterns: Iterable[str]) -> tuple[Path, ...]:
    """Paths as `[sandbox] deny_read` and `writable` give them (`~` allowed), resolved."""
    return tuple(Path(os.path.expanduser(p)).resolve() for p in patterns)


def shared_paths(root: Path, share: Iterable[str]) -> tuple[Path, ...]:
    """The checkout's `share` paths, resolved."""
    return tuple((root / item.strip().rstrip("/")).resolve() for item in share)


def fresh_tmpdir(path: Path) -> Path:
    """An empty private TMPDIR at `path`; whatever stood there (a link planted by an
    earlier command, say) is removed, never followed."""
    from autoresearch.isolation.owned import remove

    remove(path)
    path.mkdir(parents=True)
    return path


def engine_boundary(
    workdir: Path,
    tmpdir: Path,
    root: Path,
    env: dict[str, str],
    *,
    path_env: str,
    deny_read: Iterable[Path] = (),
    readonly: Iterable[Path] = (),
    writable: Iterable[Path] = (),
    network: bool = True,
    home_readable: Iterable[str] = (),
    protected: Iterable[str] = (),
    devices: Iterable[Path] = (),
) -> Boundary:
    """What every command the engine starts may see: its folder and TMPDIR writable (plus
    `writable`), the machine read-only minus the user's checkout (which holds
    `.autoresearch/`), `deny_read` and what is always hidden; of the home folder only its
    allowlist (`home_allowlist`); `readonly` and the checkout's interpreters on `path_env`
    shown again read-only; `protected` files of the folder read-only; the device nodes
    `devices` usable; the environment `env` (already reduced)."""
    home, shown = home_allowlist(home_readable, path_env)
    # Nothing of the user's checkout comes back through the allowlist (an interpreter of
    # its own is shown by `interpreter_dirs`, the rest stays hidden).
    checkout = root.resolve()
    shown = tuple(p for p in shown if not p.is_relative_to(checkout))
    return Boundary(
        workdir=workdir,
        tmpdir=tmpdir,
        hidden=(root.resolve(), *deny_read, *always_hidden(), *settings_within(shown)),
        readonly=(*readonly, *interpreter_dirs(path_env, root), *shown),
        writable=tuple(writable),
        network=network,
        env=env,
        covered=(home,) if home is not None else (),
        protected=tuple(protected),
        devices=tuple(devices),
    )


UNPROTECTED = (
    "commands run without isolation: candidate code can read your checkout and files such "
    "as ~/.ssh, leave processes behind, and see the engine's processes"
)


def choose_sandbox(
    isolation: str, source: str, executable: str = "bwrap"
) -> tuple[Sandbox, str | None]:
    """The sandbox `[sandbox] isolation` asks for, and a warning when "auto" finds none.
    "bwrap" without a working bubblewrap is refused (ConfigError)."""
    if isolation == "none":
        return NoSandbox(), None
    problem = bwrap_problem(executable)
    if problem is None:
        return Bwrap(executable), None
    if isolation == "bwrap":
        raise ConfigError(
            f"{source}: key 'sandbox.isolation': \"bwrap\" needs bubblewrap, which cannot run "
            f'here ({problem}); install it (apt install bubblewrap) or set isolation = "auto".'
        )
    return NoSandbox(), f"{UNPROTECTED} ({problem})"


def isolation_text(isolation: str) -> str:
    """What `check` and the report say about `[sandbox] isolation` on this machine."""
    if isolation == "none":
        return 'none (isolation = "none")'
    problem = bwrap_problem()
    if problem is None:
        return "bwrap"
    return f"none ({problem})"


def sockets_text(isolation: str) -> str:
    """What `check` says of the host's abstract unix sockets (an X server's, some buses'),
    which no mount covers: out of reach inside a Landlock scope, otherwise reachable
    whenever the network is on (a proposer's too, unless `[proposer] network` is "off" or
    "allow")."""
    if isolation == "none" or bwrap_problem() is not None:
        return "reachable with the network on (no sandbox)"
    scope = landlock.scoping_problem(tuple(_probe("bwrap")))
    if scope is None:
        return "out of reach (Landlock scope around bubblewrap)"
    return (
        "reachable with the network on, a proposer's too unless its network is "
        f'"off" or "allow" ({scope})'
    )


def home_text(isolation: str, readable: Iterable[str], path_env: str) -> str:
    """What `check` says a sandboxed command sees of the home folder."""
    if isolation == "none" or bwrap_problem() is not None:
        return "all of it, as you see it (no sandbox)"
    home, shown = home_allowlist(readable, path_env)
    if home is None:
        return "no home folder to hide"
    if home in shown:
        return f"{home}: all of it, read-only (home_readable lists it whole)"
    names = ", ".join(str(p) for p in shown) or "nothing"
    return f"{home} shows only {names}; read-only"


def keyrings_text(isolation: str) -> str:
    """What `check` says of the kernel's keyrings, which every process of the user shares."""
    if isolation == "none" or bwrap_problem() is not None:
        return "reachable (no sandbox): commands share your keyrings"
    problem = seccomp.problem()
    if problem is None:
        return f"out of reach ({', '.join(seccomp.CLOSED_CALLS)} fail: seccomp filter)"
    return f"reachable: {problem}"


@lru_cache(maxsize=16)
def interpreter_dirs(path_env: str, root: Path) -> tuple[Path, ...]:
    """Folders of the user's checkout that PATH runs programs from (a `.venv` inside the
    repository, say): shown read-only, so that `python` still starts when the checkout is
    hidden. A `bin` folder brings its parent (the environment) along."""
    found: list[Path] = []
    base = root.resolve()
    for entry in path_env.split(os.pathsep):
        if not entry:
            continue
        folder = Path(entry).resolve()
        if folder == base or not folder.is_relative_to(base):
            continue
        found.append(folder.parent if folder.name in ("bin", "Scripts") else folder)
    return tuple(dict.fromkeys(found))


def limits_text(memory_mb: int, cpu_seconds: int) -> str:
    """What `[sandbox] memory_mb` and `cpu_seconds` hold, as `check` and the report say it:
    limits apply to each process (setrlimit), never to a command's processes together."""
    parts = []
    if memory_mb:
        parts.append(f"address space {memory_mb} MiB")
    if cpu_seconds:
        parts.append(f"CPU time {cpu_seconds} s")
    if not parts:
        return "none (memory_mb and cpu_seconds are off)"
    return (
        ", ".join(parts) + " for each process of a command (setrlimit); the processes of one "
        "command are not limited together (no cgroup limits)"
    )
