"""Executors run metric and guard commands; the local one runs them in the worktree."""

from autoresearch.executors.base import (
    CommandSpec,
    Executor,
    ExecutorSetup,
    Measurement,
    metric_spec,
)
from autoresearch.executors.local import LocalExecutor

__all__ = [
    "CommandSpec",
    "Executor",
    "ExecutorSetup",
    "LocalExecutor",
    "Measurement",
    "metric_spec",
]
