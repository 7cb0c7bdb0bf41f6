"""Print the code-structure figures the core is held to.

    python bench/structure.py [--no-mypy]

engine.py's length and longest function, functions over 50 lines in the package, status
string literals outside the `Status` enum, and mypy's error count.
"""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "src" / "autoresearch"
STATUSES = {
    "baseline", "keep", "discard", "crash", "timeout", "guard_failed", "scope_violation",
    "no_change", "tampered", "proposer_failed", "edit_refused", "interrupted",
    "checkout_changed",
}  # fmt: skip
VOCABULARY = PACKAGE / "attempt.py"  # where the strings are defined, once


def functions(tree: ast.AST) -> list[tuple[int, str]]:
    return [
        (node.end_lineno - node.lineno + 1, node.name)  # type: ignore[operator]
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    ]


def status_literals(path: Path, tree: ast.AST) -> list[tuple[int, str]]:
    """Strings spelling a status where code decides by status: compared with something
    (`== "keep"`, `in ("keep", "discard")`), or the keys of a table by status; and quoted
    statuses in page code held in a Python string. A JSON key or a config key that happens
    to share a status's name ("baseline", "timeout") is not a status literal."""
    found: list[tuple[int, str]] = []

    def strings(node: ast.AST) -> list[ast.Constant]:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return [node]
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            return [c for e in node.elts for c in strings(e)]
        return []

    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                found += [(c.lineno, c.value) for c in strings(side) if c.value in STATUSES]
        elif isinstance(node, ast.Dict):
            keys = [k for k in node.keys if k is not None]
            named = [k for k in keys for c in strings(k) if c.value in STATUSES]
            if len(named) >= 2:
                found += [(k.lineno, k.value) for k in named if isinstance(k, ast.Constant)]
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and ("function" in node.value or "=>" in node.value)  # page code
        ):
            for quoted in re.findall(r"[\"']([a-z_]+)[\"']", node.value):
                if quoted in STATUSES:
                    found.append((node.lineno, quoted))
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-mypy", action="store_true", help="skip the mypy run")
    parser.add_argument("--list", action="store_true", help="list every status literal")
    args = parser.parse_args()
    engine = PACKAGE / "engine.py"
    engine_tree = ast.parse(engine.read_text())
    longest = max(functions(engine_tree))
    print(
        f"engine.py: {len(engine.read_text().splitlines())} lines, longest function "
        f"{longest[1]} ({longest[0]} lines)"
    )
    long_functions = []
    literals = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text())
        rel = path.relative_to(ROOT)
        long_functions += [(n, f"{rel}:{name}") for n, name in functions(tree) if n > 50]
        if path != VOCABULARY:
            literals += [(f"{rel}:{line}", text) for line, text in status_literals(path, tree)]
    print(f"functions over 50 lines in the package: {len(long_functions)}")
    for n, where in sorted(long_functions, reverse=True):
        print(f"  {where} ({n} lines)")
    print(f"status string literals outside the enum: {len(literals)}")
    if args.list:
        for where, text in literals:
            print(f"  {where}: {text!r}")
    if not args.no_mypy:
        out = subprocess.run(
            [sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True
        ).stdout
        match = re.search(r"Found (\d+) errors?", out)
        print(f"mypy errors: {match.group(1) if match else 0}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
