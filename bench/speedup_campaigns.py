"""A real timing campaign beside a CPU-heavy neighbour, several times: is the kept best
confirmed faster, and is a slower change ever kept?

Each campaign is `examples/speedup` (its own config: `rule = "auto"`, `noise = "time"`) in a
fresh repository, run through the CLI while `--neighbour` busy processes compete for the
CPUs. Afterwards, with the neighbour still running:

- `autoresearch confirm --repeat N`: the best against the baseline, N interleaved pairs;
- `autoresearch compare <parent> <kept> --repeat N` for every kept attempt: a kept change
  whose interval lies entirely on the slower side counts as a slower change kept.

    python bench/speedup_campaigns.py [--campaigns 5] [--attempts 12] [--neighbour 2]
        [--pairs 20] [--step-pairs 10]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from gitrepo import commit_all

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "speedup"
BUSY = "while True: pass"


def cli(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}
    return subprocess.run(
        [sys.executable, "-m", "autoresearch", *args],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
    )


def one_campaign(
    index: int, attempts: int, pairs: int, step_pairs: int, base: Path
) -> dict[str, object]:
    repo = base / f"speedup-{index}"
    shutil.copytree(EXAMPLE, repo)
    commit_all(repo)
    run = cli(repo, "run", "--plain", "--max-iterations", str(attempts))
    if run.returncode != 0:
        raise SystemExit(f"campaign {index} failed: {run.stdout[-2000:]} {run.stderr[-2000:]}")
    decision = next((line for line in run.stdout.splitlines() if "decision:" in line), "")
    ledger = [
        json.loads(line)
        for line in (repo / ".autoresearch" / "speedup" / "ledger.jsonl").read_text().splitlines()
    ]
    kept = [r for r in ledger if r["status"] == "keep"]
    row: dict[str, object] = {"campaign": index, "kept": len(kept), "decision": decision}
    if not kept:
        row["confirmed"] = None
        row["slower_kept"] = 0
        return row
    confirm = cli(repo, "confirm", "--repeat", str(pairs), "--json")
    if confirm.returncode != 0:
        raise SystemExit(f"confirm {index} failed: {confirm.stderr}")
    found = json.loads(confirm.stdout)
    row.update(
        confirmed=found["confirmed"],
        gain_pct=found["gain_pct"],
        low_pct=found["low_pct"],
        high_pct=found["high_pct"],
        raw_gain_pct=found["raw_gain_pct"],
    )
    slower = []
    for record in kept:
        step = cli(
            repo,
            "compare",
            record["parent"],
            str(record["iteration"]),
            "--repeat",
            str(step_pairs),
            "--json",
        )
        if step.returncode != 0:
            raise SystemExit(f"compare {index}/{record['iteration']} failed: {step.stderr}")
        data = json.loads(step.stdout)
        if data["high"] < 0:  # the whole interval on the slower side
            slower.append((record["iteration"], data["gain_pct"]))
    row["slower_kept"] = len(slower)
    row["slower"] = slower
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--campaigns", type=int, default=5)
    parser.add_argument("--attempts", type=int, default=12)
    parser.add_argument("--neighbour", type=int, default=2)
    parser.add_argument("--pairs", type=int, default=20, help="pairs for confirm")
    parser.add_argument("--step-pairs", type=int, default=10, help="pairs per kept change")
    args = parser.parse_args()
    busy = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(args.neighbour)]
    rows = []
    try:
        with tempfile.TemporaryDirectory(prefix="ar-speedup-") as tmp:
            for index in range(1, args.campaigns + 1):
                row = one_campaign(index, args.attempts, args.pairs, args.step_pairs, Path(tmp))
                rows.append(row)
                print(json.dumps(row), flush=True)
    finally:
        for process in busy:
            process.kill()
            process.wait()
    confirmed = sum(1 for r in rows if r.get("confirmed"))
    slower = sum(int(r["slower_kept"]) for r in rows)  # type: ignore[call-overload]
    print(
        f"\n{len(rows)} campaigns of examples/speedup ({args.attempts} attempts each) beside "
        f"{args.neighbour} busy processes: best confirmed faster by `confirm --repeat "
        f"{args.pairs}` in {confirmed}/{len(rows)}; kept changes confirmed slower by "
        f"`compare --repeat {args.step_pairs}`: {slower}"
    )


if __name__ == "__main__":
    main()
