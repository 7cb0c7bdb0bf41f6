"""What `check` finds out about the GPU as the metric sees it: a probe run through the
campaign's executor (so inside its sandbox, with its environment), and whether the metric
needs a GPU it will not get."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autoresearch.executors import CommandSpec, Executor
from autoresearch.isolation.process import Limits

# The device nodes GPU work opens that the command can open (a node seen through a `nodev`
# mount cannot be, nor one whose driver is not loaded); `nvidia-smi -L`; whether the
# interpreter has torch and, then, whether torch finds CUDA (ROCm builds answer it too).
PROBE = r"""
for f in {listed} /dev/nvidia* /dev/nvidia-caps/* /dev/kfd /dev/dri/*; do
  [ -c "$f" ] && (: < "$f") 2>/dev/null && echo "device $f"
done | sort -u
[ -n "${{CUDA_VISIBLE_DEVICES+set}}" ] && echo "visible $CUDA_VISIBLE_DEVICES"
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi -L 2>&1 | head -n 16 | sed 's/^/smi /'
  echo "smi-exit ${{PIPESTATUS[0]}}"
fi
{python} - <<'PROBE_EOF' 2>/dev/null
import importlib.util
if importlib.util.find_spec("torch") is None:
    print("torch absent")
else:
    try:
        import torch
        print("torch", torch.cuda.is_available(), torch.cuda.device_count())
    except Exception as exc:
        print("torch error", type(exc).__name__)
PROBE_EOF
"""
PROBE_TIMEOUT = 120.0
FRAMEWORKS = re.compile(r"\b(torch|cuda|jax|tensorflow)\b", re.IGNORECASE)
READ_BYTES = 1 << 20
PYTHON = re.compile(r"python[0-9.]*$")


@dataclass
class GpuView:
    """What the metric's command sees of the GPU."""

    devices: list[str] = field(default_factory=list)
    nvidia_smi: list[str] | None = None  # `nvidia-smi -L` lines; None: no nvidia-smi there
    visible: str | None = None  # CUDA_VISIBLE_DEVICES as the command gets it
    torch: str = "absent"  # "absent", "True", "False", or "error <name>"
    torch_devices: int = 0
    # named by the metric or guard command, the harness or the files in scope
    frameworks: list[str] = field(default_factory=list)
    problem: str = ""  # the probe itself failed

    @property
    def torch_cuda(self) -> bool | None:
        return {"True": True, "False": False}.get(self.torch)

    def warning(self, setting: str) -> str | None:
        """Said before a campaign starts whose metric names a GPU framework and would run
        without a GPU."""
        if not self.frameworks or self.problem:
            return None
        names = ", ".join(self.frameworks)
        if not self.devices:
            return (
                f"the metric's code names {names} but sees no GPU device node (sandbox.devices = "
                f"{setting}): it will run on the CPU, if at all; on a GPU machine check the "
                'driver and devices, or set isolation = "none" to compare'
            )
        if self.torch_cuda is False:
            return (
                f"the metric's code names {names} and sees {len(self.devices)} GPU device "
                "node(s), "
                "but torch.cuda.is_available() is False there"
            )
        return None

    def data(self, setting: str) -> dict[str, Any]:
        return {
            "devices": self.devices,
            "cuda_visible_devices": self.visible,
            "nvidia_smi": self.nvidia_smi,
            "torch_cuda": self.torch_cuda,
            "torch_devices": self.torch_devices if self.torch_cuda else None,
            "torch": None if self.torch == "absent" else self.torch,
            "frameworks": self.frameworks,
            "problem": self.problem or None,
            "warning": self.warning(setting),
        }

    def lines(self, setting: str) -> list[str]:
        """What `check` prints (plain text; the caller escapes it)."""
        out = [f"gpu devices: {', '.join(self.devices) or 'none'} (sandbox.devices = {setting})"]
        if self.visible is not None:
            out.append(f"CUDA_VISIBLE_DEVICES: {self.visible or '(empty)'}")
        if self.problem:
            out.append(f"gpu probe failed: {self.problem}")
        if self.nvidia_smi is not None:
            out += [f"nvidia-smi -L: {line}" for line in self.nvidia_smi] or [
                "nvidia-smi -L: (nothing)"
            ]
        if self.torch_cuda is not None:
            count = f" ({self.torch_devices} device(s))" if self.torch_cuda else ""
            out.append(f"torch.cuda.is_available(): {self.torch}{count}")
        elif self.torch != "absent":
            out.append(f"torch: {self.torch}")
        return out


def interpreter(command: str | None) -> str:
    """The Python the metric runs (its command's first word when it is one), else python."""
    try:
        words = shlex.split(command or "")
    except ValueError:
        words = []
    if words and PYTHON.search(Path(words[0]).name):
        return words[0]
    return "python"


def frameworks_named(texts: list[str]) -> list[str]:
    found = {m.group(1).lower() for text in texts for m in FRAMEWORKS.finditer(text)}
    return sorted(found)


def read_harness(folder: Path, names: list[str]) -> list[str]:
    texts = []
    for name in names:
        try:
            with open(folder / name, "rb") as handle:
                texts.append(handle.read(READ_BYTES).decode("utf-8", errors="replace"))
        except OSError:
            continue
    return texts


def probe(
    executor: Executor,
    *,
    workspace: Path,
    env: dict[str, str],
    log_stem: Path,
    limits: Limits,
    listed: tuple[Path, ...],
    python: str,
) -> GpuView:
    """Run the probe where the metric runs and read what it saw."""
    script = PROBE.format(
        listed=" ".join(shlex.quote(str(p)) for p in listed), python=shlex.quote(python)
    )
    spec = CommandSpec(script, PROBE_TIMEOUT, parse=False, limits=limits)
    measured = executor.run(spec, workspace=workspace, env=env, log_stem=log_stem)
    view = GpuView()
    if not measured.ok:
        view.problem = measured.reason
    try:
        text = measured.stdout_path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    for line in text.splitlines():
        kind, _, rest = line.partition(" ")
        if kind == "device":
            view.devices.append(rest)
        elif kind == "visible":
            view.visible = rest
        elif kind == "smi":
            view.nvidia_smi = [*(view.nvidia_smi or []), rest]
        elif kind == "smi-exit":
            view.nvidia_smi = view.nvidia_smi or []
        elif kind == "torch":
            parts = rest.split()
            if parts[:1] == ["error"]:
                view.torch = rest
            elif parts[:1] in (["True"], ["False"]):
                view.torch = parts[0]
                view.torch_devices = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
    return view
