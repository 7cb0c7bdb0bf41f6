"""Executors run metric and guard commands; the local one runs them in the worktree."""

from autoresearch.config import Campaign
from autoresearch.executors.base import (
    CommandSpec,
    Executor,
    ExecutorSetup,
    Measurement,
    metric_spec,
)
from autoresearch.executors.local import LocalExecutor


def executor_for(campaign: Campaign) -> Executor:
    """The executor `[executor] kind` names: this machine, or a Ray cluster."""
    if campaign.config.executor.kind == "ray":
        from autoresearch.executors.ray import RayExecutor

        return RayExecutor(campaign.config.executor, campaign.display_path())
    return LocalExecutor()


__all__ = [
    "CommandSpec",
    "Executor",
    "ExecutorSetup",
    "LocalExecutor",
    "Measurement",
    "executor_for",
    "metric_spec",
]
