"""The campaigns of bench/decisions.py in-process, over many noise draws.

The real `Evaluator` and decision rules run unchanged; only the metric command (computed in
Python with the very noise of bench/decisions.py's metric.py) and the git worktree are
replaced, so a campaign takes milliseconds instead of a minute. It reproduces
bench/decisions.py run for run, which leaves time for what one slow run cannot show: how
much of a comparison between rules is the luck of one noise draw. For each scenario and rule
it prints the mean over `--noise-seeds` draws of the same planned candidates, and how often
`sequential` met each goal.

Beside them, how the recorded best went: `best back` counts the keeps whose recorded best
(the level the comparison judged, as the engine records it) moved the wrong way, `was`
those where the kept candidate's own mean (what ledgers recorded before) would have, and
`best err` / `was err` how far the final recorded best is from the kept code's true value
(mean absolute %). `below` is the part of `captured` that came from gains smaller than the
campaigns' `min_delta` (0.5%), which the user asked not to keep: `strict` ignores min_delta,
the other rules keep only what looks larger than it.

    python bench/decisions_fast.py [--campaigns 20] [--attempts 40] [--noise-seeds 10]
        [--scenarios all|goals|others|simulated|traces|untuned|states|more|order|zoo|every]
        [--rules auto,strict,...] [--only TEXT] [--jobs 2] [--reasons] [--runs]
"""

from __future__ import annotations

import argparse
import statistics
import tomllib
from collections import Counter
from collections.abc import Callable, Mapping
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from autoresearch.config import Campaign, parse_config
from autoresearch.engine.recording import kept_level
from autoresearch.executors import CommandSpec, Measurement
from autoresearch.measure.evaluation import Evaluation, Evaluator
from autoresearch.measure.integrity import Fingerprint
from autoresearch.stats.decide import Rule, Verdict
from autoresearch.stats.sample_book import option_label
from autoresearch.workspace import Candidate
from decisions import (
    DATA,
    GOAL_SCENARIOS,
    MORE_SCENARIOS,
    ORDER_SCENARIOS,
    RULES,
    SCENARIOS,
    START,
    STATES_SCENARIOS,
    TRACE_SCENARIOS,
    UNTUNED_SCENARIOS,
    Scenario,
    config_text,
    gain_below_min_delta,
    make_plan,
    measurement,
    noise_state,
    positive,
)


class Replica:
    """model.py, metric.py and the worktree of one simulated campaign, in memory.

    It is the `Executor` (every run is metric.py's `measurement`) and the measurement
    tree (showing the incumbent's or the candidate's files)."""

    path = Path(".")

    def __init__(self, state: dict[str, Any]) -> None:
        self.state = state
        self.kept: list[tuple[int, float]] = []  # (candidate, true effect), as in model.py
        self.candidate: tuple[int, float] | None = None
        self.showing_incumbent = False
        self.runs: list[tuple[str, float]] = []  # ("C" or "I", value) of every run

    def settle(self) -> None:
        pass

    def show(self, commit: str) -> None:
        candidate = self.candidate
        self.showing_incumbent = candidate is None or commit != f"c{candidate[0]}"

    def run(
        self, spec: CommandSpec, *, workspace: Path, env: dict[str, str], log_stem: Path
    ) -> Measurement:
        lines = list(self.kept)
        if self.candidate is not None and not self.showing_incumbent:
            lines.append(self.candidate)
        version = str(lines[-1][0]) if lines else "0"
        value = measurement(self.state, version, [effect for _, effect in lines])
        side = "C" if self.candidate is not None and not self.showing_incumbent else "I"
        self.runs.append((side, value))
        return Measurement("ok", value, 0.0, "", log_stem)


class _Unchanged(Fingerprint):
    """No harness file, and nothing ever changes."""

    def changed(
        self, campaign: Campaign, workspace: Path, expect: Mapping[str, str] | None = None
    ) -> None:
        return None


