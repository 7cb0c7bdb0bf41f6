"""A real timing campaign on a library from the package registry, beside a busy neighbour.

The library is Python-Markdown (pure Python; `pip download` of its source distribution,
which ships its own test suite). The metric is one conversion of a generated document of
about 70 KB with the `extra` extensions (about 0.15 s of CPU), timed by the wall clock or,
with `--clock cpu`, by the process's CPU time; the guard is the library's own suite
(`python -m unittest discover tests`). The baseline is the released code with two
inefficiencies put into `Markdown.convert` (a deep copy of the element tree before it is
serialised, and one serialisation more than needed), so that the campaign has real speedups
to find: a scripted proposer offers, in an order shuffled per campaign, the two patches that
remove them (each worth about 3% of the conversion, 5-8% together as `confirm` measured
them beside the neighbour), three neutral renames and one slower change (two more deep
copies, about 7%).
`--weight N` puts each inefficiency in N times (the speedup removes all of them).
`--neighbour` processes spin on the CPUs throughout.

`--remedies` applies what the engine's "unstable benchmark" warning names: the metric
converts the document `--inner` times and prints the median, by CPU time, pinned to one
core (`taskset`), under `[metric] exclusive`. The neighbour is left where the scheduler puts
it, as on a shared machine.

Each campaign ends with `autoresearch confirm --repeat N --up-to M --json` (the kept best
against the baseline, N interleaved pairs and up to M where they leave a gain open, the
neighbour still running). Printed per campaign: the kept changes, whether confirm confirms
the kept best (and whether its first N pairs alone would have), and whether the slower
change was kept.

    python bench/real_timing.py [--campaigns 5] [--neighbour 1] [--pairs 10] [--up-to 20]
        [--clock wall|cpu] [--sections 200] [--remedies [--inner 5]] [--weight 1]
        [--machine-check 12]

Before the campaigns it prints `--machine-check` runs of the baseline's metric taken in a
row beside the neighbour: how far the machine's own speed moves while the code does not.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from autoresearch.stats.paired import paired_gain
from gitrepo import commit_all

PACKAGE = "Markdown==3.11.3"
BUSY = "while True: pass"

# (name, kind, old, new): `kind` is speedup, neutral or slower; the proposer replaces every
# occurrence of `old` in markdown/core.py by `new`.
COPY_LINE = "        root = copy.deepcopy(root)  # the serializer gets its own tree\n"
CHECK_LINE = "        self.serializer(root)  # fail early on a tree that cannot be serialised\n"
SERIALIZE = "        output = self.serializer(root)\n"
PATCHES: list[tuple[str, str, str, str]] = [
    ("drop the tree's deep copy", "speedup", COPY_LINE, ""),
    ("drop the extra serialisation", "speedup", CHECK_LINE, ""),
    ("rename newRoot to new_root", "neutral", "newRoot", "new_root"),
    ("rename prep to preprocessor", "neutral", "prep.run(", "preprocessor.run("),
    ("rename pp to postprocessor", "neutral", "pp.run(output)", "postprocessor.run(output)"),
    (
        "copy the tree twice more",
        "slower",
        SERIALIZE,
        "        root = copy.deepcopy(copy.deepcopy(root))\n" + SERIALIZE,
    ),
]
RENAMED_LOOPS = {
    "prep.run(": ("for prep in", "for preprocessor in"),
    "pp.run(output)": ("for pp in", "for postprocessor in"),
}

BENCH = """\
import sys
import time

sys.path.insert(0, ".")
import markdown  # noqa: E402

parts = []
for i in range({sections}):
    parts.append(
        f"## Section {{i}}\\n\\nSome *emphasis* and **strong** text with a "
        f"[link](http://e.com/{{i}}) and `code {{i}}` in a paragraph "
        f"that goes on & has <b>html</b>.\\n\\n"
        f"- item one {{i}}\\n- item _two_ {{i}}\\n    - nested\\n\\n> a quote {{i}}\\n\\n"
        f"    code block {{i}}\\n\\n1. first\\n2. second with ![img](a.png)\\n\\n"
    )
