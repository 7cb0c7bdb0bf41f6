"""`autoresearch demo`: copy a bundled example into a fresh git repository and run it there."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from autoresearch.errors import ConfigError
from autoresearch.gitcmd import IDENTITY, git_env, require_git

# Examples that run offline with no API key; the others need a coding agent.
OFFLINE = ("classifier", "speedup", "train")
DEFAULT = "classifier"


def examples_dir() -> Path:
    """Bundled examples: inside the installed package, or beside `src/` in a checkout."""
    package = Path(__file__).resolve().parents[1]  # src/autoresearch, or the installed one
    for candidate in (package / "_examples", package.parents[1] / "examples"):
        if candidate.is_dir():
            return candidate
    raise ConfigError("the bundled examples are missing from this installation; reinstall it.")


def available() -> list[str]:
    base = examples_dir()
    return sorted(p.name for p in base.iterdir() if (p / "autoresearch.toml").is_file())


def use_this_python() -> None:
    """Make `python` in the examples' commands the interpreter running autoresearch.

    The examples need this installation's packages (numpy, optuna); a `python`
    found first on PATH may be another interpreter without them.
    """
    bindir = str(Path(sys.executable).parent)
    os.environ["PATH"] = bindir + os.pathsep + os.environ.get("PATH", "")


def prepare(example: str, target: Path | None) -> Path:
    """A new git repository holding a copy of `example`, committed once."""
    names = available()
    if example not in names:
        raise ConfigError(f"no example named {example!r}; choose one of: {', '.join(names)}.")
    if example not in OFFLINE:
        raise ConfigError(
            f"the {example!r} example needs a coding agent and its credentials; see "
            f"{examples_dir() / example / 'README.md'} to run it by hand."
        )
    require_git()
    if target is None:
        target = Path(tempfile.mkdtemp(prefix=f"autoresearch-{example}-"))
    elif target.exists() and any(target.iterdir()):
        raise ConfigError(f"{target} is not empty; pass --dir with a new or empty folder.")
    target = target.resolve()
    shutil.copytree(
        examples_dir() / example,
        target,
        dirs_exist_ok=True,
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".autoresearch"),
    )
    (target / ".gitignore").write_text("__pycache__/\n.autoresearch/\n", encoding="utf-8")
    env = {**git_env(), **IDENTITY}
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", f"{example} example"]):
        subprocess.run(["git", *args], cwd=target, env=env, check=True, capture_output=True)
    return target
