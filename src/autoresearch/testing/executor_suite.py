"""The checks every executor passes: a number, a crash, a timeout, logs where they belong,
the environment it was given and nothing else, and nothing left running afterwards."""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from autoresearch.attempt import Status
from autoresearch.executors import (
    CommandSpec,
    Executor,
    ExecutorSetup,
    LocalExecutor,
    Measurement,
)
from autoresearch.testing.repo import git, make_repo

# The suite runs over every entry; a new executor adds one line here.
EXECUTORS: dict[str, Callable[[], Executor]] = {
    "local": LocalExecutor,
}

PATH = "/usr/local/bin:/usr/bin:/bin"


def _run(
    executor: Executor, root: Path, command: str, *, timeout: float = 20, pattern: str | None = None
) -> tuple[Measurement, Path]:
    workspace = root / "workspace"
    workspace.mkdir(parents=True, exist_ok=True)
    stem = root / "logs" / "0001-metric-1"
    env = {"PATH": PATH, "SUITE_PASSED": "passed-value-81b"}
    result = executor.run(
        CommandSpec(command, timeout, pattern),
        workspace=workspace,
        env=env,
        log_stem=stem,
    )
    return result, stem


def _started(make: Callable[[], Executor], root: Path) -> Executor:
    executor = make()
    warnings = executor.start(ExecutorSetup(state_dir=root / "state"))
    assert warnings == [], warnings
    return executor


def check_a_number(make: Callable[[], Executor], root: Path) -> None:
    executor = _started(make, root)
    result, _ = _run(executor, root, "echo 'loss 0.5'; echo 'score: 4.25'; echo done")
    assert result.ok and result.value == 4.25, result
    result, _ = _run(executor, root, "echo 'score: 4.25'; echo 9", pattern=r"score: (\S+)")
    assert result.value == 4.25, result
    executor.close()


def check_a_crash(make: Callable[[], Executor], root: Path) -> None:
    executor = _started(make, root)
    result, _ = _run(executor, root, "echo 'it broke' >&2; exit 3")
    assert result.outcome is Status.CRASH and result.value is None, result
    assert "exited with code 3: it broke" in result.reason
    result, _ = _run(executor, root, "echo no number here")
    assert result.outcome is Status.CRASH, result
    executor.close()


def check_a_timeout(make: Callable[[], Executor], root: Path) -> None:
    executor = _started(make, root)
    started = time.monotonic()
    result, _ = _run(executor, root, "sleep 60; echo 1", timeout=0.5)
    assert result.outcome is Status.TIMEOUT, result
    assert result.reason == "timed out after 0.5 s"
    assert time.monotonic() - started < 30
    executor.close()


def check_logs_where_they_belong(make: Callable[[], Executor], root: Path) -> None:
    executor = _started(make, root)
    result, stem = _run(executor, root, "echo to-stdout; echo to-stderr >&2; echo 1")
    assert result.stdout_path == stem.with_suffix(".out")
    assert "to-stdout" in stem.with_suffix(".out").read_text()
    assert "to-stderr" in stem.with_suffix(".err").read_text()
    assert "to-stderr" not in stem.with_suffix(".out").read_text()
    executor.close()


def check_the_environment_passed(make: Callable[[], Executor], root: Path) -> None:
    executor = _started(make, root)
    command = 'echo "got=$SUITE_PASSED home=${HOME:-unset} cwd=$(pwd)"; echo 1'
    _, stem = _run(executor, root, command)
    text = stem.with_suffix(".out").read_text()
    assert "got=passed-value-81b" in text, text
    assert "home=unset" in text, "a variable that was not passed reached the command"
    assert f"cwd={root / 'workspace'}" in text, text
    executor.close()


def check_nothing_left_running(make: Callable[[], Executor], root: Path) -> None:
    executor = _started(make, root)
    pid_file = root / "child.pid"
    result, _ = _run(executor, root, f"sleep 300 >/dev/null 2>&1 & echo $! > {pid_file}; echo 1")
    assert result.ok, result
    assert not _alive(int(pid_file.read_text())), "a background child outlived its command"
    executor.close()


def check_close_is_idempotent(make: Callable[[], Executor], root: Path) -> None:
    executor = make()
    executor.close()
    executor = _started(make, root)
    executor.close()
    executor.close()


def check_cancel_is_safe_at_any_moment(make: Callable[[], Executor], root: Path) -> None:
    """`cancel` (the engine calls it from another thread when the campaign stops) harms
    nothing when nothing runs: before start, between runs, after close."""
    executor = make()
    assert isinstance(executor, Executor), "an executor kind subclasses executors.base.Executor"
    executor.cancel()
    executor = _started(make, root)
    executor.cancel()
    result, _ = _run(executor, root, "echo 2")
    assert result.ok and result.value == 2, result
    executor.close()
    executor.cancel()


