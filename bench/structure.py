"""Figures of the package's structure, read from the source: what `CONTRIBUTING.md` and
`docs/architecture.md` hold it to.

    python bench/structure.py [SRC]     # SRC defaults to src/autoresearch

Prints the lines of the engine's modules, the ten longest functions, capability probes
(`getattr`/`hasattr` on a proposer or executor member), import cycles among the package's
modules, private members used across modules, and the modules at the package root.
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path

CAPABILITIES = {
    "validate", "preflight", "exhausted", "runs_commands", "confined", "parallel_safe",
    "reopen_workspace", "edited_on_candidate", "edits_in_place", "cancel",
}  # fmt: skip
ENGINE = ("engine.py", "parallel.py", "engine")


def modules(src: Path) -> dict[str, Path]:
    found = {}
    for path in sorted(src.rglob("*.py")):
        parts = list(path.relative_to(src.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def imports(name: str, tree: ast.Module, known: set[str]) -> set[str]:
    """The package's modules `name` imports anywhere: at the top, for types only, or
    inside a function (a lazy import is a dependency all the same)."""
    out: set[str] = set()
    package = name if name in known and _is_package(name, known) else name.rsplit(".", 1)[0]

    def visit(nodes: list[ast.stmt]) -> None:
        for node in nodes:
            if isinstance(node, ast.Import):
                out.update(a.name for a in node.names if a.name in known)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1])
                    base = f"{base}.{node.module}" if node.module else base
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    out.add(full if full in known else base)
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.stmt):
                    visit([child])

    visit(tree.body)
    return {m for m in out if m in known and m != name}


def _is_package(name: str, known: set[str]) -> bool:
    return any(k.startswith(name + ".") for k in known)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def strong(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    sys.setrecursionlimit(10000)
    for v in graph:
        if v not in index:
            strong(v)
    return found


def main() -> None:
    src = Path(sys.argv[1] if len(sys.argv) > 1 else "src/autoresearch").resolve()
    mods = modules(src)
    trees = {name: ast.parse(path.read_text()) for name, path in mods.items()}
    known = set(mods)
    for name in ENGINE:
        target = src / name
        files = sorted(target.rglob("*.py")) if target.is_dir() else [target]
        for file in (f for f in files if f.exists()):
            lines = len(file.read_text().splitlines())
            print(f"lines of {file.relative_to(src)}: {lines}")
    functions = []
    probes = 0
    defined: dict[str, set[str]] = defaultdict(set)
    for name, tree in trees.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                span = (node.end_lineno or node.lineno) - node.lineno + 1
                functions.append((span, f"{name}.{node.name}"))
                if node.name.startswith("_") and not node.name.startswith("__"):
                    defined[name].add(node.name)
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.ctx, ast.Store)
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
            ):
                defined[name].add(node.attr)
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "hasattr")
                and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant)
                and node.args[1].value in CAPABILITIES
            ):
                probes += 1
    private_owner: dict[str, set[str]] = defaultdict(set)
    for name, names in defined.items():
        for member in names:
            private_owner[member].add(name)
    crossing = []
    for name, tree in trees.items():
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Attribute) and node.attr.startswith("_")):
                continue
            if node.attr.startswith("__") or node.attr not in private_owner:
                continue
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                continue
            if name in private_owner[node.attr]:
                continue
            crossing.append(f"{name}: .{node.attr}")
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module in known:
                for alias in node.names:
                    if alias.name.startswith("_") and not alias.name.startswith("__"):
                        crossing.append(f"{name}: {node.module}.{alias.name}")
    graph = {name: imports(name, tree, known) for name, tree in trees.items()}
    # A package's __init__ re-exporting its submodules is not a cycle of the design.
    for name in graph:
        if _is_package(name, known):
            graph[name] = {m for m in graph[name] if not m.startswith(name + ".")}
    loops = cycles(graph)
    root = [p for p in src.glob("*.py") if p.name not in ("__init__.py", "__main__.py")]
    print("ten longest functions:")
    for span, where in sorted(functions, reverse=True)[:10]:
        print(f"  {span:4d}  {where}")
    print(f"capability probes (getattr/hasattr): {probes}")
    print(f"import cycles: {len(loops)}")
    for group in loops:
        print("  " + " <-> ".join(group))
    print(f"private members used across modules: {len(crossing)}")
    for where in crossing[:20]:
        print(f"  {where}")
    print(f"modules at the package root: {len(root)}")


if __name__ == "__main__":
    main()
