"""Accelerators for the commands the engine starts: which device nodes a sandbox shows, what
`nvidia-smi` says of the GPUs, and what GPU work needs around a run.

A sandbox's `/dev` is a fresh one, so a GPU's device nodes are bound into it one by one
(`detect_devices` finds them: NVIDIA, AMD ROCm, Intel). A command that names its GPUs in
`CUDA_VISIBLE_DEVICES` (every slot with `[executor] gpus` does) sees only those GPUs' nodes
where `nvidia-smi` maps the ids to nodes (`narrow`). GPU compilers keep caches in the home
folder, which is read-only in the sandbox and would carry state from one run into the next:
they are pointed into the run's private TMPDIR (`cache_env`). Around a run, `Watch` samples
which GPU it ran on, its memory in use and utilisation; `wait_released` holds the next run
back (bounded) while a process of the last one still holds a GPU; `out_of_memory` names a
run that ran out of GPU memory.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import subprocess
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autoresearch.errors import ConfigError

DEV = Path("/dev")
# The device nodes GPU work opens, relative to /dev: NVIDIA's per-GPU and control nodes
# (`nvidia-caps` holds MIG's), AMD ROCm's compute node and the DRM nodes AMD and Intel use.
DEVICE_GLOBS = (
    "nvidia[0-9]*",
    "nvidiactl",
    "nvidia-uvm",
    "nvidia-uvm-tools",
    "nvidia-modeset",
    "nvidia-caps/*",
    "kfd",
    "dri/*",
)
PER_GPU = re.compile(r"nvidia(\d+)$")
# Where GPU compilers keep their caches unless told (CUDA: ~/.nv/ComputeCache, Triton:
# ~/.triton/cache, torch.compile: a folder under TMPDIR, CuPy: ~/.cupy/kernel_cache).
CACHE_VARS = ("CUDA_CACHE_PATH", "TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "CUPY_CACHE_DIR")
CACHE_FOLDER = "gpu-cache"
# How long the next run waits for the GPU processes of the last one to go.
RELEASE_SECONDS = 30.0
SMI_TIMEOUT = 10.0


def detect_devices(dev: Path = DEV) -> tuple[Path, ...]:
    """The GPU device nodes under `dev` (character devices only: the links in
    `/dev/dri/by-path` are left out), sorted."""
    found: set[Path] = set()
    for pattern in DEVICE_GLOBS:
        for path in dev.glob(pattern):
            with contextlib.suppress(OSError):
                if stat.S_ISCHR(os.lstat(path).st_mode):
                    found.add(path)
    return tuple(sorted(found))


def configured_devices(setting: str | Iterable[str], source: str) -> tuple[Path, ...]:
    """The device nodes `[sandbox] devices` names: "auto" (every GPU node of this machine),
    "none", or a list of nodes (a folder stands for the nodes in it). A listed path that is
    no device node is refused (ConfigError)."""
    if setting == "auto":
        return detect_devices(DEV)
    if setting == "none" or isinstance(setting, str):
        return ()
    found: list[Path] = []
    for item in setting:
        path = Path(os.path.expanduser(item))
        try:
            mode = os.stat(path).st_mode
        except OSError:
            mode = 0
        if stat.S_ISDIR(mode):
            found += [p for p in sorted(path.rglob("*")) if _is_device(p)]
        elif stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
            found.append(path)
        else:
            raise ConfigError(
                f"{source}: key 'sandbox.devices': {item} is not a device node here; list "
                'device nodes that exist (such as "/dev/nvidia0"), or set devices = "auto" '
                'or "none".'
            )
    return tuple(dict.fromkeys(found))


def _is_device(path: Path) -> bool:
    try:
        return stat.S_ISCHR(os.lstat(path).st_mode)
    except OSError:
        return False


# -- nvidia-smi ------------------------------------------------------------------------


def smi_path(env: Mapping[str, str] | None = None) -> str | None:
    env = os.environ if env is None else env
    return shutil.which("nvidia-smi", path=env.get("PATH", os.defpath))


def _smi(smi: str, *args: str) -> list[list[str]] | None:
    """The rows `nvidia-smi` prints in CSV (no header, no units), or None when it does not
    answer (no driver, no GPU, hung)."""
    try:
        proc = subprocess.run(
            [smi, *args, "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=SMI_TIMEOUT,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if proc.returncode != 0:
        return None
    return [[f.strip() for f in line.split(",")] for line in proc.stdout.splitlines() if line]


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None  # "[N/A]", "[Not Supported]"


@dataclass(frozen=True)
class Gpu:
    """One GPU as `nvidia-smi --query-gpu` describes it."""

    index: int
    uuid: str
    name: str
    minor: int | None  # its node is /dev/nvidia<minor>
    memory_used_mib: float | None = None
    memory_total_mib: float | None = None
    utilization_pct: float | None = None


GPU_FIELDS = "index,uuid,name,minor_number,memory.used,memory.total,utilization.gpu"


def gpus(smi: str | None) -> list[Gpu]:
    """The GPUs `nvidia-smi` lists now; [] where it does not answer."""
    rows = _smi(smi, f"--query-gpu={GPU_FIELDS}") if smi else None
    found = []
    for row in rows or []:
        if len(row) != 7 or not row[0].isdigit():
            continue
        minor = _number(row[3])
        found.append(
            Gpu(
                int(row[0]),
                row[1],
                row[2],
                None if minor is None else int(minor),
                _number(row[4]),
                _number(row[5]),
                _number(row[6]),
            )
        )
    return found


def visible(table: list[Gpu], env: Mapping[str, str]) -> list[Gpu] | None:
    """The GPUs `CUDA_VISIBLE_DEVICES` in `env` names (all when it is unset); None when an
    id is not in `table` (a MIG instance, a GPU nvidia-smi did not list)."""
    value = env.get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return list(table)
    chosen: list[Gpu] = []
    for item in (part.strip() for part in value.split(",")):
        if not item or item == "-1":
            break  # CUDA stops at the first invalid id: none after it is visible
        if item.isdigit():
            match = [g for g in table if g.index == int(item)]
        else:
            match = [g for g in table if g.uuid.startswith(item)]
        if len(match) != 1:
            return None
        chosen.append(match[0])
    return chosen


def narrow(
    devices: tuple[Path, ...], env: Mapping[str, str], table: list[Gpu]
) -> tuple[tuple[Path, ...], dict[str, str]]:
    """The device nodes and environment for a command whose `CUDA_VISIBLE_DEVICES` names
    its GPUs: the per-GPU nodes of the others left out (the control nodes stay). The ids
    are then given as UUIDs: CUDA numbers the GPUs it can open, so an index would name
    another GPU, or none, once the other nodes are gone. Unchanged when the variable is
    unset or `nvidia-smi` cannot map every id to a node."""
    out = dict(env)
    if "CUDA_VISIBLE_DEVICES" not in env or not any(PER_GPU.match(d.name) for d in devices):
        return devices, out
    chosen = visible(table, env)
    if chosen is None or any(g.minor is None for g in chosen):
        return devices, out
    minors = {g.minor for g in chosen}
    kept = tuple(
        d for d in devices if not (m := PER_GPU.match(d.name)) or int(m.group(1)) in minors
    )
    if chosen:
        out["CUDA_VISIBLE_DEVICES"] = ",".join(g.uuid for g in chosen)
    return kept, out


def cache_env(
    env: Mapping[str, str], user_env: Mapping[str, str], tmpdir: Path, writable: Iterable[Path]
) -> dict[str, str]:
    """`env` with the GPU caches in the run's private TMPDIR: a cache kept from one run to
    the next would carry a candidate's state into another's measurement. A cache the user
    set (`user_env`) inside a `[sandbox] writable` path is kept where it is."""
    out = dict(env)
    open_to = tuple(writable)
    for name in CACHE_VARS:
        chosen = user_env.get(name)
        if chosen:
            path = Path(os.path.expanduser(chosen)).resolve()
            if any(path.is_relative_to(p) for p in open_to):
                out[name] = str(path)
                continue
        out[name] = str(tmpdir / CACHE_FOLDER / name.lower().removesuffix("_dir"))
    return out


# -- around a run ----------------------------------------------------------------------


class Watch:
    """Samples, while a run goes, the GPUs its `CUDA_VISIBLE_DEVICES` names (all when
    unset) through `nvidia-smi`: the highest memory in use and the mean utilisation.
    Nothing is started where there is no `nvidia-smi`."""

    def __init__(self, env: Mapping[str, str], interval: float = 1.0) -> None:
        self.smi = smi_path()
        self.env = dict(env)
        self.interval = interval
        self.samples: list[list[Gpu]] = []
        self.stopped = threading.Event()
        self.thread: threading.Thread | None = None

    def __enter__(self) -> Watch:
        if self.smi is not None:
            self.thread = threading.Thread(target=self._poll, daemon=True)
            self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopped.set()
        if self.thread is not None:
            self.thread.join(timeout=SMI_TIMEOUT + 1)

    def _poll(self) -> None:
        while True:
            chosen = visible(gpus(self.smi), self.env)
            if chosen:
                self.samples.append(chosen)
            if self.stopped.wait(self.interval):
                return

    def record(self) -> list[dict[str, Any]]:
        """One entry per GPU the run saw (empty where nvidia-smi did not answer)."""
        by_uuid: dict[str, list[Gpu]] = {}
        for sample in self.samples:
            for g in sample:
                by_uuid.setdefault(g.uuid, []).append(g)
        out = []
        for seen in by_uuid.values():
            used = [g.memory_used_mib for g in seen if g.memory_used_mib is not None]
            util = [g.utilization_pct for g in seen if g.utilization_pct is not None]
            first = seen[0]
            out.append(
                {
                    "index": first.index,
                    "uuid": first.uuid,
                    "name": first.name,
                    "memory_used_mib": max(used) if used else None,
                    "memory_total_mib": first.memory_total_mib,
                    "utilization_pct": round(sum(util) / len(util), 1) if util else None,
                    "samples": len(seen),
                }
            )
        return out


def session_members(session: int, proc: Path = Path("/proc")) -> set[int]:
    """The live processes of `session` (a command's: the engine starts each in a session
    of its own), zombies left out."""
    found = set()
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "stat").read_bytes()
        except OSError:
            continue
        fields = raw[raw.rfind(b")") + 2 :].split()
        with contextlib.suppress(IndexError, ValueError):
            if fields[0] not in (b"Z", b"X") and int(fields[3]) == session:
                found.add(int(entry.name))
    return found


def gpu_processes(smi: str) -> set[int] | None:
    """The pids `nvidia-smi` lists as using a GPU, or None when it does not answer."""
    rows = _smi(smi, "--query-compute-apps=pid")
    if rows is None:
        return None
    return {int(row[0]) for row in rows if row and row[0].isdigit()}


def wait_released(session: int, bound: float = RELEASE_SECONDS) -> float | None:
    """Wait, at most `bound` seconds, until no process of `session` (the last command's)
    holds a GPU, where `nvidia-smi` answers. The seconds waited, or None when there was
    nothing to wait for (no process of it left, no nvidia-smi)."""
    smi = smi_path()
    if smi is None or not session_members(session):
        return None
    start = time.monotonic()
    while True:
        holding = gpu_processes(smi)
        if holding is None or not holding & session_members(session):
            waited = time.monotonic() - start
            return waited if waited > 0.05 else None
        if time.monotonic() - start >= bound:
            return time.monotonic() - start
        time.sleep(0.2)


OOM_PATTERNS = re.compile(
    r"CUDA out of memory|OutOfMemoryError|HIP out of memory|hipErrorOutOfMemory|"
    r"CUBLAS_STATUS_ALLOC_FAILED|CUDNN_STATUS_ALLOC_FAILED|CUDA_ERROR_OUT_OF_MEMORY|"
    r"cudaErrorMemoryAllocation|RESOURCE_EXHAUSTED: Out of memory|OOM when allocating tensor|"
    r"UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY|XPU out of memory"
)
OOM_TAIL_BYTES = 65536


def out_of_memory(*logs: Path) -> str | None:
    """The last line of a run's output (stderr first) that says it ran out of GPU memory
    (PyTorch, JAX, TensorFlow, CUDA libraries, HIP, Intel XPU), or None."""
    for path in logs:
        try:
            with open(path, "rb") as handle:
                handle.seek(0, os.SEEK_END)
                handle.seek(max(0, handle.tell() - OOM_TAIL_BYTES))
                text = handle.read().decode("utf-8", errors="replace")
        except OSError:
            continue
        lines = [line.strip() for line in text.splitlines() if OOM_PATTERNS.search(line)]
        if lines:
            return lines[-1][:300]
    return None
