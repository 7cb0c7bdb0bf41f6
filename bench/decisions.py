"""Decision rules side by side, on simulated campaigns driven through the real engine.

Each campaign is a real git repository. `model.py` holds the list of changes applied so far;
the true value of the code is `100 - sum(EFFECTS)` (lower is better). The proposer appends
the next planned candidate, whose true effect is known (most neutral or harmful, some
helpful); a neutral candidate is still a real change of the file. The metric command
prints the true value plus noise. Every rule sees the same planned candidates, and the j-th
measurement of a version of the code draws the same noise under every rule.

For each noise scenario and rule it prints: attempts, metric runs, false keeps (kept with
true effect <= 0, as a share of the candidates that are not better), missed improvements,
the captured fraction of the available improvement (final true gain / sum of the helpful
candidates' effects) and the final true value.

    python bench/decisions.py [--campaigns 40] [--attempts 40] [--jobs 2]
        [--scenarios all|goals|others] [--rules strict,...] [--noise-seed 0]

The default (40 campaigns, every scenario) takes about 50 minutes on 2 cores; with fewer
campaigns the comparison between rules is mostly the luck of the noise draw, which
bench/decisions_fast.py measures.
"""

from __future__ import annotations

import argparse
import inspect
import itertools
import json
import math
import os
import random
import sys
import tempfile
import zlib
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from gitrepo import commit_all, git

START = 100.0
# Every campaign's `min_delta`, in percent: the smallest gain the user asks to keep.
MIN_DELTA_PCT = 0.5


def gain_below_min_delta(effects: list[float]) -> float:
    """The part of kept `effects` smaller than min_delta: what the user asked not to keep."""
    return sum(e for e in effects if 0 < e < MIN_DELTA_PCT / 100 * START)


# "auto" is `rule = "auto"` under the default `[metric] noise = "auto"` (the estimator
# follows the noise's learned shape); "auto-time" and "auto-symmetric" fix the estimator
# with `noise = "time"` (the bench metric is minimized, and its bursts only make it worse)
# or `noise = "symmetric"`.
RULES = ("auto", "auto-time", "auto-symmetric", "sequential", "strict", "threshold", "repeats")


def config_text(rule: str, **fields: object) -> str:
    """The campaign file for one bench rule."""
    name, _, noise = rule.partition("-")
    return CONFIG.format(rule=name, noise=noise or "auto", min_delta=MIN_DELTA_PCT, **fields)


DATA = Path(__file__).resolve().parent / "data"


@dataclass(frozen=True)
class Scenario:
    name: str
    noise: str  # gauss | heavy | bursts | trace
    sigma_pct: float  # noise scale (the noise unit), % of the true value
    helpful_pct: float  # typical helpful effect, % of the start value
    drift_pct: float = 0.0  # change of the machine's speed over the campaign, %
    plan: str = "uniform"  # uniform | realistic (many small gains, a few large)
    trace: str = ""  # bench/data/<trace>.csv, replayed by block bootstrap
    # The untuned shapes (see UNTUNED_SCENARIOS): a burst's median loss in effect units
    # (its losses are right-skewed), the level shift halfway and the slow frequency state's
    # cost, in % of the true value.
    burst_units: float = 1.0
    shift_pct: float = 0.0
    slow_pct: float = 0.0
    # The frequency states' odds of switching at a run: from the fast state, from the slow.
    switch: tuple[float, float] = (0.3, 0.3)
    wander_pct: float = 0.0  # the sd of the machine's wandering speed (ar1), %
    # An artifact that follows the order of runs (ORDER_SCENARIOS, `order_artifact`): its
    # kind and numbers, as (key, value) pairs.
    order: tuple[tuple[str, object], ...] = ()
    # What the noise draws are keyed by instead of the name: the order shapes share one
    # key, so that every shape meets the same Gaussian draws and only its artifact differs.
    draws: str = ""
    # The metric printed to this unit (absolute, the start value being 100): a count, or a
    # number printed to few digits, whose runs tie though the noise is real.
    resolution: float = 0.0


