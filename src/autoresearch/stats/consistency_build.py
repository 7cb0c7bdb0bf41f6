"""Writes `consistency_table.py` anew from `robust.simulated_factors` (about 40 s): run
after a change to a spread statistic, `python -m autoresearch.stats.consistency_build`."""

from __future__ import annotations

import sys
from pathlib import Path

from autoresearch.stats import consistency_table, robust

OPENING = "TABLE: dict[tuple[str, int], tuple[float, float, float]] = {"


def render() -> str:
    """The table module's text with every size's factors simulated afresh."""
    rows = [
        f'    ("{kind}", {m}): {robust.simulated_factors(m, kind)!r},\n'
        for kind in ("robust", "time")
        for m in range(2, robust.CONSISTENCY_MAX + 1)
    ]
    head, rest = Path(consistency_table.__file__).read_text().split(OPENING, 1)
    tail = rest.split("}\n", 1)[1]
    return f"{head}{OPENING}\n{''.join(rows)}}}\n{tail}"


def main() -> None:
    path = Path(consistency_table.__file__)
    path.write_text(render())
    sys.stdout.write(f"wrote {path}\n")


if __name__ == "__main__":
    main()
