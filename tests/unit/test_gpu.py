"""GPU work in the sandbox, with device nodes made here (`mknod`) and stand-in `nvidia-smi`
executables: which nodes a command can open, which GPUs a slot gets, where the caches go,
what is recorded beside a sample, the wait for a killed run's GPU processes, and a run
that ran out of GPU memory."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

import autoresearch
from autoresearch.attempt import Status
from autoresearch.errors import ConfigError
from autoresearch.executors import CommandSpec, ExecutorSetup, LocalExecutor, Measurement
from autoresearch.isolation import gpu
from autoresearch.isolation.sandbox import bwrap_problem

needs_bwrap = pytest.mark.skipif(bwrap_problem() is not None, reason=str(bwrap_problem()))
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="mknod needs root")

ENV = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}


def node(path: Path, major: int = 1, minor: int = 3) -> Path:
    """A character device at `path`; 1:3 is the null device, so a test can open it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(major, minor))
    return path


# index, uuid, name, minor, memory.used, memory.total, utilization.gpu
TABLE = [
    "0, GPU-aaaa0000, Stand-in A100, 0, 1200, 40960, 37",
    "1, GPU-bbbb1111, Stand-in A100, 1, 300, 40960, 3",
]


def stand_in_smi(
    folder: Path, monkeypatch: pytest.MonkeyPatch, table: list[str], apps: Path | None = None
) -> Path:
    """An `nvidia-smi` on the engine's PATH that answers from `table` (and lists the pid in
    `apps`, when it exists, as a GPU process)."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = "\n".join(table)
    listing = f"[ -s {apps} ] && cat {apps}; echo" if apps else "true"
    script = folder / "nvidia-smi"
    script.write_text(
        "#!/bin/bash\n"
        'case "$*" in\n'
        f"  *--query-gpu*) printf '%s\\n' \"{rows}\";;\n"
        f"  *--query-compute-apps*) {listing};;\n"
        '  -L) echo "GPU 0: Stand-in A100 (UUID: GPU-aaaa0000)";;\n'
        "esac\n"
    )
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}:{os.environ['PATH']}")
    return script


def executor(tmp_path: Path, isolation: str = "bwrap", **setup: object) -> LocalExecutor:
    found = LocalExecutor()
    found.start(ExecutorSetup(state_dir=tmp_path / "state", isolation=isolation, **setup))  # type: ignore[arg-type]
    return found


def run(
    ex: LocalExecutor,
    tmp_path: Path,
    command: str,
    env: dict[str, str] | None = None,
    timeout: float = 30,
) -> tuple[Measurement, str]:
    """`command` run once by `ex` in `tmp_path/work`: the measurement and its stdout."""
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    stem = tmp_path / "logs" / f"run-{time.monotonic_ns()}"
    measured = ex.run(
        CommandSpec(command, timeout, parse=False),
        workspace=work,
        env={**ENV, **(env or {})},
        log_stem=stem,
    )
    return measured, stem.with_suffix(".out").read_text()


# -- which nodes -----------------------------------------------------------------------


@needs_root
def test_auto_detection_in_a_fake_dev_lists_the_gpu_nodes_and_nothing_else(
    tmp_path: Path,
) -> None:
    dev = tmp_path / "dev"
    for name, major, minor in [
        ("nvidia0", 195, 0),
        ("nvidia1", 195, 1),
        ("nvidiactl", 195, 255),
        ("nvidia-modeset", 195, 254),
        ("nvidia-uvm", 511, 0),
        ("nvidia-uvm-tools", 511, 1),
        ("nvidia-caps/nvidia-cap1", 238, 1),
        ("kfd", 235, 0),
        ("dri/card0", 226, 0),
        ("dri/renderD128", 226, 128),
        # not GPUs
        ("null", 1, 3),
        ("kvm", 10, 232),
        ("fuse", 10, 229),
    ]:
        node(dev / name, major, minor)
    (dev / "nvidia7").write_text("a plain file, not a node")
    (dev / "dri/by-path").mkdir()
    (dev / "dri/by-path/pci-0000:01:00.0-render").symlink_to("../renderD128")
    found = [str(p.relative_to(dev)) for p in gpu.detect_devices(dev)]
    assert found == [
        "dri/card0",
        "dri/renderD128",
        "kfd",
        "nvidia-caps/nvidia-cap1",
        "nvidia-modeset",
        "nvidia-uvm",
        "nvidia-uvm-tools",
        "nvidia0",
        "nvidia1",
        "nvidiactl",
    ]
    assert gpu.detect_devices(tmp_path / "empty") == ()


@needs_root
@needs_bwrap
def test_a_listed_node_is_usable_inside_and_an_unlisted_one_is_not(tmp_path: Path) -> None:
    listed, other = node(tmp_path / "gpu" / "nvidia0"), node(tmp_path / "other" / "nvidia1")
    ex = executor(tmp_path, devices=(str(listed),))
    probe = f"for f in {listed} {other}; do (echo x > $f) 2>/dev/null && echo open $f; done; true"
    measured, out = run(ex, tmp_path, probe)
    assert measured.ok, measured.reason
    # The other node is on the (nodev) machine view, but cannot be opened.
    assert out.split("\n") == [f"open {listed}", ""]


@needs_root
@needs_bwrap
def test_auto_binds_the_nodes_found_and_none_binds_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dev = tmp_path / "dev"
    nodes = [node(dev / "nvidia0"), node(dev / "nvidiactl"), node(dev / "dri" / "renderD128")]
    monkeypatch.setattr(gpu, "DEV", dev)
    probe = " ".join(f"(: < {p}) 2>/dev/null && echo {p.name};" for p in nodes)
    _, out = run(executor(tmp_path, devices="auto"), tmp_path, probe)
    assert out.split() == ["nvidia0", "nvidiactl", "renderD128"]
    _, out = run(executor(tmp_path, devices="none"), tmp_path, probe)
    assert out.split() == []


def test_the_sandbox_holds_no_capability_to_make_a_node(tmp_path: Path) -> None:
    if bwrap_problem() is not None:
        pytest.skip(str(bwrap_problem()))
    _, out = run(
        executor(tmp_path),
        tmp_path,
        'mknod "$TMPDIR/nv" c 195 0 2>/dev/null && echo made; grep CapEff /proc/self/status',
    )
    assert "made" not in out
    assert out.split()[-1] == "0000000000000000"


def test_a_listed_path_that_is_no_node_is_refused_in_one_sentence(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    for bad in (tmp_path / "missing", tmp_path / "file"):
        with pytest.raises(ConfigError) as caught:
            executor(tmp_path, isolation="none", devices=(str(bad),), source="gpu.toml")
        message = str(caught.value)
        assert message.startswith("gpu.toml: key 'sandbox.devices': ")
        assert str(bad) in message and message.count(". ") == 0


# -- which GPUs a slot gets ------------------------------------------------------------


@needs_root
@needs_bwrap
def test_each_slot_opens_only_its_own_gpu_nodes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dev = tmp_path / "dev"
    nodes = [node(dev / n) for n in ("nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm")]
    stand_in_smi(tmp_path / "bin", monkeypatch, TABLE)
    probe = (
        " ".join(f"(: < {p}) 2>/dev/null && echo {p.name};" for p in nodes)
        + ' echo "visible=$CUDA_VISIBLE_DEVICES"'
    )
    seen = {}
    for slot, visible in ((0, "0"), (1, "1")):
        ex = executor(tmp_path / f"slot{slot}", devices=(str(dev),))
        _, out = run(ex, tmp_path / f"slot{slot}", probe, {"CUDA_VISIBLE_DEVICES": visible})
        seen[slot] = out.split()
    # Its own GPU's node and the shared control nodes; the variable as a UUID, which names
    # the same GPU whichever way CUDA numbers the GPUs it can open.
    assert seen[0] == ["nvidia0", "nvidiactl", "nvidia-uvm", "visible=GPU-aaaa0000"]
    assert seen[1] == ["nvidia1", "nvidiactl", "nvidia-uvm", "visible=GPU-bbbb1111"]


@needs_root
@needs_bwrap
def test_without_nvidia_smi_a_slot_keeps_its_variable_and_every_node(tmp_path: Path) -> None:
    dev = tmp_path / "dev"
    nodes = [node(dev / n) for n in ("nvidia0", "nvidia1", "nvidiactl")]
    probe = (
        " ".join(f"(: < {p}) 2>/dev/null && echo {p.name};" for p in nodes)
        + ' echo "visible=$CUDA_VISIBLE_DEVICES"'
    )
    ex = executor(tmp_path, devices=(str(dev),))
    _, out = run(ex, tmp_path, probe, {"CUDA_VISIBLE_DEVICES": "1"})
    assert out.split() == ["nvidia0", "nvidia1", "nvidiactl", "visible=1"]


def test_narrowing_follows_cuda_visible_devices() -> None:
    devices = tuple(Path("/dev") / n for n in ("nvidia0", "nvidia1", "nvidia2", "nvidiactl"))
    table = [
        gpu.Gpu(i, f"GPU-{i}{i}{i}", "x", minor)
        for i, minor in enumerate((0, 2, 1))  # minor numbers need not follow the index
    ]

    def names(value: str | None) -> tuple[list[str], str | None]:
        env = {} if value is None else {"CUDA_VISIBLE_DEVICES": value}
        kept, out = gpu.narrow(devices, env, table)
        return [p.name for p in kept], out.get("CUDA_VISIBLE_DEVICES")

    assert names(None) == (["nvidia0", "nvidia1", "nvidia2", "nvidiactl"], None)
    assert names("1") == (["nvidia2", "nvidiactl"], "GPU-111")
    assert names("2,0") == (["nvidia0", "nvidia1", "nvidiactl"], "GPU-222,GPU-000")
    assert names("GPU-1") == (["nvidia2", "nvidiactl"], "GPU-111")
    assert names("") == (["nvidiactl"], "")
    assert names("-1") == (["nvidiactl"], "-1")
    # An id nvidia-smi does not list (a MIG instance, a typo): nothing is taken away.
    assert names("7") == (["nvidia0", "nvidia1", "nvidia2", "nvidiactl"], "7")
    assert names("MIG-abc") == (["nvidia0", "nvidia1", "nvidia2", "nvidiactl"], "MIG-abc")


# -- caches ----------------------------------------------------------------------------


@needs_bwrap
def test_gpu_caches_live_in_the_runs_private_tmpdir_and_die_with_it(tmp_path: Path) -> None:
    ex = executor(tmp_path)
    write = (
        'for v in CUDA_CACHE_PATH TRITON_CACHE_DIR TORCHINDUCTOR_CACHE_DIR; do d="${!v}"; '
        'mkdir -p "$d" && ls -A "$d" && echo kernel > "$d/k" && echo "$v=$d"; done'
    )
    measured, out = run(ex, tmp_path, write, {"TRITON_CACHE_DIR": str(tmp_path / "mine")})
    assert measured.ok, measured.reason
    lines = out.split()
    assert len(lines) == 3
    tmpdir = str((tmp_path / "state" / "tmp").resolve())
    for line in lines:
        assert line.split("=", 1)[1].startswith(tmpdir + "/"), line
    # The next run finds them empty: nothing one candidate compiled reaches another's run.
    _, again = run(ex, tmp_path, write)
    assert again.split() == lines
    assert not (tmp_path / "mine").exists()


@needs_bwrap
def test_a_cache_the_user_set_inside_a_writable_path_is_kept(tmp_path: Path) -> None:
    shared = tmp_path / "cache"
    shared.mkdir()
    ex = executor(tmp_path, writable=(str(shared),))
    command = 'echo kernel >> "$TRITON_CACHE_DIR/k"; echo "$CUDA_CACHE_PATH"'
    env = {"TRITON_CACHE_DIR": str(shared), "CUDA_CACHE_PATH": str(tmp_path / "elsewhere")}
    for _ in range(2):
        measured, out = run(ex, tmp_path, command, env)
        assert measured.ok, measured.reason
    assert (shared / "k").read_text() == "kernel\nkernel\n"
    assert out.strip().startswith(str((tmp_path / "state" / "tmp").resolve()))


# -- what is recorded beside a sample --------------------------------------------------


def test_a_sample_records_the_gpu_it_ran_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stand_in_smi(tmp_path / "bin", monkeypatch, TABLE)
    ex = executor(tmp_path, isolation="none")
    measured, _ = run(ex, tmp_path, "sleep 0.2", {"CUDA_VISIBLE_DEVICES": "1"})
    (seen,) = measured.hygiene["gpus"]
    assert seen["index"] == 1 and seen["uuid"] == "GPU-bbbb1111"
    assert seen["name"] == "Stand-in A100"
    assert seen["memory_used_mib"] == 300 and seen["memory_total_mib"] == 40960
    assert seen["utilization_pct"] == 3
    measured, _ = run(ex, tmp_path, "true")
    assert [g["index"] for g in measured.hygiene["gpus"]] == [0, 1]


def test_no_gpu_record_where_nvidia_smi_is_missing_or_silent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    measured, _ = run(executor(tmp_path, isolation="none"), tmp_path, "true")
    assert measured.hygiene == {}
    broken = tmp_path / "bin" / "nvidia-smi"
    broken.parent.mkdir()
    broken.write_text("#!/bin/sh\necho 'NVIDIA-SMI has failed' >&2; exit 9\n")
    broken.chmod(0o755)
    monkeypatch.setenv("PATH", f"{broken.parent}:/usr/bin:/bin")
    measured, _ = run(executor(tmp_path, isolation="none"), tmp_path, "true")
    assert measured.hygiene == {}


@pytest.mark.slow
def test_the_machine_log_carries_the_gpu_beside_each_metric_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from autoresearch.testing.repo import git

    stand_in_smi(tmp_path / "bin", monkeypatch, TABLE)
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "bench.py").write_text("print('score: 1')\n")
    (repo / "autoresearch.toml").write_text(
        'name = "g"\nscope = ["x.py"]\n[metric]\ncommand = "python bench.py"\n'
        "pattern = 'score: ([0-9.]+)'\ndirection = \"minimize\"\n"
        '[proposer]\nkind = "command"\ncommand = "true"\n[stop]\nmax_iterations = 1\n'
    )
    (repo / "x.py").write_text("x = 1\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "init")
    proc = subprocess.run(
        [sys.executable, "-m", "autoresearch", "run", "--plain"],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=120,
        env={
            **os.environ,
            "CUDA_VISIBLE_DEVICES": "0",
            "PATH": f"{tmp_path / 'bin'}:{Path(sys.executable).parent}:/usr/bin:/bin",
            "PYTHONPATH": str(Path(autoresearch.__file__).parents[1]),
        },
    )
    assert proc.returncode == 0, proc.stderr
    lines = (repo / ".autoresearch" / "g" / "machine.jsonl").read_text().splitlines()
    assert lines
    for line in map(json.loads, lines):
        assert [g["uuid"] for g in line["gpus"]] == ["GPU-aaaa0000"], line
        assert line["gpus"][0]["memory_used_mib"] == 1200


# -- timeouts and the GPU --------------------------------------------------------------


@needs_bwrap
def test_a_timed_out_training_run_ends_whole(tmp_path: Path) -> None:
    beat = tmp_path / "work" / "beat"
    trainer = (
        f"import time\nwhile True:\n    open({str(beat)!r}, 'a').write('x')\n    time.sleep(0.05)\n"
    )
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "train.py").write_text(trainer)
    ex = executor(tmp_path)
    command = "python train.py & setsid python train.py & (trap '' TERM; python train.py) & wait"
    measured, _ = run(ex, tmp_path, command, timeout=1.5)
    assert measured.outcome is Status.TIMEOUT
    # Killed processes take a moment to be gone from the kernel's table (their exit runs).
    deadline = time.monotonic() + 10
    while gpu.session_members(ex.last_session) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert gpu.session_members(ex.last_session) == set()
    size = beat.stat().st_size
    time.sleep(0.5)
    assert beat.stat().st_size == size, "a process of the killed run is still writing"


ESCAPEE = (
    "import os, sys, time\n"
    "os.setpgid(0, 0)\n"  # out of the command's group, still in its session
    "open(sys.argv[1], 'w').write(str(os.getpid()))\n"
    "time.sleep(float(sys.argv[2]))\n"
    "open(sys.argv[3], 'w').write(repr(time.time()))\n"
)


def _leave_a_gpu_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seconds: float
) -> tuple[LocalExecutor, Path, Path]:
    """A run (without a sandbox: its PID namespace would end everything) that leaves a
    process of its session behind, listed by the stand-in nvidia-smi as using the GPU."""
    apps, ended = tmp_path / "apps", tmp_path / "ended"
    script = tmp_path / "escapee.py"
    script.write_text(ESCAPEE)
    stand_in_smi(tmp_path / "bin", monkeypatch, TABLE, apps=apps)
    ex = executor(tmp_path, isolation="none")
    measured, _ = run(
        ex,
        tmp_path,
        f"python {script} {apps} {seconds} {ended} >/dev/null 2>&1 & "
        f"while [ ! -s {apps} ]; do sleep 0.02; done; sleep 100",
        timeout=1,
    )
    assert measured.outcome is Status.TIMEOUT
    return ex, apps, ended


def test_the_next_run_waits_until_the_killed_runs_gpu_process_is_gone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ex, apps, ended = _leave_a_gpu_process(tmp_path, monkeypatch, 3.0)
    assert gpu.session_members(ex.last_session) == {int(apps.read_text())}
    measured, out = run(ex, tmp_path, f"{sys.executable} -c 'import time; print(time.time())'")
    assert float(out) >= float(ended.read_text()), "it started while the GPU was held"
    assert measured.hygiene["gpu_wait_s"] > 0.3


def test_the_wait_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ex, apps, _ = _leave_a_gpu_process(tmp_path, monkeypatch, 60.0)
    try:
        ex.release_seconds = 1.0
        start = time.monotonic()
        measured, _ = run(ex, tmp_path, "true")
        assert measured.ok
        assert 1.0 <= time.monotonic() - start < 10
        assert 1.0 <= measured.hygiene["gpu_wait_s"] < 8
    finally:
        os.kill(int(apps.read_text()), 9)


def test_no_wait_for_a_process_the_gpu_does_not_list(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ex, apps, _ = _leave_a_gpu_process(tmp_path, monkeypatch, 60.0)
    left = int(apps.read_text())
    try:
        apps.write_text("")  # still alive, but holding no GPU
        start = time.monotonic()
        measured, _ = run(ex, tmp_path, "true")
        # No wait (the bound is 30 s); the time allows for a loaded machine.
        assert "gpu_wait_s" not in measured.hygiene and time.monotonic() - start < 15
    finally:
        os.kill(left, 9)


# -- out of GPU memory -----------------------------------------------------------------

OOM_MESSAGES = [
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB (GPU 0; 39.39 "
    "GiB total capacity; 30.01 GiB already allocated)",
    "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
    "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 2.00 GiB",
    "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to "
    "allocate 8589934592 bytes.",
    "tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating "
    "tensor with shape[8192,8192]",
]


@pytest.mark.parametrize("message", OOM_MESSAGES)
def test_out_of_gpu_memory_is_its_own_reason(tmp_path: Path, message: str) -> None:
    script = tmp_path / "oom.py"
    script.write_text(
        "import sys\n"
        "print('step 1 loss 2.3')\n"
        "print('Traceback (most recent call last):', file=sys.stderr)\n"
        "print('  File \"train.py\", line 9, in <module>', file=sys.stderr)\n"
        f"print({message!r}, file=sys.stderr)\n"
        "sys.exit(1)\n"
    )
    measured, _ = run(executor(tmp_path, isolation="none"), tmp_path, f"python {script}")
    assert measured.outcome is Status.CRASH
    assert measured.reason == f"out of GPU memory: {message}"


def test_an_ordinary_crash_keeps_its_exit_code_reason(tmp_path: Path) -> None:
    measured, _ = run(
        executor(tmp_path, isolation="none"), tmp_path, "echo 'MemoryError' >&2; exit 3"
    )
    assert measured.reason == "exited with code 3: MemoryError"


@needs_root
@needs_bwrap
def test_slots_of_a_campaign_open_only_their_gpus_and_record_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from autoresearch.config import load_campaign
    from autoresearch.engine import Engine
    from autoresearch.store.ledger import Ledger
    from campaigns import script_campaign

    dev = tmp_path / "dev"
    for name in ("nvidia0", "nvidia1", "nvidiactl"):
        node(dev / name)
    stand_in_smi(tmp_path / "bin", monkeypatch, TABLE)
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    bench = (
        "import os, calc\n"
        f"for name in sorted(os.listdir({str(dev)!r})):\n"
        "    try:\n"
        f"        os.close(os.open(os.path.join({str(dev)!r}, name), os.O_RDONLY))\n"
        "        print('node', name)\n"
        "    except OSError:\n"
        "        pass\n"
        "print('visible', os.environ.get('CUDA_VISIBLE_DEVICES'))\n"
        "print(calc.N)\n"
    )
    repo = script_campaign(
        tmp_path,
        'sed -i "s/^N = .*/N = $AUTORESEARCH_ITERATION/" calc.py\nsleep 0.2\n',
        bench=bench,
        **{
            "executor.gpus": [0, 1],
            "sandbox.isolation": "bwrap",
            "sandbox.devices": [str(dev)],
            "stop.max_iterations": 4,
        },
    )
    result = Engine(load_campaign(repo), jobs=2).run()
    assert result.exit_code == 0, result.message
    state = repo / ".autoresearch" / "t"
    slot_of = {r.iteration: r.slot for r in Ledger(state).read()}
    machine = [json.loads(line) for line in (state / "machine.jsonl").read_text().splitlines()]
    mine = {0: ("nvidia0", "GPU-aaaa0000"), 1: ("nvidia1", "GPU-bbbb1111")}
    seen = set()
    for line in machine:
        iteration = int(line["run"][:4])
        if not iteration:
            continue
        slot = slot_of[iteration]
        out = (state / "logs" / f"{line['run']}.out").read_text().split("\n")
        own, uuid = mine[slot]
        assert [x for x in out if x.startswith("node")] == [f"node {own}", "node nvidiactl"]
        assert f"visible {uuid}" in out
        assert [g["uuid"] for g in line["gpus"]] == [uuid]
        seen.add(slot)
    assert seen == {0, 1}


@needs_root
@needs_bwrap
def test_a_proposers_commands_open_the_listed_nodes_too(tmp_path: Path) -> None:
    from autoresearch.isolation.confinement import confinement_for
    from autoresearch.isolation.process import run_command
    from autoresearch.testing.repo import make_repo

    listed, other = node(tmp_path / "gpu" / "nvidia0"), node(tmp_path / "other" / "nvidia1")
    checkout = make_repo(tmp_path / "repo", {"a.txt": "a\n"})
    workspace = checkout / ".autoresearch" / "c" / "workspace"
    workspace.mkdir(parents=True)
    confinement = confinement_for(
        "bwrap",
        "autoresearch.toml",
        state_dir=checkout / ".autoresearch" / "c",
        root=checkout,
        objects=None,
        devices=[str(listed)],
    )
    confined = confinement.prepare(workspace, dict(os.environ))
    result = run_command(
        f"for f in {listed} {other}; do (: < $f) 2>/dev/null && echo open $f; done; true",
        cwd=workspace,
        env=confined.env,
        timeout=20,
        stdout_path=tmp_path / "out",
        stderr_path=tmp_path / "err",
        wrap=confined.wrap,
        child_setup=confined.child_setup,
    )
    assert result.returncode == 0, (tmp_path / "err").read_text()
    assert (tmp_path / "out").read_text() == f"open {listed}\n"
