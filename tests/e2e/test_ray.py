"""`[executor] kind = "ray"` on a real Ray cluster on this machine: a head and a worker node
process on 127.0.0.1, started for this module and stopped after it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("ray")

from autoresearch.attempt import Status
from autoresearch.checks.verify import verify_campaign
from autoresearch.config import load_campaign
from autoresearch.engine import Engine
from autoresearch.errors import ConfigError
from autoresearch.store.ledger import Ledger
from autoresearch.testing.raycluster import ray_cluster
from autoresearch.testing.repo import git
from campaigns import script_campaign

pytestmark = pytest.mark.xdist_group("ray")

BENCH = """import calc, os
print("ran in", os.getcwd())
print(calc.N)
"""
# Kills the Ray worker running it (the first process up the tree that Ray named), once
# per marker file: the worker is lost in the middle of the run.
KILLER = """import calc, os, signal
marker = {marker!r}
if not os.path.exists(marker) or {always}:
    open(marker, "w").close()
    pid = os.getpid()
    while pid > 1:
        with open(f"/proc/{{pid}}/stat") as f:
            pid = int(f.read().rsplit(")", 1)[1].split()[1])
        with open(f"/proc/{{pid}}/cmdline", "rb") as f:
            if f.read().startswith(b"ray::"):
                os.kill(pid, signal.SIGKILL)
                break
print(calc.N)
"""
LOWER = 'sed -i "s/^N = .*/N = $((10 - AUTORESEARCH_ITERATION))/" calc.py\n'


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    with ray_cluster(workers=1) as address:
        yield address


def ray_campaign(tmp_path: Path, address: str, bench: str, **extra: object) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    return script_campaign(
        tmp_path,
        LOWER,
        bench=bench,
        **{
            "executor.kind": "ray",
            "executor.address": address,
            "stop.max_iterations": 3,
            **extra,  # type: ignore[dict-item]
        },
    )


def test_a_campaign_measures_on_the_workers(tmp_path: Path, cluster: str) -> None:
    repo = ray_campaign(tmp_path, cluster, BENCH, **{"executor.jobs": 2})
    result = Engine(load_campaign(repo)).run()
    assert result.exit_code == 0, result.message
    records = Ledger(repo / ".autoresearch" / "t").read()
    assert sorted(r.iteration for r in records) == [0, 1, 2, 3]
    assert all(r.status in (Status.BASELINE, Status.KEEP, Status.MERGED, Status.SUPERSEDED,
                            Status.DISCARD) for r in records), records  # fmt: skip
    logs = repo / ".autoresearch" / "t" / "logs"
    for out in logs.glob("*-metric-*.out"):
        assert "autoresearch-ray-" in out.read_text()  # a worker's folder, not ours
    best = [r for r in records if r.status.sets_best][-1]
    assert git(repo, "show", "autoresearch/t:calc.py") == f"N = {best.metric:g}\n"
    assert verify_campaign(repo, repo / ".autoresearch" / "t", "t").ok


def test_a_lost_worker_is_retried_once_then_a_crash(tmp_path: Path, cluster: str) -> None:
    once = tmp_path / "once"
    repo = ray_campaign(
        tmp_path / "a",
        cluster,
        KILLER.format(marker=str(once), always="False"),
        **{"sandbox.isolation": "none", "stop.max_iterations": 1},
    )
    result = Engine(load_campaign(repo)).run()
    assert result.exit_code == 0, result.message  # the baseline survived its lost worker
    assert once.exists()
    records = Ledger(repo / ".autoresearch" / "t").read()
    assert records[0].status is Status.BASELINE and records[0].metric == 10

    always = tmp_path / "always"
    repo = ray_campaign(
        tmp_path / "b",
        cluster,
        KILLER.format(marker=str(always), always="os.environ.get('AUTORESEARCH_ITERATION') == '1'"),
        **{"sandbox.isolation": "none", "stop.max_iterations": 1},
    )
    result = Engine(load_campaign(repo)).run()
    records = Ledger(repo / ".autoresearch" / "t").read()
    assert records[1].status is Status.CRASH
    assert records[1].reason and "lost twice" in records[1].reason


def test_an_unreachable_cluster_is_one_clear_sentence(tmp_path: Path) -> None:
    repo = ray_campaign(tmp_path, "127.0.0.1:9", BENCH)
    with pytest.raises(ConfigError, match=r"executor\.address"):
        Engine(load_campaign(repo)).run()


# Reads the user's ignored .env and the campaign's ledger from the worker, and counts them
# into its number: an honest run prints calc.N.
PEEKER = """import calc, os, pathlib
stolen = 0
for path in {paths!r}:
    try:
        stolen += len(pathlib.Path(path).read_text())
    except OSError:
        pass
print(calc.N - stolen)
"""


@pytest.mark.slow
def test_a_cluster_the_engine_starts_keeps_honest_numbers_and_its_token(tmp_path: Path) -> None:
    """`address = "local"`: the engine starts the cluster, the candidate on the worker reads
    nothing of the user's (the kept numbers are the honest ones), and once the campaign ends
    the token is gone and the engine's environment is as it was."""
    import os

    before = {k: v for k, v in os.environ.items() if k.startswith("RAY_AUTH")}
    repo_dir = tmp_path / "repo"
    secrets = [repo_dir / ".env", repo_dir / ".autoresearch" / "t" / "ledger.jsonl"]
    repo = ray_campaign(
        tmp_path,
        "local",
        PEEKER.format(paths=[str(p) for p in secrets]),
        **{"stop.max_iterations": 2, "sandbox.isolation": "bwrap"},
    )
    (repo / ".env").write_text("API_KEY=" + "x" * 50 + "\n")
    (repo / ".git" / "info" / "exclude").write_text(".env\n")
    result = Engine(load_campaign(repo)).run()
    assert result.exit_code == 0, result.message
    records = Ledger(repo / ".autoresearch" / "t").read()
    measured = [r for r in records if r.metric is not None]
    assert measured and all(r.metric == int(r.metric) and r.metric > 0 for r in measured)
    best = [r for r in records if r.status.sets_best][-1]
    assert git(repo, "show", "autoresearch/t:calc.py") == f"N = {best.metric:g}\n"
    assert not (repo / ".autoresearch" / "t" / "ray-auth-token").exists()
    assert {k: v for k, v in os.environ.items() if k.startswith("RAY_AUTH")} == before
