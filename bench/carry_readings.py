"""How soon `noise = "auto"` settles carry-over, and which way, on machines whose runs
carry the run before them and on machines whose speed only persists.

Each campaign runs the comparisons of the probe (`Rule.carry` with `Rule.probe`: blocks
of three runs of one side, a drop held for the incumbent's runs) at a known noise of 1,
candidates drawn from a fixed spread of effects, a keep making the incumbent, and reads
`noise_model.carry_over` after every comparison as `SampleBook` does: the first
comparison at which it finds carry-over or shows it absent is where the probe ends.

    python bench/carry_readings.py [--campaigns 40] [--attempts 40]
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from autoresearch.stats.decide import Comparison, Noise, Rule, Side, Verdict
from autoresearch.stats.noise_model import Runs, carry_over

# What a run gets from the one before it (its true level, this run's, the machine's
# random stream), in units of one run's noise.
Shape = Callable[[float, float, random.Random], float]
# The true effects of a campaign's candidates (most changes worse, a few better).
EFFECTS = (-5.0, -3.0, -2.0, -1.0, 0.0, 0.0, 1.0, 2.0, 3.0, 4.0)


class States:
    """Two speeds `gap` apart, each lasting `runs` runs on average: no carry-over."""

    def __init__(self, gap: float, runs: float) -> None:
        self.gap, self.runs, self.slow = gap, runs, False

    def __call__(self, last: float, now: float, rng: random.Random) -> float:
        if rng.random() < 1.0 / self.runs:
            self.slow = not self.slow
        return self.gap if self.slow else 0.0


class Wandering:
    """A speed that wanders (AR(1), `phi` a run, standard deviation `sd`): no carry-over."""

    def __init__(self, sd: float, phi: float = 0.9) -> None:
        self.sd, self.phi, self.x = sd, phi, 0.0

    def __call__(self, last: float, now: float, rng: random.Random) -> float:
        self.x = self.phi * self.x + rng.gauss(0.0, self.sd * (1 - self.phi**2) ** 0.5)
        return self.x


def thermal(share: float) -> Shape:
    """A run after a slower version carries `share` of its excess (it heated the machine)."""
    return lambda last, now, rng: share * max(0.0, last - now)


def symmetric(share: float) -> Shape:
    """A run carries `share` of the last run's difference from it, both ways."""
    return lambda last, now, rng: share * (last - now)


def switch_cost(last: float, now: float, rng: random.Random) -> float:
    """A run after another version 2 units slower, whichever is faster (no carry)."""
    return 2.0 if last != now else 0.0


def bursts(last: float, now: float, rng: random.Random) -> float:
    """Contention on one run in ten, up to 6 units (no carry)."""
    return 6.0 * rng.random() if rng.random() < 0.1 else 0.0


SHAPES: dict[str, tuple[bool, Callable[[], Shape]]] = {
    "plain (Gaussian 1)": (False, lambda: lambda last, now, rng: 0.0),
    "a switch of version costs 2": (False, lambda: switch_cost),
    "bursts: one run in ten up to 6": (False, lambda: bursts),
    "two speeds 15 apart, lasting 20 runs": (False, lambda: States(15.0, 20.0)),
    "two speeds 15 apart, lasting 3 runs": (False, lambda: States(15.0, 3.0)),
    "wandering speed, sd 5": (False, lambda: Wandering(5.0)),
    "after a slower version, all its excess": (True, lambda: thermal(1.0)),
    "after a slower version, half its excess": (True, lambda: thermal(0.5)),
    "half the last run's difference, both ways": (True, lambda: symmetric(0.5)),
}


@dataclass
class Machine:
    """One machine's runs in the order taken: Gaussian 1 noise, and what a run keeps of
    the run before it (`carry`, from the last run's true level and this one's)."""

    seed: int
    carry: Shape = lambda last, now, rng: 0.0
    rng: random.Random = field(init=False)
    last: float | None = None

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    def run(self, level: float) -> float:
        extra = 0.0 if self.last is None else self.carry(self.last, level, self.rng)
        self.last = level
        return level + self.rng.gauss(0.0, 1.0) + extra


def comparisons(
    machine: Machine, rule: Rule, baseline: list[float], attempts: int
) -> Iterator[tuple[str, Runs]]:
    """A campaign's comparisons, in order, each with its incumbent: judged at a fixed noise
    of 1 and boundary (what carry-over is read from does not need the boundary learned),
    candidates drawn from EFFECTS, a keep makes the incumbent."""
    rng = random.Random(machine.seed + 1000)
    incumbent, level = "c0", 100.0
    reference = list(baseline)
    for i in range(1, attempts + 1):
        candidate = level - rng.choice(EFFECTS)
        test = Comparison(rule, "minimize", reference[-8:], Noise(1.0, 100), 8, efficacy=2.5)
        while isinstance(side := test.next(), Side):
            test.add(machine.run(candidate if side is Side.CANDIDATE else level))
        yield incumbent, test.taken
        reference += [v for s, v, _ in test.taken if s is Side.INCUMBENT]
        if test.verdict is Verdict.KEEP:
            incumbent, level = f"c{i}", candidate
            reference = [v for s, v, _ in test.taken if s is Side.CANDIDATE][-2:]


def campaign(shape: Shape, seed: int, attempts: int) -> tuple[str, int]:
    """Where the probe ends ("found", "absent" or "open") and at which comparison."""
    rule = Rule(
        "sequential", max_samples=8, estimator="robust", pairs="both", carry=True, probe=True
    )
    machine = Machine(seed, shape)
    baseline = [machine.run(100.0) for _ in range(4)]
    sequences: list[tuple[str, Runs]] = []
    for i, compared in enumerate(comparisons(machine, rule, baseline, attempts), 1):
        sequences.append(compared)
        carry = carry_over(sequences, "minimize", 1.0, {"c0": baseline[1:]})
        if carry.found:
            return "found", i
        if carry.absent:
            return "absent", i
    return "open", attempts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--campaigns", type=int, default=40)
    parser.add_argument("--attempts", type=int, default=40)
    args = parser.parse_args()
    print(f"{args.campaigns} campaigns of {args.attempts} attempts; the probe ends with")
    print(f"{'machine':44s} {'carries':>7s} {'found':>7s} {'at':>4s} {'absent':>7s} {'at':>4s}")
    for name, (carries, make) in SHAPES.items():
        ends = [campaign(make(), seed, args.attempts) for seed in range(args.campaigns)]
        row = [name.ljust(44), ("yes" if carries else "no").rjust(7)]
        for kind in ("found", "absent"):
            at = sorted(i for end, i in ends if end == kind)
            row += [f"{len(at):7d}", f"{at[len(at) // 2] if at else '-':>4}"]
        print(" ".join(row), flush=True)


if __name__ == "__main__":
    main()
