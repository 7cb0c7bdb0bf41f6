"""Noise shapes whose artifact follows the order of runs, for `rule = "auto"`, run through the real
evaluator in-process via bench/decisions_fast.py (nothing in the repository is modified).

Every shape is Gaussian noise of 1% (bench/decisions.py's `measurement`, noise "gauss",
the realistic effect plan, helpful 4%) times an order artifact computed from what the
replica knows at each run: the global run index (s["runs"], counted from 1 over the whole
campaign, baseline included), the version measured, the previous run's version and the
true values of both, and the attempt (s["iteration"]).

    PYTHONPATH=src:bench python bench/order_shapes.py [--campaigns 8] [--attempts 30] \
        [--noise-seeds 2] [--rules auto,strict,repeats] [--only SUBSTRING] [--jobs 2] \
        [--trace] [--reasons]
"""

from __future__ import annotations

import argparse
import json
import sys
import zlib
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "bench")]

import decisions  # noqa: E402
import decisions_fast  # noqa: E402

ORIGINAL_MEASUREMENT = decisions.measurement
ORIGINAL_NOISE_STATE = decisions.noise_state
ORIGINAL_EVALUATE = decisions_fast.Evaluator.evaluate


def base(name: str) -> decisions.Scenario:
    return decisions.Scenario(name, "gauss", 1.0, 4.0, plan="realistic")


# name -> artifact parameters (kind, and its numbers)
SHAPES: dict[str, dict] = {
    "control: no artifact (gauss 1%, realistic effects)": {"kind": "none"},
    "parity +1% (every even run of the campaign 1% slower; gauss 1%)": {
        "kind": "parity",
        "pct": 1.0,
    },
    "parity +2% (every even run of the campaign 2% slower; gauss 1%)": {
        "kind": "parity",
        "pct": 2.0,
    },
    "parity +5% (every even run of the campaign 5% slower; gauss 1%)": {
        "kind": "parity",
        "pct": 5.0,
    },
    "switch +2% (a run whose version differs from the last run's 2% slower)": {
        "kind": "switch",
        "pct": 2.0,
    },
    "switch +5% (a run whose version differs from the last run's 5% slower)": {
        "kind": "switch",
        "pct": 5.0,
    },
    "same +2% (a run of the same version as the last run 2% slower)": {"kind": "same", "pct": 2.0},
    "same +5% (a run of the same version as the last run 5% slower)": {"kind": "same", "pct": 5.0},
    "thermal 0.5 (a run after a slower version: + 0.5 of its excess)": {
        "kind": "thermal",
        "share": 0.5,
        "weights": [1.0],
    },
    "thermal 1.0 (a run after a slower version: + all of its excess)": {
        "kind": "thermal",
        "share": 1.0,
        "weights": [1.0],
    },
    "thermal lasting (+0.5/0.25/0.125 of the excess of the 3 runs before)": {
        "kind": "thermal",
        "share": 1.0,
        "weights": [0.5, 0.25, 0.125],
    },
    "thermal symmetric 0.5 (a run carries 0.5 of the last run's difference, both ways)": {
        "kind": "thermal_sym",
        "share": 0.5,
    },
    "periodic job every 7 runs +5%": {"kind": "period", "every": 7, "pct": 5.0},
    "periodic job every 7 runs +20%": {"kind": "period", "every": 7, "pct": 20.0},
    "period 3 +5% (every third run 5% slower)": {"kind": "period", "every": 3, "pct": 5.0},
    "variance x3 on half the versions (odd candidate ids; kept ones keep it)": {
        "kind": "variance",
        "times": 3.0,
    },
    "variance x3 on every changed version (all but the start)": {
        "kind": "variance_all",
        "times": 3.0,
    },
    "first run of each attempt +3% (the proposer's work evicts caches)": {
        "kind": "attempt_first",
        "pct": 3.0,
    },
    "first run of each attempt +8%": {"kind": "attempt_first", "pct": 8.0},
}
SCENARIOS = {name: base(name) for name in SHAPES}


def noise_state(scenario, campaign, attempts, noise_seed):
    s = ORIGINAL_NOISE_STATE(scenario, campaign, attempts, noise_seed)
    # The same Gaussian draws under every shape (common random numbers): only the
    # artifact differs between shapes.
    s["seed"] = zlib.crc32(f"redteam/{campaign}/{noise_seed}".encode())
    s["artifact"] = SHAPES.get(scenario.name)
    s["history"] = []  # (run, version, true) of every run so far
    s["log"] = []  # (run, iteration, version, true, value, factor)
    s["last_iteration"] = -1
    return s


def measurement(s: dict, version: str, effects: list) -> float:
    value = ORIGINAL_MEASUREMENT(s, version, effects)
    art = s.get("artifact")
    run = s["runs"]  # this run's index in the campaign, from 1
    true = 100.0 - sum(effects)
    history = s["history"]
    prev = history[-1] if history else None
    factor, add = 1.0, 0.0
    if art is not None:
        kind = art["kind"]
        if kind == "parity":
            if run % 2 == 0:
                factor = 1 + art["pct"] / 100
        elif kind == "switch":
            if prev is not None and prev[1] != version:
                factor = 1 + art["pct"] / 100
        elif kind == "same":
            if prev is not None and prev[1] == version:
                factor = 1 + art["pct"] / 100
        elif kind == "thermal":
            before = reversed(history[-len(art["weights"]) :])
            for w, back in zip(art["weights"], before, strict=False):
                add += art["share"] * w * max(0.0, back[2] - true)
        elif kind == "thermal_sym":
            if prev is not None:
                add = art["share"] * (prev[2] - true)
        elif kind == "period":
            if run % art["every"] == 0:
                factor = 1 + art["pct"] / 100
        elif kind in ("variance", "variance_all"):
            noisy = version != "0" and (kind == "variance_all" or int(version) % 2 == 1)
            if noisy:
                value = true + art["times"] * (value - true)
        elif kind == "attempt_first" and s["iteration"] != s["last_iteration"]:
            factor = 1 + art["pct"] / 100
    s["last_iteration"] = s["iteration"]
    history.append((run, version, true))
    out = float(f"{(value + add) * factor:.6f}")
    s["log"].append(
        (run, s["iteration"], version, round(true, 4), out, round(factor, 4), round(add, 4))
    )
    return out