def _alive(pid: int) -> bool:
    """True while `pid` runs; a zombie awaiting its parent's wait counts as gone."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return False
        if state in "ZX":
            return False
        time.sleep(0.05)
    return True


CHECKS: dict[str, Callable[[Callable[[], Executor], Path], None]] = {
    "a_number": check_a_number,
    "a_crash": check_a_crash,
    "a_timeout": check_a_timeout,
    "logs_where_they_belong": check_logs_where_they_belong,
    "the_environment_passed": check_the_environment_passed,
    "nothing_left_running": check_nothing_left_running,
    "close_is_idempotent": check_close_is_idempotent,
    "cancel_is_safe_at_any_moment": check_cancel_is_safe_at_any_moment,
}


# -- attacks: the sandbox around a measurement, wherever the executor runs it -------------
#
# Each attack runs a metric command that tries to get out, on a rig set up as the engine
# sets up a campaign (a user's checkout with its `.autoresearch/` folder, a measurement
# folder written through a git directory borrowing the checkout's objects, `[sandbox]
# isolation = "bwrap"`), and asserts the promise itself: the secret's value is absent from
# all the command printed, the user's files are byte for byte as they were, no work ran
# outside the sandbox. Every attack also prints a line of its own, so that a command that
# did not run at all cannot pass.

RAN = "attack-ran-7f3"


@dataclass(frozen=True)
class Cluster:
    """A Ray cluster on this machine the command must not reach or read."""

    address: str  # the GCS, host:port
    http_ports: tuple[int, ...]  # the dashboard's and the agents' HTTP servers
    folders: tuple[Path, ...]  # its temp folder (sessions, sockets, logs)
    session: str  # the name of its session's folder in there, never to be listed
    token: tuple[Path, str] | None  # its token file and the token, never to be read


@dataclass
class Rig:
    """An executor started on a campaign as the engine starts one."""

    executor: Executor
    root: Path
    repo: Path  # the user's checkout
    state: Path  # its campaign folder, `.autoresearch/suite`
    workspace: Path  # the measurement folder, one commit's files
    commit: str  # that commit
    # (path, value): the value, planted at the path, must never reach the command
    forbidden: list[tuple[Path, str]]
    engine_env: dict[str, str]  # the environment the engine hands the executor
    env_secrets: list[str]  # values of the engine's environment no command may see
    passed: str  # the value of a name `[sandbox] pass_env` passes
    cluster: Cluster | None = None
    runs: int = 0

    def run(self, command: str, timeout: float = 60) -> tuple[Measurement, str]:
        self.runs += 1
        stem = self.state / "logs" / f"{self.runs:04d}-metric-1"
        stem.parent.mkdir(parents=True, exist_ok=True)
        result = self.executor.run(
            CommandSpec(command, timeout), workspace=self.workspace, env=self.engine_env,
            log_stem=stem,
        )  # fmt: skip
        logs = (stem.with_suffix(".out"), stem.with_suffix(".err"))
        text = "".join(p.read_text(errors="replace") for p in logs if p.exists())
        return result, text

    def user_files(self) -> dict[str, bytes]:
        """The checkout's files, `.git` included, but the campaign folder (where the
        executor itself writes), plus the campaign folder's planted files."""
        files = {}
        for path in sorted(self.repo.rglob("*")):
            if path.is_file() and not path.is_relative_to(self.state):
                files[str(path.relative_to(self.repo))] = path.read_bytes()
        for name in ("ledger.jsonl", "secret.txt"):
            files[name] = (self.state / name).read_bytes()
        return files


