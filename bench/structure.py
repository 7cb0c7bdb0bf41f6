"""Figures of the package's structure, read from the source: what `CONTRIBUTING.md` and
`docs/architecture.md` hold it to.

    python bench/structure.py [SRC]     # SRC defaults to src/autoresearch

Prints the lines of the engine's modules, the ten longest functions, capability probes
(`getattr`/`hasattr` on a proposer or executor member), import cycles among the package's
modules, private members used across modules, and the modules at the package root. SRC may
be an older checkout's package (the reading needs nothing of it but its files).
"""

from __future__ import annotations

import sys
from pathlib import Path

from autoresearch.testing.structure import Package

ENGINE = ("engine.py", "parallel.py", "engine")


def main() -> None:
    src = Path(sys.argv[1] if len(sys.argv) > 1 else "src/autoresearch").resolve()
    package = Package.read(src)
    for name in ENGINE:
        target = src / name
        files = sorted(target.rglob("*.py")) if target.is_dir() else [target]
        for file in (f for f in files if f.exists()):
            print(f"lines of {file.relative_to(src)}: {len(file.read_text().splitlines())}")
    print("ten longest functions:")
    for span, where in package.functions()[:10]:
        print(f"  {span:4d}  {where}")
    print(f"capability probes (getattr/hasattr): {len(package.probes())}")
    cycles = package.cycles()
    print(f"import cycles: {len(cycles)}")
    for group in cycles:
        print("  " + " <-> ".join(group))
    crossing = package.private_crossings()
    print(f"private members used across modules: {len(crossing)}")
    for where in crossing[:20]:
        print(f"  {where}")
    print(f"modules at the package root: {len(package.root_modules())}")


if __name__ == "__main__":
    main()
