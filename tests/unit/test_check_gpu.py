"""`check` says what the metric will see of the GPU, from a probe run where the metric runs:
device nodes made with mknod, a stand-in `nvidia-smi`, a stand-in `torch` package."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest

from autoresearch.isolation.sandbox import bwrap_problem
from campaigns import campaign_toml
from conftest import Runner, git, make_repo

pytestmark = pytest.mark.skipif(bwrap_problem() is not None, reason=str(bwrap_problem()))

SMI = """#!/bin/bash
case "$*" in
  -L) echo "GPU 0: Stand-in H100 (UUID: GPU-aaaa0000)"
      echo "GPU 1: Stand-in H100 (UUID: GPU-bbbb1111)";;
  *--query-gpu*) echo "0, GPU-aaaa0000, Stand-in H100, 0, 10, 81559, 0"
                 echo "1, GPU-bbbb1111, Stand-in H100, 1, 10, 81559, 0";;
esac
"""


def fake_torch(folder: Path, available: bool) -> Path:
    package = folder / "torch"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(
        "class cuda:\n"
        f"    is_available = staticmethod(lambda: {available})\n"
        "    device_count = staticmethod(lambda: 2)\n"
    )
    return folder


def repo(tmp_path: Path, bench: str, **overrides: object) -> Path:
    return make_repo(
        tmp_path / "repo",
        {
            "calc.py": "N = 3\n",
            "bench.py": bench,
            "autoresearch.toml": campaign_toml(**{"proposer.command": "true", **overrides}),
        },
    )


def tools(tmp_path: Path, torch: bool | None = None) -> dict[str, str]:
    """The environment `check` runs with: a stand-in nvidia-smi first on PATH and, when
    asked, a stand-in torch on PYTHONPATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "nvidia-smi").write_text(SMI)
    (bin_dir / "nvidia-smi").chmod(0o755)
    env = {"PATH": f"{bin_dir}:{Path(sys.executable).parent}:/usr/bin:/bin"}
    if torch is not None:
        env["PYTHONPATH"] = str(fake_torch(tmp_path / "py", torch))
    return env


def nodes(folder: Path, *names: str) -> list[Path]:
    made = []
    for name in names:
        folder.mkdir(parents=True, exist_ok=True)
        os.mknod(folder / name, stat.S_IFCHR | 0o666, os.makedev(1, 3))
        made.append(folder / name)
    return made


BENCH = 'import calc\nprint(f"score: {abs(calc.N - 3)}")\n'
TORCH_BENCH = "import calc  # trains with torch on the GPU\n" + BENCH


@pytest.mark.skipif(os.geteuid() != 0, reason="mknod needs root")
def test_check_shows_the_gpu_as_the_metric_sees_it(tmp_path: Path, invoke: Runner) -> None:
    dev = tmp_path / "dev"
    nodes(dev, "nvidia0", "nvidia1", "nvidiactl")
    toy = repo(tmp_path, TORCH_BENCH, **{"sandbox.devices": [str(dev)]})
    env = {**tools(tmp_path, torch=True), "CUDA_VISIBLE_DEVICES": "1"}
    result = invoke(toy, "check", env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert f'gpu devices: {dev}/nvidia1, {dev}/nvidiactl (sandbox.devices = ["{dev}"])' in lines
    assert "CUDA_VISIBLE_DEVICES: GPU-bbbb1111" in lines
    assert "nvidia-smi -L: GPU 0: Stand-in H100 (UUID: GPU-aaaa0000)" in lines
    assert "nvidia-smi -L: GPU 1: Stand-in H100 (UUID: GPU-bbbb1111)" in lines
    assert "torch.cuda.is_available(): True (2 device(s))" in lines
    assert "warning" not in result.stdout
    data = json.loads(invoke(toy, "check", "--json", env=env).stdout)["gpu"]
    assert data["devices"] == [f"{dev}/nvidia1", f"{dev}/nvidiactl"]
    assert data["cuda_visible_devices"] == "GPU-bbbb1111"
    assert data["torch_cuda"] is True and data["torch_devices"] == 2
    assert data["frameworks"] == ["torch"] and data["warning"] is None


def test_a_metric_that_names_torch_and_sees_no_device_is_warned(
    tmp_path: Path, invoke: Runner
) -> None:
    toy = repo(tmp_path, TORCH_BENCH, **{"sandbox.devices": "none"})
    result = invoke(toy, "check", env=tools(tmp_path, torch=False))
    assert result.returncode == 0, result.stderr
    assert 'gpu devices: none (sandbox.devices = "none")' in result.stdout
    assert "torch.cuda.is_available(): False" in result.stdout
    (warning,) = [line for line in result.stdout.splitlines() if line.startswith("warning:")]
    assert "the metric's code names torch but sees no GPU device node" in warning
    data = json.loads(invoke(toy, "check", "--json", env=tools(tmp_path / "2")).stdout)["gpu"]
    assert data["warning"] and data["frameworks"] == ["torch"]


@pytest.mark.parametrize(
    "where,named",
    [
        ({"metric.command": "python bench.py --device cuda"}, ["cuda"]),
        ({"guard.command": "python -c 'import jax'"}, ["jax"]),
        ({"scope": ["calc.py", "model.py"]}, ["tensorflow"]),
    ],
)
def test_the_framework_is_found_in_the_commands_and_the_code_in_scope(
    tmp_path: Path, invoke: Runner, where: dict[str, object], named: list[str]
) -> None:
    toy = repo(tmp_path, BENCH, **{"sandbox.devices": "none", **where})
    # model.py names tensorflow: read only when it is in scope.
    (toy / "model.py").write_text("import tensorflow as tf\n")
    git(toy, "add", "model.py")
    git(toy, "commit", "-qm", "a model")
    data = json.loads(invoke(toy, "check", "--json").stdout)["gpu"]
    assert data["frameworks"] == named and data["warning"]


@pytest.mark.skipif(os.geteuid() != 0, reason="mknod needs root")
def test_torch_without_cuda_beside_the_devices_is_warned(tmp_path: Path, invoke: Runner) -> None:
    dev = tmp_path / "dev"
    nodes(dev, "nvidia0", "nvidiactl")
    toy = repo(tmp_path, TORCH_BENCH, **{"sandbox.devices": [str(dev)]})
    result = invoke(toy, "check", env=tools(tmp_path, torch=False))
    assert "but torch.cuda.is_available() is False there" in result.stdout


def test_a_cpu_metric_gets_no_warning(tmp_path: Path, invoke: Runner) -> None:
    toy = repo(tmp_path, BENCH, **{"sandbox.devices": "none"})
    result = invoke(toy, "check")
    assert result.returncode == 0, result.stderr
    assert 'gpu devices: none (sandbox.devices = "none")' in result.stdout
    assert "warning" not in result.stdout and "torch" not in result.stdout


@pytest.mark.parametrize(
    "devices,needle",
    [
        ('"gpu"', "key 'sandbox.devices': input should be 'auto' or 'none'"),
        ('["dev/nvidia0"]', "key 'sandbox.devices': 'dev/nvidia0' is not an absolute path"),
        ('["/nonexistent/nvidia9"]', "/nonexistent/nvidia9 is not a device node here"),
    ],
)
def test_bad_devices_are_refused_in_one_sentence(
    tmp_path: Path, invoke: Runner, devices: str, needle: str
) -> None:
    toy = repo(tmp_path, BENCH)
    with open(toy / "autoresearch.toml", "a") as config:
        config.write(f"\n[sandbox]\ndevices = {devices}\n")
    result = invoke(toy, "check")
    assert result.returncode == 2
    assert needle in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
