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

from autoresearch.config import CONFIG_FILE, Campaign
from autoresearch.engine.lifecycle import Interrupted
from autoresearch.errors import AutoresearchError
from autoresearch.store.locate import Place, find_campaign, find_state_dir, place_of
from autoresearch.store.place import current_folder
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
        state_dir = state_dir_of(kwargs.get("config_path"), kwargs.get("campaign_name"))
    except Exception:  # the crash report must not fail in turn
        return None
    return state_dir if state_dir.is_dir() else None


def here() -> Place:
    """Where the command runs: the user's checkout even from a campaign's workspace."""
    return place_of(current_folder())


def checkout_root() -> Path:
    return here().root


def campaign_of(config_path: Path | None, name: str | None = None) -> Campaign:
    """The campaign a command works on: `--config`, `--name`, the campaign whose folder
    the command runs in, or the default config."""
    place = here()
    return find_campaign(place.root, place.config(config_path), name or place.campaign)


def state_dir_of(config_path: Path | None, name: str | None = None) -> Path:
    """The folder of the campaign a reading command shows (see `campaign_of`)."""
    place = here()
    return find_state_dir(place.root, place.config(config_path), name or place.campaign)


def config_of(config_path: Path | None, name: str | None = None) -> Path | None:
    """The config file of the campaign `--config`/`--name` (or the folder) designate, for
    code that takes a path: None when there is none to pass (the default applies)."""
    place = here()
    explicit = place.config(config_path)
    wanted = name or place.campaign
    if wanted is None:
        return explicit
    try:
        return find_campaign(place.root, explicit, wanted).config_path
    except AutoresearchError:
        if name is not None:
            raise
        return explicit  # inside a campaign folder with no config of it: as before


name_option = click.option(
    "--name",
    "campaign_name",
    default=None,
    metavar="NAME",
    help="The campaign (its `name`), when the repository has several; default: the one "
    "whose workspace you are in, else the config's.",
)


config_option = click.option(
    "--config",
    "config_path",
    type=click.Path(path_type=Path),
    default=None,
    help=f"Config file (default: {CONFIG_FILE} or [tool.autoresearch] in pyproject.toml).",
)
json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON.")


def campaign_options(func: F) -> F:
    """`--config` and `--name`: which campaign a command works on."""
    return config_option(name_option(func))


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
