"""How far apart a version's runs drift, per shape of the noise zoo.

At every calibration of a campaign (`noise_model.choose`), the median difference of a
version's unbiased runs four to eight of its runs apart over that of successive ones: 1 on
independent runs, more where the machine's speed wanders (a reference carried from earlier
comparisons was taken at another speed), and more also under speed states and bursts.
Runs the campaigns of bench/decisions_fast.py under `auto` and prints, per shape, the
largest ratio and every one seen.

    PYTHONPATH=src:bench python bench/drift_ratio.py [--campaigns 3] [--attempts 30]
        [--noise-seed 0] [--scenarios SET (as bench/decisions_fast.py's)] [--only TEXT]
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence

from autoresearch.stats import noise_model, robust
from autoresearch.stats.decide import Rule
from autoresearch.stats.noise_model import Choice
from decisions import positive
from decisions_fast import SCENARIO_HELP, SCENARIO_SETS, chosen, run_campaign

NEAR, FAR = 1, (4, 8)  # runs of the version apart
FAR_MIN = 24  # differences far apart before a ratio is said (1.0 before)


def drift_ratio(groups: Mapping[str, Sequence[float]], selected: Mapping[str, int]) -> float:
    """The median absolute difference FAR runs apart over the NEAR one's."""
    near: list[float] = []
    far: list[float] = []
    low, high = FAR
    for _, runs in noise_model.unbiased(groups, selected):
        near.extend(abs(runs[i + NEAR] - runs[i]) for i in range(len(runs) - NEAR))
        far.extend(
            abs(runs[i + h] - runs[i]) for h in range(low, high + 1) for i in range(len(runs) - h)
        )
    if len(far) < FAR_MIN or not near:
        return 1.0
    step = robust.median(near)
    return robust.median(far) / step if step > 0 else 1.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--campaigns", type=positive, default=3)
    parser.add_argument("--attempts", type=positive, default=30)
    parser.add_argument("--noise-seed", type=int, default=0)
    parser.add_argument(
        "--scenarios", default="zoo", choices=tuple(SCENARIO_SETS), help=SCENARIO_HELP
    )
    parser.add_argument("--only", default="", help="scenarios whose name contains this")
    args = parser.parse_args()
    seen: list[float] = []
    choose = noise_model.choose

    def recording(
        rule: Rule,
        groups: Mapping[str, Sequence[float]],
        selected: Mapping[str, int],
        direction: str,
    ) -> Choice | None:
        seen.append(drift_ratio(groups, selected))
        return choose(rule, groups, selected, direction)

    # The book calls the module's `choose` when it calibrates: seen there, as it happens.
    noise_model.choose = recording
    for scenario in chosen(args.scenarios, args.only):
        seen.clear()
        for campaign in range(args.campaigns):
            run_campaign(scenario, "auto", campaign, args.attempts, args.noise_seed)
        shown = ", ".join(f"{r:.2f}" for r in seen)
        print(f"{scenario.name[:60]:60s} largest {max(seen, default=1.0):5.2f}  ({shown})")


if __name__ == "__main__":
    main()