def run_campaign(
    scenario: Scenario,
    rule: str,
    campaign: int,
    attempts: int,
    noise_seed: int = 0,
    kept_not_better: list[dict[str, Any]] | None = None,
    where: Counter[tuple[str, int, str]] | None = None,
    by_option: Counter[tuple[str, str]] | None = None,
) -> dict[str, float]:
    """One campaign of bench/decisions.py, with the same result row; every candidate kept
    that was not better is described in `kept_not_better`, and where the runs went is
    counted in `where` (`print_runs`: the candidates' and the incumbent's runs under
    ("candidate", 0, "") and ("incumbent", 0, ""), each attempt under ("better" or "not
    better", its candidate runs, `ending`)), when given; and the attempts and runs under each
    option in force as an attempt began in `by_option` (`procedure_label`: (label, "attempts")
    and (label, "runs"))."""
    plan = make_plan(scenario, campaign, attempts)
    replica = Replica(noise_state(scenario, campaign, attempts, noise_seed))
    text = config_text(
        rule,
        state="s",
        state_dir="s",
        python="python",
        attempts=attempts,
        plan="p",
        proposer="p",
    )
    config = parse_config("bench", tomllib.loads(text))
    nowhere = Path("/nonexistent")
    evaluator = Evaluator(
        Campaign(config, nowhere, nowhere),
        replica,  # type: ignore[arg-type]
        replica,
        _Unchanged(),  # type: ignore[arg-type]
        nowhere,
        lambda *args, **kwargs: None,
        tree=replica,
    )
    incumbent = "c0"
    measured = evaluator.baseline(incumbent)
    runs = measured.runs
    assert measured.metric is not None
    best = was = measured.metric  # the recorded best, and the kept candidate's own mean
    back = was_back = 0
    kept: set[int] = set()
    for i, effect in enumerate(plan, 1):
        replica.candidate = (i, effect)
        replica.state["iteration"] = i
        start = len(replica.runs)
        option = evaluator.book.rule.option
        label = procedure_label(evaluator.book.rule)
        measured = evaluator.evaluate(i, Candidate(tree=""), f"c{i}", incumbent)
        runs += measured.runs
        if by_option is not None:
            by_option[label, "attempts"] += 1
            by_option[label, "runs"] += measured.runs
        if where is not None:
            taken = replica.runs[start:]
            ran = sum(1 for side, _ in taken if side == "C")
            where[("candidate", 0, "")] += ran
            where[("incumbent", 0, "")] += len(taken) - ran
            where[("better" if effect > 0 else "not better", ran, ending(measured))] += 1
        if kept_not_better is not None and measured.verdict is Verdict.KEEP and effect <= 0:
            kept_not_better.append(
                {
                    "campaign": campaign,
                    "draw": noise_seed,
                    "iteration": i,
                    "effect": effect,
                    "option": "/".join(map(str, option)),
                    "reason": measured.reason,
                    "runs": replica.runs[start:],
                }
            )
        if measured.verdict is Verdict.KEEP and not measured.failure:
            incumbent = f"c{i}"
            evaluator.kept(incumbent)
            replica.kept.append((i, effect))
            replica.state["kept"] = len(replica.kept)
            kept.add(i)
            after = kept_level(best, measured, "minimize")
            assert after is not None and measured.metric is not None
            back += after > best
            was_back += measured.metric > was
            best, was = after, measured.metric
        replica.candidate = None
    gain = sum(effect for _, effect in replica.kept)
    true = START - gain
    return {
        "attempts": len(plan),
        "runs": runs,
        "false_keeps": sum(1 for i in kept if plan[i - 1] <= 0),
        "not_better": sum(1 for e in plan if e <= 0),
        "missed": sum(1 for i, e in enumerate(plan, 1) if e > 0 and i not in kept),
        "helpful": sum(1 for e in plan if e > 0),
        "gain": gain,
        "gain_below": gain_below_min_delta([e for _, e in replica.kept]),
        "available": sum(e for e in plan if e > 0),
        "final": true,
        "keeps": len(kept),
        "best_back": back,
        "was_back": was_back,
        "best_err": abs(best - true) / true,
        "was_err": abs(was - true) / true,
        "campaigns": 1,
    }


