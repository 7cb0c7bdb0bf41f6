"""What noise a campaign judges at, beside the noise its interleaved runs see.

Each campaign runs null candidates through `SampleBook` under `noise = "auto"` as the
evaluator does (the book's comparison, its runs back into the book, a keep makes the
incumbent) on a machine whose speed follows time, and prints, after the last attempt, the
noise estimate its comparisons are judged at beside two figures of the machine itself: the
noise of one run against the run before it (the standard deviation of successive
differences over the square root of two: what two neighbouring runs, such as one
interleaved pair, differ by) and the noise of one run against the machine's long-run mean.
On a speed that persists or wanders, the estimate (from each version's runs, taken over
many comparisons) can sit far above what neighbouring runs differ by.

    python bench/noise_estimate.py [--campaigns 6] [--attempts 30]
"""

from __future__ import annotations

import argparse
import itertools
import math
import statistics
from collections.abc import Callable

from autoresearch.stats.decide import Rule, Verdict
from autoresearch.stats.sample_book import SampleBook
from autoresearch.testing.comparisons import drive
from carry_readings import Machine, Shape, States, Wandering
from decisions import positive

AUTO = Rule("auto", max_samples=8, confidence=0.95, estimator="robust", adaptive=True)

# Runs about a level of 100 with Gaussian noise of 1, and what the machine adds (in the
# same units, so a percent of the level).
MACHINES: dict[str, Callable[[], Shape]] = {
    "Gaussian 1%": lambda: lambda last, now, rng: 0.0,
    "wandering speed, sd 2%": lambda: Wandering(2.0),
    "wandering speed, sd 5%": lambda: Wandering(5.0),
    "two speeds 15% apart, lasting 20 runs": lambda: States(15.0, 20.0),
}


def campaign(machine: Machine, attempts: int) -> float | None:
    """The noise estimate after `attempts` null candidates (None: the book has none)."""
    book = SampleBook(AUTO, "minimize")
    book.baseline("c0", [machine.run(100.0) for _ in range(4)])
    incumbent = "c0"
    for i in range(1, attempts + 1):
        verdict, _, _ = drive(
            book, incumbent, f"c{i}", lambda: machine.run(100.0), lambda: machine.run(100.0)
        )
        if verdict is Verdict.KEEP:
            incumbent = f"c{i}"
    noise = book.comparison(incumbent).noise()
    return None if noise is None else noise.sigma


def machine_noise(machine: Machine) -> tuple[float, float]:
    """One run's noise against the run before it, and against the long-run mean."""
    values = [machine.run(100.0) for _ in range(20_000)]
    steps = [b - a for a, b in itertools.pairwise(values)]
    return statistics.pstdev(steps) / math.sqrt(2), statistics.pstdev(values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--campaigns", type=positive, default=6)
    parser.add_argument("--attempts", type=positive, default=30)
    args = parser.parse_args()
    print("machine                                 estimate (min-max)    neighbours  long run")
    for name, make in MACHINES.items():
        machines = (Machine(seed, make()) for seed in range(args.campaigns))
        found = [s for s in (campaign(m, args.attempts) for m in machines) if s is not None]
        neighbours, long_run = machine_noise(Machine(10_000, make()))
        spread = "none"
        if found:
            spread = f"{statistics.fmean(found):.2f} ({min(found):.2f}-{max(found):.2f})"
        print(f"{name:<40}{spread:<22}{neighbours:<12.2f}{long_run:.2f}")


if __name__ == "__main__":
    main()
