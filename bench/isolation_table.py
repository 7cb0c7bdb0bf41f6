"""Which attacks of `tests/test_isolation*.py` hold under each isolation mode, as a table.

    python bench/isolation_table.py [-n 2]

Runs the attack suite once and prints one row per attack: "held" where the promise held,
"open" where it is a known gap (an xfail, whose reason is printed below the table), and
"FAILED" where a promise that should hold broke.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", default="2", help="pytest-xdist workers")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "attacks.xml"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-n",
                args.n,
                *sorted(str(p.relative_to(ROOT)) for p in ROOT.glob("tests/test_isolation*.py")),
                f"--junitxml={report}",
                "-p",
                "no:cacheprovider",
            ],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            check=False,
        )
        cases = ET.parse(report).getroot().iter("testcase")
        table: dict[str, dict[str, str]] = defaultdict(dict)
        reasons: dict[str, str] = {}
        modes: list[str] = []
        for case in cases:
            name = case.get("name", "")
            attack, _, mode = name.partition("[")
            mode = mode.rstrip("]") or "-"
            if mode not in modes:
                modes.append(mode)
            skipped = case.find("skipped")
            if case.find("failure") is not None or case.find("error") is not None:
                table[attack][mode] = "FAILED"
            elif skipped is not None and skipped.get("type") == "pytest.xfail":
                table[attack][mode] = "open"
                reasons[f"{attack}[{mode}]"] = skipped.get("message", "")
            elif skipped is not None:
                table[attack][mode] = "skipped"
            else:
                table[attack][mode] = "held"
    width = max(len(a) for a in table)
    print(f"{'attack':<{width}}  " + "  ".join(f"{m:>6}" for m in modes))
    for attack in sorted(table):
        row = table[attack]
        print(f"{attack:<{width}}  " + "  ".join(f"{row.get(m, '-'):>6}" for m in modes))
    for mode in modes:
        held = sum(1 for row in table.values() if row.get(mode) == "held")
        total = sum(1 for row in table.values() if mode in row)
        print(f"{mode}: {held} of {total} attacks held")
    for case, reason in sorted(reasons.items()):
        print(f"open {case}: {reason}")


if __name__ == "__main__":
    main()
