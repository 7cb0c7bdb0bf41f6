"""Former home of process running, number reading and hashing; re-exports them.

New code imports `autoresearch.process`, `autoresearch.readout` or `autoresearch.integrity`.
This module goes once nothing imports it.
"""

from __future__ import annotations

from pathlib import Path

from autoresearch.executors.local import _engine_record
from autoresearch.integrity import sha256_file, sha256_text
from autoresearch.process import (
    KILL_GRACE_SECONDS,
    LOG_CAP_BYTES,
    CommandResult,
    Limits,
    network_isolation_problem,
    run_command,
)
from autoresearch.process import ChildRecord as _Record
from autoresearch.readout import (
    METRIC_LINE,
    NUMBER_RE,
    MetricParseError,
    extract_number,
    file_metric,
    metric_line,
    read_metric,
    value_at,
)

__all__ = [
    "KILL_GRACE_SECONDS",
    "LOG_CAP_BYTES",
    "METRIC_LINE",
    "NUMBER_RE",
    "ChildRecord",
    "CommandResult",
    "Limits",
    "MetricParseError",
    "extract_number",
    "file_metric",
    "metric_line",
    "network_isolation_problem",
    "read_metric",
    "run_command",
    "sha256_file",
    "sha256_text",
    "value_at",
]


class ChildRecord:
    """The class-level API the engine used before executors took a record of their own.

    `use(path)` names the record that a `LocalExecutor` built without one writes to;
    `LocalExecutor.start` replaces both calls.
    """

    @classmethod
    def use(cls, path: Path | None) -> None:
        _engine_record.current = None if path is None else _Record(path)

    @classmethod
    def kill_leftover(cls) -> int | None:
        record = _engine_record.current
        return record.kill_leftover() if record is not None else None