@contextmanager
def attack_rig(
    make: Callable[[], Executor], root: Path, cluster: Callable[[], Cluster] | None = None
) -> Iterator[Rig]:
    """A rig for `make`'s executor, started; `cluster` says, once it is started, which Ray
    cluster runs on this machine. Secrets are planted in the user's checkout (an ignored
    `.env`), its campaign folder, a `deny_read` file, `~/.ray` and the engine's own
    environment (which a cluster the executor starts inherits)."""
    from autoresearch.isolation.sandbox import bwrap_problem

    problem = bwrap_problem()
    if problem:
        raise RuntimeError(f"the attacks need bubblewrap: {problem}")
    tag = uuid.uuid4().hex
    repo = make_repo(
        root / "repo",
        {"bench.py": "print(1)\n", ".gitignore": ".env\n.autoresearch/\n", "calc.py": "N = 1\n"},
    )
    state = repo / ".autoresearch" / "suite"
    state.mkdir(parents=True)
    forbidden = [
        (repo / ".env", f"dotenv-{tag}"),
        (state / "secret.txt", f"state-{tag}"),
        (root / "denied" / "secret.txt", f"denied-{tag}"),
    ]
    ray_home = Path.home() / ".ray"
    made_ray_home = not ray_home.exists()
    probe = ray_home / f"suite-probe-{tag}"
    forbidden.append((probe, f"dotray-{tag}"))
    secret_env = {"SUITE_ENGINE_SECRET_TOKEN": f"envsecret-{tag}"}
    executor = make()
    try:
        for path, value in forbidden:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(value)
        (state / "ledger.jsonl").write_text('{"iteration": 0}\n')
        commit = git(repo, "rev-parse", "HEAD").strip()
        workspace = _measurement_folder(repo, state / "measure", commit)
        os.environ.update(secret_env)  # the engine's own environment, which a cluster inherits
        setup = ExecutorSetup(
            state_dir=state,
            root=repo,
            isolation="bwrap",
            deny_read=(str(root / "denied"),),
            pass_env=("SUITE_PASSED",),
        )
        executor.start(setup)
        engine_env = {
            "PATH": os.environ.get("PATH", PATH),
            "HOME": str(Path.home()),
            "SUITE_ENGINE_ONLY": f"engineonly-{tag}",
            "SUITE_PASSED": f"passed-{tag}",
            "AUTORESEARCH_ITERATION": "1",
        }
        rig = Rig(
            executor, root, repo, state, workspace, commit,
            forbidden, engine_env, [f"engineonly-{tag}", f"envsecret-{tag}"], f"passed-{tag}",
        )  # fmt: skip
        if cluster is not None:
            rig.cluster = cluster()
            rig.forbidden += [(p, rig.cluster.session) for p in rig.cluster.folders]
            if rig.cluster.token is not None:
                rig.forbidden.append(rig.cluster.token)
        yield rig
    finally:
        executor.close()
        for name in secret_env:
            os.environ.pop(name, None)
        probe.unlink(missing_ok=True)
        if made_ray_home:
            with contextlib.suppress(OSError):
                ray_home.rmdir()


def _measurement_folder(repo: Path, folder: Path, commit: str) -> Path:
    """`commit`'s files in `folder`, written through `folder.git`, a git directory that
    borrows the checkout's objects: the engine's measurement folder."""
    gitdir = folder.with_name(folder.name + ".git")
    folder.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "--bare", str(gitdir)], check=True)
    objects = (repo / ".git" / "objects").resolve()
    (gitdir / "objects" / "info" / "alternates").write_text(f"{objects}\n")
    tree = [f"--git-dir={gitdir}", f"--work-tree={folder}"]
    subprocess.run(["git", *tree, "read-tree", "--reset", "-u", commit], check=True)
    return folder


def _shown(rig: Rig, text: str) -> list[str]:
    return [value for value in [v for _, v in rig.forbidden] + rig.env_secrets if value in text]


def attack_reads_nothing_it_must_not(rig: Rig) -> None:
    """The user's checkout (its ignored `.env`), the campaign folder, a `deny_read` file,
    `~/.ray`, the Ray cluster's folders and the engine's environment: read by path, listed,
    searched for, and read through /proc."""
    targets = {p for p, _ in rig.forbidden}
    folders = {p if p.is_dir() else p.parent for p in targets}
    command = "; ".join(
        [f"cat {shlex.quote(str(p))}" for p in sorted(targets) if p.is_file()]
        + [f"ls -aR {shlex.quote(str(f))} | head -c 100000" for f in sorted(folders)]
        + [f"grep -rsh . {shlex.quote(str(f))} | head -c 100000" for f in sorted(folders)]
        + ["env", "cat /proc/*/environ | tr '\\0' '\\n'", f"echo {RAN}; echo 1"]
    )
    _, text = rig.run(command)
    assert RAN in text, text[-2000:]
    assert _shown(rig, text) == [], f"the command read {_shown(rig, text)}"


def attack_sees_only_the_environment_allowed(rig: Rig) -> None:
    """The environment the command starts with: the allowlist and what `pass_env` names,
    never a name of the engine's own or Ray's."""
    result, text = rig.run(f"env; echo {RAN}; echo 1")
    assert result.ok, (result, text[-2000:])
    assert rig.passed in text, "a name pass_env passes did not reach the command"
    names = {line.split("=", 1)[0] for line in text.splitlines() if "=" in line}
    assert not {n for n in names if n.startswith("RAY_")}, names
    assert "SUITE_ENGINE_ONLY" not in names and "SUITE_ENGINE_SECRET_TOKEN" not in names, names


