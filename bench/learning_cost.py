"""What one recalibration on the campaign's own noise costs the engine.

`SampleBook.learn` calls `noise_model.choose` when the residuals reach LEARN_MIN and each
time they grow by LEARN_GROWTH: under `noise = "auto"` it calibrates the boundary of every
start state for each estimator on a block bootstrap of the residuals. This prints the time
of one such call (the Gaussian floor already cached, as it is after a campaign's first
use of a noise level) for campaigns of growing length on bursty and on Gaussian noise.

    python bench/learning_cost.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from autoresearch.stats import noise_model
from autoresearch.stats.decide import Rule


def groups(versions: int, runs: int, bursty: bool, seed: int) -> dict[str, list[float]]:
    rng = random.Random(seed)
    left = 0
    out: dict[str, list[float]] = {}
    for v in range(versions):
        values = []
        for _ in range(runs):
            if bursty and left == 0 and rng.random() < 0.2 / (4 * 0.8):
                left = rng.choice((3, 4, 5))
            loss = 0.0
            if left:
                left -= 1
                loss = 12.0 * rng.uniform(0.7, 1.3)
            values.append(100.0 + rng.gauss(0.0, 1.0) + loss)
        out[f"v{v}"] = values
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rule = Rule("sequential", estimator="robust", adaptive=True)
    print(f"{'noise':<10}{'residuals':>10}{'seconds (median of ' + str(args.repeat) + ')':>26}")
    for bursty in (False, True):
        for versions, runs in ((2, 6), (5, 8), (10, 10), (20, 12)):
            book = groups(versions, runs, bursty, versions)
            noise_model.choose(rule, book, {}, "minimize")  # the Gaussian floor, cached
            took = []
            learned = None
            for _ in range(args.repeat):
                began = time.perf_counter()
                learned = noise_model.choose(rule, book, {}, "minimize")
                took.append(time.perf_counter() - began)
            name = "bursts" if bursty else "gaussian"
            shown = f"{statistics.median(took):.3f}" if learned else "too few to learn"
            print(f"{name:<10}{versions * runs:>10}{shown:>26}")


if __name__ == "__main__":
    main()
