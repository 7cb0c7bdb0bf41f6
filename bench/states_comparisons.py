"""One comparison at a time on a machine with two speed states, the gap known: how often a
real gain is kept, and how often it is dropped read one state off (z below -5), by how
many reference runs were carried. What the judge does once a campaign has learned its
states, apart from the learning.

    PYTHONPATH=src python bench/states_comparisons.py [--gap 0.30] [--first-keep 3]
        [--seeds 300]
"""

from __future__ import annotations

import argparse
import random

from autoresearch.stats.decide import Comparison, Noise, Rule, Side, Verdict


class Machine:
    """Two speed states, the slow one `gap` (a share) slower, switching on about one run in
    three; Gaussian noise of 1 within a state."""

    def __init__(self, seed: int, gap: float) -> None:
        self.rng = random.Random(seed)
        self.gap = gap
        self.slow = self.rng.random() < 0.5

    def run(self, level: float) -> float:
        if self.rng.random() < 0.3:
            self.slow = not self.slow
        return level * (1.0 + self.gap if self.slow else 1.0) + self.rng.gauss(0.0, 1.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gap", type=float, default=0.30)
    parser.add_argument("--first-keep", type=int, default=3)
    parser.add_argument("--seeds", type=int, default=300)
    args = parser.parse_args()
    if not 0 < args.gap < 1 or not 1 <= args.first_keep <= 8 or args.seeds < 1:
        parser.error(
            "--gap must lie between 0 and 1, --first-keep between 1 and 8, --seeds above 0"
        )
    rule = Rule(
        "sequential",
        max_samples=8,
        confidence=0.95,
        estimator="states",
        pairs="both",
        first_keep=args.first_keep,
    )
    noise = Noise(1.0, 1000, 0.0, args.gap)
    for faster in (3.0, 6.0, 9.0):
        for carried in (0, 2, 8):
            kept = off = runs = 0
            for seed in range(args.seeds):
                machine = Machine(seed, args.gap)
                prior = [machine.run(100.0) for _ in range(4)]
                reference = [machine.run(100.0) for _ in range(carried)]
                test = Comparison(rule, "minimize", reference, noise, carried, prior=prior)
                while isinstance(side := test.next(), Side):
                    test.add(machine.run(100.0 - faster if side is Side.CANDIDATE else 100.0))
                    runs += 1
                kept += test.verdict is Verdict.KEEP
                z = test.look.z if test.look is not None else None
                off += test.verdict is Verdict.DISCARD and z is not None and z < -5
            print(
                f"{faster:g} units faster, {carried} carried: kept {kept}/{args.seeds}, "
                f"dropped a state off {off}, runs {runs}"
            )


if __name__ == "__main__":
    main()