def attack_writes_nothing_of_the_user(rig: Rig) -> None:
    """Writes by path into the user's checkout, its `.git`, the campaign folder (the ledger)
    and the cluster's folders: none lands."""
    before = rig.user_files()
    repo, state = shlex.quote(str(rig.repo)), shlex.quote(str(rig.state))
    lines = [
        f"echo pwned >> {repo}/calc.py",
        f"echo pwned > {repo}/planted.txt",
        f"echo pwned >> {repo}/.git/config",
        f"echo '{{\"iteration\": 9}}' >> {state}/ledger.jsonl",
        f"echo pwned > {state}/secret.txt",
        f"rm -rf {repo}/.git/refs",
    ]
    if rig.cluster is not None:
        lines += [f"touch {shlex.quote(str(f))}/planted-by-candidate" for f in rig.cluster.folders]
    attempts = "; ".join(f"({line}) 2>/dev/null" for line in lines)
    _, text = rig.run(f"{attempts}; echo {RAN}; echo 1")
    assert RAN in text, text[-2000:]
    assert rig.user_files() == before, "the command wrote the user's checkout"
    assert not (rig.repo / "planted.txt").exists()
    if rig.cluster is not None:
        for folder in rig.cluster.folders:
            assert not (folder / "planted-by-candidate").exists(), folder


# Submits work to a Ray cluster three ways: as a driver through the GCS, and as a job
# through every HTTP server the cluster has (the dashboard's Jobs API, the dashboard
# agent's), with the cluster's token wherever one can be found (the places Ray reads it
# from, and the path the engine keeps it at). The work writes `marker`, a path of the
# user's checkout.
CLUSTER_ATTACK = r"""
import json, os, shlex, sys, urllib.request
address, marker, kept = sys.argv[1], sys.argv[2], sys.argv[3]
ports = [int(p) for p in sys.argv[4:]]
token = os.environ.get("RAY_AUTH_TOKEN")
for place in (os.environ.get("RAY_AUTH_TOKEN_PATH"), "~/.ray/auth_token", kept):
    try:
        token = token or open(os.path.expanduser(place or "")).read().strip()
    except OSError:
        pass
print("token found" if token else "no token found")
headers = {"Content-Type": "application/json"}
if token:
    os.environ["RAY_AUTH_TOKEN"] = token
    os.environ["RAY_AUTH_MODE"] = "token"
    headers["Authorization"] = "Bearer " + token
entry = sys.executable + " -c " + shlex.quote(f"open({marker!r}, 'w').write('job')")
for port in ports:
    for path in ("/api/jobs/", "/api/job_agent/jobs/"):
        body = json.dumps({"entrypoint": entry}).encode()
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}{path}", data=body, method="POST", headers=headers
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                print("http", port, path, response.status)
        except Exception as exc:
            print("http", port, path, "refused:", exc)
import ray
try:
    ray.init(address=address, logging_level=40, log_to_driver=False)

    @ray.remote(num_cpus=0)
    def write():
        with open(marker, "w") as handle:
            handle.write("task")
        return "written"

    print("task", ray.get(write.remote(), timeout=60))
except Exception as exc:
    print("driver refused:", type(exc).__name__, str(exc)[:200])
"""


def attack_reaches_no_cluster(rig: Rig) -> None:
    """With the network on, the command tries to run work on the Ray cluster of this
    machine; the same script run outside the sandbox, as the engine's user, does run it (so
    the attack is real), and inside nothing runs."""
    assert rig.cluster is not None, "this attack needs a cluster"
    script = rig.root / "cluster_attack.py"
    script.write_text(CLUSTER_ATTACK)
    outside = rig.repo / "ran-from-outside.txt"
    ports = [str(p) for p in rig.cluster.http_ports]
    kept = str(rig.cluster.token[0]) if rig.cluster.token else ""
    proc = subprocess.run(
        [sys.executable, str(script), rig.cluster.address, str(outside), kept],
        capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert outside.exists(), f"the attack does not work even outside: {proc.stdout[-2000:]}"
    outside.unlink()
    inside = rig.repo / "ran-from-inside.txt"
    argv = [sys.executable, str(script), rig.cluster.address, str(inside), kept, *ports]
    _, text = rig.run(" ".join(shlex.quote(a) for a in argv) + f"; echo {RAN}; echo 1", 240)
    assert RAN in text and "driver refused" in text, text[-3000:]
    # A job an HTTP server accepted starts in the background, some seconds later.
    deadline = time.monotonic() + (90 if re.search(r"^http .* 20\d$", text, re.M) else 3)
    while time.monotonic() < deadline and not inside.exists():
        time.sleep(0.5)
    assert not inside.exists(), f"work submitted from the sandbox ran: {text[-3000:]}"


ATTACKS: dict[str, Callable[[Rig], None]] = {
    "reads_nothing_it_must_not": attack_reads_nothing_it_must_not,
    "sees_only_the_environment_allowed": attack_sees_only_the_environment_allowed,
    "writes_nothing_of_the_user": attack_writes_nothing_of_the_user,
}
# Attacks on the cluster an executor measures on: run for executors that have one.
CLUSTER_ATTACKS: dict[str, Callable[[Rig], None]] = {
    "reaches_no_cluster": attack_reaches_no_cluster,
}
