"""What a comparison of a few runs can see on noise in two states, statistic by statistic.

The shape is bench/decisions.py's two CPU frequency states: each run is slow (15 units
worse) or fast, the state switching before about one run in three, Gaussian noise of one
unit within a state. A candidate better by `--gain` units and its incumbent are measured
in turn (incumbent, candidate, incumbent, ...), k runs a side, and judged once: each
statistic's bar is set on null comparisons to keep 5% of them, and the share of better
candidates it keeps is printed. No sequential looks and no calibration of the engine: how
much any procedure built on the statistic could see at k runs, and where it breaks.

- better half: the mean of each side's better half, as `noise = "time"` takes a side;
- pairs' median: the median of the interleaved pairs' gains;
- states known: the gain within each state both sides have runs in (weighted), as a
  comparison that knew each run's state would take it; the ceiling;
- states found: the same with the states found from the runs' levels (the candidate's runs
  moved by the pairs' median, all runs split at gaps wider than 10 units), refined three
  times.

    python bench/frequency_states.py [--paths 4000] [--gain 4] [--switch 0.3]
"""

from __future__ import annotations

import argparse
import itertools
import random
import statistics
from collections.abc import Callable, Sequence

from autoresearch.stats import robust

Run = tuple[str, float, bool]  # side ("I" or "C"), value, slow state
GAP = 15.0
SPLIT = 10.0


def comparison(rng: random.Random, k: int, gain: float, switch: float) -> list[Run]:
    slow = rng.random() < 0.5
    runs: list[Run] = []
    for j in range(2 * k):
        if rng.random() < switch:
            slow = not slow
        side = "I" if j % 2 == 0 else "C"
        value = 100 + (GAP if slow else 0.0) + rng.gauss(0.0, 1.0) - (gain if side == "C" else 0)
        runs.append((side, value, slow))
    return runs


def better_half(runs: list[Run]) -> float:
    def side(name: str) -> float:
        # The estimator's own location, its Gaussian offset left out (sigma 0): the same
        # shift on both sides would cancel.
        return robust.better_half([v for s, v, _ in runs if s == name], "minimize", 0.0)

    return side("I") - side("C")


def pairs_median(runs: list[Run]) -> float:
    return statistics.median(runs[j][1] - runs[j + 1][1] for j in range(0, len(runs), 2))


def _within(runs: list[Run], states: Sequence[bool]) -> float | None:
    total = weight = 0.0
    for state in (False, True):
        inc = [v for (s, v, _), x in zip(runs, states, strict=True) if s == "I" and x == state]
        cand = [v for (s, v, _), x in zip(runs, states, strict=True) if s == "C" and x == state]
        if inc and cand:
            n = 1 / (1 / len(inc) + 1 / len(cand))
            total += n * (statistics.fmean(inc) - statistics.fmean(cand))
            weight += n
    return total / weight if weight else None


def states_known(runs: list[Run]) -> float | None:
    return _within(runs, [slow for _, _, slow in runs])


def states_found(runs: list[Run]) -> float | None:
    gain: float | None = pairs_median(runs)
    for _ in range(3):
        if gain is None:
            return None
        moved = [v + (gain if s == "C" else 0.0) for s, v, _ in runs]
        order = sorted(range(len(moved)), key=moved.__getitem__)
        states = [False] * len(moved)
        level = False
        for before, after in itertools.pairwise(order):
            level = level or moved[after] - moved[before] > SPLIT
            states[after] = level
        gain = _within(runs, states)
    return gain


STATISTICS: dict[str, Callable[[list[Run]], float | None]] = {
    "better half": better_half,
    "pairs' median": pairs_median,
    "states known": states_known,
    "states found": states_found,
}


def kept(values: list[float | None], bar: float) -> float:
    return sum(1 for v in values if v is not None and v > bar) / len(values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--paths", type=int, default=4000)
    parser.add_argument("--gain", type=float, default=4.0)
    parser.add_argument("--switch", type=float, default=0.3)
    args = parser.parse_args()
    if args.paths < 100 or not 0 <= args.switch <= 1:
        raise SystemExit("--paths must be 100 or more and --switch between 0 and 1.")
    rng = random.Random(20261204)
    print(f"kept at 5% false keeps, gain {args.gain:g} units, switch {args.switch:g}:")
    print(f"{'runs a side':>12} " + " ".join(f"{name:>14}" for name in STATISTICS))
    for k in (2, 3, 4, 5, 6, 8):
        null = [comparison(rng, k, 0.0, args.switch) for _ in range(args.paths)]
        better = [comparison(rng, k, args.gain, args.switch) for _ in range(args.paths)]
        row = []
        for stat in STATISTICS.values():
            found = sorted(-1e18 if v is None else v for v in map(stat, null))
            bar = found[int(0.95 * len(found))]
            row.append(f"{kept([stat(r) for r in better], bar):>14.2f}")
        print(f"{k:>12} " + " ".join(row))


if __name__ == "__main__":
    main()
