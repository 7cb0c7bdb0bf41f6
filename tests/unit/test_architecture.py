"""The layering of docs/architecture.md, held against the imports themselves: every import
of the package counts (at the top, for types only, or inside a function)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import autoresearch
from autoresearch.attempt import TRAITS, Status
from autoresearch.testing.structure import Package

PACKAGE = Package.read(Path(autoresearch.__file__).resolve().parent)
MODULES = PACKAGE.modules
_imports = PACKAGE.imports
_floor = PACKAGE.floor


def test_no_import_cycles() -> None:
    assert PACKAGE.cycles() == []


def test_no_private_member_is_used_across_modules() -> None:
    assert PACKAGE.private_crossings() == []


ABOVE: dict[str, set[str]] = {
    # a floor: the floors it must never import
    "stats": {"root", "config", "isolation", "executors", "proposers", "store", "measure",
              "learning", "checks", "engine", "views", "cli", "agent", "testing"},
    "isolation": {"executors", "proposers", "store", "measure", "learning", "checks",
                  "engine", "views", "cli", "agent"},
    "executors": {"proposers", "store", "learning", "checks", "engine", "views", "cli",
                  "agent"},
    "proposers": {"store", "measure", "learning", "checks", "engine", "views", "cli",
                  "agent"},
    "store": {"learning", "checks", "engine", "views", "cli", "agent"},
    "measure": {"learning", "checks", "engine", "views", "cli", "agent"},
    "learning": {"checks", "engine", "views", "cli", "agent"},
    "engine": {"views", "cli", "agent"},
    "views": {"cli", "agent"},
    "cli": {"agent"} - {"agent"},  # cli registers the agent's commands: it is the top
}  # fmt: skip


@pytest.mark.parametrize("floor", sorted(ABOVE))
def test_a_floor_imports_nothing_above_it(floor: str) -> None:
    stats_leaves = {"root"} if floor == "stats" else set()
    wrong = []
    for name in (m for m in MODULES if _floor(m) == floor):
        for imported in _imports(name):
            target = _floor(imported)
            if target in ABOVE[floor] and not (target == "root" and imported == "autoresearch"):
                wrong.append(f"{name} -> {imported}")
            if stats_leaves and target != "stats" and imported != "autoresearch":
                wrong.append(f"{name} -> {imported}")
    assert sorted(set(wrong)) == []


def test_the_engine_runs_no_command_itself() -> None:
    """The engine reaches measurement through the evaluator and the executor; of `process`
    it takes only the record each slot's commands write their process group to."""
    taken = set()
    for name in (m for m in MODULES if _floor(m) == "engine"):
        for node in ast.walk(MODULES[name]):
            if isinstance(node, ast.ImportFrom) and node.module == "autoresearch.isolation.process":
                taken.update(alias.name for alias in node.names)
            if isinstance(node, ast.Import):
                assert "autoresearch.isolation.process" not in {a.name for a in node.names}
    assert taken <= {"ChildRecord"}


def test_capabilities_are_declared_never_probed() -> None:
    assert PACKAGE.probes() == []


def test_every_status_has_one_row_of_traits() -> None:
    assert set(TRAITS) == set(Status)
    # What the table says is what the derived properties say.
    for status in Status:
        traits = TRAITS[status]
        assert status.halts is traits.halts
        assert status.measured is traits.measured
        assert status.is_failure is traits.failure
        assert status.fast_roll_back is traits.fast_roll_back
        assert status.stores_content is not traits.rejects_content
