"""Every executor through the package's conformance suite."""

from __future__ import annotations

from pathlib import Path

import pytest

from autoresearch.testing import executor_suite as suite


@pytest.mark.parametrize("check", sorted(suite.CHECKS))
@pytest.mark.parametrize("name", sorted(suite.EXECUTORS))
def test_executor(name: str, check: str, tmp_path: Path) -> None:
    suite.CHECKS[check](suite.EXECUTORS[name], tmp_path)
