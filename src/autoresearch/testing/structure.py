"""The package's structure, read from its source: the modules, the imports between them,
capability probes, private members used across modules, import cycles. What
`bench/structure.py` prints and `tests/unit/test_architecture.py` holds the floors to."""

from __future__ import annotations

import ast
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

# The proposer and executor members a caller might probe for instead of reading the
# declaration (proposers/base.py, executors/base.py).
CAPABILITIES = frozenset(
    {
        "validate", "preflight", "exhausted", "runs_commands", "confined", "parallel_safe",
        "reopen_workspace", "edited_on_candidate", "edits_in_place", "cancel",
    }
)  # fmt: skip


@dataclass
class Package:
    src: Path
    modules: dict[str, ast.Module] = field(default_factory=dict)

    @classmethod
    def read(cls, src: Path) -> Package:
        found = cls(src)
        for path in sorted(src.rglob("*.py")):
            parts = list(path.relative_to(src.parent).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found.modules[".".join(parts)] = ast.parse(path.read_text())
        return found

    def is_package(self, module: str) -> bool:
        return any(m.startswith(module + ".") for m in self.modules)

    def floor(self, module: str) -> str:
        """The folder a module lives in ("root" for the package's own root)."""
        parts = module.split(".")
        deep = len(parts) > 2 or (len(parts) == 2 and self.is_package(module))
        return parts[1] if deep else "root"

    def imports(self, name: str) -> set[str]:
        """The package's modules `name` imports anywhere (at the top, for types only, or
        in a function: a lazy import is a dependency all the same), but its own
        submodules: a package's `__init__` naming them is not a dependency of the design."""
        out: set[str] = set()
        for node in ast.walk(self.modules[name]):
            if isinstance(node, ast.Import):
                out.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    out.add(full if full in self.modules else node.module)
        return {m for m in out if m in self.modules and m != name and not m.startswith(name + ".")}

    def cycles(self) -> list[list[str]]:
        """Groups of modules that import each other, however far round (Tarjan)."""
        graph = {name: self.imports(name) for name in self.modules}
        index: dict[str, int] = {}
        low: dict[str, int] = {}
        stack: list[str] = []
        found: list[list[str]] = []

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
                    found.append(sorted(group))

        for v in graph:
            if v not in index:
                strong(v)
        return found

    def probes(self) -> list[str]:
        """Every `getattr`/`hasattr` of a capability's name."""
        found = []
        for name, tree in self.modules.items():
            for node in ast.walk(tree):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Name)
                    and node.func.id in ("getattr", "hasattr")
                    and len(node.args) >= 2
                    and isinstance(node.args[1], ast.Constant)
                    and node.args[1].value in CAPABILITIES
                ):
                    found.append(f"{name}: {node.func.id}(..., {node.args[1].value!r})")
        return found

    def private_crossings(self) -> list[str]:
        """Private members (`_name`) of one module used by another."""
        owners: dict[str, set[str]] = defaultdict(set)
        for name, tree in self.modules.items():
            for node in ast.walk(tree):
                member = None
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    member = node.name
                elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                    member = node.attr
                if member and member.startswith("_") and not member.startswith("__"):
                    owners[member].add(name)
        crossing = []
        for name, tree in self.modules.items():
            for node in ast.walk(tree):
                if isinstance(node, ast.Attribute) and node.attr in owners:
                    self_call = isinstance(node.value, ast.Name) and node.value.id in (
                        "self",
                        "cls",
                    )
                    if not self_call and name not in owners[node.attr]:
                        crossing.append(f"{name}: .{node.attr}")
                if isinstance(node, ast.ImportFrom) and node.module in self.modules:
                    for alias in node.names:
                        if alias.name.startswith("_") and not alias.name.startswith("__"):
                            crossing.append(f"{name}: {node.module}.{alias.name}")
        return crossing

    def functions(self) -> list[tuple[int, str]]:
        """(lines, module.function) of every function, longest first."""
        found = []
        for name, tree in self.modules.items():
            for node in ast.walk(tree):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    span = (node.end_lineno or node.lineno) - node.lineno + 1
                    found.append((span, f"{name}.{node.name}"))
        return sorted(found, reverse=True)

    def root_modules(self) -> list[str]:
        return sorted(
            p.name for p in self.src.glob("*.py") if p.name not in ("__init__.py", "__main__.py")
        )
