"""Safety: verify, sandbox limits, secrets, the user's checkout, stale locks, config fuzzing."""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autoresearch.config import parse_config
from autoresearch.errors import ConfigError
from conftest import Runner, git, ledger, make_repo, statuses


def test_verify_passes_on_a_clean_campaign(toy: Path, cli: Runner) -> None:
    assert cli(toy, "run").returncode == 0
    result = cli(toy, "verify")
    assert result.returncode == 0, result.stdout
    assert "hash chain intact" in result.stdout
    assert json.loads(cli(toy, "verify", "--json").stdout)["records"] == 8


def test_verify_names_the_altered_line(toy: Path, cli: Runner) -> None:
    assert cli(toy, "run").returncode == 0
    path = toy / ".autoresearch/toy/ledger.jsonl"
    lines = path.read_text().splitlines()
    record = json.loads(lines[2])
    record["metric"] = 1.0  # someone makes a discard look better
    lines[2] = json.dumps(record)
    path.write_text("\n".join(lines) + "\n")
    result = cli(toy, "verify")
    assert result.returncode == 1
    assert "line 4 (iteration 3): its prev_hash does not match line 3" in result.stdout


def test_verify_catches_moved_refs_and_branch(toy: Path, cli: Runner) -> None:
    assert cli(toy, "run").returncode == 0
    git(toy, "update-ref", "refs/autoresearch/toy/2", "refs/autoresearch/toy/3")
    git(toy, "update-ref", "refs/heads/autoresearch/toy", "refs/autoresearch/toy/1")
    result = cli(toy, "verify")
    assert result.returncode == 1
    assert "iteration 2: refs/autoresearch/toy/2 points at" in result.stdout
    assert "branch autoresearch/toy is at" in result.stdout


def test_verify_catches_a_deleted_record(toy: Path, cli: Runner) -> None:
    assert cli(toy, "run").returncode == 0
    path = toy / ".autoresearch/toy/ledger.jsonl"
    lines = path.read_text().splitlines()
    del lines[3]
    path.write_text("\n".join(lines) + "\n")
    result = cli(toy, "verify")
    assert result.returncode == 1
    assert "iteration 4 where 3 was expected" in result.stdout


def sandbox_repo(tmp_path: Path, bench: str, sandbox: str, proposer: str = "true") -> Path:
    config = f"""\
name = "s"
scope = ["calc.py"]

[metric]
command = "python bench.py"
direction = "minimize"

[stop]
max_iterations = 1

[sandbox]
{sandbox}

[proposer]
kind = "command"
command = "{proposer}"
"""
    return make_repo(
        tmp_path / "repo", {"calc.py": "N = 1\n", "bench.py": bench, "autoresearch.toml": config}
    )


def test_secrets_are_not_passed_to_the_metric_unless_listed(tmp_path: Path, cli: Runner) -> None:
    bench = (
        "import os\n"
        "print('seen:', sorted(k for k in os.environ if k.startswith('AR_TEST')))\n"
        "print(1)\n"
    )
    seen = tmp_path / "proposer-env"
    repo = sandbox_repo(
        tmp_path,
        bench,
        'pass_env = ["AR_TEST_PASSED_TOKEN"]',
        proposer=f"env | grep ^AR_TEST | sort > {seen}",
    )
    env = {
        "AR_TEST_API_KEY": "a",
        "AR_TEST_PASSED_TOKEN": "b",
        "AR_TEST_SECRET": "c",
        "AR_TEST_PLAIN": "d",
    }
    assert cli(repo, "run", env=env).returncode == 0
    out = (repo / ".autoresearch/s/logs/0000-metric-1.out").read_text()
    assert "['AR_TEST_PASSED_TOKEN', 'AR_TEST_PLAIN']" in out
    # The proposer (an agent needs its API key) gets the whole environment.
    assert seen.read_text().count("AR_TEST_") == 4


