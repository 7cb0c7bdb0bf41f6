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
import random
import statistics
from collections.abc import Callable, Iterator

from autoresearch.stats.decide import Rule, Side, Verdict
from autoresearch.stats.sample_book import SampleBook

AUTO = Rule("auto", max_samples=8, confidence=0.95, estimator="robust", adaptive=True)


def gaussian(seed: int) -> Iterator[float]:
    rng = random.Random(seed)
    while True:
        yield 100.0 + rng.gauss(0.0, 1.0)


def wandering(sd: float) -> Callable[[int], Iterator[float]]:
    """A speed that wanders (AR(1), 0.9 a run, standard deviation `sd` %), Gaussian 1%."""

    def machine(seed: int) -> Iterator[float]:
        rng, speed = random.Random(seed), 0.0
        while True:
            speed = 0.9 * speed + rng.gauss(0.0, sd * math.sqrt(1 - 0.81))
            yield 100.0 + speed + rng.gauss(0.0, 1.0)

    return machine


def states(gap: float, runs: float) -> Callable[[int], Iterator[float]]:
    """Two speeds `gap` % apart, each lasting `runs` runs on average, Gaussian 1%."""

    def machine(seed: int) -> Iterator[float]:
        rng, slow = random.Random(seed), False
        while True:
            if rng.random() < 1.0 / runs:
                slow = not slow
            yield 100.0 * (1 + gap / 100 if slow else 1.0) + rng.gauss(0.0, 1.0)

    return machine


MACHINES: dict[str, Callable[[int], Iterator[float]]] = {
    "Gaussian 1%": gaussian,
    "wandering speed, sd 2%": wandering(2.0),
    "wandering speed, sd 5%": wandering(5.0),
    "two speeds 15% apart, lasting 20 runs": states(15.0, 20.0),
}


def campaign(machine: Iterator[float], attempts: int) -> float | None:
    """The noise estimate after `attempts` null candidates (None: the book has none)."""
    book = SampleBook(AUTO, "minimize")
    book.baseline("c0", [next(machine) for _ in range(4)])
    incumbent = "c0"
    for i in range(1, attempts + 1):
        test = book.comparison(incumbent)
        candidate: list[float] = []
        while isinstance(side := test.next(), Side):
            value = next(machine)
            if side is Side.INCUMBENT:
                book.remeasured(incumbent, value)
            else:
                candidate.append(value)
            test.add(value)
        book.measured(f"c{i}", candidate, incumbent, test.taken)
        if test.verdict is Verdict.KEEP:
            book.kept(f"c{i}")
            incumbent = f"c{i}"
    noise = book.comparison(incumbent).noise()
    return None if noise is None else noise.sigma


def machine_noise(make: Callable[[int], Iterator[float]], seed: int) -> tuple[float, float]:
    """One run's noise against the run before it, and against the long-run mean."""
    runs = make(seed)
    values = [next(runs) for _ in range(20_000)]
    steps = [b - a for a, b in itertools.pairwise(values)]
    return statistics.pstdev(steps) / math.sqrt(2), statistics.pstdev(values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--campaigns", type=int, default=6)
    parser.add_argument("--attempts", type=int, default=30)
    args = parser.parse_args()
    print("machine                                 estimate (min-max)    neighbours  long run")
    for name, make in MACHINES.items():
        estimates = (campaign(make(seed), args.attempts) for seed in range(args.campaigns))
        found = [sigma for sigma in estimates if sigma]
        neighbours, long_run = machine_noise(make, 10_000)
        spread = "none"
        if found:
            spread = f"{statistics.fmean(found):.2f} ({min(found):.2f}-{max(found):.2f})"
        print(f"{name:<40}{spread:<22}{neighbours:<12.2f}{long_run:.2f}")


if __name__ == "__main__":
    main()