doc = "".join(parts)
converter = markdown.Markdown(extensions=["extra"])  # the imports are not the workload
times = []
for _ in range({inner}):
    start = time.{clock}()
    converter.convert(doc)
    times.append(1000 * (time.{clock}() - start))
times.sort()
print(f"time_ms: {{times[len(times) // 2]:.3f}}")
"""

PROPOSER = """\
import json, os, sys
plan = json.load(open(sys.argv[1]))
i = int(os.environ["AUTORESEARCH_ITERATION"])
if i > len(plan):
    sys.exit("no patch left")
name, kind, old, new, extra = plan[i - 1]
path = "markdown/core.py"
text = open(path).read()
if old not in text:
    sys.exit(f"{name}: already applied")
text = text.replace(old, new)
if extra:
    text = text.replace(extra[0], extra[1])
open(path, "w").write(text)
open(os.environ["AUTORESEARCH_DESCRIPTION_FILE"], "w").write(name)
print(name)
"""

CONFIG = """\
name = "markdown"
goal = "make Markdown.convert faster"
scope = ["markdown"]
harness = ["bench.py", "tests"]

[metric]
command = "{metric}"
direction = "minimize"
pattern = 'time_ms: ([0-9.]+)'
timeout = 120
noise = "time"
exclusive = {exclusive}

[decision]
rule = "auto"
max_samples = 8
confirm = 0

[guard]
command = "python -m unittest discover -q tests"
timeout = 300

[stop]
max_iterations = {attempts}

[proposer]
kind = "command"
command = "{python} {proposer} {plan}"
network = "off"
"""


def cli(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}
    # The campaign runs in its own folder: a relative PYTHONPATH (`PYTHONPATH=src`, to time
    # a checkout other than the installed one) must name the same code there.
    if env.get("PYTHONPATH"):
        parts = env["PYTHONPATH"].split(os.pathsep)
        env["PYTHONPATH"] = os.pathsep.join(str(Path(p).resolve()) for p in parts if p)
    return subprocess.run(
        [sys.executable, "-m", "autoresearch", *args],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
    )


def library(base: Path) -> Path:
    """The library's source distribution, unpacked once."""
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
         "-q", "-d", str(base / "dl"), PACKAGE],
        check=True,
    )  # fmt: skip
    archive = next((base / "dl").glob("*.tar.gz"))
    with tarfile.open(archive) as tar:
        tar.extractall(base / "src", filter="data")
    return next((base / "src").iterdir())


def metric_command(remedies: bool) -> str:
    """The metric's command line: pinned to one core under `--remedies`."""
    return "taskset -c 0 python bench.py" if remedies else "python bench.py"


def baseline_repo(repo: Path, source: Path, bench: str, weight: int) -> None:
    """The library with the inefficiencies put in, and the metric's script."""
    repo.mkdir()
    shutil.copytree(source / "markdown", repo / "markdown")
    shutil.copytree(source / "tests", repo / "tests")
    core = repo / "markdown" / "core.py"
    text = core.read_text()
    assert SERIALIZE in text and "import codecs\n" in text
    text = text.replace("import codecs\n", "import codecs\nimport copy\n", 1)
    core.write_text(text.replace(SERIALIZE, (COPY_LINE + CHECK_LINE) * weight + SERIALIZE, 1))
    (repo / "bench.py").write_text(bench)


