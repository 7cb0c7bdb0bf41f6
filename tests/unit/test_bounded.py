"""Bounded resources: a candidate with a file above `[scope] max_file_mb`, or more changed
files than `max_files`, is refused by its sizes before git stores anything; a large file
under the cap is measured without the engine holding it; a resource that runs out in an
attempt (a full disk) is that attempt's status, never the engine's death.

The engine runs in a process of its own under an address-space limit (`RLIMIT_AS`) of
1 GiB: an engine that reads a 1.5 GiB file, or a 640 MiB blob twice, dies of it."""

from __future__ import annotations

import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from campaigns import script_campaign
from conftest import Runner, git, ledger, snapshot

GIB = 1 << 30
MIB = 1 << 20

BIG = r"""
mkdir -p data
if [ "$AUTORESEARCH_ITERATION" = 1 ]; then
  truncate -s 1536M data/big.bin; echo "a huge file"
else
  sed -i 's/10/9/' calc.py; echo "nine"
fi
"""


def run_limited(repo: Path, memory: int, *args: str) -> subprocess.CompletedProcess[str]:
    """`autoresearch run --plain` in a process whose address space is capped at `memory`
    bytes (its git commands inherit the cap)."""

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    return subprocess.run(
        [sys.executable, "-m", "autoresearch", "run", "--plain", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=600,
        preexec_fn=cap,
    )


def largest_object(repo: Path) -> int:
    sizes = git(repo, "cat-file", "--batch-all-objects", "--batch-check=%(objectsize)")
    return max(int(s) for s in sizes.split())


@pytest.mark.parametrize("isolation", ["auto", "none"])
def test_a_sparse_file_above_the_cap_is_refused_and_the_campaign_goes_on(
    tmp_path: Path, isolation: str
) -> None:
    # `auto`: the proposer is sealed and the kernel names what it touched; `none`: git
    # scans the whole workspace. The cap holds on both ways in.
    repo = script_campaign(
        tmp_path,
        BIG,
        scope=["calc.py", "data"],
        **{"stop.max_iterations": 2, "sandbox.isolation": isolation},
    )
    before = snapshot(repo)
    proc = run_limited(repo, GIB)
    assert proc.returncode == 0, proc.stderr
    records = ledger(repo, "t")
    assert [r["status"] for r in records] == ["baseline", "edit_refused", "keep"]
    refused = records[1]
    assert refused["files"] == ["data/big.bin"] and refused["commit"] is None
    assert "data/big.bin is 1.5 GiB, above the 100 MiB cap ([scope] max_file_mb)" in str(
        refused["reason"]
    )
    assert records[2]["metric"] == 9.0
    assert snapshot(repo) == before  # the user's checkout, byte for byte
    assert largest_object(repo) < MIB  # the file's content never entered the repository
    assert git(repo, "ls-tree", "-r", "--name-only", "autoresearch/t").split() == [
        "autoresearch.toml",
        "bench.py",
        "calc.py",
    ]
    assert not (repo / ".autoresearch/t/worktree/data/big.bin").exists()


def test_the_cap_is_the_configured_one(tmp_path: Path, invoke: Runner) -> None:
    script = """
mkdir -p data
if [ "$AUTORESEARCH_ITERATION" = 1 ]; then head -c 3000000 /dev/zero > data/a.bin; echo big
else head -c 1000000 /dev/zero > data/a.bin; sed -i 's/10/9/' calc.py; echo small; fi
"""
    repo = script_campaign(
        tmp_path,
        script,
        scope={"paths": ["calc.py", "data"], "max_file_mb": 2},
        **{"stop.max_iterations": 2},
    )
    result = invoke(repo, "run", "--plain")
    assert result.returncode == 0, result.stderr
    records = ledger(repo, "t")
    assert [r["status"] for r in records] == ["baseline", "edit_refused", "keep"]
    assert "data/a.bin is 2.861 MiB, above the 2 MiB cap" in str(records[1]["reason"])
    kept = git(repo, "cat-file", "-s", f"{records[2]['commit']}:data/a.bin")
    assert int(kept) == 1_000_000  # under the cap: stored and measured as it is


FLOOD = r"""
mkdir -p gen
if [ "$AUTORESEARCH_ITERATION" = 1 ]; then
  for i in $(seq 1 40); do echo "$i" > "gen/f$i.txt"; done
  HARNESS
  echo "a flood of files"
else
  sed -i 's/10/9/' calc.py; echo "nine"
fi
"""


def test_more_files_than_max_files_are_refused_by_their_count(
    tmp_path: Path, invoke: Runner
) -> None:
    repo = script_campaign(
        tmp_path,
        FLOOD.replace("HARNESS", ""),
        scope={"paths": ["calc.py", "gen"], "max_files": 25},
        **{"stop.max_iterations": 2},
    )
    before = snapshot(repo)
    result = invoke(repo, "run", "--plain")
    assert result.returncode == 0, result.stderr
    records = ledger(repo, "t")
    assert [r["status"] for r in records] == ["baseline", "edit_refused", "keep"]
    reason = str(records[1]["reason"])
    assert "touches 40 files, above the cap of 25 ([scope] max_files)" in reason
    # The record names a few of them: a flood of names is not written to the ledger.
    files = records[1]["files"]
    assert isinstance(files, list) and 0 < len(files) <= 20
    assert all(str(f).startswith("gen/") for f in files)
    assert records[1]["commit"] is None
    assert "refs/autoresearch/t/1\n" not in git(repo, "for-each-ref", "refs/autoresearch/")
    assert snapshot(repo) == before
    assert list((repo / ".autoresearch/t/worktree").glob("gen/*")) == []


def test_a_flood_that_touches_the_harness_still_halts_the_campaign(
    tmp_path: Path, invoke: Runner
) -> None:
    repo = script_campaign(
        tmp_path,
        FLOOD.replace("HARNESS", "echo 'print(0)' > bench.py"),
        scope={"paths": ["calc.py", "gen"], "max_files": 25},
        **{"stop.max_iterations": 2},
    )
    result = invoke(repo, "run", "--plain")
    assert result.returncode == 3, result.stderr
    records = ledger(repo, "t")
    assert [r["status"] for r in records] == ["baseline", "tampered"]
    assert records[1]["files"] == ["bench.py"]


@pytest.mark.parametrize(
    ("scope", "says"),
    [
        ({"paths": ["calc.py"], "max_file_mb": 0}, "key 'scope.max_file_mb': input should be"),
        ({"paths": ["calc.py"], "max_file_mb": True}, "key 'scope.max_file_mb': must not be"),
        ({"paths": ["calc.py"], "max_files": 0}, "key 'scope.max_files': input should be"),
        ({"paths": ["calc.py"], "max_size": 3}, "key 'scope.max_size' is not a known setting"),
        ({"max_files": 3}, "key 'scope.paths' is missing"),
    ],
)
def test_bad_caps_are_one_sentence(
    tmp_path: Path, invoke: Runner, scope: dict[str, object], says: str
) -> None:
    repo = script_campaign(tmp_path, "echo nothing", scope=scope)
    result = invoke(repo, "run", "--plain")
    assert result.returncode == 2
    assert says in result.stderr and "autoresearch.toml" in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) <= 2