def procedure_label(rule: Rule) -> str:
    """The procedure an attempt is judged by, in a few words: which runs are judged, then
    the option (`sample_book.option_label`: the estimator, the earliest keep)."""
    runs = "every run judged"
    if rule.carry:
        runs = "judged after own" + (", probing" if rule.probe else "")
    return f"{runs}: {option_label(*rule.option)}"


def ending(measured: Evaluation) -> str:
    """What ended an attempt, in a word, from its verdict and the reason the engine gave."""
    if measured.verdict is Verdict.KEEP:
        return "keep"
    reason = measured.reason or ""
    for words, name in (
        ("screened out", "screen"),
        ("futility", "futility"),
        ("not better", "not better"),
        ("short of", "short of min_delta"),
        ("max_samples", "max_samples"),
        ("the bar", "below the bar"),
        ("than the incumbent", "worse"),
    ):
        if words in reason:
            return name
    return "other"


def totals(rows: list[dict[str, float]]) -> dict[str, float]:
    total: dict[str, float] = {}
    for row in rows:
        for key, value in row.items():
            total[key] = total.get(key, 0.0) + value
    return total


# The sets of shapes `--scenarios` names.
SCENARIO_SETS: dict[str, tuple[Scenario, ...]] = {
    "all": SCENARIOS + TRACE_SCENARIOS,
    "goals": GOAL_SCENARIOS,
    "others": SCENARIOS[len(GOAL_SCENARIOS) :],
    "simulated": SCENARIOS,
    "traces": TRACE_SCENARIOS,
    "untuned": UNTUNED_SCENARIOS,
    "states": STATES_SCENARIOS,
    "more": MORE_SCENARIOS,
    "order": ORDER_SCENARIOS,
    "zoo": SCENARIOS + TRACE_SCENARIOS + UNTUNED_SCENARIOS,
    "every": SCENARIOS + TRACE_SCENARIOS + UNTUNED_SCENARIOS + STATES_SCENARIOS + MORE_SCENARIOS,
}
SCENARIO_HELP = (
    "all (the noise zoo: simulated and replayed traces); goals (the two Gaussian levels); "
    "others (the simulated rest); simulated; traces; untuned (shapes the rules were not "
    "tuned on); states (the frequency states in other gaps and ways of switching); more "
    "(skewed noise, a wandering speed); order (artifacts that follow the order of runs); zoo "
    "(all and untuned); every (zoo, states and more)"
)


