"""`confirm`'s interval beside Wilcoxon's signed-rank interval, on several noise shapes.

For each shape, pairs of runs of two versions B - A = gain + (noise - noise) are drawn, and
95% intervals computed: the sign test's on `--pairs` pairs (`autoresearch.stats.paired`,
what `confirm --repeat N` prints), the sign test's in two looks (`--pairs`, then as many
more where the first leave a gain open, each look at 97.5%: what `confirm` does by
default) and Wilcoxon's (two order statistics of the pairwise averages of the
differences, at the exact signed-rank level). Printed: how often each confirms (its lower
end above 0) at a gain of 0, 0.5 and 1 noise unit, how often it covers the true gain, and
the pairs it took on average. Last, the case `confirm` promises to hold: 10 pairs a clear
gain apart, one of them spiked.

    python bench/paired_intervals.py [--pairs 10] [--paths 3000]
"""

from __future__ import annotations

import argparse
import math
import random
from collections.abc import Callable, Sequence

from autoresearch.stats.paired import in_looks, paired_gain


def signed_rank_interval(d: Sequence[float], level: float = 0.95) -> tuple[float, float]:
    n = len(d)
    counts = [1]
    for rank in range(1, n + 1):
        grown = counts + [0] * rank
        for w, c in enumerate(counts):
            grown[w + rank] += c
        counts = grown
    alpha, running, c = (1 - level) / 2 * 2**n, 0, 0
    while running + counts[c] <= alpha:
        running += counts[c]
        c += 1
    c = max(c - 1, 0)
    walsh = sorted((d[i] + d[j]) / 2 for i in range(n) for j in range(i, n))
    return walsh[c], walsh[-1 - c]


def sign_interval(d: Sequence[float]) -> tuple[float, float]:
    found = paired_gain([0.0] * len(d), [-x for x in d], "minimize")
    return found.low, found.high


def two_looks(d: Sequence[float], more: Callable[[int], list[float]]) -> tuple[float, float, int]:
    """The sign test's interval as `confirm` takes it by default (`paired.in_looks`): the
    pairs of `d`, then as many more (`more`) where they leave a gain open."""
    pending: Sequence[float] | None = d

    def take(count: int) -> tuple[list[float], list[float]]:
        nonlocal pending
        drawn = pending if pending is not None else more(count)
        pending = None
        return [0.0] * count, [-x for x in drawn]

    _, _, found = in_looks((len(d), 2 * len(d)), "minimize", take)
    return found.low, found.high, found.pairs


def shapes(rng: random.Random) -> dict[str, Callable[[], float]]:
    def t3() -> float:
        return rng.gauss(0, 1) / math.sqrt(sum(rng.gauss(0, 1) ** 2 for _ in range(3)) / 3)

    return {
        "Gaussian": lambda: rng.gauss(0, 1),
        "t, 3 dof": t3,
        "10% spikes": lambda: rng.gauss(0, 1) + (8 * rng.random() if rng.random() < 0.1 else 0),
        "lognormal": lambda: math.exp(rng.gauss(0, 0.8)),
        "two states": lambda: rng.gauss(0, 0.2) + (3.0 if rng.random() < 0.5 else 0.0),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=10)
    parser.add_argument("--paths", type=int, default=3000)
    args = parser.parse_args()
    if args.pairs < 6 or args.paths < 100:
        raise SystemExit("--pairs must be 6 or more (95% needs 6) and --paths 100 or more.")
    rng = random.Random(20261204)

    def alone(
        interval: Callable[[Sequence[float]], tuple[float, float]],
    ) -> Callable[[Sequence[float], Callable[[int], list[float]]], tuple[float, float, int]]:
        return lambda d, more: (*interval(d), len(d))

    methods = {
        "sign test": alone(sign_interval),
        "sign test, two looks": two_looks,
        "signed rank": alone(signed_rank_interval),
    }
    print(
        f"{args.pairs} pairs (two looks: up to {2 * args.pairs}); confirmed at a gain of "
        "0 / 0.5 / 1 noise unit, coverage, pairs taken:"
    )
    for name, draw in shapes(rng).items():
        print(f"  {name}")
        for method, interval in methods.items():
            confirmed, covered, taken = [], 0, 0
            for g in (0.0, 0.5, 1.0):

                def more(n: int, g: float = g, draw: Callable[[], float] = draw) -> list[float]:
                    return [g + draw() - draw() for _ in range(n)]

                hits = 0
                for _ in range(args.paths):
                    low, high, pairs = interval(more(args.pairs), more)
                    hits += low > 0
                    covered += low <= g <= high
                    taken += pairs
                confirmed.append(hits / args.paths)
            shown = " / ".join(f"{x:.2f}" for x in confirmed)
            paths = 3 * args.paths
            print(
                f"    {method:21} {shown}, {covered / paths:.3f}, {taken / paths:.1f} pairs",
                flush=True,
            )
    methods_spiked = {"sign test": sign_interval, "signed rank": signed_rank_interval}
    spiked = [1.0 + 0.05 * rng.gauss(0, 1) for _ in range(10)]
    spiked[3] -= 30.0
    for method, spiked_interval in methods_spiked.items():
        low, high = spiked_interval(spiked)
        print(f"10 pairs 1 unit apart, one spiked by 30: {method} [{low:.3g}, {high:.3g}]")


if __name__ == "__main__":
    main()
