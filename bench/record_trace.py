"""Record a real noise trace: run a metric command N times on this machine, one sample per line.

    python bench/record_trace.py --cwd examples/speedup --pattern 'sort_ms: ([0-9.]+)' \
        --runs 500 --out bench/data/speedup_quiet.csv -- python bench.py

Each line is `value,loadavg1`. With `--neighbour K`, K CPU-bound processes run beside the
metric for the whole recording (the contended trace); they are stopped at the end.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

BUSY = "while True: pass"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cwd", type=Path, default=Path("."))
    parser.add_argument("--pattern", required=True)
    parser.add_argument("--runs", type=int, default=500)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--neighbour", type=int, default=0)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = [c for c in args.command if c != "--"]
    pattern = re.compile(args.pattern)
    busy = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(args.neighbour)]
    try:
        with args.out.open("w", encoding="utf-8") as out:
            out.write("value,loadavg1\n")
            for i in range(args.runs):
                done = subprocess.run(command, cwd=args.cwd, capture_output=True, text=True)
                found = pattern.search(done.stdout)
                if done.returncode != 0 or not found:
                    raise SystemExit(f"run {i}: no value in {done.stdout!r} {done.stderr!r}")
                out.write(f"{float(found.group(1))},{os.getloadavg()[0]:.2f}\n")
                out.flush()
    finally:
        for process in busy:
            process.kill()
            process.wait()


if __name__ == "__main__":
    main()
