"""What every command shares: the consoles, the error handler that turns a known error
into one sentence and a non-zero exit, and the common options."""

from __future__ import annotations

import errno
import functools
import sys
import tempfile
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click
from rich.console import Console

from autoresearch.config import CONFIG_FILE
from autoresearch.engine.lifecycle import Interrupted
from autoresearch.errors import AutoresearchError
from autoresearch.gitcmd import repo_root
from autoresearch.store.locate import find_state_dir
from autoresearch.views.render import safe

F = TypeVar("F", bound=Callable[..., Any])

console = Console(highlight=False, soft_wrap=True)
err_console = Console(stderr=True, highlight=False, soft_wrap=True)


def handle_errors(func: F) -> F:
    """One sentence and an exit code for everything a user can cause; never a traceback."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except AutoresearchError as exc:
            err_console.print(f"[bold red]error:[/] {safe(str(exc))}")
            sys.exit(exc.exit_code)
        except (KeyboardInterrupt, Interrupted):
            err_console.print("interrupted")
            sys.exit(130)
        except click.exceptions.Exit:
            raise
        except click.ClickException:
            raise
        except OSError as exc:
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                _internal(exc, kwargs)
            where = f" writing {exc.filename}" if exc.filename else ""
            err_console.print(
                f"[bold red]error:[/] the disk is full{safe(where)} ({safe(exc.strerror or '')}); "
                "free some space and run again (a campaign resumes where it stopped)."
            )
            sys.exit(1)
        except Exception as exc:  # a bug of ours: keep the details, show one line
            _internal(exc, kwargs)

    return wrapper  # type: ignore[return-value]


def _internal(exc: Exception, kwargs: dict[str, Any]) -> NoReturn:
    """A bug of ours: the details kept in a file (when it can be written), one line shown."""
    try:
        fd, path = tempfile.mkstemp(
            prefix="autoresearch-crash-", suffix=".txt", dir=_crash_dir(kwargs)
        )
        with open(fd, "w") as handle:
            traceback.print_exc(file=handle)
        details = f"details in {path}; "
    except OSError:
        details = ""
    err_console.print(
        f"[bold red]internal error:[/] {type(exc).__name__}: {safe(str(exc))} "
        f"({safe(details)}please report it)"
    )
    sys.exit(70)


def _crash_dir(kwargs: dict[str, Any]) -> Path | None:
    """The campaign's folder when there is one (the details stay with the campaign),
    else the system's temporary folder."""
    try:
        state_dir = find_state_dir(checkout_root(), kwargs.get("config_path"))
    except Exception:  # the crash report must not fail in turn
        return None
    return state_dir if state_dir.is_dir() else None


def checkout_root() -> Path:
    return repo_root(Path.cwd())


config_option = click.option(
    "--config",
    "config_path",
    type=click.Path(path_type=Path),
    default=None,
    help=f"Config file (default: {CONFIG_FILE} or [tool.autoresearch] in pyproject.toml).",
)
json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON.")


def output_options(func: F) -> F:
    """The options of every command that runs a campaign."""
    func = click.option(
        "--plain", is_flag=True, help="One line per attempt instead of the live view."
    )(func)
    func = click.option("--quiet", is_flag=True, help="Print only the final summary.")(func)
    return click.option(
        "--max-iterations",
        type=click.IntRange(min=0),
        default=None,
        help="Total attempts for the campaign (overrides [stop] max_iterations).",
    )(func)