SCENARIOS = (
    Scenario("gauss 1% (noise = 1/4 of a helpful change)", "gauss", 1.0, 4.0),
    Scenario("gauss 5% (noise = a helpful change)", "gauss", 5.0, 5.0),
    Scenario("heavy-tailed (t, 3 dof, scale 1%)", "heavy", 1.0, 4.0),
    Scenario("gauss 1% + drift -3%", "gauss", 1.0, 4.0, drift_pct=-3.0),
    Scenario("bursts (20% of runs, ~3 long, 0.5-2 effect units; gauss 1%)", "bursts", 1.0, 4.0),
    Scenario("gauss 1%, realistic effects", "gauss", 1.0, 4.0, plan="realistic"),
    Scenario("bursts, realistic effects", "bursts", 1.0, 4.0, plan="realistic"),
)
TRACE_SCENARIOS = tuple(
    Scenario(
        f"trace {name} (block bootstrap), {plan} effects", "trace", 2.0, 5.0, plan=plan, trace=name
    )
    for name in (
        "compress_idle",
        "speedup_quiet",
        "compress_quiet",
        "speedup_contended",
        "compress_contended",
    )
    for plan in ("uniform", "realistic")
)
# Shapes the rules were not tuned on, all with the realistic effect distribution: bursts
# of contention 3-5 runs long on 20% of the runs whose losses are right-skewed (one
# magnitude per burst, lognormal, its median a small, a typical and a large effect), the
# machine 10% slower from the campaign's middle attempt on, two CPU frequency states
# (15% apart, switching on about one run in three) and one lone spike (x1.6) on the
# first run after each keep. The last is known only to the in-process bench, which
# knows when a keep happens (`kept` in the state); bench/decisions.py runs the others.
UNTUNED_SCENARIOS = (
    *(
        Scenario(
            f"bursts 3-5 runs, 20% of runs, median loss {units:g} effect units (skewed)",
            "bursts35",
            1.0,
            4.0,
            plan="realistic",
            burst_units=units,
        )
        for units in (0.5, 1.0, 3.0)
    ),
    Scenario(
        "level shift +10% halfway (gauss 1%)", "shift", 1.0, 4.0, plan="realistic", shift_pct=10.0
    ),
    Scenario(
        "bimodal: two frequency states 15% apart (gauss 1%)",
        "bimodal",
        1.0,
        4.0,
        plan="realistic",
        slow_pct=15.0,
    ),
    Scenario(
        "a lone spike x1.6 right after each keep (gauss 1%)",
        "keep_spike",
        1.0,
        4.0,
        plan="realistic",
    ),
)
# The frequency states in other shapes than the one above, so that finding them is not
# fitted to one gap and one way of switching: a gap of 6% (within 8 sigmas of the noise,
# where no states should be found), 8% and 30%; states that last about 20 runs; a state
# drawn afresh for every run; the slow state on one run in five.
STATES_SCENARIOS = tuple(
    Scenario(
        f"bimodal: two frequency states {gap:g}% apart, {how} (gauss 1%)",
        "bimodal",
        1.0,
        4.0,
        plan="realistic",
        slow_pct=gap,
        switch=switch,
    )
    for gap, how, switch in (
        (6.0, "switching on one run in three", (0.3, 0.3)),
        (8.0, "switching on one run in three", (0.3, 0.3)),
        (30.0, "switching on one run in three", (0.3, 0.3)),
        (15.0, "each lasting about 20 runs", (0.05, 0.05)),
        (15.0, "drawn afresh for every run", (0.5, 0.5)),
        (15.0, "slow on one run in five", (0.1, 0.4)),
    )
)
# More shapes the rules were not tuned on: right-skewed noise on every run (a lognormal
# scaled to 1% and 3%), a machine whose speed wanders from run to run (each run keeping
# 0.9 of the last one's departure, 2% and 5% sd, beside 1% of noise of its own), and a
# metric printed to 1, 2 and 3 noise units (runs of the same code tie, though they vary).
MORE_SCENARIOS = (
    *(
        Scenario(
            f"right-skewed noise (lognormal, sd {pct:g}%)", "lognormal", pct, 4.0, plan="realistic"
        )
        for pct in (1.0, 3.0)
    ),
    *(
        Scenario(
            f"wandering speed (AR(1), 0.9 a run, sd {pct:g}%; gauss 1%)",
            "ar1",
            1.0,
            4.0,
            plan="realistic",
            wander_pct=pct,
        )
        for pct in (2.0, 5.0)
    ),
    *(
        Scenario(
            f"printed to {units:g} noise unit{'s' if units > 1 else ''} (gauss 1%, runs tie)",
            "gauss",
            1.0,
            4.0,
            plan="realistic",
            resolution=units,
        )
        for units in (1.0, 2.0, 3.0)
    ),
)
# Artifacts that follow the order of runs, on Gaussian noise of 1% with the realistic
# effects: every other run of the campaign slower; a run slower when its version differs
# from (or is the same as) the last run's; a run carrying part of the excess of slower
# runs before it (heat), or of the last run's difference both ways; a job every 7th or 3rd
# run; a candidate whose runs are three times as variable as the incumbent's; the first
# run of each attempt slower (the proposer's work evicted the caches).
ORDER_SCENARIOS = tuple(
    Scenario(name, "gauss", 1.0, 4.0, plan="realistic", order=tuple(order), draws="redteam")
    for name, order in (
        ("control: no artifact (gauss 1%, realistic effects)", ()),
        *(
            (
                f"parity +{pct:g}% (every even run of the campaign {pct:g}% slower; gauss 1%)",
                (("kind", "parity"), ("pct", pct)),
            )
            for pct in (1.0, 2.0, 5.0)
        ),
        *(
            (
                f"switch +{pct:g}% (a run whose version differs from the last run's {pct:g}% "
                "slower)",
                (("kind", "switch"), ("pct", pct)),
            )
            for pct in (2.0, 5.0)
        ),
        *(
            (
                f"same +{pct:g}% (a run of the same version as the last run {pct:g}% slower)",
                (("kind", "same"), ("pct", pct)),
            )
            for pct in (2.0, 5.0)
        ),
        (
            "thermal 0.5 (a run after a slower version: + 0.5 of its excess)",
            (("kind", "thermal"), ("share", 0.5), ("weights", (1.0,))),
        ),
        (
            "thermal 1.0 (a run after a slower version: + all of its excess)",
            (("kind", "thermal"), ("share", 1.0), ("weights", (1.0,))),
        ),
        (
            "thermal lasting (+0.5/0.25/0.125 of the excess of the 3 runs before)",
            (("kind", "thermal"), ("share", 1.0), ("weights", (0.5, 0.25, 0.125))),
        ),
        (
            "thermal symmetric 0.5 (a run carries 0.5 of the last run's difference, both ways)",
            (("kind", "thermal_sym"), ("share", 0.5)),
        ),
        *(
            (
                f"periodic job every 7 runs +{pct:g}%",
                (("kind", "period"), ("every", 7), ("pct", pct)),
            )
            for pct in (5.0, 20.0)
        ),
        (
            "period 3 +5% (every third run 5% slower)",
            (("kind", "period"), ("every", 3), ("pct", 5.0)),
        ),
        (
            "variance x3 on half the versions (odd candidate ids; kept ones keep it)",
            (("kind", "variance"), ("times", 3.0)),
        ),
        (
            "variance x3 on every changed version (all but the start)",
            (("kind", "variance_all"), ("times", 3.0)),
        ),
        (
            "first run of each attempt +3% (the proposer's work evicts caches)",
            (("kind", "attempt_first"), ("pct", 3.0)),
        ),
        ("first run of each attempt +8%", (("kind", "attempt_first"), ("pct", 8.0))),
    )
)
GOAL_SCENARIOS = SCENARIOS[:2]
ZOO = SCENARIOS + TRACE_SCENARIOS
# The share of runs inside a burst, the mean burst length and its loss in effect units.
BURST_SHARE, BURST_LENGTH, BURST_LOSS = 0.2, 3, (0.5, 2.0)
BLOCK = 10  # runs per block of a replayed trace (keeps its bursts together)