LARGE = r"""
mkdir -p data
if [ "$AUTORESEARCH_ITERATION" = 1 ]; then
  truncate -s 640M data/large.bin; sed -i 's/10/9/' calc.py; echo "a large file"
fi
"""

# The metric reads the large file through: a number only when all of it is there.
READS_IT = """import calc
with open("data/large.bin", "rb") as handle:
    size = sum(len(block) for block in iter(lambda: handle.read(1 << 20), b""))
print(calc.N if size == 640 * 1024 * 1024 else 999)
"""


@pytest.mark.slow
def test_a_large_file_under_the_cap_is_measured_without_the_engine_holding_it(
    tmp_path: Path,
) -> None:
    # 640 MiB held once, let alone twice, does not fit beside the engine in 1 GiB.
    repo = script_campaign(
        tmp_path,
        LARGE,
        bench="import calc\nprint(calc.N)\n",
        scope={"paths": ["calc.py", "data"], "max_file_mb": 1000},
        files={"reads_it.py": READS_IT},
        **{"stop.max_iterations": 1, "metric.command": "python reads_it.py"},
    )
    # Without the file, the baseline reads nothing: the metric fails on the start commit.
    (repo / "data").mkdir()
    (repo / "data/large.bin").write_bytes(b"")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "an empty data file")
    proc = run_limited(repo, GIB)
    assert proc.returncode == 0, proc.stderr
    records = ledger(repo, "t")
    assert [r["status"] for r in records] == ["baseline", "keep"], records
    assert records[0]["metric"] == 999.0 and records[1]["metric"] == 9.0
    size = git(repo, "cat-file", "-s", "autoresearch/t:data/large.bin")
    assert int(size) == 640 * MIB


