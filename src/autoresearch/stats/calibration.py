"""A disk cache of calibrated sequential boundaries (pure values of their parameters).

A boundary is a deterministic function of its key (fixed seed, fixed paths) and of the
procedure it simulates, so the cache keeps one file per version of the judge (`judge`,
`decide.JUDGE_VERSION`, bumped whenever a change can give another verdict, as a changed
boundary does): a cached value is exactly the one a fresh calibration by today's judge would
give, never one an earlier build left behind; the cache only saves the seconds. It lives in
$AUTORESEARCH_CACHE_DIR, else $XDG_CACHE_HOME/autoresearch, else ~/.cache/autoresearch; when
it cannot be read or written the boundary is simply computed.

The package ships the boundaries its own tests and benches ask for, computed by the judge of
today's version (`shipped/judge-<J>.json`): each takes seconds of simulation, and a first
run of the test suite on a new machine would otherwise spend most of an hour on them. A key
missing from the user's cache is taken from there before it is computed, and written to the
user's cache as a computed one is. `python -m autoresearch.stats.calibration ship` writes
the user's cache of the newest judge it holds into the package (after the suite and the
benches have run with an empty cache, so that it holds what they ask for);
`tests/unit/test_shipped_boundaries.py` computes a sample of the shipped values afresh.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Callable
from functools import lru_cache
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


def shipped_file(judge: int) -> Path:
    """The boundaries of the judge of version `judge` that the package ships."""
    return Path(__file__).with_name("shipped") / f"judge-{judge}.json"


@lru_cache(maxsize=4)
def shipped(judge: int) -> dict[str, float]:
    """The shipped boundaries of the judge of version `judge` (none for another version)."""
    return _read(shipped_file(judge))


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
    value = shipped(judge).get(key)
    if value is None:
        value = compute()
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        merged = {**_read(path), key: value}
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".calibration-")
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(merged, out)
        os.replace(tmp, path)
    return value


def ship(judge: int) -> int:
    """Write the user's cache of the judge of version `judge` into the package's shipped
    boundaries (merged with those already shipped); the number of boundaries shipped."""
    return write_shipped(judge, {**shipped(judge), **_read(cache_file(judge))})


def write_shipped(judge: int, boundaries: dict[str, float]) -> int:
    """Make `boundaries` the shipped boundaries of the judge of version `judge`; how many."""
    target = shipped_file(judge)
    target.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(dict(sorted(boundaries.items())), indent=0) + "\n"
    target.write_text(text, encoding="utf-8")
    shipped.cache_clear()
    return len(boundaries)


def newest_cached_judge() -> int | None:
    """The newest judge version the user's cache holds boundaries of."""
    prefix = f"calibration-v{VERSION}-judge"
    versions = [
        int(path.stem.removeprefix(prefix))
        for path in cache_dir().glob(f"{prefix}*.json")
        if path.stem.removeprefix(prefix).isdigit()
    ]
    return max(versions, default=None)


if __name__ == "__main__":
    import sys

    judge = newest_cached_judge()
    if sys.argv[1:] != ["ship"] or judge is None:
        sys.exit(
            "usage: python -m autoresearch.stats.calibration ship (after the suite and the "
            f"benches have filled {cache_dir()})"
        )
    try:
        count = ship(judge)
    except OSError as error:
        sys.exit(f"cannot write {shipped_file(judge)}: {error.strerror}")
    print(f"{count} boundaries of judge {judge} in {shipped_file(judge)}")
