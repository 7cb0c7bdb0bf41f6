"""Ship today's judge's boundaries for the keys an earlier judge shipped, computed afresh.

`python -m autoresearch.stats.reship [--jobs N]`: every key of the newest shipped file of an
earlier judge is calibrated by today's judge (`decide.calibrate_key`) and the lot written to
`shipped/judge-<today>.json`. A judge bump so costs the minutes of those simulations, not
a run of the suite and the benches with an empty cache (`python -m
autoresearch.stats.calibration ship` remains for keys they ask for that were never shipped).
Nothing is taken from the user's cache: it may hold what a version of today's judge under
development computed. Kept apart from `calibration`, which `decide`
imports: this module imports `decide`.
"""

from __future__ import annotations

import argparse
import json
import os
from concurrent.futures import ProcessPoolExecutor

from autoresearch.stats import calibration
from autoresearch.stats.decide import JUDGE_VERSION, calibrate_key


def earlier_judge(today: int) -> int | None:
    """The newest judge before `today` whose boundaries the package ships."""
    for judge in range(today - 1, 0, -1):
        if calibration.shipped_file(judge).exists():
            return judge
    return None


def reship(jobs: int) -> tuple[int, int]:
    """Compute today's boundaries for the earlier judge's keys and ship them: (the earlier
    judge, how many boundaries are shipped)."""
    earlier = earlier_judge(JUDGE_VERSION)
    if earlier is None:
        raise SystemExit("no earlier judge's boundaries are shipped: nothing to recompute")
    keys = sorted(calibration.shipped(earlier))
    if jobs == 1:
        values = [calibrate_key(key) for key in keys]
    else:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            values = list(pool.map(calibrate_key, keys, chunksize=8))
    target = calibration.shipped_file(JUDGE_VERSION)
    text = json.dumps(dict(zip(keys, values, strict=True)), indent=0) + "\n"
    target.write_text(text, encoding="utf-8")
    calibration.shipped.cache_clear()
    return earlier, len(keys)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m autoresearch.stats.reship")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    earlier, count = reship(max(1, args.jobs))
    print(
        f"{count} boundaries of judge {JUDGE_VERSION} (the keys of judge {earlier}) in "
        f"{calibration.shipped_file(JUDGE_VERSION)}"
    )


if __name__ == "__main__":
    main()
