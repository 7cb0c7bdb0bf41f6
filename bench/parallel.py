"""Several candidates in flight (`[executor] jobs`), driven through the real engine.

Three figures, each on real git repositories with sleep-bound metrics:

1. Throughput: experiments per hour with 1, 2, 4 and 8 jobs side by side on a metric that
   sleeps (`--sleep` seconds) and never improves (every attempt is a plain discard, so
   each costs one proposal and one measurement). Goal: >= 0.85 N times the 1-job rate.
2. Decisions: true gain per wall-clock hour with 4 jobs vs 1 on the decision benchmark's
   candidates (see bench/decisions.py: 55% neutral, 30% harmful, 15% helpful, stratified
   in blocks of 20; noise 1% of the value, rule `sequential`), with a metric that sleeps.
   A false keep is a keep whose true value is not better than the incumbent it replaced,
   counted against the candidates that are not better. Goal: >= 3x, false keeps <= 5%.
3. Merge and re-verify: four winners from the same base, on a metric where their effects
   add and on one where they interact (any two together are worse than either alone):
   combinations tried and kept, and the final metric against the best single winner.

    python bench/parallel.py [--sleep 4.0] [--budget 150] [--parts throughput,decisions,merge]
    python bench/parallel.py --parts ray     # 1 and 2 jobs on a local Ray cluster of two
                                             # worker node processes (needs autoresearch[ray])
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

from gitrepo import commit_all, git

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from autoresearch.attempt import AttemptRecord, Status
from autoresearch.config import load_campaign
from autoresearch.engine import Engine
from autoresearch.events import Attempted, Event
from autoresearch.store.ledger import Ledger

CONFIG = """name = "b"
scope = ["calc.py"]
harness = ["bench.py"]
[metric]
command = "python3 bench.py"
direction = "minimize"
timeout = 120
[stop]
max_iterations = {iterations}
max_minutes = {minutes}
[proposer]
kind = "command"
command = "python3 {proposer}"
timeout = 60
[sandbox]
isolation = "none"
[decision]
{decision}
"""


def campaign(
    folder: Path,
    calc: str,
    bench: str,
    proposer: str,
    *,
    iterations: int,
    minutes: float = 0,
    decision: str = 'rule = "strict"',
    ray: str | None = None,
) -> Path:
    repo = folder / "repo"
    repo.mkdir(parents=True)
    script = folder / "propose.py"
    script.write_text(proposer)
    (repo / "calc.py").write_text(calc)
    (repo / "bench.py").write_text(bench)
    config = CONFIG.format(
        iterations=iterations, minutes=minutes, proposer=script, decision=decision
    )
    if ray:
        config += f'[executor]\nkind = "ray"\naddress = "{ray}"\n'
    (repo / "autoresearch.toml").write_text(config)
    git(repo, "init", "-q", "-b", "main")
    commit_all(repo, "initial")
    return repo


def run(repo: Path, jobs: int) -> tuple[list[AttemptRecord], float]:
    """The campaign's records and the seconds from the baseline's record to the stop."""
    marks: list[float] = []

    def listen(event: Event) -> None:
        if isinstance(event, Attempted) and event.record.status is Status.BASELINE:
            marks.append(time.monotonic())

    Engine(load_campaign(repo), on_event=listen, jobs=jobs).run()
    seconds = time.monotonic() - marks[0]
    return Ledger(repo / ".autoresearch" / "b").read(), seconds


# -- 1. throughput ---------------------------------------------------------------------------

FLAT_BENCH = "import time\ntime.sleep({sleep})\nprint(10)\n"
# Any change will do: the metric never moves, so every attempt is a discard.
TOUCH = """import random
with open("calc.py", "w") as f:
    f.write(f"X = {random.random()!r}\\n")