NOISE = r"""
mkdir -p data
if [ "$AUTORESEARCH_ITERATION" = 1 ]; then
  head -c 30M /dev/urandom > data/noise.bin; echo "thirty megabytes of noise"
else
  sed -i 's/10/9/' calc.py; echo "nine"
fi
"""


def test_a_full_disk_halts_the_campaign_with_a_record(tmp_path: Path) -> None:
    """The repository on a file system of 40 MiB: the proposer's 30 MiB file fits, git's
    copy of it does not. The attempt is recorded, the file is gone, the campaign halts with
    `disk_full` in one sentence; a resume on a disk with room goes on."""
    if shutil.which("unshare") is None or not _can_mount(tmp_path):
        pytest.skip("needs `unshare -rm` to mount a small file system")
    source = script_campaign(
        tmp_path, NOISE, scope=["calc.py", "data"], **{"sandbox.isolation": "none"}
    )
    before = snapshot(source)
    small, out = tmp_path / "small", tmp_path / "out"
    small.mkdir()
    script = (
        f"mount -t tmpfs -o size=40m none {small} && cp -a {source} {small}/repo && "
        f"cd {small}/repo && {sys.executable} -m autoresearch run --plain "
        f"> {tmp_path}/stdout 2> {tmp_path}/stderr; echo $? > {tmp_path}/code; "
        f"cp -a {small}/repo {out}"
    )
    subprocess.run(["unshare", "-rm", "sh", "-c", script], check=True, timeout=300)
    stderr = (tmp_path / "stderr").read_text()
    assert (tmp_path / "code").read_text().strip() == "1", stderr
    assert "Traceback" not in stderr
    records = ledger(out, "t")
    assert [r["status"] for r in records] == ["baseline", "edit_refused"]
    assert "No space left on device" in str(records[1]["reason"])
    stdout = (tmp_path / "stdout").read_text()
    assert "stopped: disk_full" in stdout
    assert not (out / ".autoresearch/t/worktree/data").exists()
    after = snapshot(out)
    assert {k: after[k] for k in ("files", "head", "branches")} == {
        k: before[k] for k in ("files", "head", "branches")
    }
    # With room again, the campaign resumes where it stopped.
    resumed = subprocess.run(
        [sys.executable, "-m", "autoresearch", "run", "--plain"],
        cwd=out,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert [r["status"] for r in ledger(out, "t")][2] == "keep"


def _can_mount(tmp_path: Path) -> bool:
    probe = tmp_path / "probe"
    probe.mkdir()
    done = subprocess.run(
        ["unshare", "-rm", "sh", "-c", f"mount -t tmpfs -o size=1m none {probe}"],
        capture_output=True,
        timeout=30,
    )
    return done.returncode == 0