def load_trace(name: str) -> list[float]:
    """A recorded trace as ratios to its median (value,loadavg1 per line)."""
    lines = (DATA / f"{name}.csv").read_text().split()[1:]
    values = [float(line.split(",")[0]) for line in lines if line]
    ordered = sorted(values)
    median = ordered[len(ordered) // 2]
    return [round(v / median, 5) for v in values]


def noise_state(scenario: Scenario, campaign: int, attempts: int, noise_seed: int) -> dict:
    """What the metric needs to draw a campaign's noise, and its counters."""
    if scenario.draws:
        key = f"{scenario.draws}/{campaign}/{noise_seed}"
    else:
        key = f"{scenario.name}/{campaign}" + (f"/{noise_seed}" if noise_seed else "")
    return {
        "runs": 0,
        "per_version": {},
        "seed": zlib.crc32(key.encode()),
        "noise": scenario.noise,
        "sigma_pct": scenario.sigma_pct,
        "drift_pct": scenario.drift_pct,
        "expected_runs": attempts * 3,
        "burst_left": 0,
        "burst_unit": scenario.helpful_pct / 100.0 * START,
        "burst": [BURST_SHARE, BURST_LENGTH, *BURST_LOSS],
        "trace": load_trace(scenario.trace) if scenario.trace else [],
        # The untuned shapes' parameters and what they remember between runs.
        "burst_median": scenario.burst_units,
        "burst_scale": 1.0,
        "shift_pct": scenario.shift_pct,
        "slow_pct": scenario.slow_pct,
        "switch": list(scenario.switch),
        "wander_pct": scenario.wander_pct,
        "wander": 0.0,
        "slow": False,
        "iteration": 0,  # the attempt measured now (AUTORESEARCH_ITERATION)
        "attempts": attempts,
        "kept": 0,  # keeps so far, as the in-process bench tells them
        "kept_seen": 0,
        # An order artifact's parameters, and what it remembers: (version, true value) of
        # every run so far, and the attempt of the last run.
        "order": {k: list(v) if isinstance(v, tuple) else v for k, v in scenario.order},
        "history": [],
        "last_iteration": -1,
        "resolution": scenario.resolution,
    }


def measurement(s: dict, version: str, effects: list) -> float:
    """One metric run of code whose changes have these true effects: its true value plus
    noise plus drift, as printed. The j-th measurement of a version draws the same noise
    under every rule (common random numbers), so that the rules are compared on the same
    luck, not only on the same candidates. Counts the run in `s`."""
    s["runs"] += 1
    j = s["per_version"][version] = s["per_version"].get(version, 0) + 1
    rng = random.Random(f"{s['seed']}/{version}/{j}")
    true = 100.0 - sum(effects)
    scale = s["sigma_pct"] / 100.0 * true
    # What the machine does at this run (bursts, the trace) follows time, not the version.
    when = random.Random(f"{s['seed']}/t/{s['runs']}")
    if s["noise"] == "trace":
        trace = s["trace"]
        block = random.Random(f"{s['seed']}/block/{s['runs'] // 10}").randrange(len(trace))
        return float(f"{true * trace[(block + s['runs'] % 10) % len(trace)]:.6f}")
    if s["noise"] == "heavy":
        e = rng.gauss(0, 1) / math.sqrt(rng.gammavariate(1.5, 1 / 1.5)) / math.sqrt(3.0)
    elif s["noise"] == "lognormal":
        # Right-skewed (skewness about 3), scaled to mean 0 and sd 1.
        e = (rng.lognormvariate(0.0, 0.8) - math.exp(0.32)) / math.sqrt(
            (math.exp(0.64) - 1) * math.exp(0.64)
        )
    else:
        e = rng.gauss(0, 1)
    loss = 0.0
    if s["noise"] == "bursts":
        share, length, low, high = s["burst"]
        if s["burst_left"] == 0 and when.random() < share / (length * (1 - share)):
            s["burst_left"] = when.choice((length - 1, length, length + 1))
        if s["burst_left"] > 0:
            s["burst_left"] -= 1
            loss = when.uniform(low, high) * s["burst_unit"]
    factor = 1.0
    if s["noise"] == "bursts35":
        # 20% of runs in bursts of 3-5 (mean 4); one right-skewed magnitude per burst.
        if s["burst_left"] == 0 and when.random() < 0.2 / (4 * 0.8):
            s["burst_left"] = when.choice((3, 4, 5))
            s["burst_scale"] = when.lognormvariate(0.0, 0.75)
        if s["burst_left"] > 0:
            s["burst_left"] -= 1
            unit = s["burst_median"] * s["burst_unit"] * s["burst_scale"]
            loss = unit * when.uniform(0.7, 1.3)
    elif s["noise"] == "shift":
        if s["iteration"] > s["attempts"] // 2:
            factor = 1.0 + s["shift_pct"] / 100.0
    elif s["noise"] == "bimodal":
        if when.random() < s["switch"][s["slow"]]:
            s["slow"] = not s["slow"]
        if s["slow"]:
            factor = 1.0 + s["slow_pct"] / 100.0
    elif s["noise"] == "ar1":
        # The machine's speed wanders: each run keeps 0.9 of the last one's departure.
        s["wander"] = 0.9 * s["wander"] + math.sqrt(1 - 0.81) * when.gauss(0, 1)
        factor = 1.0 + s["wander_pct"] / 100.0 * s["wander"]
    elif s["noise"] == "keep_spike" and s["kept"] > s["kept_seen"]:
        s["kept_seen"] = s["kept"]
        factor = 1.6
    drift = 1.0 + s["drift_pct"] / 100.0 * min(s["runs"] / s["expected_runs"], 1.0)
    value = float(f"{(true * drift + scale * e + loss) * factor:.6f}")
    if s.get("order"):
        value = order_artifact(s, version, true, value)
    step = s.get("resolution", 0.0)
    return float(f"{round(value / step) * step:.6g}") if step else value


def order_artifact(s: dict, version: str, true: float, value: float) -> float:
    """`value` with the scenario's order artifact (ORDER_SCENARIOS), computed from what
    the campaign knows at this run: its index, the version measured, the last run's
    version and the true values of both, the attempt."""
    art = s["order"]
    run = s["runs"]
    history = s["history"]
    prev = history[-1] if history else None
    factor, add = 1.0, 0.0
    kind = art.get("kind")
    slower = (
        (kind == "parity" and run % 2 == 0)
        or (kind == "switch" and prev is not None and prev[0] != version)
        or (kind == "same" and prev is not None and prev[0] == version)
        or (kind == "period" and run % art.get("every", 1) == 0)
        or (kind == "attempt_first" and s["iteration"] != s["last_iteration"])
    )
    if slower:
        factor = 1 + art["pct"] / 100
    if kind == "thermal":
        before = reversed(history[-len(art["weights"]) :])
        for w, back in zip(art["weights"], before, strict=False):
            add += art["share"] * w * max(0.0, back[1] - true)
    elif kind == "thermal_sym" and prev is not None:
        add = art["share"] * (prev[1] - true)
    noisier = version != "0" and (
        kind == "variance_all" or (kind == "variance" and int(version) % 2 == 1)
    )
    if noisier:
        value = true + art["times"] * (value - true)
    s["last_iteration"] = s["iteration"]
    history.append((version, true))
    return float(f"{(value + add) * factor:.6f}")


# metric.py: `measurement` itself, on the state file; the version measured is the last
# candidate in model.py (0: the start).
METRIC = (
    "import json, math, os, random, re, sys\n"
    "sys.dont_write_bytecode = True\n"
    "import model\n\n"
    + inspect.getsource(measurement)
    + "\n\n"
    + inspect.getsource(order_artifact)
    + """
state = os.environ["BENCH_STATE"]
with open(state) as f:
    s = json.load(f)
s["iteration"] = int(os.environ.get("AUTORESEARCH_ITERATION", "0"))
version = (re.findall(r"# candidate ([0-9]+)", open("model.py").read()) or ["0"])[-1]
value = measurement(s, version, model.EFFECTS)
with open(state, "w") as f:
    json.dump(s, f)
print(f"value: {value:.6f}")
"""
)

PROPOSER = """\
import json, os, sys
plan = json.load(open(os.environ["BENCH_PLAN"]))
i = int(os.environ["AUTORESEARCH_ITERATION"])
effect = plan[i - 1] if i <= len(plan) else 0.0
with open("model.py", "a") as f:
    f.write(f"EFFECTS.append({effect!r})  # candidate {i}\\n")
print(f"candidate {i} (true effect {effect:+.3f})")
"""

CONFIG = """\
name = "bench"
scope = ["model.py"]
harness = ["metric.py"]

[metric]
command = "BENCH_STATE={state} {python} -E -s metric.py"
direction = "minimize"
pattern = 'value: ([-0-9.eE+]+)'
noise = "{noise}"

[decision]
rule = "{rule}"
min_delta = "{min_delta}%"
repeats = 5
max_samples = 8
confidence = 0.95

[stop]
max_iterations = {attempts}

[sandbox]
writable = ["{state_dir}"]  # the metric keeps its noise state beside the repository

[proposer]
kind = "command"
command = "BENCH_PLAN={plan} {python} -E -s {proposer}"
"""


def make_plan(scenario: Scenario, campaign: int, attempts: int) -> list[float]:
    if scenario.plan == "realistic":
        return realistic_plan(scenario, campaign, attempts)
    rng = random.Random(f"{scenario.helpful_pct}-{campaign}")
    h = scenario.helpful_pct / 100.0 * START
    plan = []
    for _ in range(attempts):
        u = rng.random()
        if u < 0.55:
            plan.append(0.0)
        elif u < 0.85:
            plan.append(-rng.uniform(0.5, 2.5) * h)
        else:
            plan.append(rng.uniform(0.25, 1.75) * h)
    return plan


def realistic_plan(scenario: Scenario, campaign: int, attempts: int) -> list[float]:
    """Many small gains, most below one noise unit, a few large ones; as many neutral and
    harmful changes as in the uniform plan."""
    rng = random.Random(f"realistic-{scenario.helpful_pct}-{campaign}")
    h = scenario.helpful_pct / 100.0 * START
    unit = scenario.sigma_pct / 100.0 * START
    plan = []
    for _ in range(attempts):
        u = rng.random()
        if u < 0.55:
            plan.append(0.0)
        elif u < 0.75:
            plan.append(-rng.uniform(0.5, 2.5) * h)
        elif u < 0.95:
            plan.append(rng.uniform(0.1, 1.3) * unit)  # small: mostly below one noise unit
        else:
            plan.append(rng.uniform(1.0, 2.0) * h)  # large
    return plan


def run_campaign(job: tuple[Scenario, str, int, int, int]) -> dict[str, float]:
    from autoresearch.attempt import Status
    from autoresearch.config import load_campaign
    from autoresearch.engine import Engine
    from autoresearch.store.ledger import Ledger

    scenario, rule, campaign, attempts, noise_seed = job
    plan = make_plan(scenario, campaign, attempts)
    with tempfile.TemporaryDirectory(prefix="ar-decisions-") as tmp:
        base = Path(tmp).resolve()
        repo = base / "repo"
        repo.mkdir()
        state = base / "state.json"
        state.write_text(json.dumps(noise_state(scenario, campaign, attempts, noise_seed)))
        (base / "plan.json").write_text(json.dumps(plan))
        (base / "propose.py").write_text(PROPOSER)
        (repo / "model.py").write_text("EFFECTS = []\n")
        (repo / "metric.py").write_text(METRIC)
        (repo / "autoresearch.toml").write_text(
            config_text(
                rule,
                state=state,
                state_dir=base,
                python=sys.executable,
                attempts=attempts,
                plan=base / "plan.json",
                proposer=base / "propose.py",
            )
        )
        commit_all(repo)
        campaign_obj = load_campaign(repo)
        result = Engine(campaign_obj).run()
        assert result.stop_reason == "max_iterations", result
        records = Ledger(campaign_obj.state_dir).read()
        best = git(repo, "show", "autoresearch/bench:model.py")
        kept_effects = [
            float(line.split("(")[1].split(")")[0])
            for line in best.splitlines()
            if line.startswith("EFFECTS.append")
        ]
        kept = {r.iteration for r in records if r.status is Status.KEEP}
        setting = [r for r in records if r.status.sets_best]
        bests = [r.best_after for r in setting]
        means = [r.metric for r in setting]
        true = START - sum(kept_effects)
        return {
            "attempts": sum(1 for r in records if r.iteration > 0),
            "runs": sum(r.metric_runs or 0 for r in records),
            "false_keeps": sum(1 for i in kept if plan[i - 1] <= 0),
            "not_better": sum(1 for e in plan if e <= 0),
            "missed": sum(1 for i, e in enumerate(plan, 1) if e > 0 and i not in kept),
            "helpful": sum(1 for e in plan if e > 0),
            "gain": sum(kept_effects),
            "gain_below": gain_below_min_delta(kept_effects),
            "available": sum(e for e in plan if e > 0),
            "final": true,
            # How the recorded best went: keeps that moved it the wrong way, and those
            # where the kept candidate's own mean would have; the final one's error.
            "keeps": len(kept),
            "best_back": sum(1 for a, b in itertools.pairwise(bests) if b > a),
            "was_back": sum(1 for a, b in itertools.pairwise(means) if b > a),
            "best_err": abs(bests[-1] - true) / true,
            "was_err": abs(means[-1] - true) / true,
            "campaigns": 1,
        }


def positive(text: str) -> int:
    """argparse type: a whole number of at least 1."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}")
    return int(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--campaigns", type=positive, default=40)
    parser.add_argument("--attempts", type=positive, default=40)
    parser.add_argument("--jobs", type=positive, default=os.cpu_count() or 2)
    parser.add_argument(
        "--scenarios",
        default="all",
        choices=("all", "goals", "others"),
        help="all; goals (the two Gaussian levels); others (heavy tails, drift)",
    )
    parser.add_argument(
        "--rules", default=",".join(RULES), help="comma-separated subset of " + ", ".join(RULES)
    )
    parser.add_argument(
        "--noise-seed", type=int, default=0, help="other noise draws for the same candidates"
    )
    args = parser.parse_args()
    unknown = set(args.rules.split(",")) - set(RULES)
    if unknown:
        parser.error(
            f"--rules: unknown {', '.join(sorted(unknown))}; choose from {', '.join(RULES)}"
        )
    rules = [r for r in RULES if r in args.rules.split(",")]
    scenarios = {
        "all": SCENARIOS,
        "goals": GOAL_SCENARIOS,
        "others": SCENARIOS[len(GOAL_SCENARIOS) :],
    }[args.scenarios]
    jobs = [
        (s, rule, c, args.attempts, args.noise_seed)
        for s in scenarios
        for rule in rules
        for c in range(args.campaigns)
    ]
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        results = list(pool.map(run_campaign, jobs))
    table: dict[tuple[str, str], dict[str, float]] = {}
    for (scenario, rule, *_), row in zip(jobs, results, strict=True):
        total = table.setdefault((scenario.name, rule), {})
        for key, value in row.items():
            total[key] = total.get(key, 0.0) + value
    print(
        f"{args.campaigns} campaigns x {args.attempts} attempts per scenario and rule; "
        "the same planned candidates for every rule\n"
    )
    header = (
        f"{'rule':<11}{'attempts':>9}{'runs':>7}{'false keeps':>19}{'missed':>11}"
        f"{'captured':>10}{'final':>9}"
    )
    for scenario in scenarios:
        print(scenario.name)
        print(header)
        for rule in rules:
            t = table[(scenario.name, rule)]
            share = 100 * t["false_keeps"] / t["not_better"]
            fk = f"{int(t['false_keeps'])}/{int(t['not_better'])} ({share:.1f}%)"
            print(
                f"{rule:<11}{int(t['attempts']):>9}{int(t['runs']):>7}{fk:>19}"
                f"{int(t['missed']):>5}/{int(t['helpful']):<5}{t['gain'] / t['available']:>10.3f}"
                f"{t['final'] / args.campaigns:>9.2f}"
            )
        if not {"sequential", "repeats", "strict"} <= set(rules):
            print()
            continue
        seq, rep, st = (table[(scenario.name, r)] for r in ("sequential", "repeats", "strict"))
        print(
            f"sequential vs repeats: {seq['runs'] / rep['runs']:.2f} of its metric runs, "
            f"captured {seq['gain'] / seq['available']:.3f} vs {rep['gain'] / rep['available']:.3f}"
            f"; vs strict {st['gain'] / st['available']:.3f}\n"
        )


if __name__ == "__main__":
    main()