def chosen(name: str, only: str = "") -> tuple[Scenario, ...]:
    """The shapes of the set `name` whose name contains `only`, but a replayed trace whose
    recording is missing."""
    return tuple(
        s
        for s in SCENARIO_SETS[name]
        if only in s.name and (not s.trace or (DATA / f"{s.trace}.csv").exists())
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--campaigns", type=positive, default=20)
    parser.add_argument("--attempts", type=positive, default=40)
    parser.add_argument("--noise-seeds", type=positive, default=10)
    parser.add_argument(
        "--scenarios",
        default="all",
        choices=tuple(SCENARIO_SETS),
        help=SCENARIO_HELP,
    )
    parser.add_argument("--rules", default="auto,auto-time,sequential,strict,repeats")
    parser.add_argument("--only", default="", help="scenarios whose name contains this")
    parser.add_argument("--jobs", type=positive, default=1, help="campaigns run at once")
    parser.add_argument(
        "--reasons",
        action="store_true",
        help="print every candidate `auto` kept that was not better: why, and its runs",
    )
    parser.add_argument(
        "--runs",
        action="store_true",
        help="print where each rule's runs went: the candidate's, the incumbent's, how "
        "the attempts ended by how many candidate runs they took, and under which option",
    )
    args = parser.parse_args()
    unknown = set(args.rules.split(",")) - set(RULES)
    if unknown:
        parser.error(f"--rules: unknown {', '.join(sorted(unknown))}")
    rules = [r for r in RULES if r in args.rules.split(",")]
    scenarios = chosen(args.scenarios, args.only)
    print(
        f"{args.campaigns} campaigns x {args.attempts} attempts, noise draws 0 to "
        f"{args.noise_seeds - 1} (draw 0 is bench/decisions.py's); means over the draws\n"
    )
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        for scenario in scenarios:
            per_rule: dict[str, list[dict[str, float]]] = {}
            where: dict[str, Counter[tuple[str, int, str]]] = {}  # `print_runs`
            by_option: dict[str, Counter[tuple[str, str]]] = {}
            kept: list[dict[str, Any]] = []  # `auto`'s kept not-better candidates
            for rule in rules:
                jobs = [
                    (scenario, rule, c, args.attempts, seed, args.reasons and rule == "auto")
                    for seed in range(args.noise_seeds)
                    for c in range(args.campaigns)
                ]
                done = list(
                    pool.map(campaign_job, jobs) if args.jobs > 1 else map(campaign_job, jobs)
                )
                per_rule[rule] = [
                    totals(
                        [
                            row
                            for row, *_ in done[seed * args.campaigns : (seed + 1) * args.campaigns]
                        ]
                    )
                    for seed in range(args.noise_seeds)
                ]
                kept.extend(d for _, found, _, _ in done for d in found)
                where[rule] = sum((w for _, _, w, _ in done), Counter())
                by_option[rule] = sum((o for *_, o in done), Counter())
            report(scenario, per_rule)
            if args.runs:
                print_runs(per_rule, where, by_option, args.noise_seeds)
            print_reasons(kept)


def campaign_job(
    job: tuple[Scenario, str, int, int, int, bool],
) -> tuple[
    dict[str, float],
    list[dict[str, Any]],
    Counter[tuple[str, int, str]],
    Counter[tuple[str, str]],
]:
    """One campaign (for a pool of processes): its row, its kept not-better candidates
    when asked for them, where its runs went and under which option (`print_runs`)."""
    scenario, rule, campaign, attempts, seed, reasons = job
    found: list[dict[str, Any]] | None = [] if reasons else None
    where: Counter[tuple[str, int, str]] = Counter()
    by_option: Counter[tuple[str, str]] = Counter()
    row = run_campaign(scenario, rule, campaign, attempts, seed, found, where, by_option)
    return row, found or [], where, by_option


def print_reasons(found: list[dict[str, Any]]) -> None:
    for d in found:
        runs = " ".join(f"{side}:{value:.2f}" for side, value in d["runs"])
        print(
            f"  kept, not better: campaign {d['campaign']} draw {d['draw']} #{d['iteration']} "
            f"effect {d['effect']:+.3f} [{d['option']}] {d['reason']}\n      runs {runs}"
        )


def print_runs(
    per_rule: dict[str, list[dict[str, float]]],
    where: dict[str, Counter[tuple[str, int, str]]],
    by_option: dict[str, Counter[tuple[str, str]]],
    draws: int,
) -> None:
    """Where each rule's runs went (means over the draws): the candidates', the
    incumbent's re-measurements and the baselines', how the attempts ended, by the
    candidate runs they took (those not judged among them: under `Rule.carry` the first
    run of each block, so "screen" may follow two), and the attempts and runs under each
    option in force."""
    for rule, rows in per_rule.items():
        counts = where[rule]
        total = sum(t["runs"] for t in rows) / draws
        candidate = counts["candidate", 0, ""] / draws
        incumbent = counts["incumbent", 0, ""] / draws
        print(
            f"  {rule}: {total:.0f} runs: candidates {candidate:.0f}, the incumbent "
            f"{incumbent:.0f} ({100 * incumbent / total:.0f}%), baselines "
            f"{total - candidate - incumbent:.0f}"
        )
        for kind in ("not better", "better"):
            ends = sorted((ran, how, n / draws) for (k, ran, how), n in counts.items() if k == kind)
            by_runs = [
                f"{ran}: " + ", ".join(f"{how} {n:g}" for r, how, n in ends if r == ran)
                for ran in sorted({ran for ran, _, _ in ends})
            ]
            attempts = sum(n for _, _, n in ends)
            print(f"    {kind} ({attempts:g} attempts), by candidate runs: " + "; ".join(by_runs))
        options = by_option[rule]
        for label in sorted({label for label, _ in options}):
            count, ran = options[label, "attempts"], options[label, "runs"]
            print(
                f"    {label}: {count / draws:g} attempts, {ran / draws:g} runs "
                f"({ran / count:.2f} an attempt)"
            )
    print()


def captured(t: dict[str, float]) -> float:
    return t["gain"] / t["available"]


def report(scenario: Scenario, per_rule: dict[str, list[dict[str, float]]]) -> None:
    print(scenario.name)
    print(
        f"{'rule':<11}{'runs':>8}{'false keeps':>13}{'captured':>10}  {'(min-max)':<14}"
        f"{'below':>6}"
        f"{'best back':>13}{'was':>10}{'best err':>10}{'was err':>9}"
    )
    for rule, draws in per_rule.items():
        caps = [captured(t) for t in draws]
        runs = statistics.fmean(t["runs"] for t in draws)
        false_keeps = statistics.fmean(t["false_keeps"] / t["not_better"] for t in draws)
        keeps = sum(t["keeps"] for t in draws)
        below = statistics.fmean(t["gain_below"] / t["available"] for t in draws)
        back, was = (int(sum(t[k] for t in draws)) for k in ("best_back", "was_back"))
        errs = [
            100 * sum(t[k] for t in draws) / sum(t["campaigns"] for t in draws)
            for k in ("best_err", "was_err")
        ]
        print(
            f"{rule:<11}{runs:>8.0f}{100 * false_keeps:>12.1f}%{statistics.fmean(caps):>10.3f}"
            f"  ({min(caps):.3f}-{max(caps):.3f}){below:>7.3f}{f'{back}/{int(keeps)}':>13}"
            f"{was:>10}"
            f"{errs[0]:>9.2f}%{errs[1]:>8.2f}%"
        )
    mine = "auto" if "auto" in per_rule else "sequential"
    if not {mine, "repeats", "strict"} <= set(per_rule):
        print()
        return
    draws = list(zip(*(per_rule[r] for r in (mine, "repeats", "strict")), strict=True))

    def share(test: Callable[[Any, Any, Any], bool]) -> str:
        return f"{sum(1 for d in draws if test(*d))}/{len(draws)}"

    def mean(key: Callable[[dict[str, float]], float], rule: str) -> float:
        return statistics.fmean(key(t) for t in per_rule[rule])

    fk = mean(lambda t: t["false_keeps"] / t["not_better"], mine)
    cap, cap_strict, cap_rep = (mean(captured, r) for r in (mine, "strict", "repeats"))
    runs = mean(lambda t: t["runs"], mine) / mean(lambda t: t["runs"], "repeats")
    goals = [
        f"false keeps {100 * fk:.1f}% {'<=' if fk <= 0.05 else '>'} 5%",
        f"captured {cap:.3f} {'>=' if cap >= cap_strict else '<'} strict's {cap_strict:.3f}",
        f"{'>=' if cap >= cap_rep - 0.03 else '<'} repeats' - 0.03 ({cap_rep - 0.03:.3f})",
        f"runs {runs:.2f} of repeats' {'<=' if runs <= 0.5 else '>'} 0.5",
    ]
    print(f"{mine} (means over draws): " + ", ".join(goals))
    print(
        f"{mine} in how many draws: false keeps <= 5% "
        + share(lambda s, r, t: s["false_keeps"] <= 0.05 * s["not_better"])
        + ", runs <= half of repeats' "
        + share(lambda s, r, t: s["runs"] <= 0.5 * r["runs"])
        + ", captured >= repeats "
        + share(lambda s, r, t: captured(s) >= captured(r))
        + ", captured > strict "
        + share(lambda s, r, t: captured(s) > captured(t))
        + "\n"
    )


if __name__ == "__main__":
    main()
