"""A disk cache of calibrated sequential boundaries (pure values of their parameters).

A boundary is a deterministic function of its key (fixed seed, fixed paths) and of the
procedure it simulates, so the cache keeps one file per version of the judge (`judge`,
`decide.JUDGE_VERSION`, bumped whenever a change can give another verdict, as a changed
boundary does): a cached value is exactly the one a fresh calibration by today's judge would
give, never one an earlier build left behind; the cache only saves the seconds. It lives in
$AUTORESEARCH_CACHE_DIR, else $XDG_CACHE_HOME/autoresearch, else ~/.cache/autoresearch; when
it cannot be read or written the boundary is simply computed.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

VERSION = 3  # the file's layout; the procedure's version is the judge's


def cache_dir() -> Path:
    """Where the engine keeps what it can always compute again."""
    base = os.environ.get("AUTORESEARCH_CACHE_DIR")
    if not base:
        xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        base = str(Path(xdg) / "autoresearch")
    return Path(base)


def cache_file(judge: int) -> Path:
    """The boundaries the judge of version `judge` calibrated."""
    return cache_dir() / f"calibration-v{VERSION}-judge{judge}.json"


def _read(path: Path) -> dict[str, float]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: float(v) for k, v in data.items() if isinstance(v, int | float)}


def cached(key: str, compute: Callable[[], float], judge: int) -> float:
    """The boundary of `key` under the judge of version `judge`: read, else computed and
    kept."""
    path = cache_file(judge)
    known = _read(path)
    if key in known:
        return known[key]
    value = compute()
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        merged = {**_read(path), key: value}
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".calibration-")
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(merged, out)
        os.replace(tmp, path)
    return value
