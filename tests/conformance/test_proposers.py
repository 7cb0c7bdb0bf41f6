"""Every proposer kind through the package's conformance suite."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from autoresearch.proposers import REGISTRY
from autoresearch.testing import proposer_suite as suite


@pytest.fixture
def rigs(tmp_path: Path) -> Iterator[Callable[[str], suite.Rig]]:
    made: list[suite.Rig] = []

    def make(kind: str) -> suite.Rig:
        made.append(suite.make_rig(kind, tmp_path / kind))
        return made[-1]

    yield make
    for rig in made:
        rig.close()


def test_every_registered_kind_is_in_the_suite() -> None:
    assert set(suite.KINDS) == set(REGISTRY)


@pytest.mark.parametrize("check", sorted(suite.CHECKS))
@pytest.mark.parametrize("kind", sorted(suite.KINDS))
def test_proposer_kind(kind: str, check: str, rigs: Callable[[str], suite.Rig]) -> None:
    suite.CHECKS[check](rigs(kind))


@pytest.mark.parametrize("kind,mode", suite.failure_cases())
def test_a_broken_tool_is_a_failed_proposal(
    kind: str, mode: str, rigs: Callable[[str], suite.Rig]
) -> None:
    suite.check_a_broken_tool_is_a_failed_proposal(rigs(kind), mode)
