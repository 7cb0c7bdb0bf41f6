"""The careful engineer's campaign: what the checks refuse, and what they cost.

A scripted proposer makes changes with known effects on two metrics (latency, the
primary, and memory): one trades memory for speed, one is a pure simplification, one buys
a tiny gain with many lines, one overfits the visible cases, one touches a critical path,
one breaks the guard and fixes it on the second try. The campaign runs twice on a real
repository with real subprocesses: with only the primary number, and with `[[metrics]]`,
`simplicity`, `[holdout]`, `[approval]` and `[guard] rework`. It prints each attempt's
status (and reason) under both, and the engine's and measurement seconds per attempt.

    python bench/judging.py
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from autoresearch.config import load_campaign
from autoresearch.engine import Engine
from autoresearch.executors import LocalExecutor
from autoresearch.proposers.base import Outcome, Proposal, ProposalContext
from autoresearch.store.ledger import Ledger

PY = sys.executable
APP = "LATENCY = 100\nMEM = 100\nOK = True\nMEMO = False\n" + "".join(
    f"def helper_{i}():\n    return {i}\n\n\n" for i in range(10)
)
PAY = "FEE = 10\n"
BENCH = """\
import app, pay
cases = [1, 2, 3]
lat = app.LATENCY + pay.FEE - (30 if app.MEMO else 0)
print(f"METRIC latency_ms={lat}")
print(f"METRIC mem_mb={app.MEM}")
"""
HOLDOUT = """\
import sys
sys.path.insert(0, ".")
import app, pay
print(app.LATENCY + pay.FEE + (50 if app.MEMO else 0))
"""
PLAIN = f"""\
name = "bench"
scope = ["app.py", "pay.py"]
harness = ["bench.py"]

[metric]
command = "{PY} bench.py"
name = "latency_ms"
direction = "minimize"

[guard]
command = "{PY} -c 'import app; assert app.OK'"

[sandbox]
isolation = "none"
"""
CAREFUL = (
    PLAIN.replace('isolation = "none"\n', 'isolation = "none"\n\n')
    + f"""
[decision]
simplicity = true

[holdout]
command = "{PY} holdout/eval.py"
files = ["holdout/**"]

[approval]
paths = ["pay.py"]

[[metrics]]
name = "mem_mb"
direction = "minimize"
no_regress = "10%"
"""
).replace("assert app.OK'\"\n", "assert app.OK'\"\nrework = 2\n")


def setting(**values: object) -> Callable[[Path], Proposal]:
    def edit(workspace: Path) -> Proposal:
        path = workspace / "app.py"
        lines = path.read_text().splitlines()
        out = [
            f"{ln.split(' =')[0]} = {values[ln.split(' =')[0]]!r}"
            if ln.split(" =")[0] in values
            else ln
            for ln in lines
        ]
        path.write_text("\n".join(out) + "\n")
        return Proposal(description=", ".join(f"{k}={v}" for k, v in values.items()))

    return edit


def drop_helpers(workspace: Path) -> Proposal:
    path = workspace / "app.py"
    path.write_text(path.read_text().split("def helper_0")[0])
    return Proposal(description="remove unused helpers")


def bloat(workspace: Path) -> Proposal:
    setting(LATENCY=99.9)(workspace)
    path = workspace / "app.py"
    path.write_text(path.read_text() + "".join(f"X_{i} = {i}\n" for i in range(80)))
    return Proposal(description="0.1% faster, 80 more lines")


def fee(workspace: Path) -> Proposal:
    (workspace / "pay.py").write_text("FEE = 2\n")
    return Proposal(description="lower the fee")


def nothing(workspace: Path) -> Proposal:
    return Proposal(description="no fix")


EDITS = [
    setting(LATENCY=70, MEM=250),  # memory for speed
    drop_helpers,  # pure simplification
    bloat,  # a tiny gain bought with lines
    setting(MEMO=True),  # memorises the visible cases
    fee,  # a critical path
    setting(LATENCY=90, OK=False),  # breaks the guard ...
    nothing,  # ... the first try does not fix it
    setting(OK=True),  # ... the second does
]


class Scripted:
    runs_commands = False

    def __init__(self) -> None:
        self.count = 0

    def propose(self, ctx: ProposalContext) -> Proposal:
        self.count += 1
        return EDITS[min(self.count, len(EDITS)) - 1](ctx.workspace)

    def observe(self, outcome: Outcome) -> None:
        return None

    def close(self) -> None:
        return None


def campaign(folder: Path, config: str) -> list[tuple[str, str, float, float]]:
    repo = folder / "repo"
    repo.mkdir(parents=True)
    for name, text in {
        "app.py": APP,
        "pay.py": PAY,
        "bench.py": BENCH,
        "autoresearch.toml": config,
        ".gitignore": "holdout/\n",
    }.items():
        (repo / name).write_text(text)
    (repo / "holdout").mkdir()
    (repo / "holdout" / "eval.py").write_text(HOLDOUT)
    for args in (
        ["init", "-q", "-b", "main"],
        ["add", "-A"],
        ["-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "start"],
    ):
        subprocess.run(["git", "-C", str(repo), *args], check=True)
    engine = Engine(
        load_campaign(repo),
        proposer=Scripted(),  # type: ignore[arg-type]
        executor=LocalExecutor(),
        max_iterations=len(EDITS),
    )
    engine.run()
    out = []
    for record in Ledger(repo / ".autoresearch" / "bench").read()[1:]:
        timings = record.timings
        engine_s = timings.engine if timings else 0.0
        measure_s = (timings.measure + timings.guard) if timings else 0.0
        out.append((str(record.status), record.reason or "", engine_s, measure_s))
    return out


def main() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        plain = campaign(Path(scratch) / "plain", PLAIN)
        careful = campaign(Path(scratch) / "careful", CAREFUL)
    print(f"{'#':>2}  {'change':<34} {'primary only':<14} careful engineer")
    names = [
        "memory for speed",
        "pure simplification",
        "tiny gain, 81 changed lines",
        "overfits the visible cases",
        "touches pay.py (critical)",
        "breaks the guard",
        "rework try 1: no fix",
        "rework try 2: fixes it",
    ]
    for i, name in enumerate(names):
        p = plain[i][0] if i < len(plain) else "-"
        c, why = (careful[i][0], careful[i][1]) if i < len(careful) else ("-", "")
        print(f"{i + 1:>2}  {name:<34} {p:<14} {c}: {why[:90]}")
    for label, rows in (("primary only", plain), ("careful", careful)):
        engine = statistics.median(r[2] for r in rows)
        measure = statistics.median(r[3] for r in rows)
        print(
            f"{label}: engine {engine * 1000:.0f} ms/attempt (median), metric+guard+holdout "
            f"{measure * 1000:.0f} ms/attempt (median)"
        )


if __name__ == "__main__":
    main()
