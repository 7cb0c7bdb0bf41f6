"""Ship today's judge's boundaries for the keys an earlier judge shipped, computed afresh.

`python -m autoresearch.stats.reship [--jobs N]`: every key of the newest shipped file of an
earlier judge is calibrated by today's judge (`decide.calibrate_key`, in N processes) and
the lot written to `shipped/judge-<today>.json`. It takes about as long as a run of the
suite and the benches with an empty cache (69 minutes on two cores for 1,619 keys), but
needs neither: it ships exactly the keys shipped before, unattended (`python -m
autoresearch.stats.calibration ship` remains for keys they ask for that were never
shipped). Nothing is taken from the user's cache: it may hold what a version of today's
judge under development computed. Kept apart from `calibration`, which `decide` imports:
this module imports `decide`.
"""

from __future__ import annotations

import argparse
import os
import sys
from concurrent.futures import ProcessPoolExecutor

from autoresearch.stats import calibration
from autoresearch.stats.decide import JUDGE_VERSION, calibrate_key


def earlier_judge(today: int) -> int | None:
    """The newest judge before `today` whose boundaries the package ships."""
    for judge in range(today - 1, 0, -1):
        if calibration.shipped_file(judge).exists():
            return judge
    return None


def reship(earlier: int, jobs: int) -> int:
    """Ship today's boundaries for the keys the judge of version `earlier` shipped, computed
    in `jobs` processes; how many."""
    keys = sorted(calibration.shipped(earlier))
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        values = pool.map(calibrate_key, keys, chunksize=8)
        return calibration.write_shipped(JUDGE_VERSION, dict(zip(keys, values, strict=True)))


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m autoresearch.stats.reship")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    earlier = earlier_judge(JUDGE_VERSION)
    if earlier is None:
        sys.exit(f"no judge before {JUDGE_VERSION} ships boundaries: nothing to compute again")
    target = calibration.shipped_file(JUDGE_VERSION)
    try:
        count = reship(earlier, max(1, args.jobs))
    except OSError as error:
        sys.exit(f"cannot write {target}: {error.strerror}")
    print(f"{count} boundaries of judge {JUDGE_VERSION} (the keys of judge {earlier}) in {target}")


if __name__ == "__main__":
    main()
