"""What the machine was doing while a metric ran, and the lock that keeps campaigns apart.

Every metric run leaves one line in `<state>/machine.jsonl`: the attempt, the side (baseline,
candidate, incumbent, confirm), the value, the one-minute load average, and the CPU
frequency where Linux exposes it. Contention then shows up as data beside the numbers it
disturbed, rather than as a mystery.

`[metric] exclusive = true` takes a machine-wide lock around each metric run (a file in the
system's temporary folder, or in $AUTORESEARCH_LOCK_DIR), so that two campaigns on one
machine never time each other: they take turns run by run.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from filelock import FileLock

from autoresearch.isolation.owned import append_own

LOCK_NAME = "autoresearch-measure.lock"
CPU_FREQ = Path("/proc/cpuinfo")


def load_average() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def cpu_mhz() -> float | None:
    """The mean current frequency of the CPUs, where /proc/cpuinfo gives it."""
    try:
        text = CPU_FREQ.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    values = []
    for line in text.splitlines():
        if line.lower().startswith("cpu mhz"):
            try:
                values.append(float(line.split(":", 1)[1]))
            except (IndexError, ValueError):
                continue
    return round(sum(values) / len(values), 1) if values else None


def snapshot() -> dict[str, Any]:
    """The machine's state now, as recorded beside a sample."""
    return {"loadavg1": load_average(), "cpu_mhz": cpu_mhz()}


def record(state_dir: Path, **fields: Any) -> None:
    """Append one sample's line to machine.jsonl; a failure to write never stops a run."""
    line = {"utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **fields, **snapshot()}
    with contextlib.suppress(OSError), append_own(state_dir / "machine.jsonl") as out:
        out.write((json.dumps(line) + "\n").encode())


def read(state_dir: Path) -> list[dict[str, Any]]:
    try:
        lines = (state_dir / "machine.jsonl").read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        with contextlib.suppress(json.JSONDecodeError):
            data = json.loads(line)
            if isinstance(data, dict):
                out.append(data)
    return out


def lock_path() -> Path:
    base = os.environ.get("AUTORESEARCH_LOCK_DIR") or tempfile.gettempdir()
    return Path(base) / LOCK_NAME


@contextlib.contextmanager
def exclusive(enabled: bool) -> Iterator[None]:
    """Hold the machine-wide measurement lock for the duration, when `enabled`."""
    if not enabled:
        yield
        return
    path = lock_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path)):
        yield
