"""A thin, explicit wrapper around the git command line."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from collections.abc import Sequence
from pathlib import Path

from autoresearch.errors import GitError

_SCRUBBED = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_PREFIX")
IDENTITY = {
    "GIT_AUTHOR_NAME": "autoresearch",
    "GIT_AUTHOR_EMAIL": "autoresearch@localhost",
    "GIT_COMMITTER_NAME": "autoresearch",
    "GIT_COMMITTER_EMAIL": "autoresearch@localhost",
}


def git_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED}
    env["GIT_TERMINAL_PROMPT"] = "0"
    env["GIT_OPTIONAL_LOCKS"] = "0"
    env["GIT_LITERAL_PATHSPECS"] = "1"
    env["LC_ALL"] = "C"
    return env


def isolated_env() -> dict[str, str]:
    """No system or user configuration: only what the engine passes applies (no filters,
    hooks, fsmonitor or helpers configured anywhere else)."""
    return {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}


def require_git() -> str:
    exe = shutil.which("git")
    if exe is None:
        raise GitError("git is not installed or not on PATH; install git and run again.")
    return exe


class Git:
    """Runs git in one directory with fixed configuration flags."""

    def __init__(
        self,
        cwd: Path,
        config: Sequence[str] = (),
        *,
        args: Sequence[str] = (),
        env: dict[str, str] | None = None,
    ) -> None:
        self.cwd = cwd
        self.exe = require_git()
        self.prefix = [self.exe]
        for item in config:
            self.prefix += ["-c", item]
        self.prefix += list(args)
        self.env = {**git_env(), **(env or {})}

    def run(
        self,
        *args: str,
        input: bytes | None = None,
        check: bool = True,
        extra_env: dict[str, str] | None = None,
    ) -> str:
        return self.run_bytes(*args, input=input, check=check, extra_env=extra_env).decode(
            "utf-8", errors="surrogateescape"
        )

    def run_bytes(
        self,
        *args: str,
        input: bytes | None = None,
        check: bool = True,
        extra_env: dict[str, str] | None = None,
    ) -> bytes:
        env = self.env if extra_env is None else {**self.env, **extra_env}
        proc = subprocess.run(
            [*self.prefix, *args],
            cwd=self.cwd,
            env=env,
            input=input,
            stdin=None if input is not None else subprocess.DEVNULL,
            capture_output=True,
        )
        if check and proc.returncode != 0:
            message = proc.stderr.decode(errors="replace").strip().splitlines()
            detail = message[-1] if message else f"exit code {proc.returncode}"
            raise GitError(f"git {args[0]} failed in {self.cwd}: {detail}")
        return proc.stdout

    def popen(
        self, *args: str, extra_env: dict[str, str] | None = None, stderr: bool = False
    ) -> subprocess.Popen[bytes]:
        """git started with pipes for stdin and stdout (stderr dropped, or a pipe too): for
        a conversation such as `cat-file --batch`, read a piece at a time."""
        return subprocess.Popen(
            [*self.prefix, *args],
            cwd=self.cwd,
            env=self.env if extra_env is None else {**self.env, **extra_env},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE if stderr else subprocess.DEVNULL,
        )

    def ok(
        self, *args: str, input: bytes | None = None, extra_env: dict[str, str] | None = None
    ) -> bool:
        return not self.failure(*args, input=input, extra_env=extra_env)

    def failure(
        self, *args: str, input: bytes | None = None, extra_env: dict[str, str] | None = None
    ) -> str:
        """Run git; "" when it succeeded, else its last line of error (or its exit code)."""
        proc = subprocess.run(
            [*self.prefix, *args],
            cwd=self.cwd,
            env=self.env if extra_env is None else {**self.env, **extra_env},
            input=input,
            stdin=None if input is not None else subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        if proc.returncode == 0:
            return ""
        lines = proc.stderr.decode(errors="replace").strip().splitlines()
        return lines[-1].strip() if lines else f"exit code {proc.returncode}"

    def rev(self, ref: str) -> str | None:
        out = self.run("rev-parse", "-q", "--verify", f"{ref}^{{commit}}", check=False).strip()
        return out or None


class RefUpdates:
    """One `git update-ref --stdin` kept running in a repository, each update a transaction
    of its own (`start`, `update`, `commit`), as one `git update-ref` process would make it:
    git takes the same locks and checks the same expected value, without a process start
    per ref. A refused update raises GitError with git's own words, and the next one
    starts git afresh."""

    def __init__(self, git: Git) -> None:
        self.git = git
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()  # one transaction at a time on the pipe

    def update(self, ref: str, new: str, old: str | None = None, *, deref: bool = True) -> None:
        """Point `ref` at `new`; only if it points at `old` now, when given."""
        lines = ["start", *([] if deref else ["option no-deref"])]
        lines += [f"update {ref} {new}" + ("" if old is None else f" {old}"), "commit", ""]
        with self._lock:
            if self._proc is None:
                self._proc = self.git.popen("update-ref", "--stdin", stderr=True)
            proc = self._proc
            assert proc.stdin is not None and proc.stdout is not None
            try:
                proc.stdin.write("\n".join(lines).encode())
                proc.stdin.flush()
                answers = [proc.stdout.readline(), proc.stdout.readline()]
            except OSError:
                answers = []
            if answers == [b"start: ok\n", b"commit: ok\n"]:
                return
            said = self._stop()
            if answers[:1] == [b"start: ok\n"]:
                raise GitError(f"git update-ref failed in {self.git.cwd}: {said}")
        # git stopped before the transaction began (a git without transactions on stdin,
        # or one that could not start): the update as one command of its own.
        args = [] if deref else ["--no-deref"]
        self.git.run("update-ref", *args, ref, new, *([] if old is None else [old]))

    def _stop(self) -> str:
        """Stop git; the last line it wrote to stderr."""
        proc, self._proc = self._proc, None
        if proc is None:
            return ""
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        err = proc.stderr.read().decode(errors="replace") if proc.stderr is not None else ""
        if proc.stderr is not None:
            proc.stderr.close()
        lines = err.strip().splitlines()
        return lines[-1].strip() if lines else f"exit code {proc.returncode}"

    def close(self) -> None:
        with self._lock:
            self._stop()


def repo_root(start: Path) -> Path:
    """The top of the git work tree that contains `start`."""
    require_git()
    proc = subprocess.run(
        ["git", "rev-parse", "--show-toplevel"],
        cwd=start,
        env=git_env(),
        capture_output=True,
        stdin=subprocess.DEVNULL,
    )
    if proc.returncode != 0:
        raise GitError(
            f"{start} is not inside a git repository; run `git init` and commit your code first."
        )
    return Path(proc.stdout.decode().strip()).resolve()


def workspace_files(path: Path) -> list[str]:
    """Tracked and untracked (not ignored) files of a work tree, sorted."""
    raw = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=path,
        env=git_env(),
        capture_output=True,
        check=False,
    ).stdout
    return sorted({p.decode("utf-8", "surrogateescape") for p in raw.split(b"\0") if p})