"""


def throughput(
    sleep: float, ray: str | None = None, all_jobs: tuple[int, ...] = (1, 2, 4, 8)
) -> None:
    where = f"a local Ray cluster ({ray})" if ray else "this machine"
    print(f"\n## Throughput on {where}: metric sleeps {sleep:g} s, 4 attempts per job")
    goal = 0.8 if ray else 0.85
    print(f"jobs  attempts  seconds  experiments/hour  speedup  goal ({goal:g} N)")
    base = None
    for jobs in all_jobs:
        with tempfile.TemporaryDirectory() as tmp:
            repo = campaign(
                Path(tmp),
                "X = 0\n",
                FLAT_BENCH.format(sleep=sleep),
                TOUCH,
                iterations=4 * jobs,
                ray=ray,
            )
            records, seconds = run(repo, jobs)
        attempts = len(records) - 1
        rate = attempts / seconds * 3600
        base = base or rate
        speedup = rate / base
        ok = "ok" if speedup >= goal * jobs else "MISSED"
        print(f"{jobs:4d}  {attempts:8d}  {seconds:7.1f}  {rate:16.0f}  {speedup:7.2f}  {ok}")


# -- 2. decisions ----------------------------------------------------------------------------

# The decision benchmark's candidates (bench/decisions.py, "gauss 1%"): the code's true
# value is 100 - sum(E); 55% of candidates are neutral, 30% harmful, 15% helpful (about 4%
# of the start value each). Candidate i sets its own E<i>, on a line of its own, so winners
# from the same incumbent merge cleanly and their effects add up.
PLAN_SIZE = 1500
START = 100.0
PLANNED = """import json, os
i = int(os.environ["AUTORESEARCH_ITERATION"])
plan = json.load(open({plan!r}))
effect = plan[i - 1] if i <= len(plan) else 0.0
text = open("calc.py").read().replace(f"E{{i}} = 0.0\\n", f"E{{i}} = {{effect!r}}\\n", 1)
open("calc.py", "w").write(text)
print(f"candidate {{i}} (true effect {{effect:+.3f}})")
"""
NOISY_BENCH = """import random, time, calc
time.sleep({sleep})
true = {start} - sum(v for k, v in vars(calc).items() if k.startswith("E"))
print(true + random.gauss(0, {sigma_pct} / 100 * true))
"""
DECISION = 'rule = "sequential"\nmin_delta = "0.5%"\nmax_samples = 8\nconfidence = 0.95'


def make_plan(seed: int = 0, helpful_pct: float = 4.0) -> list[float]:
    """The decision benchmark's mix, stratified: every block of 20 candidates holds 11
    neutral, 6 harmful and 3 helpful ones in a shuffled order, so the gain on offer grows
    with the number of candidates tried, not with the luck of the draw."""
    rng = random.Random(f"parallel-{seed}")
    h = helpful_pct / 100.0 * START
    block = [-0.0] * 11 + [-f * h for f in (0.5, 0.9, 1.3, 1.7, 2.1, 2.5)]
    block += [f * h for f in (0.5, 1.0, 1.5)]
    plan: list[float] = []
    while len(plan) < PLAN_SIZE:
        shuffled = list(block)  # -0.0: a real change of the file, with no effect
        rng.shuffle(shuffled)
        plan += shuffled
    return plan[:PLAN_SIZE]


def true_value(repo: Path, commit: str) -> float:
    text = git(repo, "show", f"{commit}:calc.py")
    values = [float(line.split(" = ")[1]) for line in text.splitlines() if " = " in line]
    return START - sum(values)


def decisions(sleep: float, budget: float, sigma_pct: float) -> None:
    print(
        f"\n## Decisions: the decision benchmark's candidates, noise {sigma_pct:g}% (gauss), "
        f"rule sequential, metric sleeps {sleep:g} s, {budget:g} s of campaign per run"
    )
    print(
        "jobs  attempts  seconds  true gain (of offered)  gain/hour  keeps  merged  "
        "superseded  false keeps (of not-better candidates)"
    )
    plan = make_plan()
    calc = "".join(f"E{i} = 0.0\n\n#\n\n" for i in range(1, PLAN_SIZE + 1))
    rates = {}
    for jobs in (1, 4):
        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / "plan.json").write_text(json.dumps(plan))
            repo = campaign(
                Path(tmp),
                calc,
                NOISY_BENCH.format(sleep=sleep, start=START, sigma_pct=sigma_pct),
                PLANNED.format(plan=str(Path(tmp) / "plan.json")),
                iterations=PLAN_SIZE,
                minutes=budget / 60,
                decision=DECISION,
            )
            records, seconds = run(repo, jobs)
            keeps = [r for r in records if r.status.sets_best and r.iteration]
            false = sum(
                1
                for r in keeps
                if true_value(repo, r.commit or "") >= true_value(repo, r.parent or "")
            )
            best = keeps[-1].commit if keeps else records[0].commit
            gain = true_value(repo, records[0].commit or "") - true_value(repo, best or "")
        measured = [r for r in records if r.iteration and r.samples]
        not_better = sum(1 for r in measured if plan[r.iteration - 1] <= 0)
        tried = max(r.iteration for r in records)
        offered = sum(e for e in plan[:tried] if e > 0)
        merged = sum(1 for r in records if r.status is Status.MERGED)
        superseded = sum(1 for r in records if r.status is Status.SUPERSEDED)
        rates[jobs] = gain / seconds * 3600
        share = false / not_better if not_better else 0.0
        print(
            f"{jobs:4d}  {len(records) - 1:8d}  {seconds:7.1f}  {gain:9.1f} ({offered:7.1f})  "
            f"{rates[jobs]:9.0f}  {len(keeps):5d}  {merged:6d}  {superseded:10d}  "
            f"{false} of {not_better} ({share:.1%})"
        )
    ratio = rates[4] / rates[1] if rates[1] else float("inf")
    print(f"true gain per hour, 4 jobs vs 1: {ratio:.2f}x (goal >= 3x)")


# -- 3. merge and re-verify ------------------------------------------------------------------

ADD = """import calc, time
time.sleep({sleep})
print(10 - calc.A - 2 * calc.B - 3 * calc.C - calc.D)
"""
# Each change helps alone; any two together cost more than they bring.
INTERACT = """import calc, time
time.sleep({sleep})
on = [calc.A, calc.B, calc.C, calc.D]
pairs = sum(on[i] * on[j] for i in range(4) for j in range(i + 1, 4))
print(10 - calc.A - 2 * calc.B - 3 * calc.C - calc.D + 6 * pairs)
"""
ONE_EACH = """import os
name = "ABCD"[(int(os.environ["AUTORESEARCH_ITERATION"]) - 1) % 4]
text = open("calc.py").read().replace(f"{name} = 0", f"{name} = 1")
open("calc.py", "w").write(text)
"""


def merge(sleep: float) -> None:
    print("\n## Merge and re-verify: four winners from the same base, 4 jobs")
    print("scenario    tried  kept  superseded  best single  final  gain over best single")
    calc = "A = 0\n\n#\n\nB = 0\n\n#\n\nC = 0\n\n#\n\nD = 0\n"
    for name, bench in (("additive", ADD), ("interacting", INTERACT)):
        with tempfile.TemporaryDirectory() as tmp:
            repo = campaign(Path(tmp), calc, bench.format(sleep=sleep), ONE_EACH, iterations=4)
            records, _ = run(repo, 4)
        tried = sum(1 for r in records if r.note and "merged onto" in r.note)
        merged = sum(1 for r in records if r.status is Status.MERGED)
        superseded = sum(1 for r in records if r.status is Status.SUPERSEDED)
        singles = [
            r.metric
            for r in records
            if r.iteration and r.metric is not None and not (r.note and "merged onto" in r.note)
        ]
        # A winner merged later was first measured alone: its note keeps that number.
        for r in records:
            if r.note and "merged onto" in r.note:
                singles.append(float(r.note.split("(")[1].split(")")[0]))
        best_single = min(singles)
        final = [r.metric for r in records if r.status.sets_best][-1]
        assert final is not None
        print(
            f"{name:11s} {tried:5d}  {merged:4d}  {superseded:10d}  {best_single:11g}  "
            f"{final:5g}  {best_single - final:+g}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sleep", type=float, default=4.0)
    parser.add_argument("--budget", type=float, default=150.0)
    parser.add_argument("--noise", type=float, default=1.0, help="noise, %% of the value")
    parser.add_argument("--parts", default="throughput,decisions,merge")
    args = parser.parse_args()
    parts = args.parts.split(",")
    print(f"bench/parallel.py on {os.cpu_count()} cores: {json.dumps(vars(args))}")
    if "throughput" in parts:
        throughput(args.sleep)
    if "decisions" in parts:
        decisions(args.sleep, args.budget, args.noise)
    if "merge" in parts:
        merge(args.sleep)
    if "ray" in parts:
        from autoresearch.testing.raycluster import ray_cluster

        # A head that runs nothing and two worker node processes of one CPU each.
        with ray_cluster(workers=2, head_cpus=0, cpus=1) as address:
            throughput(args.sleep, ray=address, all_jobs=(1, 2))


if __name__ == "__main__":
    main()