def test_memory_limit_turns_a_hog_into_a_crash(tmp_path: Path, cli: Runner) -> None:
    bench = "import calc\nblob = bytearray(400 * 1024 * 1024) if calc.N == 2 else b''\nprint(1)\n"
    repo = sandbox_repo(
        tmp_path, bench, "memory_mb = 200", proposer="sed -i 's/^N = .*/N = 2/' calc.py"
    )
    assert cli(repo, "run").returncode == 0
    record = ledger(repo, "s")[1]
    assert record["status"] == "crash" and "MemoryError" in record["reason"]


def test_cpu_limit_stops_a_spinning_metric(tmp_path: Path, cli: Runner) -> None:
    bench = "import calc\nwhile calc.N == 2:\n    pass\nprint(1)\n"
    repo = sandbox_repo(
        tmp_path, bench, "cpu_seconds = 1", proposer="sed -i 's/^N = .*/N = 2/' calc.py"
    )
    assert cli(repo, "run").returncode == 0
    assert ledger(repo, "s")[1]["status"] == "crash"


@pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root here")
def test_network_off_means_no_network(tmp_path: Path, cli: Runner) -> None:
    bench = (
        "import socket\n"
        "names = [n for _, n in socket.if_nameindex()]\n"
        "print('interfaces', names)\nprint(len(names))\n"
    )
    repo = sandbox_repo(tmp_path, bench, "network = false")
    result = cli(repo, "run")
    assert result.returncode == 0, result.stdout + result.stderr
    assert ledger(repo, "s")[0]["metric"] == 1  # only the loopback device is left


def test_a_proposer_writing_to_the_users_checkout_halts(tmp_path: Path, cli: Runner) -> None:
    repo = sandbox_repo(
        tmp_path, "print(1)\n", "", proposer="echo oops >> $AUTORESEARCH_WORKSPACE/../../../calc.py"
    )
    result = cli(repo, "run")
    assert result.returncode == 3
    assert statuses(repo, "s") == ["baseline", "checkout_changed"]
    assert "calc.py" in ledger(repo, "s")[1]["reason"]
    assert "checkout changed" in result.stdout
    assert json.loads(cli(repo, "status", "--json").stdout)["stop_reason"] == "checkout_changed"


def test_stale_git_locks_from_a_killed_engine_are_cleared(toy: Path, cli: Runner) -> None:
    assert cli(toy, "run", "--max-iterations", "1").returncode == 0
    gitdir = Path(git(toy / ".autoresearch/toy/worktree", "rev-parse", "--git-dir").strip())
    (gitdir / "index.lock").write_text("")
    (toy / ".git/refs/heads/autoresearch/toy.lock").write_text("")
    result = cli(toy, "run", "--max-iterations", "3")
    assert result.returncode == 0, result.stderr
    assert [r["iteration"] for r in ledger(toy)] == [0, 1, 2, 3]


def test_dirty_checkout_is_warned_about(toy: Path, cli: Runner) -> None:
    (toy / "calc.py").write_text("N = 999\n")
    result = cli(toy, "run", "--max-iterations", "1")
    assert result.returncode == 0
    assert "uncommitted changes" in result.stdout
    assert ledger(toy)[0]["metric"] == 7  # the campaign starts from HEAD


def test_detached_head_starts_from_that_commit(toy: Path, cli: Runner) -> None:
    git(toy, "checkout", "-q", "--detach")
    result = cli(toy, "run", "--max-iterations", "1")
    assert result.returncode == 0, result.stderr


def test_missing_git_is_one_sentence(tmp_path: Path, cli: Runner) -> None:
    result = cli(tmp_path, "run", env={"PATH": "/nonexistent"})
    assert result.returncode != 0
    assert "git" in result.stderr and "Traceback" not in result.stderr


scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 5), st.floats(allow_nan=True), st.text(max_size=8)
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
KEYS = [
    "name",
    "goal",
    "scope",
    "harness",
    "share",
    "metric",
    "guard",
    "stop",
    "decision",
    "proposer",
    "judge",
    "sandbox",
    "instructions",
]
SUBKEYS = [
    "command",
    "direction",
    "pattern",
    "timeout",
    "target",
    "file",
    "key",
    "name",
    "kind",
    "rule",
    "max_iterations",
    "plateau",
    "rubric",
    "files",
    "space",
    "low",
]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.dictionaries(
        st.sampled_from(KEYS),
        st.one_of(values, st.dictionaries(st.sampled_from(SUBKEYS), values, max_size=4)),
        max_size=8,
    )
)
def test_the_config_loader_never_raises_anything_but_a_config_error(data: dict) -> None:
    try:
        parse_config("autoresearch.toml", data)
    except ConfigError as exc:
        message = str(exc)
        assert message.startswith("autoresearch.toml") and "\n" not in message


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_arbitrary_toml_text_is_a_config_error_or_a_config(text: str) -> None:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return
    try:
        parse_config("autoresearch.toml", data)
    except ConfigError:
        pass


KILL_CONFIG = """\
name = "k"
scope = ["calc.py"]
harness = ["bench.py"]

[metric]
command = "python bench.py"
direction = "minimize"

[stop]
max_iterations = 3

[proposer]
kind = "command"
command = "bash {proposer}"
"""


@pytest.mark.parametrize("phase", ["proposing", "measuring"])
def test_sigkill_mid_attempt_is_recovered(tmp_path: Path, cli: Runner, phase: str) -> None:
    import signal
    import subprocess
    import sys
    import time

    marker = tmp_path / "marker"
    pid_file = tmp_path / "child.pid"
    proposer = tmp_path / "p.sh"
    hang = f"if [ ! -e {marker} ]; then echo $$ > {pid_file}; touch {marker}; sleep 60; fi"
    proposer.write_text(
        'sed -i "s/^N = .*/N = $((10 - AUTORESEARCH_ITERATION))/" calc.py\n'
        + (
            f'if [ "$AUTORESEARCH_ITERATION" = 2 ]; then {hang}; fi\n'
            if phase == "proposing"
            else ""
        )
    )
    bench = "import calc\n"
    if phase == "measuring":
        bench += (
            "import os, time, pathlib\n"
            f"m = pathlib.Path({str(marker)!r})\n"
            "if calc.N == 8 and not m.exists():\n"
            f"    pathlib.Path({str(pid_file)!r}).write_text(str(os.getpid()))\n"
            "    m.touch(); time.sleep(60)\n"
        )
    bench += "print(calc.N)\n"
    repo = make_repo(
        tmp_path / "repo",
        {
            "calc.py": "N = 10\n",
            "bench.py": bench,
            "autoresearch.toml": KILL_CONFIG.format(proposer=proposer),
        },
    )
    engine = subprocess.Popen(
        [sys.executable, "-m", "autoresearch", "run"],
        cwd=repo,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while not (marker.exists() and pid_file.exists() and pid_file.read_text().strip()):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    engine.send_signal(signal.SIGKILL)
    engine.wait()
    orphan = int(pid_file.read_text())
    assert Path(f"/proc/{orphan}").exists(), "the command outlives a SIGKILLed engine"
    result = cli(repo, "run")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "killed process group" in result.stdout
    stat = Path(f"/proc/{orphan}/stat")
    assert not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] in "ZX"
    records = ledger(repo, "k")
    assert [r["iteration"] for r in records] == [0, 1, 2, 3]
    assert [r["status"] for r in records] == ["baseline", "keep", "interrupted", "keep"]
    assert cli(repo, "verify").returncode == 0
    worktree = repo / ".autoresearch/k/worktree"
    assert git(worktree, "status", "--porcelain", "--ignored") == ""


def test_writing_through_a_shared_link_halts(tmp_path: Path, cli: Runner) -> None:
    repo = sandbox_repo(
        tmp_path,
        "print(open('data/x.txt').read().count('a'))\n",
        "",
        proposer="echo aaaa >> data/x.txt",
    )
    config = repo / "autoresearch.toml"
    config.write_text('share = ["data"]\n' + config.read_text())
    (repo / ".gitignore").write_text("data/\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "share")
    (repo / "data").mkdir()
    (repo / "data/x.txt").write_text("a\n")
    result = cli(repo, "run")
    assert result.returncode == 3
    record = ledger(repo, "s")[1]
    assert record["status"] == "checkout_changed" and "data (shared)" in record["reason"]
