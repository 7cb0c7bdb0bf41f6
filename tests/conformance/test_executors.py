"""Every executor through the package's conformance suite: the checks every kind passes,
and the attacks on the sandbox around a measurement, for a local run and for a run on a
Ray worker of a cluster the engine starts (`address = "local"`)."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from autoresearch.executors import Executor, LocalExecutor
from autoresearch.isolation.sandbox import bwrap_problem
from autoresearch.testing import executor_suite as suite


@pytest.mark.parametrize("check", sorted(suite.CHECKS))
@pytest.mark.parametrize("name", sorted(suite.EXECUTORS))
def test_executor(name: str, check: str, tmp_path: Path) -> None:
    suite.CHECKS[check](suite.EXECUTORS[name], tmp_path)


HAS_RAY = importlib.util.find_spec("ray") is not None


def _ray_local() -> Executor:
    from autoresearch.config import ExecutorConfig
    from autoresearch.executors.ray import RayExecutor

    return RayExecutor(ExecutorConfig(kind="ray", address="local"))


def _kinds() -> list[object]:
    ray = [pytest.mark.skipif(not HAS_RAY, reason="ray is not installed"),
           pytest.mark.xdist_group("ray")]  # fmt: skip
    return [pytest.param("local", id="local"), pytest.param("ray", id="ray-local", marks=ray)]


@pytest.fixture(scope="module", params=_kinds())
def rig(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[suite.Rig]:
    """One started executor per kind for every attack (a cluster starts once)."""
    if problem := bwrap_problem():
        pytest.skip(problem)
    root = tmp_path_factory.mktemp(f"attacks-{request.param}")
    make: Callable[[], Executor] = LocalExecutor
    cluster = None
    if request.param == "ray":
        from autoresearch.testing.raycluster import connected_cluster

        make, cluster = _ray_local, connected_cluster
    with suite.attack_rig(make, root, cluster) as made:
        yield made


@pytest.mark.parametrize("attack", sorted(suite.ATTACKS))
def test_attack(rig: suite.Rig, attack: str) -> None:
    suite.ATTACKS[attack](rig)


@pytest.mark.parametrize("attack", sorted(suite.CLUSTER_ATTACKS))
def test_cluster_attack(rig: suite.Rig, attack: str) -> None:
    if rig.cluster is None:
        pytest.skip("no cluster: the executor measures on this machine")
    suite.CLUSTER_ATTACKS[attack](rig)
