"""The measurement's sandbox: secrets withheld, memory and CPU limits, no network.

The campaign runs in-process through the click runner; the metric is a real process."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from autoresearch.isolation.sandbox import bwrap_problem
from campaigns import campaign_toml
from conftest import Runner, ledger, make_repo


def sandbox_repo(
    tmp_path: Path, bench: str, sandbox: dict[str, object], proposer: str = "true", **extra: object
) -> Path:
    config = campaign_toml(
        name="s",
        harness=None,
        guard=None,
        sandbox=sandbox,
        **{
            "metric.pattern": None,
            "metric.target": None,
            "stop.max_iterations": 1,
            "proposer.command": proposer,
            **extra,
        },
    )
    return make_repo(
        tmp_path / "repo", {"calc.py": "N = 1\n", "bench.py": bench, "autoresearch.toml": config}
    )


@pytest.mark.parametrize(
    "isolation,seen_by_metric",
    [
        # Without a sandbox, secret-looking names are removed (a denylist).
        ("none", "['AR_TEST_PASSED_TOKEN', 'AR_TEST_PLAIN']"),
        # In the sandbox the environment is an allowlist: only what pass_env names.
        pytest.param(
            "bwrap",
            "['AR_TEST_PASSED_TOKEN']",
            marks=pytest.mark.skipif(bwrap_problem() is not None, reason="no bubblewrap"),
        ),
    ],
)
def test_secrets_are_not_passed_to_the_metric_unless_listed(
    tmp_path: Path, invoke: Runner, isolation: str, seen_by_metric: str
) -> None:
    bench = (
        "import os\n"
        "print('seen:', sorted(k for k in os.environ if k.startswith('AR_TEST')))\n"
        "print(1)\n"
    )
    out = tmp_path / "out"
    out.mkdir()
    seen = out / "proposer-env"
    repo = sandbox_repo(
        tmp_path,
        bench,
        {"pass_env": ["AR_TEST_PASSED_TOKEN"], "isolation": isolation},
        proposer=f"env | grep -e ^AR_TEST -e ^ANTHROPIC | sort > {seen}",
        **{"proposer.pass_env": ["AR_TEST_PLAIN"], "proposer.writable": [str(out)]},
    )
    env = {
        "AR_TEST_API_KEY": "a",
        "AR_TEST_PASSED_TOKEN": "b",
        "AR_TEST_SECRET": "c",
        "AR_TEST_PLAIN": "d",
        "ANTHROPIC_API_KEY": "e",
    }
    assert invoke(repo, "run", env=env).returncode == 0
    metric_out = (repo / ".autoresearch/s/logs/0000-metric-1.out").read_text()
    assert seen_by_metric in metric_out
    # The proposer's environment is an allowlist too: the names agents read their keys
    # from, and what `[proposer] pass_env` adds; never the metric's `pass_env`.
    assert seen.read_text().splitlines() == ["ANTHROPIC_API_KEY=e", "AR_TEST_PLAIN=d"]


def test_memory_limit_turns_a_hog_into_a_crash(tmp_path: Path, invoke: Runner) -> None:
    bench = "import calc\nblob = bytearray(400 * 1024 * 1024) if calc.N == 2 else b''\nprint(1)\n"
    repo = sandbox_repo(
        tmp_path, bench, {"memory_mb": 200}, proposer="sed -i 's/^N = .*/N = 2/' calc.py"
    )
    assert invoke(repo, "run").returncode == 0
    record = ledger(repo, "s")[1]
    assert record["status"] == "crash" and "MemoryError" in record["reason"]


def test_cpu_limit_stops_a_spinning_metric(tmp_path: Path, invoke: Runner) -> None:
    bench = "import calc\nwhile calc.N == 2:\n    pass\nprint(1)\n"
    repo = sandbox_repo(
        tmp_path, bench, {"cpu_seconds": 1}, proposer="sed -i 's/^N = .*/N = 2/' calc.py"
    )
    assert invoke(repo, "run").returncode == 0
    assert ledger(repo, "s")[1]["status"] == "crash"


@pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root here")
def test_network_off_means_no_network(tmp_path: Path, invoke: Runner) -> None:
    bench = (
        "import socket\n"
        "names = [n for _, n in socket.if_nameindex()]\n"
        "print('interfaces', names)\nprint(len(names))\n"
    )
    repo = sandbox_repo(tmp_path, bench, {"network": False})
    result = invoke(repo, "run")
    assert result.returncode == 0, result.stdout + result.stderr
    assert ledger(repo, "s")[0]["metric"] == 1  # only the loopback device is left


def test_sockets_covered_are_those_bound_outside_the_commands_own_paths(tmp_path: Path) -> None:
    import socket

    from autoresearch.isolation.sandbox import Boundary, host_sockets

    work, tmp, open_dir, other = (tmp_path / n for n in ("w", "t", "open", "o"))
    for folder in (work, tmp, open_dir, other):
        folder.mkdir()
    bound = []
    for folder in (work, open_dir, other):
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(folder / "s"))
        bound.append(sock)
    (other / "not-a-socket").write_text("")
    rows = [
        f"0000: 00000002 00000000 00010000 0001 01 {i} {p}"
        for i, p in enumerate(
            [work / "s", open_dir / "s", other / "s", other / "not-a-socket", other / "gone"]
        )
    ]
    rows += ["0000: 00000002 00000000 00010000 0001 01 9 @abstract", "0000: 0002 0 0 0001 01 8"]
    table = tmp_path / "unix"
    table.write_text("Num RefCount Protocol Flags Type St Inode Path\n" + "\n".join(rows) + "\n")
    boundary = Boundary(work, tmp, writable=(open_dir,))
    try:
        assert host_sockets(boundary, table) == [other / "s"]
    finally:
        for sock in bound:
            sock.close()
