"""The layering of docs/architecture.md, held against the imports themselves: every import
of the package counts (at the top, for types only, or inside a function)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import autoresearch
from autoresearch.attempt import TRAITS, Status

SRC = Path(autoresearch.__file__).resolve().parent
CAPABILITIES = {
    "validate", "preflight", "exhausted", "runs_commands", "confined", "parallel_safe",
    "reopen_workspace", "edited_on_candidate", "edits_in_place", "cancel",
}  # fmt: skip


def _modules() -> dict[str, ast.Module]:
    found = {}
    for path in sorted(SRC.rglob("*.py")):
        parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = ast.parse(path.read_text())
    return found


MODULES = _modules()


def _imports(name: str) -> set[str]:
    """The package's modules `name` imports (a package's own submodules left out: its
    `__init__` naming them is not a dependency of the design)."""
    out: set[str] = set()
    for node in ast.walk(MODULES[name]):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                out.add(full if full in MODULES else node.module)
    return {m for m in out if m in MODULES and m != name and not m.startswith(name + ".")}


def _floor(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and _is_package(module)) else "root"


def _is_package(module: str) -> bool:
    return any(m.startswith(module + ".") for m in MODULES)


def test_no_import_cycles() -> None:
    graph = {name: _imports(name) for name in MODULES}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = [stack.pop()]
            while group[-1] != v:
                group.append(stack.pop())
            if len(group) > 1:
                cycles.append(sorted(group))

    for v in graph:
        if v not in index:
            strong(v)
    assert cycles == []


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
    probes = []
    for name, tree in MODULES.items():
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "hasattr")
                and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant)
                and node.args[1].value in CAPABILITIES
            ):
                probes.append(f"{name}: {node.func.id}(..., {node.args[1].value!r})")
    assert probes == []


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