# Captured reasons of decisions (per process; returned with each campaign's row).
CAPTURE: list[dict] = []


def evaluate(self, iteration, candidate, commit, incumbent):
    replica = self.executor
    start = len(replica.state["log"])
    out = ORIGINAL_EVALUATE(self, iteration, candidate, commit, incumbent)
    runs = replica.state["log"][start:]
    CAPTURE.append(
        {
            "iteration": iteration,
            "effect": replica.candidate[1] if replica.candidate else None,
            "verdict": out.verdict.value,
            "reason": out.reason,
            "estimator": f"{self.rule.estimator}/{self.rule.first_keep}",
            "runs": [(r[0], "C" if r[2] == str(iteration) else "I", r[4]) for r in runs],
            "true": runs[0][3] if runs else None,
        }
    )
    return out


decisions.measurement = measurement
decisions_fast.measurement = measurement
decisions_fast.noise_state = noise_state
decisions_fast.Evaluator.evaluate = evaluate


def one(job):
    name, rule, c, attempts, seed = job
    CAPTURE.clear()
    row = decisions_fast.run_campaign(SCENARIOS[name], rule, c, attempts, seed)
    bad = [d for d in CAPTURE if d["verdict"] == "keep" and d["effect"] <= 0]
    for d in bad:
        d.update(campaign=c, seed=seed)
    return (
        row,
        bad,
        {
            k: sum(1 for d in CAPTURE if d["estimator"] == k)
            for k in {d["estimator"] for d in CAPTURE}
        },
    )


def trace(name: str, rule: str = "auto", campaign: int = 0, attempts: int = 8) -> None:
    """Print the first runs of one campaign: run, attempt, version, true, value, factor, add."""
    replica_holder = {}
    original_init = decisions_fast.Replica.__init__

    def init(self, state):
        original_init(self, state)
        replica_holder["r"] = self

    decisions_fast.Replica.__init__ = init
    CAPTURE.clear()
    decisions_fast.run_campaign(SCENARIOS[name], rule, campaign, attempts, 0)
    decisions_fast.Replica.__init__ = original_init
    print(f"trace: {name} / {rule} / campaign {campaign}")
    print("  run att ver   true      value     factor  add")
    for r in replica_holder["r"].state["log"][:40]:
        print(f"  {r[0]:>3} {r[1]:>3} {r[2]:>3} {r[3]:>8.3f} {r[4]:>10.4f} {r[5]:>7} {r[6]:>6}")
    for d in CAPTURE[:attempts]:
        runs = [(x[1], round(x[2], 2)) for x in d["runs"]]
        print(
            f"  attempt {d['iteration']} effect {d['effect']:+.3f} {d['verdict']}: "
            f"{d['reason']}  runs {runs}"
        )
    print()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--campaigns", type=int, default=8)
    p.add_argument("--attempts", type=int, default=30)
    p.add_argument("--noise-seeds", type=int, default=2)
    p.add_argument("--rules", default="auto,strict,repeats")
    p.add_argument("--only", default="")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--trace", action="store_true")
    p.add_argument("--reasons", action="store_true", help="print every kept not-better decision")
    p.add_argument("--dump", default="", help="write kept not-better decisions (json) here")
    a = p.parse_args()
    names = [n for n in SHAPES if a.only in n]
    rules = [r for r in decisions.RULES if r in a.rules.split(",")]
    if a.trace:
        for n in names:
            trace(n)
        return
    print(
        f"{a.campaigns} campaigns x {a.attempts} attempts, noise draws 0 to {a.noise_seeds - 1}\n"
    )
    dump = {}
    with ProcessPoolExecutor(max_workers=a.jobs) as pool:
        for n in names:
            per_rule = {}
            for rule in rules:
                jobs = [
                    (n, rule, c, a.attempts, seed)
                    for seed in range(a.noise_seeds)
                    for c in range(a.campaigns)
                ]
                results = list(pool.map(one, jobs))
                per_rule[rule] = [
                    decisions_fast.totals(
                        [results[seed * a.campaigns + c][0] for c in range(a.campaigns)]
                    )
                    for seed in range(a.noise_seeds)
                ]
                if rule == "auto":
                    bad = [d for _, b, _ in results for d in b]
                    est: dict[str, int] = {}
                    for _, _, e in results:
                        for k, v in e.items():
                            est[k] = est.get(k, 0) + v
                    dump[n] = bad
            decisions_fast.report(SCENARIOS[n], per_rule)
            if "auto" in rules:
                print(
                    f"  auto: estimator/first_keep at decisions: {est}; "
                    f"kept not-better: {len(dump[n])}"
                )
                if a.reasons:
                    for d in dump[n]:
                        print(
                            f"    c{d['campaign']} s{d['seed']} #{d['iteration']} "
                            f"effect {d['effect']:+.3f} [{d['estimator']}] {d['reason']}"
                        )
                        print(
                            f"       runs {' '.join(f'{x[0]}{x[1]}:{x[2]:.2f}' for x in d['runs'])}"
                        )
                print()
            sys.stdout.flush()
    if a.dump:
        Path(a.dump).write_text(json.dumps(dump, indent=1))


if __name__ == "__main__":
    main()
