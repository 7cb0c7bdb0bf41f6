"""What a run that pushes shared files out of the page cache costs the run after it.

The run after is `python -c "import ..."` of a few standard and installed libraries (what
a benchmark's harness does before it times anything, and what a metric that times the
whole command times). Before each of its timings, either nothing happens (a run that
opens the same files and leaves them be) or a run asks the kernel to drop those files
from the page cache (`posix_fadvise(POSIX_FADV_DONTNEED)` on every `.py`, `.pyc` and
`.so` of the interpreter's libraries), unfiltered and then under the sandbox's seccomp
filter (`isolation/launcher.py`), in turn, `--rounds` times. Prints the median time of
each, and the slowdown.

    python bench/page_cache.py [--rounds 15]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

from autoresearch.isolation import launcher, seccomp

IMPORTS = "import json, email, http.client, asyncio, unittest, decimal, xml.dom.minidom"
DROP = """
import os, sys, sysconfig, pathlib
advice = os.POSIX_FADV_DONTNEED if sys.argv[1] == "drop" else os.POSIX_FADV_NORMAL
for key in ("stdlib", "platstdlib", "purelib", "platlib"):
    for path in pathlib.Path(sysconfig.get_paths()[key]).rglob("*"):
        if path.suffix in (".py", ".pyc", ".so") and path.is_file():
            try:
                fd = os.open(path, os.O_RDONLY)
            except OSError:
                continue
            try:
                os.posix_fadvise(fd, 0, 0, advice)
            except PermissionError:
                pass
            os.close(fd)
"""


def before(how: str) -> None:
    argv = [sys.executable, "-c", DROP, "keep" if how == "nothing" else "drop"]

    def start() -> subprocess.Popen[bytes]:
        return subprocess.Popen(argv, start_new_session=True)

    proc = launcher.shared(True, False)(start) if how == "filtered" else start()
    proc.wait()


def timed() -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", IMPORTS], check=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    if args.rounds < 3:
        raise SystemExit("--rounds must be 3 or more.")
    if seccomp.problem() is not None:
        raise SystemExit(f"no seccomp filter here: {seccomp.problem()}")
    ways = ("nothing", "dropped", "filtered")
    times: dict[str, list[float]] = {way: [] for way in ways}
    timed()
    for _ in range(args.rounds):
        for way in ways:
            before(way)
            times[way].append(timed())
    base = statistics.median(times["nothing"])
    print(f"`python -c '{IMPORTS}'`, median of {args.rounds} in turn:")
    labels = {
        "nothing": "after a run that leaves the files be",
        "dropped": "after a run that drops them (unfiltered)",
        "filtered": "after a run that asks to, under the sandbox's filter",
    }
    for way in ways:
        median = statistics.median(times[way])
        print(f"  {labels[way]:54} {1000 * median:6.1f} ms  {100 * (median / base - 1):+5.1f}%")


if __name__ == "__main__":
    main()
