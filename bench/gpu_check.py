"""GPU campaigns end to end: the `train` example run under bubblewrap with two slots, one GPU
each, and what each slot saw and measured.

On a GPU machine this is the check that the sandbox passes the GPU through and that the slots
own their GPUs: each metric run prints what it sees (CUDA_VISIBLE_DEVICES, the GPU device
nodes it can open, torch's device), and the engine's machine log says which GPU each run
used (`nvidia-smi`: model, peak memory in use, utilisation). Without a GPU it runs the same
campaign on the CPU (NumPy), which shows the mechanics only.

    python bench/gpu_check.py                      # 2 slots, the first two GPUs
    python bench/gpu_check.py --gpus 2,3 --iterations 8 --isolation bwrap
    python bench/gpu_check.py --json               # the same figures as one JSON object

Output, one block per slot:

    slot 0: CUDA_VISIBLE_DEVICES=GPU-5f3c...; nodes /dev/nvidia0 /dev/nvidiactl /dev/nvidia-uvm
            torch: cuda (NVIDIA A100-SXM4-40GB)
            ran on: GPU 0 NVIDIA A100-SXM4-40GB: peak 1021 MiB in use, 38% busy (9 runs)
            measured: 4 attempts (keep 2, discard 2), 9 metric runs, 3.1 s a run
    ...
    slots kept apart: yes (no GPU and no per-GPU node seen by two slots)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

SRC = Path(__file__).resolve().parent.parent / "src"
sys.path.insert(0, str(SRC))

from autoresearch.cli.demo import prepare  # noqa: E402
from autoresearch.isolation import gpu  # noqa: E402
from autoresearch.isolation.sandbox import bwrap_problem  # noqa: E402

# A harness file the bench adds to its copy of the example: what one metric run sees.
SLOT_VIEW = r'''"""What this metric run sees of the GPU (added by bench/gpu_check.py)."""
import glob
import importlib.util
import os

print("visible:", os.environ.get("CUDA_VISIBLE_DEVICES", "(unset)"))
nodes = []
for path in sorted(set(glob.glob("/dev/nvidia*") + glob.glob("/dev/nvidia-caps/*")
                       + glob.glob("/dev/kfd") + glob.glob("/dev/dri/*"))):
    try:
        os.close(os.open(path, os.O_RDONLY))
        nodes.append(path)
    except OSError:
        pass
print("nodes:", " ".join(nodes) or "(none)")
if importlib.util.find_spec("torch") is None:
    print("torch: not installed")
else:
    import torch
    if torch.cuda.is_available():
        names = [torch.cuda.get_device_name(k) for k in range(torch.cuda.device_count())]
        print("torch: cuda (" + ", ".join(names) + ")")
    else:
        print("torch: cpu (no GPU)")
'''


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=(
            "Run the train example under bubblewrap with two slots, one GPU each, and print "
            "what each slot saw (CUDA_VISIBLE_DEVICES, device nodes, torch's device) and "
            "measured (the GPU it ran on, memory, utilisation, its attempts)."
        )
    )
    parser.add_argument(
        "--gpus",
        default=None,
        help="GPU ids for the slots, comma-separated (default: the first two nvidia-smi "
        "lists; none on a machine without one)",
    )
    parser.add_argument("--jobs", type=int, default=2, help="slots (default 2)")
    parser.add_argument("--iterations", type=int, default=6, help="attempts (default 6)")
    parser.add_argument(
        "--isolation",
        default="bwrap",
        choices=["bwrap", "auto", "none"],
        help="[sandbox] isolation (default bwrap: refuse to run without bubblewrap)",
    )
    parser.add_argument("--dir", type=Path, default=None, help="where to make the repository")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds for the campaign")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    return parser.parse_args()


def machine_gpus() -> list[gpu.Gpu]:
    return gpu.gpus(gpu.smi_path())


def setup_repo(target: Path, ids: list[int], jobs: int, iterations: int, isolation: str) -> Path:
    repo = prepare("train", target)
    (repo / "slot_view.py").write_text(SLOT_VIEW)
    config = (repo / "autoresearch.toml").read_text()
    config = config.replace(
        'harness = ["evaluate.py"]', 'harness = ["evaluate.py", "slot_view.py"]'
    )
    config = config.replace(
        'command = "python evaluate.py"', 'command = "python slot_view.py && python evaluate.py"'
    )
    config = re.sub(r"max_iterations = \d+", f"max_iterations = {iterations}", config)
    config += (
        f"\n[executor]\njobs = {jobs}\ngpus = {json.dumps(ids)}\n"
        f'\n[sandbox]\nisolation = "{isolation}"\n'
    )
    (repo / "autoresearch.toml").write_text(config)
    for args in (["add", "-A"], ["commit", "-qm", "two slots, one GPU each"]):
        subprocess.run(
            ["git", "-c", "user.name=bench", "-c", "user.email=bench@localhost", *args],
            cwd=repo,
            check=True,
            capture_output=True,
        )
    return repo


def run_campaign(repo: Path, timeout: float) -> tuple[int, float, str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(SRC), os.environ.get("PYTHONPATH")])),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "autoresearch", "run", "--plain"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return proc.returncode, time.monotonic() - start, proc.stdout + proc.stderr


def read_view(path: Path) -> dict[str, str]:
    view = {}
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return view
    for line in text.splitlines():
        key, sep, rest = line.partition(": ")
        if sep and key in ("visible", "nodes", "torch", "device", "val_loss"):
            view[key] = rest.strip()
    return view


def figures(repo: Path) -> dict[str, Any]:
    state = repo / ".autoresearch" / "train"
    records = [json.loads(line) for line in (state / "ledger.jsonl").read_text().splitlines()]
    slot_of = {r["iteration"]: r.get("slot") for r in records}
    machine = [json.loads(line) for line in (state / "machine.jsonl").read_text().splitlines()]
    slots: dict[str, dict[str, Any]] = defaultdict(
        lambda: {"views": [], "gpus": {}, "runs": 0, "seconds": 0.0, "statuses": []}
    )
    for record in records:
        key = "baseline" if record["status"] == "baseline" else f"slot {record.get('slot')}"
        slots[key]["statuses"].append(record["status"])
        slots[key]["seconds"] += float(record.get("measure_seconds") or 0.0)
    for line in machine:
        stem = str(line.get("run", ""))
        iteration = int(stem[:4]) if stem[:4].isdigit() else 0
        key = "baseline" if iteration == 0 else f"slot {slot_of.get(iteration)}"
        slot = slots[key]
        slot["runs"] += 1
        view = read_view(state / "logs" / f"{stem}.out")
        if view:
            slot["views"].append(view)
        for seen in line.get("gpus") or []:
            fresh = {"index": seen["index"], "name": seen["name"], "peak": 0.0, "busy": []}
            mine = slot["gpus"].setdefault(seen["uuid"], {**fresh, "runs": 0})
            mine["runs"] += 1
            mine["peak"] = max(mine["peak"], seen.get("memory_used_mib") or 0.0)
            if seen.get("utilization_pct") is not None:
                mine["busy"].append(seen["utilization_pct"])
    summary = [r for r in records if r["status"] != "baseline"]
    best = min((r["best"] for r in records if r.get("best") is not None), default=None)
    return {
        "slots": dict(slots),
        "baseline": records[0].get("metric"),
        "best": best,
        "attempts": len(summary),
    }


def describe(name: str, slot: dict[str, Any]) -> list[str]:
    lines = []
    views = slot["views"]
    visible = sorted({v.get("visible", "?") for v in views})
    nodes = sorted({v.get("nodes", "?") for v in views})
    torch = sorted({v.get("torch", "?") for v in views})
    device = sorted({v.get("device", "?") for v in views})
    lines.append(f"{name}: CUDA_VISIBLE_DEVICES={' | '.join(visible) or '?'}")
    lines.append(f"    nodes: {' | '.join(nodes) or '?'}")
    lines.append(
        f"    torch: {' | '.join(torch) or '?'}; the example trained on {' | '.join(device)}"
    )
    if slot["gpus"]:
        for uuid, g in slot["gpus"].items():
            busy = f"{sum(g['busy']) / len(g['busy']):.0f}% busy" if g["busy"] else "busy ?"
            lines.append(
                f"    ran on: GPU {g['index']} {g['name']} ({uuid}): peak {g['peak']:.0f} MiB in "
                f"use, {busy} ({g['runs']} runs)"
            )
    else:
        lines.append("    ran on: no GPU (nvidia-smi did not answer)")
    counts = defaultdict(int)
    for status in slot["statuses"]:
        counts[status] += 1
    spread = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
    per_run = slot["seconds"] / slot["runs"] if slot["runs"] else 0.0
    lines.append(
        f"    measured: {len(slot['statuses'])} record(s) ({spread}), {slot['runs']} metric "
        f"runs, {per_run:.2f} s a run"
    )
    return lines


def kept_apart(slots: dict[str, dict[str, Any]]) -> tuple[bool, str]:
    """No GPU (by nvidia-smi's account) and no per-GPU node used by two slots."""
    owners: dict[str, set[str]] = defaultdict(set)
    for name, slot in slots.items():
        if name == "baseline":
            continue
        for uuid in slot["gpus"]:
            owners[uuid].add(name)
        for view in slot["views"]:
            for node in view.get("nodes", "").split():
                if gpu.PER_GPU.match(Path(node).name):
                    owners[node].add(name)
    shared = {k: v for k, v in owners.items() if len(v) > 1}
    if not owners:
        return True, "no GPU seen, nothing to share"
    if shared:
        return False, "shared: " + "; ".join(
            f"{k} by {', '.join(sorted(v))}" for k, v in shared.items()
        )
    return True, "no GPU and no per-GPU node seen by two slots"


def main() -> int:
    args = arguments()
    if args.isolation == "bwrap" and bwrap_problem() is not None:
        print(f"gpu_check: bubblewrap cannot run here: {bwrap_problem()}", file=sys.stderr)
        return 2
    found = machine_gpus()
    if args.gpus is not None:
        ids = [int(g) for g in args.gpus.split(",") if g.strip()]
    else:
        ids = [g.index for g in found[: args.jobs]]
    target = args.dir or Path(tempfile.mkdtemp(prefix="gpu-check-"))
    repo = setup_repo(target, ids, args.jobs, args.iterations, args.isolation)
    code, seconds, output = run_campaign(repo, args.timeout)
    if code != 0:
        print(f"gpu_check: the campaign failed (exit {code}) in {repo}:\n{output}", file=sys.stderr)
        return 1
    data = figures(repo)
    apart, why = kept_apart(data["slots"])
    data.update(
        machine=[{"index": g.index, "name": g.name, "uuid": g.uuid} for g in found],
        gpus=ids,
        jobs=args.jobs,
        isolation=args.isolation,
        seconds=round(seconds, 1),
        kept_apart=apart,
        repository=str(repo),
    )
    if args.json:
        print(json.dumps(data, indent=2))
        return 0 if apart else 1
    machine = ", ".join(f"{g.index} {g.name} ({g.uuid})" for g in found) or "none"
    print(f"machine GPUs (nvidia-smi): {machine}")
    print(
        f"campaign: examples/train, jobs {args.jobs}, gpus {ids or '[] (CPU only)'}, isolation "
        f"{args.isolation}: {data['attempts']} attempts in {seconds:.1f} s"
    )
    for name in sorted(data["slots"], key=lambda n: (n != "baseline", n)):
        for line in describe(name, data["slots"][name]):
            print(line)
    print(f"val_loss: baseline {data['baseline']} -> best {data['best']}")
    print(f"slots kept apart: {'yes' if apart else 'NO'} ({why})")
    print(f"repository: {repo}")
    if args.dir is None and apart:
        shutil.rmtree(target, ignore_errors=True)
    return 0 if apart else 1


if __name__ == "__main__":
    sys.exit(main())