def machine_check(
    source: Path, base: Path, bench: str, remedies: bool, weight: int, runs: int
) -> str:
    """The baseline's metric run `runs` times in a row beside the neighbour, before any
    campaign: how far this machine's own speed moves while the code does not (a level that
    shifts for several runs in a row is beyond what a campaign of a few runs a side sees
    through)."""
    repo = base / "machine-check"
    baseline_repo(repo, source, bench, weight)
    # The campaign's command, run by this interpreter (the engine puts its own first on PATH).
    command = [sys.executable if w == "python" else w for w in metric_command(remedies).split()]
    values = []
    for _ in range(runs):
        out = subprocess.run(command, cwd=repo, capture_output=True, text=True)
        if "time_ms:" not in out.stdout:
            raise SystemExit(f"the machine check's metric run failed: {out.stderr[-2000:]}")
        values.append(float(out.stdout.split("time_ms:")[1]))
    ordered = sorted(values)
    median = ordered[len(ordered) // 2]
    far = [abs(v / median - 1) > 0.1 for v in values]
    longest = run = 0
    for out_of_line in far:
        run = run + 1 if out_of_line else 0
        longest = max(longest, run)
    return (
        f"the machine, before the campaigns: {runs} runs of the baseline's metric in a row: "
        + ", ".join(f"{v:.0f}" for v in values)
        + f" ms; median {median:.1f}, {100 * (ordered[0] / median - 1):+.1f}% to "
        f"{100 * (ordered[-1] / median - 1):+.1f}%; the longest stretch more than 10% from "
        f"the median: {longest} run(s)"
    )


def one_campaign(
    index: int,
    source: Path,
    base: Path,
    pairs: tuple[int, int],
    bench: str,
    remedies: bool,
    weight: int,
) -> dict[str, object]:
    repo = base / f"markdown-{index}"
    baseline_repo(repo, source, bench, weight)
    order = list(PATCHES)
    random.Random(index).shuffle(order)
    plan = [(*p, RENAMED_LOOPS.get(p[2])) for p in order]
    (base / f"plan-{index}.json").write_text(json.dumps(plan))
    (repo / "autoresearch.toml").write_text(
        CONFIG.format(
            attempts=len(plan),
            metric=metric_command(remedies),
            exclusive="true" if remedies else "false",
            python=sys.executable,
            proposer=base / "propose.py",
            plan=base / f"plan-{index}.json",
        )
    )
    commit_all(repo)
    run = cli(repo, "run", "--plain")
    if run.returncode != 0:
        raise SystemExit(f"campaign {index} failed: {run.stdout[-3000:]} {run.stderr[-3000:]}")
    ledger = [
        json.loads(line)
        for line in (repo / ".autoresearch" / "markdown" / "ledger.jsonl").read_text().splitlines()
    ]
    by_iteration = {r.get("iteration"): r for r in ledger}
    kept = []
    for i, (name, kind, *_rest) in enumerate(plan, 1):
        record = by_iteration.get(i)
        if record is not None and record.get("status") == "keep":
            kept.append((name, kind))
    row: dict[str, object] = {
        "campaign": index,
        "kept": [name for name, _ in kept],
        "speedups_kept": sum(1 for _, kind in kept if kind == "speedup"),
        "slower_kept": sum(1 for _, kind in kept if kind == "slower"),
        "statuses": [by_iteration.get(i, {}).get("status") for i in range(1, len(plan) + 1)],
        # Why each speedup that was not kept was dropped: the judge's own words.
        "speedups_dropped": {
            name: by_iteration.get(i, {}).get("reason")
            for i, (name, kind, *_rest) in enumerate(plan, 1)
            if kind == "speedup" and by_iteration.get(i, {}).get("status") != "keep"
        },
    }
    if not kept:
        row["confirmed"] = None
        return row
    first, most = pairs
    confirm = cli(repo, "confirm", "--repeat", str(first), "--up-to", str(most), "--json")
    if confirm.returncode not in (0, 1) or not confirm.stdout.strip():
        raise SystemExit(f"confirm {index} failed: {confirm.stdout} {confirm.stderr}")
    found = json.loads(confirm.stdout)
    row.update(
        confirmed=found.get("confirmed"),
        pairs=found.get("pairs"),
        first_look_confirmed=paired_gain(
            found["a_samples"][:first], found["b_samples"][:first], "minimize"
        ).confirmed,
        gain_pct=found.get("gain_pct"),
        low_pct=found.get("low_pct"),
        high_pct=found.get("high_pct"),
    )
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--campaigns", type=int, default=5)
    parser.add_argument("--neighbour", type=int, default=1)
    parser.add_argument("--pairs", type=int, default=10, help="pairs for confirm")
    parser.add_argument(
        "--up-to", type=int, default=None, help="most pairs for confirm (default: twice --pairs)"
    )
    parser.add_argument(
        "--clock",
        choices=("wall", "cpu"),
        default="wall",
        help="what the metric times: wall-clock time, or the process's CPU time (the remedy "
        "the engine names for an unstable benchmark)",
    )
    parser.add_argument("--sections", type=int, default=200, help="the document's size")
    parser.add_argument(
        "--remedies",
        action="store_true",
        help="apply the remedies the engine's warning names: the median of --inner "
        "conversions, CPU time, pinned to one core, [metric] exclusive",
    )
    parser.add_argument("--inner", type=int, default=5, help="conversions a run (--remedies)")
    parser.add_argument(
        "--weight",
        type=int,
        default=1,
        help="how many times each inefficiency is put in (and each speedup removes): 1 "
        "gives speedups of about 3%% each, 2 about 6%%, 3 about 9%%",
    )
    parser.add_argument(
        "--machine-check",
        type=int,
        default=12,
        help="runs of the baseline's metric in a row before the campaigns, to show how far "
        "the machine's own speed moves (0: none)",
    )
    args = parser.parse_args()
    if args.weight < 1 or args.inner < 1 or args.machine_check < 0:
        parser.error(
            "--weight and --inner take a whole number of 1 or more, --machine-check of 0 or more"
        )
    most = 2 * args.pairs if args.up_to is None else args.up_to
    if most < args.pairs:
        parser.error("--up-to takes at least as many pairs as --pairs")
    if args.remedies:
        args.clock = "cpu"
    clock = "perf_counter" if args.clock == "wall" else "process_time"
    inner = args.inner if args.remedies else 1
    bench = BENCH.format(clock=clock, sections=args.sections, inner=inner)
    rows = []
    with tempfile.TemporaryDirectory(prefix="ar-real-timing-") as tmp:
        base = Path(tmp)
        source = library(base)
        (base / "propose.py").write_text(PROPOSER)
        busy = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(args.neighbour)]
        try:
            if args.machine_check:
                check = machine_check(
                    source, base, bench, args.remedies, args.weight, args.machine_check
                )
                print(check, flush=True)
            for index in range(1, args.campaigns + 1):
                row = one_campaign(
                    index, source, base, (args.pairs, most), bench, args.remedies, args.weight
                )
                rows.append(row)
                print(json.dumps(row), flush=True)
        finally:
            for process in busy:
                process.kill()
                process.wait()
    confirmed = sum(1 for r in rows if r.get("confirmed"))
    first_look = sum(1 for r in rows if r.get("first_look_confirmed"))
    slower = sum(1 for r in rows if r["slower_kept"])
    print(
        f"\n{len(rows)} campaigns on {PACKAGE} ({len(PATCHES)} patches each: 2 speedups, "
        f"3 renames, 1 slower), {args.clock} time"
        + (f", median of {inner}, pinned, exclusive" if args.remedies else "")
        + (f", inefficiencies x{args.weight}" if args.weight != 1 else "")
        + f", beside {args.neighbour} busy process(es): "
        f"kept best confirmed "
        f"by `confirm --repeat {args.pairs} --up-to {most}` in {confirmed}/{len(rows)} "
        f"(by its first {args.pairs} pairs alone in {first_look}/{len(rows)}); campaigns that kept "
        f"the slower change: {slower}"
    )


if __name__ == "__main__":
    main()
