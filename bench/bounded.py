"""What a large candidate costs the engine: its peak memory and its time per attempt.

Runs two campaigns of one attempt each, the engine in a process of its own, and prints the
engine's peak resident memory (`ru_maxrss` of its own process, git's aside) and the
attempt's `engine_seconds` from the ledger:

- refused: the proposer writes a sparse file above `[scope] max_file_mb` (1.5 GiB against
  the default 100 MiB cap): `edit_refused` from its size alone;
- measured: a sparse file under a raised cap (640 MiB against 1000 MiB): committed, copied
  into the measurement folder a MiB at a time, measured, kept.

    python bench/bounded.py [--refused-mb 1536] [--measured-mb 640]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import tomlkit

ENGINE = """
import atexit, resource, sys
atexit.register(lambda: print("PEAK_KB", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                              file=sys.stderr))
sys.argv = ["autoresearch", "run", "--plain"]
from autoresearch.cli.commands import main
main()
"""


def campaign(folder: Path, size_mb: int, cap_mb: int) -> Path:
    repo = folder / "repo"
    repo.mkdir(parents=True)
    (repo / "calc.py").write_text("N = 10\n")
    (repo / "bench.py").write_text("import calc\nprint(calc.N)\n")
    script = folder / "propose.sh"
    script.write_text(
        f"mkdir -p data\ntruncate -s {size_mb}M data/big.bin\n"
        "sed -i 's/10/9/' calc.py\necho 'a large file'\n"
    )
    config = {
        "name": "b",
        "scope": {"paths": ["calc.py", "data"], "max_file_mb": cap_mb},
        "harness": ["bench.py"],
        "metric": {"command": "python bench.py", "direction": "minimize"},
        "stop": {"max_iterations": 1},
        "proposer": {"kind": "command", "command": f"bash {script}"},
        "decision": {"rule": "strict"},
    }
    (repo / "autoresearch.toml").write_text(tomlkit.dumps(config))
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "start"]):
        subprocess.run(
            ["git", *args],
            cwd=repo,
            check=True,
            env={**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b",
                 "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@b"},
        )  # fmt: skip
    return repo


def measure(label: str, size_mb: int, cap_mb: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        repo = campaign(Path(tmp), size_mb, cap_mb)
        done = subprocess.run(
            [sys.executable, "-c", ENGINE], cwd=repo, capture_output=True, text=True
        )
        peak = next(
            (int(line.split()[1]) for line in done.stderr.splitlines() if "PEAK_KB" in line), 0
        )
        lines = (repo / ".autoresearch/b/ledger.jsonl").read_text().splitlines()
        record = json.loads(lines[-1])
        print(
            f"{label:9} {size_mb:5} MiB file, cap {cap_mb:5} MiB: {record['status']:13} "
            f"engine {record['engine_seconds']:7.2f} s   peak memory {peak / 1024:6.0f} MiB"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--refused-mb", type=int, default=1536)
    parser.add_argument("--measured-mb", type=int, default=640)
    args = parser.parse_args()
    measure("refused", args.refused_mb, 100)
    measure("measured", args.measured_mb, 1000)


if __name__ == "__main__":
    main()
